//! Hand-built and synthetic views: a small builder for tests (records with the
//! meanings of `docs/records.md`) and a large synthetic view for benchmarks.
//! Not a simulator: no ground truth is produced.

use ground_truth::bundle::LossAccounting;
use ground_truth::trace::{
    ApiDomain, CopyDirection, HostMemory, MarkerPhase, Record, Rid, SwitchReason, SyncType,
};
use ground_truth::view::{LossSpec, ViewSpec};
use ground_truth::{Collectors, Mode, Ns, Query, Question, TraceView, SCHEMA_VERSION};

/// Builds a view record by record. Rids are handed out in a scrambled order so
/// tests cannot accidentally depend on rid order.
#[derive(Debug, Clone)]
pub struct ViewBuilder {
    pub records: Vec<Record>,
    pub queries: Vec<Query>,
    pub spec: ViewSpec,
    pub loss: LossAccounting,
    next: u64,
    next_corr: u32,
}

impl Default for ViewBuilder {
    fn default() -> Self {
        Self::new()
    }
}

/// What [`ViewBuilder::launch`] created.
#[derive(Debug, Clone, Copy)]
pub struct Launch {
    pub api: Rid,
    pub uprobe: Rid,
    pub op: Rid,
    pub corr: u32,
}

pub const US: Ns = 1_000;

impl ViewBuilder {
    pub fn new() -> Self {
        ViewBuilder {
            records: Vec::new(),
            queries: Vec::new(),
            spec: ViewSpec {
                collectors: Collectors::Combined,
                mode: Mode::Instrumented,
                loss: LossSpec::None,
            },
            loss: LossAccounting::default(),
            next: 0,
            next_corr: 100,
        }
    }

    pub fn rid(&mut self) -> Rid {
        self.next += 1;
        // A fixed bijection on small numbers: order says nothing.
        (self.next.wrapping_mul(0x9E37_79B9) % 1_000_003) + 1_000_000 * (self.next / 1_000_003) + 7
    }

    pub fn corr(&mut self) -> u32 {
        self.next_corr += 1;
        self.next_corr
    }

    fn push(&mut self, r: Record) -> Rid {
        let rid = r.rid();
        self.records.push(r);
        rid
    }

    pub fn api(&mut self, tid: u32, name: &str, start: Ns, end: Ns) -> (Rid, u32) {
        let corr = self.corr();
        let rid = self.rid();
        let cbid = if name.starts_with("cuda") { 211 } else { 307 };
        let domain = if name.starts_with("cuda") {
            ApiDomain::Runtime
        } else {
            ApiDomain::Driver
        };
        self.push(Record::Api {
            rid,
            domain,
            cbid,
            name: name.into(),
            tid,
            start,
            end,
            correlation_id: corr,
        });
        (rid, corr)
    }

    pub fn uprobe(
        &mut self,
        tid: u32,
        function: &str,
        enter: Ns,
        exit: Ns,
        handle: u64,
        stack: &[&str],
    ) -> Rid {
        let rid = self.rid();
        let stack = stack.iter().copied().collect();
        self.push(Record::Uprobe {
            rid,
            tid,
            function: function.into(),
            enter,
            exit,
            handle,
            stack,
        })
    }

    #[allow(clippy::too_many_arguments)]
    pub fn kernel(
        &mut self,
        corr: u32,
        stream: u32,
        name: &str,
        queued: Ns,
        submitted: Ns,
        start: Ns,
        end: Ns,
    ) -> Rid {
        self.kernel_record(corr, stream, name, (0, 0), [queued, submitted, start, end])
    }

    /// A kernel record; `graph`: (graph id, node id), (0, 0) for a direct launch.
    fn kernel_record(
        &mut self,
        corr: u32,
        stream: u32,
        name: &str,
        graph: (u32, u64),
        [queued, submitted, start, end]: [Ns; 4],
    ) -> Rid {
        let rid = self.rid();
        self.push(Record::Kernel {
            rid,
            stream,
            correlation_id: corr,
            queued,
            submitted,
            start,
            end,
            detail: ground_truth::trace::KernelDetail {
                name: name.into(),
                context: 1,
                device: 0,
                graph_id: graph.0,
                graph_node_id: graph.1,
                grid: [132, 1, 1],
                block: [128, 1, 1],
                channel: 0,
            }
            .into(),
        })
    }

    #[allow(clippy::too_many_arguments)]
    pub fn graph_kernel(
        &mut self,
        corr: u32,
        stream: u32,
        name: &str,
        graph_id: u32,
        node: u64,
        start: Ns,
        end: Ns,
    ) -> Rid {
        // Graph node executions carry no queued/submitted timestamps.
        self.kernel_record(corr, stream, name, (graph_id, node), [0, 0, start, end])
    }

    /// A graph node execution with a `queued` time, as the H200's CUPTI reports
    /// some (earlier than the launch call: docs/gpu-facts.md).
    #[allow(clippy::too_many_arguments)]
    pub fn graph_kernel_queued(
        &mut self,
        corr: u32,
        stream: u32,
        name: &str,
        (graph_id, node): (u32, u64),
        queued: Ns,
        start: Ns,
        end: Ns,
    ) -> Rid {
        self.kernel_record(
            corr,
            stream,
            name,
            (graph_id, node),
            [queued, 0, start, end],
        )
    }

    #[allow(clippy::too_many_arguments)]
    pub fn memcpy(
        &mut self,
        corr: u32,
        stream: u32,
        direction: CopyDirection,
        memory: HostMemory,
        bytes: u64,
        times: [Ns; 4],
    ) -> Rid {
        let rid = self.rid();
        let [queued, submitted, start, end] = times;
        self.push(Record::Memcpy {
            rid,
            direction,
            memory,
            stream,
            correlation_id: corr,
            queued,
            submitted,
            start,
            end,
            detail: ground_truth::trace::CopyDetail {
                bytes,
                context: 1,
                device: 0,
                graph_id: 0,
                graph_node_id: 0,
                channel: 1,
            }
            .into(),
        })
    }

    pub fn cuda_event(
        &mut self,
        corr: u32,
        stream: u32,
        event: u64,
        event_sync_id: u64,
        ts: Ns,
    ) -> Rid {
        let rid = self.rid();
        self.push(Record::CudaEvent {
            rid,
            event,
            event_sync_id,
            stream,
            correlation_id: corr,
            ts,
        })
    }

    #[allow(clippy::too_many_arguments)]
    pub fn sync(
        &mut self,
        corr: u32,
        sync_type: SyncType,
        stream: u32,
        event: u64,
        event_sync_id: u64,
        start: Ns,
        end: Ns,
    ) -> Rid {
        let rid = self.rid();
        self.push(Record::Sync {
            rid,
            sync_type,
            stream,
            event,
            event_sync_id,
            correlation_id: corr,
            start,
            end,
        })
    }

    pub fn ext(&mut self, corr: u32, token: u64) -> Rid {
        let rid = self.rid();
        self.push(Record::ExternalCorrelation {
            rid,
            external_kind: "request".into(),
            external_id: token,
            correlation_id: corr,
        })
    }

    pub fn marker(
        &mut self,
        tid: u32,
        phase: MarkerPhase,
        queue: &str,
        token: &str,
        ts: Ns,
    ) -> Rid {
        let rid = self.rid();
        self.push(Record::Marker {
            rid,
            tid,
            phase,
            queue: queue.into(),
            token: token.into(),
            ts,
        })
    }

    pub fn nvtx(&mut self, tid: u32, name: &str, start: Ns, end: Ns) -> Rid {
        let rid = self.rid();
        self.push(Record::Nvtx {
            rid,
            tid,
            name: name.into(),
            start,
            end,
        })
    }

    pub fn sched(&mut self, tid: u32, switch_out: Ns, switch_in: Ns, reason: SwitchReason) -> Rid {
        let rid = self.rid();
        self.push(Record::Sched {
            rid,
            tid,
            cpu: 0,
            switch_out,
            switch_in,
            reason,
        })
    }

    pub fn fault(&mut self, tid: u32, ts: Ns, duration: Ns, major: bool) -> Rid {
        let rid = self.rid();
        self.push(Record::PageFault {
            rid,
            tid,
            ts,
            duration,
            address: 0x7f00_0000_0000 + ts,
            major,
        })
    }

    /// A kernel launch: api `[t, t+5µs]` on `tid`, its uprobe, and the kernel
    /// (queued in the call, submitted at `submitted` or at once, start 5 µs later
    /// unless `start` is given).
    #[allow(clippy::too_many_arguments)]
    pub fn launch_at(
        &mut self,
        tid: u32,
        api_name: &str,
        t: Ns,
        stream: u32,
        kernel: &str,
        submitted: Option<Ns>,
        start: Option<Ns>,
        dur: Ns,
        site: &str,
    ) -> Launch {
        let (api, corr) = self.api(tid, api_name, t, t + 5 * US);
        let uprobe = self.uprobe(
            tid,
            api_name,
            t + US,
            t + 4 * US,
            0x5000 + stream as u64,
            &["libcuda.so.1!entry", site, "main"],
        );
        let queued = t + 2 * US;
        let submitted = submitted.unwrap_or(queued);
        let start = start.unwrap_or(submitted + 5 * US);
        let op = self.kernel(corr, stream, kernel, queued, submitted, start, start + dur);
        Launch {
            api,
            uprobe,
            op,
            corr,
        }
    }

    /// A plain launch: submitted at once, started 5 µs later.
    pub fn launch(&mut self, tid: u32, t: Ns, stream: u32, kernel: &str, dur: Ns) -> Launch {
        self.launch_at(
            tid,
            "cudaLaunchKernel",
            t,
            stream,
            kernel,
            None,
            None,
            dur,
            "app.py:10",
        )
    }

    pub fn query(&mut self, id: &str, rid: Rid, question: Question) {
        self.queries.push(Query {
            id: id.into(),
            rid,
            question,
        });
    }

    pub fn build(&self) -> TraceView {
        let mut records = self.records.clone();
        records.sort_by_key(|r| (r.interval().0, r.rid()));
        TraceView {
            schema_version: SCHEMA_VERSION,
            bundle: "hand-built".into(),
            spec: self.spec,
            queries: self.queries.clone(),
            collector_loss: self.loss,
            records,
        }
    }
}

/// A synthetic instrumented, combined view of about `n_records` records:
/// requests handed from a front thread to a pool, each launching kernels and a
/// copy on a few streams with event edges between streams, scheduler noise, and
/// a handful of queries. For benchmarks; deterministic.
pub fn synthetic_view(n_records: usize) -> TraceView {
    let mut b = ViewBuilder::new();
    let mut t: Ns = 1_000_000;
    let mut req: u64 = 0;
    let mut esid: u64 = 1;
    let pool = [11u32, 12, 13, 14];
    let mut stream_free = [0 as Ns; 10];
    let mut q_rids = Vec::new();
    while b.records.len() < n_records {
        req += 1;
        let tok = req.to_string();
        b.marker(1, MarkerPhase::RequestBegin, "", &tok, t);
        b.marker(1, MarkerPhase::TaskBegin, "", &tok, t + US);
        b.marker(1, MarkerPhase::Enqueue, "work", &tok, t + 3 * US);
        let tid = pool[(req % 4) as usize];
        let mut h = t + 10 * US;
        b.marker(tid, MarkerPhase::TaskBegin, "work", &tok, h);
        let s = 1 + (req % 4) as u32 * 2;
        for k in 0..4u32 {
            h += 8 * US;
            let stream = if k == 3 { s + 1 } else { s };
            let (api, corr) = b.api(tid, "cudaLaunchKernel", h, h + 5 * US);
            let _ = api;
            b.uprobe(
                tid,
                "cuLaunchKernel",
                h + US,
                h + 4 * US,
                0x7000 + stream as u64,
                &["libcuda.so.1!cuLaunchKernel", "model.py:42", "main"],
            );
            b.ext(corr, req);
            let queued = h + 2 * US;
            let submitted = queued.max(stream_free[stream as usize]);
            let start = submitted + 3 * US;
            let end = start + 20 * US + (req % 7) * US;
            stream_free[stream as usize] = end;
            let kr = b.kernel(
                corr,
                stream,
                &format!("k{k}"),
                queued,
                submitted,
                start,
                end,
            );
            if k == 1 && req % 97 == 7 && q_rids.len() < 8 {
                q_rids.push(kr);
            }
            if k == 2 {
                // Event on s, waited on by s+1.
                h += 8 * US;
                let (_, c) = b.api(tid, "cudaEventRecord", h, h + 2 * US);
                b.cuda_event(c, s, 0x9000 + (req % 3), esid, end);
                h += 4 * US;
                let (_, c2) = b.api(tid, "cudaStreamWaitEvent", h, h + 2 * US);
                b.sync(
                    c2,
                    SyncType::StreamWaitEvent,
                    s + 1,
                    0x9000 + (req % 3),
                    esid,
                    h,
                    end.max(h),
                );
                stream_free[(s + 1) as usize] = stream_free[(s + 1) as usize].max(end);
                esid += 1;
            }
        }
        if req % 50 == 0 {
            b.sched(tid, h + 50 * US, h + 80 * US, SwitchReason::Preempted);
        }
        t += 60 * US;
    }
    for (i, r) in q_rids.into_iter().enumerate() {
        b.query(&format!("q{i}"), r, Question::Cause);
    }
    let _ = (CopyDirection::H2d, HostMemory::Pinned);
    b.build()
}
