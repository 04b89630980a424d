//! One colour per profiler, the same in every plot and on every page: derived from the
//! profiler's name, never from its position among the profilers of a result set, so a
//! profiler keeps its colour when another is added. Colour-blind-safe palettes only
//! (Okabe–Ito for the shipped profilers, Paul Tol's "muted" set for any other name), and
//! verdicts are blue against orange, never red against green.

/// An sRGB colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Colour(pub u8, pub u8, pub u8);

impl Colour {
    /// `#rrggbb`, for HTML and SVG.
    pub fn hex(self) -> String {
        format!("#{:02x}{:02x}{:02x}", self.0, self.1, self.2)
    }
}

/// Okabe–Ito colours of the shipped profilers (yellow and black left out: yellow is too
/// light on white, black is the text colour).
const SHIPPED: &[(&str, Colour)] = &[
    ("causal-graph", Colour(0x00, 0x72, 0xB2)),
    ("cupti-correlation", Colour(0xE6, 0x9F, 0x00)),
    ("timestamp-join", Colour(0x00, 0x9E, 0x73)),
    ("ebpf-host", Colour(0xD5, 0x5E, 0x00)),
    ("nvtx-enclosure", Colour(0xCC, 0x79, 0xA7)),
    ("hta-critical-path", Colour(0x56, 0xB4, 0xE9)),
];

/// Paul Tol's "muted" scheme, for every other profiler (external commands, probes).
const OTHERS: [Colour; 9] = [
    Colour(0x33, 0x22, 0x88),
    Colour(0x88, 0xCC, 0xEE),
    Colour(0x44, 0xAA, 0x99),
    Colour(0x11, 0x77, 0x33),
    Colour(0x99, 0x99, 0x33),
    Colour(0xDD, 0xCC, 0x77),
    Colour(0xCC, 0x66, 0x77),
    Colour(0x88, 0x22, 0x55),
    Colour(0xAA, 0x44, 0x99),
];

/// A verdict that holds (Okabe–Ito blue).
pub const CORRECT: Colour = Colour(0x00, 0x72, 0xB2);
/// A verdict that does not hold (Okabe–Ito orange).
pub const WRONG: Colour = Colour(0xE6, 0x9F, 0x00);
/// Nothing asked.
pub const NOT_ASKED: Colour = Colour(0xDD, 0xDD, 0xDD);

/// The colour of profiler `name`: its own for a shipped profiler, else one of
/// [`OTHERS`] chosen by an FNV-1a hash of the name.
pub fn profiler_colour(name: &str) -> Colour {
    if let Some((_, c)) = SHIPPED.iter().find(|(n, _)| *n == name) {
        return *c;
    }
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    OTHERS[(hash % OTHERS.len() as u64) as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_colour_depends_on_the_name_alone() {
        assert_eq!(profiler_colour("causal-graph").hex(), "#0072b2");
        assert_eq!(profiler_colour("my-tool"), profiler_colour("my-tool"));
        let shipped: Vec<Colour> = SHIPPED.iter().map(|(_, c)| *c).collect();
        for (i, c) in shipped.iter().enumerate() {
            assert!(
                !shipped[i + 1..].contains(c),
                "two shipped profilers share {c:?}"
            );
            assert!(
                !OTHERS.contains(c),
                "{c:?} is also an other profiler's colour"
            );
        }
    }
}
