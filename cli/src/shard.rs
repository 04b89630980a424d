//! Scale-out of `causalbench run` over machines (docs/scale-out.md): `--shard K/N`
//! keeps the cases whose key hashes to K of N (`report --merge` joins the shards again,
//! `merge.rs`). A case's shard depends on its key alone, so a case stays in its shard
//! when the suite grows.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// One of `count` disjoint parts of a suite, `index` counted from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Shard {
    /// The whole suite.
    pub const WHOLE: Shard = Shard { index: 1, count: 1 };

    /// Whether the case (or megakernel family) named `key` belongs to this shard.
    pub fn holds(&self, key: &str) -> bool {
        if self.count == 1 {
            return true;
        }
        let digest = Sha256::digest(key.as_bytes());
        let head = u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"));
        head % u64::from(self.count) == u64::from(self.index - 1)
    }

    /// The key a megakernel-track family is sharded by.
    pub fn track_key(family: &str) -> String {
        format!("megakernel-{family}")
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl std::str::FromStr for Shard {
    type Err = String;
    fn from_str(text: &str) -> Result<Shard, String> {
        let bad = || format!("`{text}` is not K/N with 1 ≤ K ≤ N (e.g. 2/8)");
        let (index, count) = text.split_once('/').ok_or_else(bad)?;
        let index: u32 = index.trim().parse().map_err(|_| bad())?;
        let count: u32 = count.trim().parse().map_err(|_| bad())?;
        if index == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_parse_and_refuse_what_is_not_k_of_n() {
        assert_eq!("2/8".parse::<Shard>(), Ok(Shard { index: 2, count: 8 }));
        for bad in ["0/3", "4/3", "3", "a/3", "1/0", "-1/3"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }

    #[test]
    fn every_key_is_in_exactly_one_shard_and_stays_there() {
        let keys: Vec<String> = (0..300).map(|i| format!("sim-case-{i}.r0")).collect();
        for count in [1, 2, 3, 7] {
            let mut sizes = vec![0; count as usize];
            for key in &keys {
                let holders: Vec<u32> = (1..=count)
                    .filter(|&index| Shard { index, count }.holds(key))
                    .collect();
                assert_eq!(holders.len(), 1, "{key} in {holders:?} of {count}");
                sizes[holders[0] as usize - 1] += 1;
            }
            // A hash split is roughly even: no shard is empty or holds most of the suite.
            if count > 1 {
                assert!(
                    sizes.iter().all(|&n| n > 0 && n < 300 * 2 / count as usize),
                    "{sizes:?}"
                );
            }
        }
        // The shard of a key depends on the key only, not on the rest of the suite.
        let shard = Shard { index: 2, count: 3 };
        assert_eq!(shard.holds("sim-a.r0"), shard.holds("sim-a.r0"));
    }
}
