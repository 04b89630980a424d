//! The strings a simulated run repeats: API entry points and stack frames,
//! device-op names and each scenario step's id, kernel, queue and call-site
//! names. They are made once per run and shared by every node and record that
//! carries them, so simulating an operation allocates no string.

use ground_truth::scenario::{Scenario, Step};
use ground_truth::trace::{ApiDomain, CopyDirection};
use ground_truth::{SharedStack, SharedStr};
use std::cell::RefCell;
use std::collections::HashMap;

/// A CUDA API call the simulated application makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    LaunchKernel,
    CuLaunchKernel,
    CuLaunchKernelEx,
    MemcpyAsyncH2d,
    MemcpyAsyncD2h,
    MemcpyAsyncD2d,
    MemsetAsync,
    EventRecord,
    StreamWaitEvent,
    CuEventRecord,
    CuStreamWaitEvent,
    GraphLaunch,
    StreamSynchronize,
    EventSynchronize,
    DeviceSynchronize,
}

/// How an API call appears in the records.
pub struct ApiSpec {
    /// The function the application called (API record and node name).
    pub name: &'static str,
    /// The libcuda entry point a uprobe sees.
    pub driver_fn: &'static str,
    pub cbid: u32,
    pub domain: ApiDomain,
    /// The CUDA runtime's frame in the uprobe's user stack (runtime calls only).
    pub runtime_frame: Option<&'static str>,
}

const fn runtime(
    name: &'static str,
    driver_fn: &'static str,
    cbid: u32,
    runtime_frame: &'static str,
) -> ApiSpec {
    ApiSpec {
        name,
        driver_fn,
        cbid,
        domain: ApiDomain::Runtime,
        runtime_frame: Some(runtime_frame),
    }
}

const fn driver(name: &'static str, cbid: u32) -> ApiSpec {
    ApiSpec {
        name,
        driver_fn: name,
        cbid,
        domain: ApiDomain::Driver,
        runtime_frame: None,
    }
}

/// Indexed by `Api as usize`.
const APIS: [ApiSpec; 15] = [
    runtime(
        "cudaLaunchKernel",
        "cuLaunchKernel",
        211,
        "libcudart.so.13!cudaLaunchKernel",
    ),
    driver("cuLaunchKernel", 307),
    driver("cuLaunchKernelEx", 652),
    runtime(
        "cudaMemcpyAsync",
        "cuMemcpyHtoDAsync_v2",
        41,
        "libcudart.so.13!cudaMemcpyAsync",
    ),
    runtime(
        "cudaMemcpyAsync",
        "cuMemcpyDtoHAsync_v2",
        41,
        "libcudart.so.13!cudaMemcpyAsync",
    ),
    runtime(
        "cudaMemcpyAsync",
        "cuMemcpyDtoDAsync_v2",
        41,
        "libcudart.so.13!cudaMemcpyAsync",
    ),
    runtime(
        "cudaMemsetAsync",
        "cuMemsetD8Async",
        48,
        "libcudart.so.13!cudaMemsetAsync",
    ),
    runtime(
        "cudaEventRecord",
        "cuEventRecord",
        135,
        "libcudart.so.13!cudaEventRecord",
    ),
    runtime(
        "cudaStreamWaitEvent",
        "cuStreamWaitEvent",
        146,
        "libcudart.so.13!cudaStreamWaitEvent",
    ),
    // The callback ids CUPTI gives these driver calls on the H200 (results/corpus).
    driver("cuEventRecord", 119),
    driver("cuStreamWaitEvent", 295),
    runtime(
        "cudaGraphLaunch",
        "cuGraphLaunch",
        311,
        "libcudart.so.13!cudaGraphLaunch",
    ),
    runtime(
        "cudaStreamSynchronize",
        "cuStreamSynchronize",
        131,
        "libcudart.so.13!cudaStreamSynchronize",
    ),
    runtime(
        "cudaEventSynchronize",
        "cuEventSynchronize",
        133,
        "libcudart.so.13!cudaEventSynchronize",
    ),
    runtime(
        "cudaDeviceSynchronize",
        "cuCtxSynchronize",
        165,
        "libcudart.so.13!cudaDeviceSynchronize",
    ),
];

impl Api {
    pub fn spec(self) -> &'static ApiSpec {
        &APIS[self as usize]
    }

    pub fn memcpy(direction: CopyDirection) -> Api {
        match direction {
            CopyDirection::H2d => Api::MemcpyAsyncH2d,
            CopyDirection::D2h => Api::MemcpyAsyncD2h,
            CopyDirection::D2d => Api::MemcpyAsyncD2d,
        }
    }
}

/// Strings of one scenario step.
#[derive(Debug, Default)]
pub struct StepNames {
    /// The step's id (a node's `step` field).
    pub id: Option<SharedStr>,
    /// Kernel name (kernel steps), NVTX range (pushes) or queue (handoffs).
    pub name: Option<SharedStr>,
    pub call_site: Option<SharedStr>,
    /// Graph launches: each graph node's `step` field, `launch-id/node-id`.
    pub graph_node_steps: Vec<SharedStr>,
}

/// The strings of one API call's node and records.
struct ApiNames {
    name: SharedStr,
    driver_fn: SharedStr,
    runtime_frame: Option<SharedStr>,
}

/// Every string a simulated run puts in its ground truth and trace, made once.
pub struct Names {
    /// Indexed by `Api as usize`.
    apis: Vec<ApiNames>,
    /// Stack frames of the simulated application around its CUDA calls.
    worker_frame: SharedStr,
    main_frame: SharedStr,
    /// The kind of external id an instrumented application tags calls with.
    pub request_kind: SharedStr,
    /// `memcpy h2d`, `memcpy d2h`, `memcpy d2d`.
    memcpy: [SharedStr; 3],
    pub memset: SharedStr,
    pub event_record: SharedStr,
    pub stream_wait: SharedStr,
    /// Indexed by program, then step.
    steps: Vec<Vec<StepNames>>,
    /// Kernel names of each graph's nodes, indexed by graph, then node.
    graph_kernels: Vec<Vec<SharedStr>>,
    /// The stacks made so far, by call and call site: every uprobe record of the
    /// same call from the same site shares one.
    stacks: RefCell<HashMap<(usize, Option<SharedStr>), SharedStack>>,
}

impl Names {
    pub fn new(sc: &Scenario) -> Self {
        let steps = sc
            .programs
            .iter()
            .map(|p| p.steps.iter().map(|s| step_names(sc, s)).collect())
            .collect();
        let graph_kernels = sc
            .graphs
            .iter()
            .map(|g| {
                g.nodes
                    .iter()
                    .map(|n| SharedStr::from(&n.kernel.name))
                    .collect()
            })
            .collect();
        Names {
            apis: APIS
                .iter()
                .map(|a| ApiNames {
                    name: a.name.into(),
                    driver_fn: a.driver_fn.into(),
                    runtime_frame: a.runtime_frame.map(SharedStr::from),
                })
                .collect(),
            worker_frame: "app!worker_loop".into(),
            main_frame: "app!main".into(),
            request_kind: "request".into(),
            memcpy: [CopyDirection::H2d, CopyDirection::D2h, CopyDirection::D2d]
                .map(|d| SharedStr::from(crate::record::contention::memcpy_node_name(d))),
            memset: "memset".into(),
            event_record: "event record".into(),
            stream_wait: "stream wait".into(),
            steps,
            graph_kernels,
            stacks: Default::default(),
        }
    }

    /// The function the application called.
    pub fn api(&self, api: Api) -> &SharedStr {
        &self.apis[api as usize].name
    }

    /// The libcuda entry point a uprobe on the call sees.
    pub fn driver_fn(&self, api: Api) -> &SharedStr {
        &self.apis[api as usize].driver_fn
    }

    /// The user stack of the call, innermost frame first: the libcuda entry
    /// point, the runtime's frame (runtime calls), the call site (or the
    /// worker loop), `main`.
    pub fn stack(&self, api: Api, call_site: Option<&SharedStr>) -> SharedStack {
        let key = (api as usize, call_site.cloned());
        self.stacks
            .borrow_mut()
            .entry(key)
            .or_insert_with(|| {
                let names = &self.apis[api as usize];
                let mut stack = Vec::with_capacity(4);
                stack.push(names.driver_fn.clone());
                stack.extend(names.runtime_frame.clone());
                stack.push(call_site.unwrap_or(&self.worker_frame).clone());
                stack.push(self.main_frame.clone());
                stack.into()
            })
            .clone()
    }

    pub fn memcpy(&self, direction: CopyDirection) -> &SharedStr {
        let i = match direction {
            CopyDirection::H2d => 0,
            CopyDirection::D2h => 1,
            CopyDirection::D2d => 2,
        };
        &self.memcpy[i]
    }

    pub fn step(&self, program: usize, step: usize) -> &StepNames {
        &self.steps[program][step]
    }

    pub fn graph_kernel(&self, graph: usize, node: usize) -> &SharedStr {
        &self.graph_kernels[graph][node]
    }
}

fn step_names(sc: &Scenario, step: &Step) -> StepNames {
    let id = step.id().map(SharedStr::from);
    let (name, call_site) = match step {
        Step::Kernel {
            name, call_site, ..
        } => (Some(name.as_str()), call_site.as_deref()),
        Step::Copy { call_site, .. } => (None, call_site.as_deref()),
        Step::NvtxPush { name } => (Some(name.as_str()), None),
        Step::Handoff { queue } => (Some(queue.as_str()), None),
        _ => (None, None),
    };
    let graph_node_steps = match step {
        Step::GraphLaunch { graph, .. } => sc
            .graphs
            .iter()
            .find(|g| g.name == *graph)
            .map(|g| {
                g.nodes
                    .iter()
                    .map(|n| format!("{}/{}", step.id().unwrap_or_default(), n.id).into())
                    .collect()
            })
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    StepNames {
        id,
        name: name.map(SharedStr::from),
        call_site: call_site.map(SharedStr::from),
        graph_node_steps,
    }
}
