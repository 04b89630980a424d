//! Lookup tables over one [`TraceView`], shared by every baseline.
//!
//! Built once per explanation in O(n log n): records are addressed by their
//! position in `view.records` (a `u32`), never by rid order, since rids carry no
//! meaning beyond identity.

use ground_truth::trace::{MarkerPhase, Record, Rid, SwitchReason, SyncType};
use ground_truth::{Ns, SharedStr, TraceView};

/// Position of a record in `view.records`.
pub type Pos = u32;

/// The index's maps: keyed by small integers (rids, positions, correlation ids,
/// thread ids) that need no protection against chosen collisions, so a fast hasher.
/// Nothing reads them in iteration order (every such walk sorts first).
pub type FastMap<K, V> = rustc_hash::FxHashMap<K, V>;

/// The activities of one correlation id: one for most launches, a graph launch's
/// kernels otherwise (kept inline: a view holds millions of launches).
pub type Activities = smallvec::SmallVec<[Pos; 1]>;

/// An entry of the index's by-position arrays that names no record.
const NO_RECORD: Pos = Pos::MAX;

/// What an API call (or a uprobe on a driver entry point) does, from its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CallKind {
    /// Kernel launch: `cudaLaunchKernel`, `cuLaunchKernel`, `cuLaunchKernelEx`,
    /// `cudaLaunchKernelExC`, cooperative launches...
    KernelLaunch,
    GraphLaunch,
    Memcpy,
    Memset,
    EventRecord,
    StreamWait,
    /// Stream / event / context / device synchronize.
    Synchronize,
    Other,
}

impl CallKind {
    /// Classifies a runtime or driver entry point by name. Every launch flavour
    /// counts as a launch (HTA PR 271: `cuLaunchKernelEx` was missed).
    pub fn of(name: &str) -> CallKind {
        let n = AsciiCaseless(name);
        if n.contains("graphlaunch") {
            CallKind::GraphLaunch
        } else if n.contains("launch") {
            CallKind::KernelLaunch
        } else if n.contains("memcpy") {
            CallKind::Memcpy
        } else if n.contains("memset") {
            CallKind::Memset
        } else if n.contains("eventrecord") {
            CallKind::EventRecord
        } else if n.contains("waitevent") {
            CallKind::StreamWait
        } else if n.contains("synchronize") {
            CallKind::Synchronize
        } else {
            CallKind::Other
        }
    }

    /// Does the call enqueue a kernel, copy or memset?
    pub fn launches_work(self) -> bool {
        matches!(
            self,
            CallKind::KernelLaunch | CallKind::GraphLaunch | CallKind::Memcpy | CallKind::Memset
        )
    }

    /// Could this call have created the device record `r`?
    pub fn can_create(self, r: &Record) -> bool {
        match r {
            Record::Kernel { .. } => matches!(self, CallKind::KernelLaunch | CallKind::GraphLaunch),
            Record::Memcpy { .. } => matches!(self, CallKind::Memcpy | CallKind::GraphLaunch),
            Record::Memset { .. } => matches!(self, CallKind::Memset | CallKind::GraphLaunch),
            _ => false,
        }
    }
}

/// Positions by a small integer key (a record's rid, a correlation id). Recorders
/// number both densely (the simulator's rids are a permutation of 1..=n, CUPTI's
/// correlation ids count up), so a table indexed by the key is the usual case: a tenth
/// of a hash map's memory at ten million records, and one cache miss per lookup.
/// Keys spread wider than twice their count fall back to a map. A repeated key keeps
/// its last position, as a map's insert does.
#[derive(Debug)]
enum Positions {
    Dense(Vec<Pos>),
    Sparse(FastMap<u64, Pos>),
}

impl Positions {
    /// `pairs` is walked twice (the highest key first), so it is a function making the walk.
    fn of<I: Iterator<Item = (u64, Pos)>>(pairs: impl Fn() -> I) -> Self {
        let (mut count, mut highest) = (0u64, 0u64);
        for (key, _) in pairs() {
            count += 1;
            highest = highest.max(key);
        }
        if highest < 2 * count + 16 {
            let mut table = vec![NO_RECORD; if count == 0 { 0 } else { highest as usize + 1 }];
            for (key, p) in pairs() {
                table[key as usize] = p;
            }
            Positions::Dense(table)
        } else {
            let mut map = FastMap::with_capacity_and_hasher(count as usize, Default::default());
            for (key, p) in pairs() {
                map.insert(key, p);
            }
            Positions::Sparse(map)
        }
    }

    fn get(&self, key: u64) -> Option<Pos> {
        match self {
            Positions::Dense(table) => usize::try_from(key)
                .ok()
                .and_then(|i| table.get(i).copied())
                .filter(|&p| p != NO_RECORD),
            Positions::Sparse(map) => map.get(&key).copied(),
        }
    }
}

/// The CUPTI activities of each correlation id (one for most launches, a graph
/// launch's kernels otherwise), in record order: every group's positions side by
/// side in one array, found through per-key offsets (a table indexed by the
/// correlation id when ids are dense, else the sorted distinct ids). A map holding a
/// small vector per id cost 69 bytes per launch.
#[derive(Debug)]
struct ActivityGroups {
    /// Dense: `offsets[c]..offsets[c + 1]` is correlation id `c`'s group. Sparse:
    /// `offsets[i]..offsets[i + 1]` is the group of `ids[i]`.
    offsets: Vec<u32>,
    /// Sparse only: the distinct correlation ids, ascending.
    ids: Option<Vec<u32>>,
    positions: Vec<Pos>,
}

impl ActivityGroups {
    fn of(recs: &[Record]) -> Self {
        let activity = |r: &Record| match r {
            Record::Kernel { correlation_id, .. }
            | Record::Memcpy { correlation_id, .. }
            | Record::Memset { correlation_id, .. }
            | Record::Sync { correlation_id, .. }
            | Record::CudaEvent { correlation_id, .. } => Some(*correlation_id),
            _ => None,
        };
        let (mut count, mut highest) = (0u64, 0u32);
        for c in recs.iter().filter_map(activity) {
            count += 1;
            highest = highest.max(c);
        }
        if u64::from(highest) < 2 * count + 16 {
            let mut offsets = vec![0u32; highest as usize + 2];
            for c in recs.iter().filter_map(activity) {
                offsets[c as usize + 1] += 1;
            }
            for i in 1..offsets.len() {
                offsets[i] += offsets[i - 1];
            }
            let mut fill = offsets.clone();
            let mut positions = vec![NO_RECORD; count as usize];
            for (p, r) in recs.iter().enumerate() {
                if let Some(c) = activity(r) {
                    positions[fill[c as usize] as usize] = p as Pos;
                    fill[c as usize] += 1;
                }
            }
            ActivityGroups {
                offsets,
                ids: None,
                positions,
            }
        } else {
            // (id, position) pairs: positions are distinct, so the order is total and
            // each group keeps record order.
            let mut pairs: Vec<(u32, Pos)> = recs
                .iter()
                .enumerate()
                .filter_map(|(p, r)| activity(r).map(|c| (c, p as Pos)))
                .collect();
            pairs.sort_unstable();
            let mut ids = Vec::new();
            let mut offsets = Vec::new();
            for (i, &(c, _)) in pairs.iter().enumerate() {
                if ids.last() != Some(&c) {
                    ids.push(c);
                    offsets.push(i as u32);
                }
            }
            offsets.push(pairs.len() as u32);
            ActivityGroups {
                offsets,
                ids: Some(ids),
                positions: pairs.into_iter().map(|(_, p)| p).collect(),
            }
        }
    }

    fn group(&self, i: usize) -> &[Pos] {
        &self.positions[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    fn get(&self, correlation_id: u32) -> Option<&[Pos]> {
        let i = match &self.ids {
            None => correlation_id as usize,
            Some(ids) => ids.binary_search(&correlation_id).ok()?,
        };
        if i + 1 >= self.offsets.len() {
            return None;
        }
        Some(self.group(i)).filter(|g| !g.is_empty())
    }

    /// Every correlation id with activities and its group, by ascending id.
    fn iter(&self) -> impl Iterator<Item = (u32, &[Pos])> {
        (0..self.offsets.len().saturating_sub(1)).filter_map(move |i| {
            let id = match &self.ids {
                None => i as u32,
                Some(ids) => ids[i],
            };
            Some((id, self.group(i))).filter(|(_, g)| !g.is_empty())
        })
    }
}

/// Per-thread host records, each list sorted by start time.
#[derive(Debug, Default, Clone)]
pub struct ThreadRecs {
    /// Canonical host calls: `api` records, plus uprobes that no `api` record covers.
    pub calls: Vec<Pos>,
    pub apis: Vec<Pos>,
    pub uprobes: Vec<Pos>,
    pub sched: Vec<Pos>,
    pub faults: Vec<Pos>,
    pub markers: Vec<Pos>,
    pub nvtx: Vec<Pos>,
}

#[derive(Debug)]
pub struct Index<'a> {
    pub view: &'a TraceView,
    pub recs: &'a [Record],
    /// Each record's position by rid ([`Index::pos`]).
    pos_of: Positions,
    /// Each correlation id's API record ([`Index::api_of_corr`]).
    api_by_corr: Positions,
    /// Whether the view has any API record ([`Index::has_api_records`]).
    has_api: bool,
    /// CUPTI activity records (device ops, cuda_event, sync) by correlation id
    /// ([`Index::activities`]).
    acts_by_corr: ActivityGroups,
    /// Request token from external correlation records, by correlation id: an
    /// index into `tokens` ([`Index::token_of_corr`]).
    token_by_corr: Positions,
    pub threads: FastMap<u32, ThreadRecs>,
    /// The pairing of api records and uprobes (same thread, uprobe inside the call),
    /// both directions in one array by position (`NO_RECORD` for none): an api
    /// record's uprobe ([`Index::uprobe_of_api`]) at the api record's position, a
    /// uprobe's api record ([`Index::api_of_uprobe`]) at the uprobe's. A record is one
    /// or the other, so the two never share a slot. (A record's launching API record
    /// and its token are looked up through the correlation-id tables instead of
    /// being stored per record: 8 bytes a record less.)
    paired: Vec<Pos>,
    /// The distinct request tokens of the external correlation records.
    tokens: Vec<SharedStr>,
    /// Each host call's [`CallKind`] by position ([`CallKind::Other`] for other records).
    call_kinds: Vec<CallKind>,
    /// Kernels, copies and memsets, sorted by start.
    pub device_ops: Vec<Pos>,
    /// All NVTX ranges, sorted by start.
    pub nvtx: Vec<Pos>,
    /// All markers, sorted by ts.
    pub markers: Vec<Pos>,
    /// Canonical host calls of every thread, sorted by start.
    pub all_calls: Vec<Pos>,
    /// Each stream's stream waits: (when enqueued, when its event fired, 0 when
    /// the event record is not in the view), sorted ([`Index::wait_fired_before`]).
    stream_waits: FastMap<u32, Vec<(Ns, Ns)>>,
}

impl<'a> Index<'a> {
    pub fn new(view: &'a TraceView) -> Self {
        let recs = &view.records[..];
        let mut ix = Index {
            view,
            recs,
            pos_of: Positions::of(|| recs.iter().enumerate().map(|(p, r)| (r.rid(), p as Pos))),
            api_by_corr: Positions::of(|| {
                recs.iter().enumerate().filter_map(|(p, r)| match r {
                    Record::Api { correlation_id, .. } => {
                        Some((u64::from(*correlation_id), p as Pos))
                    }
                    _ => None,
                })
            }),
            has_api: recs.iter().any(|r| matches!(r, Record::Api { .. })),
            acts_by_corr: ActivityGroups::of(recs),
            token_by_corr: Positions::Dense(Vec::new()),
            threads: FastMap::default(),
            paired: Vec::new(),
            tokens: Vec::new(),
            call_kinds: Vec::new(),
            device_ops: Vec::new(),
            nvtx: Vec::new(),
            markers: Vec::new(),
            all_calls: Vec::new(),
            stream_waits: FastMap::default(),
        };
        let mut fired: FastMap<u64, Ns> = FastMap::default();
        let mut waits: Vec<(u32, Ns, u64)> = Vec::new();
        // One allocation per distinct token, however many launches carry it.
        let mut token_ix: FastMap<u64, u32> = FastMap::default();
        let mut token_ix_by_corr: Vec<(u64, u32)> = Vec::new();
        for (i, r) in recs.iter().enumerate() {
            let p = i as Pos;
            match r {
                Record::Api { tid, .. } => ix.threads.entry(*tid).or_default().apis.push(p),
                Record::Kernel { .. } | Record::Memcpy { .. } | Record::Memset { .. } => {
                    ix.device_ops.push(p)
                }
                Record::Sync {
                    sync_type: SyncType::StreamWaitEvent,
                    stream,
                    event_sync_id,
                    start,
                    ..
                } => waits.push((*stream, *start, *event_sync_id)),
                Record::CudaEvent {
                    event_sync_id, ts, ..
                } if *event_sync_id != 0 => {
                    fired.insert(*event_sync_id, *ts);
                }
                Record::Sync { .. } | Record::CudaEvent { .. } => {}
                Record::ExternalCorrelation {
                    external_id,
                    correlation_id,
                    external_kind,
                    ..
                } => {
                    if external_kind.is_empty() || external_kind == "request" {
                        let t = *token_ix.entry(*external_id).or_insert_with(|| {
                            ix.tokens.push(external_id.to_string().into());
                            (ix.tokens.len() - 1) as u32
                        });
                        token_ix_by_corr.push((u64::from(*correlation_id), t));
                    }
                }
                Record::Nvtx { tid, .. } => {
                    ix.nvtx.push(p);
                    ix.threads.entry(*tid).or_default().nvtx.push(p);
                }
                Record::Marker { tid, .. } => {
                    ix.markers.push(p);
                    ix.threads.entry(*tid).or_default().markers.push(p);
                }
                Record::Uprobe { tid, .. } => ix.threads.entry(*tid).or_default().uprobes.push(p),
                Record::Sched { tid, .. } => ix.threads.entry(*tid).or_default().sched.push(p),
                Record::PageFault { tid, .. } => ix.threads.entry(*tid).or_default().faults.push(p),
            }
        }
        for (stream, enqueued, esid) in waits {
            let at = if esid == 0 {
                0
            } else {
                fired.get(&esid).copied().unwrap_or(0)
            };
            ix.stream_waits
                .entry(stream)
                .or_default()
                .push((enqueued, at));
        }
        for v in ix.stream_waits.values_mut() {
            v.sort_unstable();
        }
        drop(fired);
        // Token indices, stored as positions.
        ix.token_by_corr = Positions::of(|| token_ix_by_corr.iter().copied());
        drop(token_ix_by_corr);
        // Classified once per distinct name (names are shared strings).
        let mut kinds: FastMap<(*const u8, usize), CallKind> = FastMap::default();
        ix.call_kinds = (0..recs.len() as Pos)
            .map(|p| match recs[p as usize] {
                Record::Api { ref name, .. }
                | Record::Uprobe {
                    function: ref name, ..
                } => *kinds
                    .entry((name.as_ptr(), name.len()))
                    .or_insert_with(|| CallKind::of(name)),
                _ => CallKind::Other,
            })
            .collect();
        let key = |p: &Pos| (recs[*p as usize].interval().0, recs[*p as usize].rid());
        ix.device_ops.sort_by_key(key);
        ix.nvtx.sort_by_key(key);
        ix.markers.sort_by_key(key);
        let mut pairs = Vec::new();
        for t in ix.threads.values_mut() {
            for v in [
                &mut t.apis,
                &mut t.uprobes,
                &mut t.sched,
                &mut t.faults,
                &mut t.markers,
                &mut t.nvtx,
            ] {
                v.sort_by_key(key);
            }
            // Pair each uprobe with the api call it nests with on the same thread: a
            // runtime API record contains the driver entry point's uprobe, while a
            // driver API record's CUPTI timestamps are taken inside the probed function.
            let mut calls = t.apis.clone();
            for &u in &t.uprobes {
                let (enter, exit) = recs[u as usize].interval();
                let k = t
                    .apis
                    .partition_point(|&a| recs[a as usize].interval().0 <= enter);
                let contains_u = (k > 0)
                    .then(|| t.apis[k - 1])
                    .filter(|&a| recs[a as usize].interval().1 >= exit);
                let inside_u = t.apis.get(k).copied().filter(|&a| {
                    let (s, e) = recs[a as usize].interval();
                    s >= enter && e <= exit
                });
                let paired = contains_u.or(inside_u);
                match paired {
                    Some(a) => pairs.push((a, u)),
                    None => calls.push(u),
                }
            }
            calls.sort_by_key(key);
            t.calls = calls;
        }
        ix.paired = vec![NO_RECORD; recs.len()];
        // An api record paired twice keeps its last pairing.
        for (a, u) in pairs {
            ix.paired[a as usize] = u;
            ix.paired[u as usize] = a;
        }
        let mut all: Vec<Pos> = ix
            .threads
            .values()
            .flat_map(|t| t.calls.iter().copied())
            .collect();
        all.sort_by_key(key);
        ix.all_calls = all;
        ix
    }

    pub fn rec(&self, p: Pos) -> &'a Record {
        &self.recs[p as usize]
    }

    pub fn rid(&self, p: Pos) -> Rid {
        self.recs[p as usize].rid()
    }

    pub fn pos(&self, rid: Rid) -> Option<Pos> {
        self.pos_of.get(rid)
    }

    /// The API record of a correlation id (the last one, should several share it).
    pub fn api_of_corr(&self, correlation_id: u32) -> Option<Pos> {
        self.api_by_corr.get(u64::from(correlation_id))
    }

    /// The CUPTI activities (device ops, cuda_event, sync) of a correlation id, in
    /// record order; `None` when it has none.
    pub fn activities(&self, correlation_id: u32) -> Option<&[Pos]> {
        self.acts_by_corr.get(correlation_id)
    }

    /// Every correlation id with activities and those activities, by ascending id.
    pub fn activities_by_corr(&self) -> impl Iterator<Item = (u32, &[Pos])> {
        self.acts_by_corr.iter()
    }

    /// The uprobe paired with an api record (same thread, inside the call).
    pub fn uprobe_of_api(&self, api: Pos) -> Option<Pos> {
        match self.rec(api) {
            Record::Api { .. } => Some(self.paired[api as usize]).filter(|&u| u != NO_RECORD),
            _ => None,
        }
    }

    /// The api record a uprobe is paired with.
    pub fn api_of_uprobe(&self, uprobe: Pos) -> Option<Pos> {
        match self.rec(uprobe) {
            Record::Uprobe { .. } => Some(self.paired[uprobe as usize]).filter(|&a| a != NO_RECORD),
            _ => None,
        }
    }

    /// The request token of a correlation id (external correlation records).
    pub fn token_of_corr(&self, correlation_id: u32) -> Option<&SharedStr> {
        let t = self.token_by_corr.get(u64::from(correlation_id))?;
        Some(&self.tokens[t as usize])
    }

    pub fn start(&self, p: Pos) -> Ns {
        self.rec(p).interval().0
    }

    pub fn end(&self, p: Pos) -> Ns {
        self.rec(p).interval().1
    }

    /// The canonical host call for an api or uprobe record (the api when paired).
    pub fn canonical_call(&self, p: Pos) -> Pos {
        match self.rec(p) {
            Record::Uprobe { .. } => self.api_of_uprobe(p).unwrap_or(p),
            _ => p,
        }
    }

    /// Name of a host call (api name or uprobe function).
    pub fn call_name(&self, p: Pos) -> &'a str {
        match self.rec(p) {
            Record::Api { name, .. } => name,
            Record::Uprobe { function, .. } => function,
            _ => "",
        }
    }

    pub fn call_kind(&self, p: Pos) -> CallKind {
        self.call_kinds[p as usize]
    }

    /// The request token of a record's correlation id (external correlation records).
    pub fn token(&self, p: Pos) -> Option<&SharedStr> {
        let t = self
            .token_by_corr
            .get(u64::from(self.rec(p).correlation_id()?))?;
        Some(&self.tokens[t as usize])
    }

    /// The uprobe stack of a host call, if any collector saw one.
    pub fn stack(&self, call: Pos) -> Option<&'a [SharedStr]> {
        let u = match self.rec(call) {
            Record::Uprobe { .. } => Some(call),
            _ => self.uprobe_of_api(call),
        }?;
        match self.rec(u) {
            Record::Uprobe { stack, .. } => Some(stack),
            _ => None,
        }
    }

    /// A device op's (queued, submitted, start, end) as its record gives them
    /// (0: not measured). How to read a time a recorder got wrong is for each
    /// profiler to say (the reference: `causal_graph::readings`).
    pub fn device_times(&self, p: Pos) -> Option<(Ns, Ns, Ns, Ns)> {
        self.rec(p).device_times()
    }

    /// When the event of the last stream wait enqueued on `stream` before `t`
    /// fired (0 when there is none or its event record is not in the view): an
    /// op enqueued after the wait could not start before then.
    pub fn wait_fired_before(&self, stream: u32, t: Ns) -> Ns {
        let Some(v) = self.stream_waits.get(&stream) else {
            return 0;
        };
        let k = v.partition_point(|w| w.0 < t);
        k.checked_sub(1).map_or(0, |i| v[i].1)
    }

    /// The api record that created a CUPTI activity (by correlation id).
    pub fn launch_api(&self, p: Pos) -> Option<Pos> {
        match self.rec(p) {
            Record::Api { .. } => None,
            r => self.api_of_corr(r.correlation_id()?),
        }
    }

    pub fn thread(&self, tid: u32) -> Option<&ThreadRecs> {
        self.threads.get(&tid)
    }

    /// Does this view contain CUPTI API records at all?
    pub fn has_api_records(&self) -> bool {
        self.has_api
    }

    /// The innermost NVTX range on `tid` that encloses `t`.
    pub fn nvtx_enclosing_on(&self, tid: u32, t: Ns) -> Option<Pos> {
        let th = self.thread(tid)?;
        innermost_enclosing(self, &th.nvtx, t)
    }

    /// The innermost NVTX range of any thread that encloses `t`.
    pub fn nvtx_enclosing_any(&self, t: Ns) -> Option<Pos> {
        innermost_enclosing(self, &self.nvtx, t)
    }

    /// The latest marker on `tid` with ts ≤ t matching `pred`.
    pub fn last_marker_on(&self, tid: u32, t: Ns, pred: impl Fn(&Record) -> bool) -> Option<Pos> {
        let th = self.thread(tid)?;
        let k = th.markers.partition_point(|&m| self.start(m) <= t);
        th.markers[..k]
            .iter()
            .rev()
            .copied()
            .find(|&m| pred(self.rec(m)))
    }

    /// The request token of the host task running on `tid` at time `t`, from
    /// handoff markers (the latest `task_begin`/`request_begin` with a token).
    pub fn task_token_on(&self, tid: u32, t: Ns) -> Option<String> {
        let m = self.last_marker_on(tid, t, |r| {
            matches!(
                r,
                Record::Marker {
                    phase: MarkerPhase::TaskBegin | MarkerPhase::RequestBegin,
                    ..
                }
            )
        })?;
        match self.rec(m) {
            Record::Marker { token, .. } if !token.is_empty() => Some(token.to_string()),
            _ => None,
        }
    }

    /// Host calls on the same thread, in order: the call made just before `call`.
    pub fn prev_call(&self, call: Pos) -> Option<Pos> {
        let tid = self.rec(call).tid()?;
        let th = self.thread(tid)?;
        let k = th.calls.partition_point(|&c| {
            (self.start(c), self.rid(c)) < (self.start(call), self.rid(call))
        });
        (k > 0).then(|| th.calls[k - 1])
    }

    /// Preempted/traced scheduler intervals and page faults of the calling thread
    /// in `[from, to]`: (total descheduled ns, total fault ns, last sched, last fault),
    /// and the time it was switched out because it blocked.
    ///
    /// A fault the recorder could not time (duration 0, no `fexit`) lasts until
    /// the thread's next fault, capped at [`UNTIMED_FAULT_CAP_NS`]: a thread
    /// faulting back to back spends that gap in the handler. The thread's last
    /// fault has no next one to bound it: it counts no time here, and is
    /// reported as [`HostStalls::last_untimed_fault`] for a profiler to read.
    pub fn host_stalls(&self, tid: u32, from: Ns, to: Ns) -> HostStalls {
        let mut out = HostStalls::default();
        let Some(th) = self.thread(tid) else {
            return out;
        };
        for &s in &th.sched {
            if let Record::Sched {
                switch_out,
                switch_in,
                reason,
                ..
            } = self.rec(s)
            {
                let lo = (*switch_out).max(from);
                let hi = (*switch_in).min(to);
                if hi <= lo {
                    continue;
                }
                if matches!(reason, SwitchReason::Preempted | SwitchReason::Traced) {
                    out.desched_ns += (hi - lo) as f64;
                    out.last_sched = Some(s);
                } else {
                    out.blocked_ns += (hi - lo) as f64;
                }
            }
        }
        let k0 = th.faults.partition_point(|&f| self.end(f) < from);
        for (i, &f) in th.faults[k0..].iter().enumerate() {
            let (s, mut e) = self.rec(f).interval();
            if s > to {
                break;
            }
            // Recorders that cannot time faults (no fexit) leave duration 0: a thread
            // faulting back to back spends the gap to its next fault in the handler,
            // so take that gap, capped so isolated faults don't absorb ordinary work.
            if e == s {
                match th.faults.get(k0 + i + 1) {
                    Some(&next) => {
                        e = s + self.start(next).saturating_sub(s).min(UNTIMED_FAULT_CAP_NS);
                    }
                    None => out.last_untimed_fault = Some(f),
                }
            }
            let lo = s.max(from);
            let hi = e.min(to);
            if hi >= lo {
                out.fault_ns += (hi - lo) as f64;
                out.faults += 1;
                out.last_fault = Some(f);
                if let Record::PageFault { major: true, .. } = self.rec(f) {
                    out.major += 1;
                }
            }
        }
        out
    }
}

/// Longest gap attributed to one untimed page fault (a major fault's order of
/// magnitude), [`Index::host_stalls`].
pub const UNTIMED_FAULT_CAP_NS: Ns = 200_000;

#[derive(Debug, Default, Clone, Copy)]
pub struct HostStalls {
    pub desched_ns: f64,
    /// Time switched out because the thread blocked (sleep, lock, I/O):
    /// off the CPU by its own wait, not a stall.
    pub blocked_ns: f64,
    pub fault_ns: f64,
    pub faults: u32,
    pub major: u32,
    pub last_sched: Option<Pos>,
    pub last_fault: Option<Pos>,
    /// The thread's last page fault in the view, when the walk reached it (it
    /// started by the interval's end) and its recorder could not time it: no
    /// later fault bounds it, so it counted no time (a fact; how long it held
    /// the thread is not in the records).
    pub last_untimed_fault: Option<Pos>,
}

fn innermost_enclosing(ix: &Index, sorted: &[Pos], t: Ns) -> Option<Pos> {
    // Ranges starting at or before t; the innermost enclosing one starts latest.
    let k = sorted.partition_point(|&p| ix.start(p) <= t);
    sorted[..k].iter().rev().copied().find(|&p| ix.end(p) >= t)
}

/// The call-site frame of a user stack (innermost first): the first frame outside
/// the CUDA libraries and the interposition layers.
pub fn call_site_frame(stack: &[SharedStr]) -> Option<&str> {
    stack
        .iter()
        .map(|s| s.as_str())
        .find(|f| !is_library_frame(f))
}

/// [`call_site_frame`], remembering in `library` which frames (shared strings, by
/// address) are library frames: the same few frames repeat on every launch.
pub(crate) fn call_site_frame_memo<'s>(
    stack: &'s [SharedStr],
    library: &mut FastMap<(*const u8, usize), bool>,
) -> Option<&'s str> {
    stack.iter().map(|s| s.as_str()).find(|f| {
        !*library
            .entry((f.as_ptr(), f.len()))
            .or_insert_with(|| is_library_frame(f))
    })
}

fn is_library_frame(frame: &str) -> bool {
    let f = frame.trim();
    if f.is_empty()
        || f == "[unknown]"
        || f.starts_with("0x") && !f.contains(' ') && !f.contains(':')
    {
        return true;
    }
    let lower = AsciiCaseless(f);
    const LIBS: [&str; 8] = [
        "libcuda",
        "libcudart",
        "libcupti",
        "libnvidia",
        "libcublas",
        "libnvrtc",
        "libc.so",
        "ld-linux",
    ];
    if LIBS.iter().any(|l| lower.contains(l)) {
        return true;
    }
    // A bare CUDA entry point name (`cuLaunchKernel`, `cudaLaunchKernel`, `cuLaunchKernelEx`).
    let sym = f
        .split(['!', '(', ' ', '+'])
        .find(|s| !s.is_empty())
        .unwrap_or(f);
    let is_cuda_symbol = |s: &str, prefix: &str| {
        s.strip_prefix(prefix)
            .and_then(|r| r.chars().next())
            .is_some_and(|c| c.is_ascii_uppercase())
    };
    is_cuda_symbol(sym, "cuda") || is_cuda_symbol(sym, "cu") || sym.starts_with("__cuda")
}

/// A string searched as its ASCII lowercase would be, without making that copy
/// (names are classified once per record).
struct AsciiCaseless<'a>(&'a str);

impl AsciiCaseless<'_> {
    /// Whether the lowercased string contains `needle` (lowercase ASCII).
    fn contains(&self, needle: &str) -> bool {
        let (hay, needle) = (self.0.as_bytes(), needle.as_bytes());
        needle.is_empty()
            || hay.windows(needle.len()).any(|w| {
                w.iter()
                    .zip(needle)
                    .all(|(h, n)| h.to_ascii_lowercase() == *n)
            })
    }
}

/// Median of a list (NaN-free); `None` for an empty list.
pub fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(rid: Rid, correlation_id: u32) -> Record {
        Record::CudaEvent {
            rid,
            event: 1,
            event_sync_id: rid,
            stream: 7,
            correlation_id,
            ts: rid * 10,
        }
    }

    fn api(rid: Rid, correlation_id: u32) -> Record {
        Record::Api {
            rid,
            domain: ground_truth::trace::ApiDomain::Runtime,
            cbid: 0,
            name: "cudaEventRecord".into(),
            tid: 1,
            start: rid * 10,
            end: rid * 10 + 5,
            correlation_id,
        }
    }

    /// Activities by correlation id as a map of vectors in record order would have them.
    fn reference_groups(recs: &[Record]) -> std::collections::BTreeMap<u32, Vec<Pos>> {
        let mut m = std::collections::BTreeMap::<u32, Vec<Pos>>::new();
        for (p, r) in recs.iter().enumerate() {
            if let Record::CudaEvent { correlation_id, .. } = r {
                m.entry(*correlation_id).or_default().push(p as Pos);
            }
        }
        m
    }

    #[test]
    fn groups_activities_by_correlation_id_dense_or_sparse() {
        // Dense ids (a table by id) and ids far apart (sorted ids), each with a
        // repeated id whose activities are not adjacent in the records.
        for spread in [1u32, 1_000_003] {
            let corr = |i: u32| (i % 5 + 1) * spread;
            let recs: Vec<Record> = (0..12u32)
                .map(|i| event(u64::from(i) + 1, corr(i)))
                .chain([api(100, corr(2)), api(101, corr(2))])
                .collect();
            let groups = ActivityGroups::of(&recs);
            let expected = reference_groups(&recs);
            let found: std::collections::BTreeMap<u32, Vec<Pos>> =
                groups.iter().map(|(c, g)| (c, g.to_vec())).collect();
            assert_eq!(found, expected, "spread {spread}");
            for (c, g) in &expected {
                assert_eq!(groups.get(*c), Some(g.as_slice()));
            }
            assert_eq!(groups.get(0), None);
            assert_eq!(groups.get(6 * spread + 1), None);
            assert_eq!(groups.get(u32::MAX), None);
            // The API record of a correlation id: the last of two sharing it.
            let apis = Positions::of(|| {
                recs.iter().enumerate().filter_map(|(p, r)| match r {
                    Record::Api { correlation_id, .. } => {
                        Some((u64::from(*correlation_id), p as Pos))
                    }
                    _ => None,
                })
            });
            assert_eq!(apis.get(u64::from(corr(2))), Some(13));
            assert_eq!(apis.get(u64::from(corr(1))), None);
            assert_eq!(apis.get(u64::MAX), None);
        }
    }

    #[test]
    fn classifies_every_launch_flavour() {
        for n in [
            "cudaLaunchKernel",
            "cuLaunchKernel",
            "cuLaunchKernelEx",
            "cudaLaunchKernelExC",
            "cuLaunchCooperativeKernel",
        ] {
            assert_eq!(CallKind::of(n), CallKind::KernelLaunch, "{n}");
        }
        assert_eq!(CallKind::of("cudaGraphLaunch"), CallKind::GraphLaunch);
        assert_eq!(CallKind::of("cuMemcpyHtoDAsync_v2"), CallKind::Memcpy);
        assert_eq!(CallKind::of("cudaStreamWaitEvent"), CallKind::StreamWait);
        assert_eq!(CallKind::of("cuStreamSynchronize"), CallKind::Synchronize);
    }

    #[test]
    fn picks_the_first_frame_outside_cuda() {
        let s: Vec<SharedStr> = [
            "libcuda.so.1!cuLaunchKernel",
            "cudaLaunchKernel",
            "libcudart.so.13!0x1234",
            "model.py:42 forward",
            "main",
        ]
        .map(SharedStr::from)
        .to_vec();
        assert_eq!(call_site_frame(&s), Some("model.py:42 forward"));
        let s = ["cuLaunchKernelEx", "app::attention::launch"].map(SharedStr::from);
        assert_eq!(call_site_frame(&s), Some("app::attention::launch"));
    }
}
