//! Kineto's events, typed: what each category means (the categories and
//! argument names torch.profiler's Kineto writes: `cpu_op`,
//! `user_annotation`, `python_function`, `cuda_runtime`, `cuda_driver`,
//! `kernel`, `gpu_memcpy`, `gpu_memset`, `cuda_sync`, and flow events
//! `ph: s`/`f`). Events of other categories are counted, not kept.

use super::KinetoTrace;
use ground_truth::io::FormatError;
use serde_json::{Map, Value};
use std::path::Path;

/// A CPU-side event with a duration: an operator, a `record_function`
/// annotation or a Python frame (`with_stack`).
#[derive(Debug, Clone, PartialEq)]
pub struct Annotation {
    pub index: usize,
    pub category: String,
    pub name: String,
    pub tid: u64,
    pub start: i64,
    pub end: i64,
    pub external_id: Option<u64>,
}

/// A CUDA runtime or driver API call.
#[derive(Debug, Clone, PartialEq)]
pub struct HostCall {
    pub index: usize,
    pub driver: bool,
    pub name: String,
    pub tid: u64,
    pub start: i64,
    pub end: i64,
    pub correlation: u64,
    pub cbid: u32,
    pub external_id: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceKind {
    Kernel,
    Memcpy,
    Memset,
}

/// A kernel, copy or memset on a stream.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceActivity {
    pub index: usize,
    pub kind: DeviceKind,
    pub name: String,
    pub device: u32,
    pub context: u32,
    pub stream: u32,
    pub correlation: u64,
    pub start: i64,
    pub end: i64,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub bytes: u64,
    /// Graph node id (kernels launched by a graph), 0 if none.
    pub graph_node_id: u64,
}

/// A CUDA synchronization event (`enable_cuda_sync_events`): a stream,
/// event or context synchronize, or a stream wait.
#[derive(Debug, Clone, PartialEq)]
pub struct SyncActivity {
    pub index: usize,
    /// Kineto's name: "Stream Sync", "Event Sync", "Context Sync",
    /// "Stream Wait Event".
    pub name: String,
    pub stream: u32,
    pub correlation: u64,
    pub start: i64,
    pub end: i64,
    /// The correlation id of the event record waited on (-1 or absent: not known).
    pub wait_on_event_record: Option<u64>,
    pub wait_on_stream: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowPhase {
    Start,
    Finish,
}

/// One end of a flow arrow (`ac2g`: a launch to its device activity).
#[derive(Debug, Clone, PartialEq)]
pub struct Flow {
    pub index: usize,
    pub category: String,
    pub id: u64,
    pub phase: FlowPhase,
    pub pid: u64,
    pub tid: u64,
    pub ts: i64,
}

/// The typed events of one trace. Times are nanoseconds of Kineto's clock.
#[derive(Debug, Clone, Default)]
pub struct Activities {
    pub annotations: Vec<Annotation>,
    pub calls: Vec<HostCall>,
    pub device: Vec<DeviceActivity>,
    pub syncs: Vec<SyncActivity>,
    pub flows: Vec<Flow>,
    /// Events of categories not typed here (metadata, counters, ...).
    pub other: usize,
}

/// Reads one event's fields, naming `.traceEvents[i].field` in errors.
struct Fields<'a> {
    file: &'a Path,
    index: usize,
    event: &'a Map<String, Value>,
    base_ns: i64,
}

impl Fields<'_> {
    fn path(&self, field: &str) -> String {
        format!(".traceEvents[{}].{field}", self.index)
    }

    fn error(&self, field: &str, message: impl Into<String>) -> FormatError {
        FormatError::new(self.file, self.path(field), message)
    }

    fn get(&self, field: &str) -> Option<&Value> {
        self.event.get(field)
    }

    fn text(&self, field: &str) -> Result<String, FormatError> {
        match self.get(field) {
            Some(Value::String(s)) => Ok(s.clone()),
            Some(_) => Err(self.error(field, "expected a string")),
            None => Err(self.error(field, "missing")),
        }
    }

    /// An id that Kineto writes as a number or a string of digits (pid, tid).
    fn id(&self, field: &str) -> Result<u64, FormatError> {
        match self.get(field) {
            Some(Value::Number(n)) => n
                .as_u64()
                .or_else(|| n.as_i64().map(|v| v as u64))
                .ok_or_else(|| self.error(field, "expected an integer id")),
            Some(Value::String(s)) => Ok(s
                .trim()
                .trim_start_matches("stream ")
                .parse::<u64>()
                .unwrap_or_else(|_| hash_name(s))),
            Some(_) => Err(self.error(field, "expected an integer or a string id")),
            None => Err(self.error(field, "missing")),
        }
    }

    /// A time in microseconds relative to the trace's base, as nanoseconds.
    fn micros(&self, field: &str) -> Result<i64, FormatError> {
        let v = match self.get(field) {
            Some(Value::Number(n)) => n
                .as_f64()
                .ok_or_else(|| self.error(field, "expected a number"))?,
            Some(_) => return Err(self.error(field, "expected a number of microseconds")),
            None => return Err(self.error(field, "missing")),
        };
        if !v.is_finite() || v.abs() > 1e16 {
            return Err(self.error(field, format!("{v} is not a time in microseconds")));
        }
        Ok((v * 1000.0).round() as i64)
    }

    fn ts(&self) -> Result<i64, FormatError> {
        Ok(self.micros("ts")? + self.base_ns)
    }

    fn span(&self) -> Result<(i64, i64), FormatError> {
        let start = self.ts()?;
        let dur = match self.get("dur") {
            None => 0,
            Some(_) => self.micros("dur")?,
        };
        if dur < 0 {
            return Err(self.error("dur", "a negative duration"));
        }
        Ok((start, start + dur))
    }

    fn arg(&self, name: &str) -> Option<&Value> {
        self.event.get("args")?.as_object()?.get(name)
    }

    fn arg_u64(&self, name: &str) -> Result<Option<u64>, FormatError> {
        match self.arg(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => match (n.as_u64(), n.as_i64()) {
                (Some(v), _) => Ok(Some(v)),
                // Kineto writes -1 for "not known".
                (None, Some(v)) if v < 0 => Ok(None),
                _ => Err(self.error(&format!("args.{name}"), "expected an integer")),
            },
            Some(_) => Err(self.error(&format!("args.{name}"), "expected an integer")),
        }
    }

    fn arg_u32(&self, name: &str) -> Result<u32, FormatError> {
        let v = self.arg_u64(name)?.unwrap_or(0);
        u32::try_from(v).map_err(|_| self.error(&format!("args.{name}"), "over 32 bits"))
    }

    fn arg_dim3(&self, name: &str) -> Result<[u32; 3], FormatError> {
        let Some(v) = self.arg(name) else {
            return Ok([0; 3]);
        };
        let bad = || self.error(&format!("args.{name}"), "expected three integers");
        let items = v.as_array().ok_or_else(bad)?;
        if items.len() != 3 {
            return Err(bad());
        }
        let mut out = [0u32; 3];
        for (o, x) in out.iter_mut().zip(items) {
            *o = x
                .as_u64()
                .and_then(|v| u32::try_from(v).ok())
                .ok_or_else(bad)?;
        }
        Ok(out)
    }
}

/// A stable number for a thread or stream named by text (Kineto names some
/// rows, e.g. "stream 7 7"): the digits where there are some, else a hash.
fn hash_name(s: &str) -> u64 {
    if let Some(d) = s.split_whitespace().find_map(|w| w.parse::<u64>().ok()) {
        return d;
    }
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

impl Activities {
    /// Types the events of `trace` (read from `file`, named in errors).
    pub fn from_trace(file: &Path, trace: &KinetoTrace) -> Result<Activities, FormatError> {
        let base_ns = match trace.base_time_ns {
            Some(b) => i64::try_from(b).map_err(|_| {
                FormatError::new(file, ".baseTimeNanoseconds", "over the range of a time")
            })?,
            None => 0,
        };
        let mut out = Activities::default();
        for (index, event) in trace.events.iter().enumerate() {
            let f = Fields {
                file,
                index,
                event,
                base_ns,
            };
            out.add(&f)?;
        }
        Ok(out)
    }

    fn add(&mut self, f: &Fields) -> Result<(), FormatError> {
        let ph = match f.get("ph") {
            Some(Value::String(s)) => s.as_str(),
            Some(_) => return Err(f.error("ph", "expected a string")),
            None => return Err(f.error("ph", "missing")),
        };
        let category = match f.get("cat") {
            Some(Value::String(s)) => s.as_str(),
            _ => "",
        };
        match ph {
            "s" | "f" => {
                let id = match f.get("id") {
                    Some(Value::Number(n)) => n
                        .as_u64()
                        .ok_or_else(|| f.error("id", "expected an integer"))?,
                    Some(Value::String(s)) => s.parse::<u64>().unwrap_or_else(|_| hash_name(s)),
                    _ => return Err(f.error("id", "a flow event needs an id")),
                };
                self.flows.push(Flow {
                    index: f.index,
                    category: category.to_string(),
                    id,
                    phase: if ph == "s" {
                        FlowPhase::Start
                    } else {
                        FlowPhase::Finish
                    },
                    pid: f.id("pid")?,
                    tid: f.id("tid")?,
                    ts: f.ts()?,
                });
                return Ok(());
            }
            "X" => {}
            _ => {
                self.other += 1;
                return Ok(());
            }
        }
        match category {
            "cpu_op" | "user_annotation" | "python_function" | "gpu_user_annotation" => {
                let (start, end) = f.span()?;
                self.annotations.push(Annotation {
                    index: f.index,
                    category: category.to_string(),
                    name: f.text("name")?,
                    tid: f.id("tid")?,
                    start,
                    end,
                    external_id: f.arg_u64("External id")?,
                });
            }
            "cuda_runtime" | "cuda_driver" => {
                let (start, end) = f.span()?;
                let correlation = f
                    .arg_u64("correlation")?
                    .ok_or_else(|| f.error("args.correlation", "missing"))?;
                self.calls.push(HostCall {
                    index: f.index,
                    driver: category == "cuda_driver",
                    name: f.text("name")?,
                    tid: f.id("tid")?,
                    start,
                    end,
                    correlation,
                    cbid: f.arg_u32("cbid")?,
                    external_id: f.arg_u64("External id")?,
                });
            }
            "kernel" | "gpu_memcpy" | "gpu_memset" => {
                let (start, end) = f.span()?;
                let kind = match category {
                    "kernel" => DeviceKind::Kernel,
                    "gpu_memcpy" => DeviceKind::Memcpy,
                    _ => DeviceKind::Memset,
                };
                self.device.push(DeviceActivity {
                    index: f.index,
                    kind,
                    name: f.text("name")?,
                    device: f.arg_u32("device")?,
                    context: f.arg_u32("context")?,
                    stream: f.arg_u32("stream")?,
                    correlation: f
                        .arg_u64("correlation")?
                        .ok_or_else(|| f.error("args.correlation", "missing"))?,
                    start,
                    end,
                    grid: f.arg_dim3("grid")?,
                    block: f.arg_dim3("block")?,
                    bytes: f.arg_u64("bytes")?.unwrap_or(0),
                    graph_node_id: f.arg_u64("graph node id")?.unwrap_or(0),
                });
            }
            "cuda_sync" => {
                let (start, end) = f.span()?;
                self.syncs.push(SyncActivity {
                    index: f.index,
                    name: f.text("name")?,
                    stream: f.arg_u32("stream")?,
                    correlation: f.arg_u64("correlation")?.unwrap_or(0),
                    start,
                    end,
                    wait_on_event_record: f.arg_u64("wait_on_cuda_event_record_corr_id")?,
                    wait_on_stream: f
                        .arg_u64("wait_on_stream")?
                        .and_then(|v| u32::try_from(v).ok()),
                });
            }
            _ => self.other += 1,
        }
        Ok(())
    }
}
