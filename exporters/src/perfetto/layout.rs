//! Track layout: which track a record's slice goes to, and lanes so that slices on one
//! track nest (Perfetto requires it).

use super::model::{Model, Slice, Track, TrackKind, CB_PID, GPU_PID_BASE};
use ground_truth::trace::Record;
use ground_truth::Ns;
use ground_truth::SharedStr;
use std::collections::{BTreeMap, HashSet};

/// Where a record goes: (group key, lane-group label) before lane assignment.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Group {
    Thread(u32, &'static str),
    Stream(u32, u32, &'static str),
    GpuSync(u32),
    Cb(String),
}

pub(super) struct Builder {
    pub(super) model: Model,
    pub(super) host_pid: u32,
    pub(super) next_uuid: u64,
    /// Base track of each group (lane 0) and its extra lanes.
    pub(super) lanes: BTreeMap<Group, Vec<u64>>,
    pub(super) process_tracks: BTreeMap<u32, u64>,
    pub(super) thread_tracks: BTreeMap<u32, u64>,
    pub(super) stream_tracks: BTreeMap<(u32, u32), u64>,
    /// Pending slices per group, laid out in `layout`.
    pub(super) pending: BTreeMap<Group, Vec<usize>>,
    /// The group of every slice.
    pub(super) group: Vec<Group>,
    /// The model's texts, each stored once.
    pub(super) texts: Texts,
}

impl Builder {
    pub(super) fn new(title: String, host_pid: u32) -> Self {
        Builder {
            model: Model {
                title,
                ..Default::default()
            },
            host_pid,
            next_uuid: 1,
            lanes: BTreeMap::new(),
            process_tracks: BTreeMap::new(),
            thread_tracks: BTreeMap::new(),
            stream_tracks: BTreeMap::new(),
            pending: BTreeMap::new(),
            group: Vec::new(),
            texts: Default::default(),
        }
    }

    pub(super) fn track(
        &mut self,
        parent: Option<u64>,
        name: String,
        kind: TrackKind,
        rank: i32,
    ) -> u64 {
        let uuid = self.next_uuid;
        self.next_uuid += 1;
        self.model.tracks.push(Track {
            uuid,
            parent,
            name,
            kind,
            rank,
        });
        uuid
    }

    pub(super) fn process(&mut self, pid: u32, name: &str, rank: i32) -> u64 {
        if let Some(&u) = self.process_tracks.get(&pid) {
            return u;
        }
        let u = self.track(None, name.to_string(), TrackKind::Process { pid }, rank);
        self.process_tracks.insert(pid, u);
        u
    }

    pub(super) fn thread(&mut self, tid: u32) -> u64 {
        if let Some(&u) = self.thread_tracks.get(&tid) {
            return u;
        }
        let pid = self.host_pid;
        self.process(pid, "host", 0);
        let u = self.track(
            None,
            format!("thread {tid}"),
            TrackKind::Thread { pid, tid },
            tid as i32,
        );
        self.thread_tracks.insert(tid, u);
        u
    }

    pub(super) fn stream(&mut self, device: u32, stream: u32) -> u64 {
        if let Some(&u) = self.stream_tracks.get(&(device, stream)) {
            return u;
        }
        let p = self.process(GPU_PID_BASE + device, &format!("GPU {device}"), 1);
        let u = self.track(
            Some(p),
            format!("stream {stream}"),
            TrackKind::Named,
            stream as i32,
        );
        self.stream_tracks.insert((device, stream), u);
        u
    }

    /// Lane 0 of a group (creating its track).
    pub(super) fn base(&mut self, g: &Group) -> u64 {
        if let Some(v) = self.lanes.get(g) {
            return v[0];
        }
        let u = match g {
            Group::Thread(tid, "api") => self.thread(*tid),
            Group::Thread(tid, label) => {
                let t = self.thread(*tid);
                let rank = [
                    "nvtx",
                    "uprobe",
                    "sched",
                    "page faults",
                    "markers",
                    "unrecorded",
                ]
                .iter()
                .position(|l| l == label)
                .unwrap_or(9) as i32;
                self.track(
                    Some(t),
                    format!("thread {tid} · {label}"),
                    TrackKind::Named,
                    rank,
                )
            }
            Group::Stream(d, s, "ops") => self.stream(*d, *s),
            Group::Stream(d, s, label) => {
                let t = self.stream(*d, *s);
                self.track(
                    Some(t),
                    format!("stream {s} · {label}"),
                    TrackKind::Named,
                    0,
                )
            }
            Group::GpuSync(d) => {
                let p = self.process(GPU_PID_BASE + d, &format!("GPU {d}"), 1);
                self.track(
                    Some(p),
                    "synchronization".to_string(),
                    TrackKind::Named,
                    i32::MAX,
                )
            }
            Group::Cb(label) => {
                let p = self.process(CB_PID, "causalbench", -1);
                self.track(Some(p), label.clone(), TrackKind::Named, 0)
            }
        };
        self.lanes.insert(g.clone(), vec![u]);
        u
    }

    /// Adds a slice to a group; its track is decided in `layout`.
    pub(super) fn add(&mut self, g: Group, mut s: Slice) -> usize {
        s.track = self.base(&g);
        let i = self.model.slices.len();
        self.model.slices.push(s);
        self.group.push(g.clone());
        self.pending.entry(g).or_default().push(i);
        i
    }

    /// Puts every group's slices on lanes where they nest; instants stay on lane 0.
    pub(super) fn layout(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        for (g, mut idx) in pending {
            idx.sort_by(|&a, &b| {
                let (x, y) = (&self.model.slices[a], &self.model.slices[b]);
                (x.start, std::cmp::Reverse(x.end), a).cmp(&(y.start, std::cmp::Reverse(y.end), b))
            });
            let mut stacks: Vec<Vec<Ns>> = vec![Vec::new()];
            for i in idx {
                let (start, end, instant) = {
                    let s = &self.model.slices[i];
                    (s.start, s.end, s.instant)
                };
                if instant {
                    continue;
                }
                let mut chosen = None;
                for (li, st) in stacks.iter_mut().enumerate() {
                    while st.last().is_some_and(|&e| e <= start) {
                        st.pop();
                    }
                    if st.last().is_none_or(|&top| end <= top) {
                        chosen = Some((li, st.len() as u32));
                        st.push(end);
                        break;
                    }
                }
                let (lane, depth) = chosen.unwrap_or_else(|| {
                    stacks.push(vec![end]);
                    (stacks.len() - 1, 0)
                });
                while self.lanes[&g].len() <= lane {
                    let n = self.lanes[&g].len();
                    let base = self.lanes[&g][0];
                    let name = format!(
                        "{} #{}",
                        self.model
                            .tracks
                            .iter()
                            .find(|t| t.uuid == base)
                            .map(|t| t.name.clone())
                            .unwrap_or_default(),
                        n + 1
                    );
                    let u = self.track(Some(base), name, TrackKind::Named, n as i32);
                    self.lanes.get_mut(&g).unwrap().push(u);
                }
                let s = &mut self.model.slices[i];
                s.track = self.lanes[&g][lane];
                s.depth = depth;
            }
        }
    }
}

/// The group (track) a record's slice belongs to.
pub(super) fn group_of(r: &Record) -> Option<Group> {
    Some(match r {
        Record::Api { tid, .. } => Group::Thread(*tid, "api"),
        Record::Nvtx { tid, .. } => Group::Thread(*tid, "nvtx"),
        Record::Uprobe { tid, .. } => Group::Thread(*tid, "uprobe"),
        Record::Sched { tid, .. } => Group::Thread(*tid, "sched"),
        Record::PageFault { tid, .. } => Group::Thread(*tid, "page faults"),
        Record::Marker { tid, .. } => Group::Thread(*tid, "markers"),
        Record::Kernel { stream, .. }
        | Record::Memcpy { stream, .. }
        | Record::Memset { stream, .. } => {
            Group::Stream(r.device().expect("device op"), *stream, "ops")
        }
        Record::CudaEvent { stream, .. } => Group::Stream(0, *stream, "ops"),
        Record::Sync {
            sync_type, stream, ..
        } => match sync_type {
            ground_truth::trace::SyncType::StreamWaitEvent
            | ground_truth::trace::SyncType::StreamSynchronize => Group::Stream(0, *stream, "sync"),
            _ => Group::GpuSync(0),
        },
        Record::ExternalCorrelation { .. } => return None,
    })
}

/// One shared copy of each distinct text of a model.
#[derive(Default)]
pub(super) struct Texts(HashSet<SharedStr>);

impl Texts {
    pub(super) fn get(&mut self, text: &str) -> SharedStr {
        if let Some(shared) = self.0.get(text) {
            return shared.clone();
        }
        let shared = SharedStr::from(text);
        self.0.insert(shared.clone());
        shared
    }
}
