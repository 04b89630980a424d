//! `%globaltimer` → CLOCK_MONOTONIC for a run without CUPTI: the offset
//! between the two clocks measured by host–device pings just before and just
//! after the run (`cuda::standalone::clock`), interpolated linearly in time
//! between the two (the two-point drift fit). Measured once per process, the
//! offset drifted by about 25 µs over a 27-scenario process on the H200
//! (results/byo-collector-h200/README.md); measured around each run, the
//! drift inside one run is what the line removes.

use ground_truth::Ns;

/// One measurement of CLOCK_MONOTONIC − `%globaltimer`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ClockSample {
    /// CLOCK_MONOTONIC − `%globaltimer` (ns).
    pub offset_ns: i64,
    /// When it was measured (CLOCK_MONOTONIC ns, the best pings' midpoint).
    pub at_ns: Ns,
    /// The best ping's round trip: the offset is known to half of it.
    pub round_trip_ns: u64,
    pub pings: u32,
}

/// The offset of one run: a sample before it and, where measured, one after.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ClockFit {
    pub before: ClockSample,
    pub after: Option<ClockSample>,
}

impl ClockFit {
    /// A constant offset (one sample).
    pub fn constant(sample: ClockSample) -> ClockFit {
        ClockFit {
            before: sample,
            after: None,
        }
    }

    /// The line through both samples; a later sample that is not later in
    /// time than the first cannot give a slope and is left out.
    pub fn between(before: ClockSample, after: ClockSample) -> ClockFit {
        ClockFit {
            before,
            after: (after.at_ns > before.at_ns).then_some(after),
        }
    }

    /// How much the offset moved between the two samples (ns).
    pub fn drift_ns(&self) -> i64 {
        self.after
            .map_or(0, |a| a.offset_ns - self.before.offset_ns)
    }

    /// The offset at CLOCK_MONOTONIC time `t` (extrapolated outside the
    /// samples: the drift of a crystal is a rate).
    pub fn offset_at(&self, t: Ns) -> i64 {
        let b = &self.before;
        let Some(a) = &self.after else {
            return b.offset_ns;
        };
        let span = (a.at_ns - b.at_ns) as i128;
        let moved = (a.offset_ns - b.offset_ns) as i128;
        let since = t as i128 - b.at_ns as i128;
        b.offset_ns + (moved * since / span) as i64
    }

    /// A `%globaltimer` reading in CLOCK_MONOTONIC: the time `t` with
    /// `t = g + offset_at(t)`, solved on the line (with the offsets of
    /// `b` and `a` at host times `t0` and `t1`, `t = g + o0 + k (t − t0)` for
    /// `k = (o1 − o0) / (t1 − t0)`).
    pub fn to_mono(self, g: Ns) -> Ns {
        let b = &self.before;
        let constant = || (g as i64 + b.offset_ns).max(0) as Ns;
        let Some(a) = &self.after else {
            return constant();
        };
        let span = (a.at_ns - b.at_ns) as i128;
        let moved = (a.offset_ns - b.offset_ns) as i128;
        if span - moved <= 0 {
            // A clock running backwards against the other: no single time.
            return constant();
        }
        let t =
            ((g as i128 + b.offset_ns as i128) * span - moved * b.at_ns as i128) / (span - moved);
        t.max(0) as Ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(at_ns: Ns, offset_ns: i64) -> ClockSample {
        ClockSample {
            offset_ns,
            at_ns,
            round_trip_ns: 1_500,
            pings: 100,
        }
    }

    #[test]
    fn one_sample_is_a_constant_offset() {
        let f = ClockFit::constant(sample(1_000_000, 5_000));
        assert_eq!(f.to_mono(10), 5_010);
        assert_eq!(f.to_mono(9_000_000), 9_005_000);
        assert_eq!(f.drift_ns(), 0);
    }

    #[test]
    fn two_samples_interpolate_linearly_in_time() {
        // 25 µs of drift over one second, as the H200's 27-scenario process.
        let f = ClockFit::between(
            sample(1_000_000_000, 1_000_000),
            sample(2_000_000_000, 1_025_000),
        );
        assert_eq!(f.drift_ns(), 25_000);
        assert_eq!(f.offset_at(1_000_000_000), 1_000_000);
        assert_eq!(f.offset_at(1_500_000_000), 1_012_500);
        assert_eq!(f.offset_at(2_000_000_000), 1_025_000);
        // Extrapolated on the same line outside the samples.
        assert_eq!(f.offset_at(2_200_000_000), 1_030_000);
        assert_eq!(f.offset_at(800_000_000), 995_000);
        // A reading taken half-way through the run (globaltimer = mono − offset).
        let g = 1_500_000_000 - 1_012_500;
        assert!(f.to_mono(g).abs_diff(1_500_000_000) <= 1);
        // Within a nanosecond at both samples.
        assert_eq!(f.to_mono(1_000_000_000 - 1_000_000), 1_000_000_000);
        assert!(f.to_mono(2_000_000_000 - 1_025_000).abs_diff(2_000_000_000) <= 1);
    }

    #[test]
    fn a_second_sample_at_or_before_the_first_is_left_out() {
        let f = ClockFit::between(sample(5_000, 100), sample(5_000, 900));
        assert_eq!(f.after, None);
        assert_eq!(f.offset_at(1_000_000), 100);
        let f = ClockFit::between(sample(5_000, 100), sample(4_000, 900));
        assert_eq!(f.after, None);
    }

    #[test]
    fn a_negative_drift_and_early_readings_stay_on_the_clock() {
        let f = ClockFit::between(sample(1_000, -400), sample(2_000, -600));
        assert_eq!(f.offset_at(1_500), -500);
        // Never below zero.
        assert_eq!(f.to_mono(100), 0);
    }
}
