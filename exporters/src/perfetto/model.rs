//! The exported picture both encoders read: tracks, slices (or instants), flows.

use ground_truth::{Ns, SharedStr};

/// What a track is.
#[derive(Debug, Clone, PartialEq)]
pub enum TrackKind {
    Process {
        pid: u32,
    },
    Thread {
        pid: u32,
        tid: u32,
    },
    /// A named track under `parent`.
    Named,
}

#[derive(Debug, Clone)]
pub struct Track {
    pub uuid: u64,
    pub parent: Option<u64>,
    pub name: String,
    pub kind: TrackKind,
    /// Position among siblings.
    pub rank: i32,
}

/// A debug-annotation value. Text is shared: a large trace repeats a few
/// strings (kinds, names, streams) hundreds of thousands of times.
#[derive(Debug, Clone, PartialEq)]
pub enum Arg {
    U(u64),
    I(i64),
    F(f64),
    S(SharedStr),
    B(bool),
}

impl Arg {
    pub fn text(v: impl Into<SharedStr>) -> Arg {
        Arg::S(v.into())
    }
}

/// A slice (`end > start`) or an instant (`instant`).
#[derive(Debug, Clone)]
pub struct Slice {
    pub track: u64,
    pub start: Ns,
    pub end: Ns,
    pub instant: bool,
    pub name: String,
    pub category: &'static str,
    /// Annotations by name: every name is one of a closed set (the record
    /// fields and the exporter's own), so it is a static string, not a copy per slice.
    pub args: Vec<(&'static str, Arg)>,
    /// Flows leaving this slice.
    pub flows_out: Vec<u64>,
    /// Flows ending at this slice.
    pub flows_in: Vec<u64>,
    /// Nesting depth on its track (set by lane assignment).
    pub depth: u32,
}

impl Slice {
    /// A point in time on `track`: a mark, a flow's end, a claim's verdict.
    pub fn instant(
        track: u64,
        at: Ns,
        name: String,
        category: &'static str,
        args: Vec<(&'static str, Arg)>,
    ) -> Slice {
        Slice {
            track,
            start: at,
            end: at,
            instant: true,
            name,
            category,
            args,
            flows_out: Vec::new(),
            flows_in: Vec::new(),
            depth: 0,
        }
    }
}

/// A flow between two slices (indices into `Model::slices`).
#[derive(Debug, Clone)]
pub struct Flow {
    pub id: u64,
    pub name: String,
    pub from: usize,
    pub to: usize,
}

/// The exported picture: tracks, slices and flows; written as protobuf or JSON.
#[derive(Debug, Clone, Default)]
pub struct Model {
    pub title: String,
    pub tracks: Vec<Track>,
    pub slices: Vec<Slice>,
    pub flows: Vec<Flow>,
    /// Edges that could not be drawn (an end not shown), with why.
    pub skipped: Vec<String>,
}

/// Counts of an export, for logs and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ModelStats {
    pub tracks: usize,
    pub thread_tracks: usize,
    pub stream_tracks: usize,
    pub slices: usize,
    pub instants: usize,
    pub flows: usize,
}

impl Model {
    pub fn stats(&self) -> ModelStats {
        ModelStats {
            tracks: self.tracks.len(),
            thread_tracks: self
                .tracks
                .iter()
                .filter(|t| matches!(t.kind, TrackKind::Thread { .. }))
                .count(),
            stream_tracks: self
                .tracks
                .iter()
                .filter(|t| {
                    t.name.starts_with("stream ")
                        && t.parent.is_some_and(|p| {
                            self.tracks.iter().any(|q| {
                                q.uuid == p
                                    && matches!(q.kind, TrackKind::Process { pid } if pid >= GPU_PID_BASE)
                            })
                        })
                })
                .count(),
            slices: self.slices.iter().filter(|s| !s.instant).count(),
            instants: self.slices.iter().filter(|s| s.instant).count(),
            flows: self.flows.len(),
        }
    }
}

pub(super) const HOST_PID_FALLBACK: u32 = 1;
/// Synthetic pids of the GPU and causalbench processes (clear of real tids).
pub(super) const GPU_PID_BASE: u32 = 0x7f00_0000;
pub(super) const CB_PID: u32 = 0x7e00_0000;
