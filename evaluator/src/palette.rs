//! One colour per profiler, the same in every plot and on every page: derived from the
//! profiler's name, never from its position among the profilers of a result set, so a
//! profiler keeps its colour when another is added, unless the two would look alike on
//! one page ([`Palette`]). Colour-blind-safe palettes only
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

/// Colours closer than this (the "redmean" approximation of perceived distance) are
/// too alike to tell two profilers apart at a glance: Okabe–Ito's sky blue and
/// Tol's light cyan are 92 apart, the nearest pair of shipped colours 133.
pub const MIN_DISTANCE: f64 = 110.0;

/// Perceived distance between two sRGB colours: the "redmean" weighting of the
/// channel differences, a cheap stand-in for a colour-difference formula.
pub fn distance(a: Colour, b: Colour) -> f64 {
    let mean_red = (f64::from(a.0) + f64::from(b.0)) / 2.0;
    let (dr, dg, db) = (
        f64::from(a.0) - f64::from(b.0),
        f64::from(a.1) - f64::from(b.1),
        f64::from(a.2) - f64::from(b.2),
    );
    ((2.0 + mean_red / 256.0) * dr * dr
        + 4.0 * dg * dg
        + (2.0 + (255.0 - mean_red) / 256.0) * db * db)
        .sqrt()
}

/// The colours of the profilers shown together (a site, a page): each profiler's
/// [`profiler_colour`], except where it would be within [`MIN_DISTANCE`] of a colour
/// already given (the shipped profilers' first, then the others by name): then the next
/// of [`OTHERS`] after its own that is far enough from every colour given, or, when
/// none is, the next not given at all. So a profiler keeps its colour wherever no
/// other on the page is too like it.
#[derive(Debug, Clone, Default)]
pub struct Palette {
    colours: std::collections::BTreeMap<String, Colour>,
}

impl Palette {
    pub fn for_profilers<'a>(names: impl IntoIterator<Item = &'a str>) -> Palette {
        let names: std::collections::BTreeSet<&str> = names.into_iter().collect();
        let mut colours = std::collections::BTreeMap::new();
        let mut given: Vec<Colour> = Vec::new();
        for (name, c) in SHIPPED.iter().filter(|(n, _)| names.contains(n)) {
            colours.insert(name.to_string(), *c);
            given.push(*c);
        }
        let shipped = |n: &str| SHIPPED.iter().any(|(s, _)| *s == n);
        for name in names.iter().filter(|n| !shipped(n)) {
            let own = profiler_colour(name);
            let start = OTHERS.iter().position(|c| *c == own).unwrap_or(0);
            let candidates: Vec<Colour> = (0..OTHERS.len())
                .map(|i| OTHERS[(start + i) % OTHERS.len()])
                .collect();
            let far = |c: &Colour| given.iter().all(|g| distance(*c, *g) >= MIN_DISTANCE);
            let colour = candidates
                .iter()
                .find(|c| far(c))
                .or_else(|| candidates.iter().find(|c| !given.contains(c)))
                .copied()
                .unwrap_or(own);
            colours.insert(name.to_string(), colour);
            given.push(colour);
        }
        Palette { colours }
    }

    /// The colour of `name`: its place in the palette, else [`profiler_colour`].
    pub fn colour(&self, name: &str) -> Colour {
        self.colours
            .get(name)
            .copied()
            .unwrap_or_else(|| profiler_colour(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pair_of_profilers_on_a_page_is_far_enough_apart() {
        // The shipped profilers and a dozen external ones: more than the palettes hold
        // far apart, so the last only differ.
        let mut names: Vec<String> = SHIPPED.iter().map(|(n, _)| n.to_string()).collect();
        let few: Vec<String> = (0..4).map(|i| format!("tool-{i}")).collect();
        names.extend(few.iter().cloned());
        let palette = Palette::for_profilers(names.iter().map(String::as_str));
        for (i, a) in names.iter().enumerate() {
            for b in &names[i + 1..] {
                let d = distance(palette.colour(a), palette.colour(b));
                assert!(d >= MIN_DISTANCE, "{a} and {b}: {d:.0}");
            }
        }
        // The shipped profilers keep their colours; a lone other keeps its own.
        assert_eq!(
            palette.colour("causal-graph"),
            profiler_colour("causal-graph")
        );
        let alone = Palette::for_profilers(["tool-0"]);
        assert_eq!(alone.colour("tool-0"), profiler_colour("tool-0"));
        let many: Vec<String> = (0..12).map(|i| format!("x-{i}")).collect();
        let crowded = Palette::for_profilers(many.iter().map(String::as_str));
        let distinct: std::collections::BTreeSet<String> =
            many.iter().map(|n| crowded.colour(n).hex()).collect();
        assert_eq!(
            distinct.len(),
            OTHERS.len(),
            "every colour used before one repeats"
        );
    }

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
