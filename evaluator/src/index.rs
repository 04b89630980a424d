//! Rid → owning-node index used on the scoring hot path.
//!
//! Semantically this is [`ground_truth::GroundTruth::rid_owner`] (when two nodes
//! list the same rid, the later node wins) plus one bit per rid saying whether
//! the rid is a record of the view being scored. It is built for speed at
//! 10⁷ records: a flat `Vec<u32>` when rids are dense (the recorder's usual
//! numbering), otherwise a `HashMap<u64, u32>` with a cheap, well-mixing hasher
//! and the capacity reserved up front.

use ground_truth::{GroundTruth, NodeId, Rid};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Bit set in a slot when the rid is a record of the view.
const IN_VIEW: u32 = 1 << 31;
/// Empty dense slot.
const EMPTY: u32 = u32::MAX;
/// Node ids must stay below this to fit beside the flag (2³¹ − 1 nodes: far more
/// than fit in memory as `Node` values).
pub(crate) const MAX_NODES: usize = (IN_VIEW - 1) as usize;

/// A 64-bit finalizer (from splitmix64 / murmur3): good low and high bits for
/// hashbrown, one multiply-xorshift round pair per key.
#[derive(Default, Clone, Copy)]
pub(crate) struct RidHasher(u64);

impl Hasher for RidHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        // Not used for u64 keys; kept correct for any other key type.
        for &b in bytes {
            self.write_u64(u64::from(b) ^ self.0.rotate_left(8));
        }
    }
    #[inline]
    fn write_u64(&mut self, x: u64) {
        let mut z = x ^ self.0;
        z = (z ^ (z >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
        z = (z ^ (z >> 33)).wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        self.0 = z ^ (z >> 33);
    }
    #[inline]
    fn write_u32(&mut self, x: u32) {
        self.write_u64(u64::from(x));
    }
}

pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<RidHasher>>;

pub(crate) fn fast_map<K, V>(capacity: usize) -> FastMap<K, V> {
    HashMap::with_capacity_and_hasher(capacity, BuildHasherDefault::default())
}

enum Slots {
    Dense { base: u64, slots: Vec<u32> },
    Hashed(FastMap<u64, u32>),
}

pub(crate) struct RidIndex {
    slots: Slots,
}

impl RidIndex {
    /// Indexes every rid of every node (`node.id` as owner; nodes whose id does
    /// not fit are skipped, they can't be valid).
    pub(crate) fn new(gt: &GroundTruth) -> Self {
        let mut count = 0usize;
        let (mut lo, mut hi) = (u64::MAX, 0u64);
        for n in &gt.nodes {
            for &r in &n.rids {
                count += 1;
                lo = lo.min(r);
                hi = hi.max(r);
            }
        }
        let dense = count > 0 && (hi - lo) < (4 * count as u64).saturating_add(1024);
        let slots = if dense {
            let mut slots = vec![EMPTY; (hi - lo + 1) as usize];
            for n in gt.nodes.iter().filter(|n| (n.id as usize) < MAX_NODES) {
                for &r in &n.rids {
                    slots[(r - lo) as usize] = n.id;
                }
            }
            Slots::Dense { base: lo, slots }
        } else {
            let mut map = fast_map(count);
            for n in gt.nodes.iter().filter(|n| (n.id as usize) < MAX_NODES) {
                for &r in &n.rids {
                    map.insert(r, n.id);
                }
            }
            Slots::Hashed(map)
        };
        RidIndex { slots }
    }

    #[inline]
    fn slot(&self, rid: Rid) -> Option<u32> {
        match &self.slots {
            Slots::Dense { base, slots } => {
                let i = rid.checked_sub(*base)?;
                let v = *slots.get(usize::try_from(i).ok()?)?;
                (v != EMPTY).then_some(v)
            }
            Slots::Hashed(map) => map.get(&rid).copied(),
        }
    }

    /// Marks `rid` as a record of the view; returns its owner, if any.
    #[inline]
    pub(crate) fn mark_in_view(&mut self, rid: Rid) -> Option<NodeId> {
        let slot = match &mut self.slots {
            Slots::Dense { base, slots } => {
                let i = usize::try_from(rid.checked_sub(*base)?).ok()?;
                let s = slots.get_mut(i)?;
                if *s == EMPTY {
                    return None;
                }
                s
            }
            Slots::Hashed(map) => map.get_mut(&rid)?,
        };
        *slot |= IN_VIEW;
        Some(*slot & !IN_VIEW)
    }

    /// The node that owns `rid`, whether or not the view shows it.
    #[inline]
    pub(crate) fn owner(&self, rid: Rid) -> Option<NodeId> {
        self.slot(rid).map(|v| v & !IN_VIEW)
    }

    /// The node that owns `rid`, only if `rid` is a record of the view.
    #[inline]
    pub(crate) fn visible_owner(&self, rid: Rid) -> Option<NodeId> {
        self.slot(rid)
            .filter(|v| v & IN_VIEW != 0)
            .map(|v| v & !IN_VIEW)
    }
}

/// Where each rid's request attribution sits in `Explanation::attribution` (the first
/// attribution of a rid wins): a table by rid when the attributed rids are dense, as
/// [`RidIndex`] decides, else a map. A map from rid to token cost about 50 bytes per
/// attributed record, the score's largest structure on a large case.
pub(crate) struct FirstAttribution {
    slots: Slots,
}

impl FirstAttribution {
    pub(crate) fn new(attribution: &[ground_truth::Attribution]) -> Self {
        let (mut lo, mut hi) = (u64::MAX, 0u64);
        for a in attribution {
            lo = lo.min(a.rid);
            hi = hi.max(a.rid);
        }
        let count = attribution.len();
        // Positions must stay clear of the empty slot's value.
        let fits = count < EMPTY as usize;
        let dense = fits && count > 0 && (hi - lo) < (4 * count as u64).saturating_add(1024);
        let slots = if dense {
            let mut slots = vec![EMPTY; (hi - lo + 1) as usize];
            for (i, a) in attribution.iter().enumerate() {
                let s = &mut slots[(a.rid - lo) as usize];
                if *s == EMPTY {
                    *s = i as u32;
                }
            }
            Slots::Dense { base: lo, slots }
        } else {
            let mut map = fast_map(count);
            for (i, a) in attribution.iter().enumerate() {
                map.entry(a.rid).or_insert(i as u32);
            }
            Slots::Hashed(map)
        };
        FirstAttribution { slots }
    }

    /// The position of `rid`'s first attribution.
    #[inline]
    pub(crate) fn get(&self, rid: Rid) -> Option<usize> {
        match &self.slots {
            Slots::Dense { base, slots } => {
                let i = usize::try_from(rid.checked_sub(*base)?).ok()?;
                slots.get(i).filter(|&&v| v != EMPTY).map(|&v| v as usize)
            }
            Slots::Hashed(map) => map.get(&rid).map(|&v| v as usize),
        }
    }
}
