//! How written numbers are rounded.

/// Rounds to 6 decimals so that written numbers are stable and short.
pub(crate) fn round6(x: f64) -> f64 {
    let r = (x * 1e6).round() / 1e6;
    if r == 0.0 {
        0.0
    } else {
        r
    }
}
