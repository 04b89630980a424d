//! The primitives of a run's ground truth and trace: nodes, edges, records
//! and their rids. What a step produces out of them is decided in
//! [`super::steps`]; backends call that, not these, for scenario steps.

use ground_truth::graph::{Edge, EdgeType, GroundTruth, Node, NodeDetail, NodeId, NodeKind};
use ground_truth::scenario::QueueDecl;
use ground_truth::trace::{Record, Rid};
use ground_truth::{Ns, SharedStr};

/// Identity fields of a node besides its kind, name and times. Strings are
/// shared, so one `NodeInfo` can be cloned into every node a step creates
/// without copying them.
#[derive(Debug, Clone, Default)]
pub struct NodeInfo {
    pub request: Option<SharedStr>,
    pub step: Option<SharedStr>,
    pub thread: Option<u32>,
    pub stream: Option<u32>,
    pub call_site: Option<SharedStr>,
    pub operator: Option<SharedStr>,
    pub generation: u32,
}

#[derive(Debug, Default)]
pub struct RunBuilder {
    pub truth: GroundTruth,
    pub trace: Vec<Record>,
    /// Whether records are kept (the twin run only needs times).
    pub keep_records: bool,
    next_rid: Rid,
    /// Each application thread's last host operation (task, call or handoff):
    /// what kept the thread busy when its next task had to wait for it
    /// (`steps::host_task`, the `busy` edge).
    pub(super) last_on_thread: std::collections::HashMap<u32, NodeId>,
    /// The bounded queues of the scenario by name ([`RunBuilder::declare_queues`]):
    /// what the `backpressure` rule needs (`steps::handoff`).
    pub(super) bounded: std::collections::HashMap<SharedStr, BoundedQueue>,
}

/// A queue of bounded capacity as the recording path follows it: how many
/// items were pushed onto it, and the consumer tasks that took its items, in
/// the order they took them (a push waits for the take that frees its slot).
#[derive(Debug, Default)]
pub(super) struct BoundedQueue {
    pub capacity: u32,
    pub pushes: u64,
    pub takes: Vec<NodeId>,
}

impl RunBuilder {
    pub fn new(keep_records: bool) -> Self {
        RunBuilder {
            keep_records,
            ..Default::default()
        }
    }

    /// Declares the scenario's queues: a bounded one (`QueueDecl::capacity`)
    /// makes its pushes wait for room (`steps::handoff`, the `backpressure`
    /// edge); unbounded ones need nothing.
    pub fn declare_queues(&mut self, queues: &[QueueDecl]) {
        for q in queues {
            if let Some(capacity) = q.capacity {
                self.bounded.insert(
                    q.name.as_str().into(),
                    BoundedQueue {
                        capacity,
                        ..Default::default()
                    },
                );
            }
        }
    }

    /// Reserves room for about `ops` scenario operations (saves regrowing huge
    /// vectors) and maps it up front.
    pub fn reserve(&mut self, ops: usize) {
        self.truth.nodes.reserve(ops * 2 + 16);
        self.truth.edges.reserve(ops * 3 + 16);
        prefault(&self.truth.nodes);
        prefault(&self.truth.edges);
        if self.keep_records {
            self.trace.reserve(ops * 4 + 16);
            prefault(&self.trace);
        }
    }

    pub fn node(
        &mut self,
        kind: NodeKind,
        name: impl Into<SharedStr>,
        info: NodeInfo,
        start: Ns,
        end: Ns,
    ) -> NodeId {
        let id = self.truth.nodes.len() as NodeId;
        self.truth.nodes.push(Node {
            id,
            kind,
            name: name.into(),
            request: info.request,
            step: info.step,
            detail: NodeDetail {
                thread: info.thread,
                stream: info.stream,
                call_site: info.call_site,
                operator: info.operator,
            }
            .into(),
            generation: info.generation,
            start,
            end,
            queued: 0,
            submitted: 0,
            rids: Default::default(),
        });
        id
    }

    pub fn set_device_times(&mut self, n: NodeId, queued: Ns, submitted: Ns, start: Ns, end: Ns) {
        let node = &mut self.truth.nodes[n as usize];
        node.queued = queued;
        node.submitted = submitted;
        node.start = start;
        node.end = end;
    }

    pub fn edge(&mut self, src: NodeId, dst: NodeId, kind: EdgeType) {
        self.truth.edges.push(Edge { src, dst, kind });
    }

    /// Adds a record observing `owner` (or no node). `make` receives the rid.
    pub fn record(
        &mut self,
        owner: Option<NodeId>,
        make: impl FnOnce(Rid) -> Record,
    ) -> Option<Rid> {
        if !self.keep_records {
            return None;
        }
        let rid = self.next_rid;
        self.next_rid += 1;
        self.trace.push(make(rid));
        if let Some(n) = owner {
            self.truth.nodes[n as usize].rids.push(rid);
        }
        Some(rid)
    }

    /// Rewrites rids with a keyed bijection so their order and gaps say nothing
    /// about time or loss. Records stay in the order the recorder received them
    /// (as CUPTI buffers deliver them: not sorted by start time).
    pub fn finish(mut self, key: u64) -> (GroundTruth, Vec<Record>) {
        let perm = RidScramble::new(self.next_rid, key);
        for node in &mut self.truth.nodes {
            for r in &mut node.rids {
                *r = perm.apply(*r);
            }
        }
        for rec in &mut self.trace {
            *rec.rid_mut() = perm.apply(rec.rid());
        }
        (self.truth, self.trace)
    }
}

/// Has the kernel map a vector's reserved memory in one call (Linux
/// `MADV_POPULATE_WRITE`) instead of one page fault per 4 KiB as it fills. A
/// 1 M-op run fills about a gigabyte; on the 2-core VM this was measured on,
/// faulting it in cost 0.6 s per GB and populating it 0.35 s. (Transparent huge
/// pages were faster only when the kernel had them free: a fresh process had
/// to wait for compaction, 2 s per GB.) A no-op where unsupported.
#[cfg_attr(not(target_os = "linux"), allow(unused_variables))]
fn prefault<T>(v: &Vec<T>) {
    #[cfg(target_os = "linux")]
    {
        const PAGE: usize = 4096;
        let start = v.as_ptr() as usize;
        let end = start + v.capacity() * std::mem::size_of::<T>();
        // Whole pages inside the allocation only (madvise wants an aligned start).
        let (first, last) = (start.next_multiple_of(PAGE), end / PAGE * PAGE);
        if last > first {
            // SAFETY: the range lies inside the vector's own allocation; populating
            // maps its pages (zero-filled, as untouched memory reads anyway) and
            // changes no contents. Old kernels answer EINVAL, which changes nothing.
            unsafe {
                libc::madvise(
                    first as *mut libc::c_void,
                    last - first,
                    libc::MADV_POPULATE_WRITE,
                );
            }
        }
    }
}

/// A keyed permutation of [0, n) shifted to start at 1: two rounds of
/// multiply-by-odd and xorshift (each a bijection modulo a power of two),
/// cycle-walked back into range. Cheap, and consecutive inputs land far apart.
/// Its constants are derived once: a 1 M-op run scrambles millions of rids.
pub struct RidScramble {
    n: u64,
    mask: u64,
    half: u32,
    k1: u64,
    k2: u64,
}

impl RidScramble {
    pub fn new(n: u64, key: u64) -> Self {
        let bits = 64 - n.max(2).saturating_sub(1).leading_zeros();
        let mask = if bits >= 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        RidScramble {
            n,
            mask,
            half: bits.div_ceil(2),
            k1: crate::mix(key) & mask,
            k2: crate::mix(key ^ 0xA5A5) & mask,
        }
    }

    pub fn apply(&self, r: Rid) -> Rid {
        let mut x = r;
        loop {
            x = (x ^ self.k1).wrapping_mul(0x9E37_79B9_7F4A_7C15) & self.mask;
            x ^= x >> self.half;
            x = (x ^ self.k2).wrapping_mul(0xD6E8_FEB8_6659_FD93) & self.mask;
            x ^= x >> self.half;
            if x < self.n {
                return x + 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn scramble_is_a_permutation() {
        for n in [1u64, 2, 3, 17, 1000, 4096] {
            let perm = RidScramble::new(n, 42);
            let mut seen: Vec<u64> = (0..n).map(|r| perm.apply(r)).collect();
            seen.sort();
            assert_eq!(seen, (1..=n).collect::<Vec<_>>(), "n = {n}");
        }
    }
}
