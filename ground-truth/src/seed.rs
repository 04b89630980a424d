//! Deterministic mixing for seeded choices. Every seeded decision in the
//! project (jitter, loss, pool choices) derives from (seed, stable key) through
//! this one function, so the same seed gives the same bytes everywhere.

/// splitmix64's finaliser.
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A value in [0, 1) derived from a key.
pub fn unit(key: u64) -> f64 {
    (mix(key) >> 11) as f64 / (1u64 << 53) as f64
}
