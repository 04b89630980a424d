//! Background noise a real host has, so that a host-side record alone proves
//! nothing and repetitions differ (docs/records.md, "Background noise"):
//! scheduler preemptions and minor page faults on application threads at the
//! rates measured on the H200 corpus, and a launch-latency scale and duration
//! jitter drawn per run. Everything is a seeded draw, so the same seed still
//! gives the same bundle; the twin draws with its own seed, so its noise is
//! independent of the injected run's.

use ground_truth::seed::{mix, unit};
use ground_truth::Ns;

/// Noise rates. The defaults are measured on `results/corpus/h200-580/` (the
/// 120 bundles without a host injection; docs/records.md gives the command).
#[derive(Debug, Clone)]
pub struct NoiseParams {
    /// Natural preemptions per application-thread second (36 in 6.88 s).
    pub preemptions_per_s: f64,
    /// Off-CPU time of a natural preemption: p10, p50 and p90, then the maximum seen.
    pub preemption_ns: [Ns; 4],
    /// Natural minor page faults per application-thread second (59 in 6.88 s).
    pub faults_per_s: f64,
    /// Cost of one minor fault, as `HostParams::minor_fault_ns`'s range.
    pub fault_ns: (Ns, Ns),
    /// Relative spread of the per-run launch-latency scale (±).
    pub launch_scale_spread: f64,
    /// The per-op jitter of host and device durations is drawn per run between
    /// `HostParams::jitter` and this many times it.
    pub jitter_spread: f64,
}

impl Default for NoiseParams {
    fn default() -> Self {
        NoiseParams {
            preemptions_per_s: 5.2,
            preemption_ns: [11_300, 16_800, 21_600, 49_500],
            faults_per_s: 8.6,
            fault_ns: (1_500, 4_000),
            launch_scale_spread: 0.15,
            jitter_spread: 3.0,
        }
    }
}

impl NoiseParams {
    /// No background noise at all (a perfectly quiet host).
    pub fn quiet() -> NoiseParams {
        NoiseParams {
            preemptions_per_s: 0.0,
            faults_per_s: 0.0,
            launch_scale_spread: 0.0,
            jitter_spread: 1.0,
            ..NoiseParams::default()
        }
    }
}

/// A host stall the noise puts before an application thread's next step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stall {
    /// The thread is preempted for this long.
    Preempted(Ns),
    /// The thread takes one minor page fault of this cost, at this address.
    PageFault { cost: Ns, address: u64 },
}

/// One run's noise: its per-run draws and each thread's time of the last draw.
#[derive(Debug)]
pub struct Noise {
    seed: u64,
    params: NoiseParams,
    /// Multiplies every API call's latency in this run.
    launch_scale: f64,
    /// Relative per-op jitter of durations in this run.
    jitter: f64,
    /// Per thread: when its noise was last drawn.
    last: Vec<Ns>,
}

impl Noise {
    /// `base_jitter`: the host's relative per-op jitter (`HostParams::jitter`).
    pub fn new(seed: u64, params: &NoiseParams, base_jitter: f64, threads: usize) -> Noise {
        let seed = mix(seed ^ 0x006e_6f69_7365);
        let spread = |salt: u64, s: f64| 1.0 + (unit(seed ^ salt) * 2.0 - 1.0) * s;
        Noise {
            seed,
            launch_scale: spread(1, params.launch_scale_spread),
            jitter: base_jitter * (1.0 + (params.jitter_spread - 1.0) * unit(seed ^ 2)),
            params: params.clone(),
            last: vec![0; threads],
        }
    }

    /// `v` with this run's per-op jitter, keyed by the op.
    pub fn jitter_ns(&self, key: u64, v: Ns) -> Ns {
        let j = (unit(self.seed ^ mix(key)) * 2.0 - 1.0) * self.jitter;
        ((v as f64) * (1.0 + j)).round().max(0.0) as Ns
    }

    /// An API call's latency in this run.
    pub fn launch_latency(&self, ns: Ns) -> Ns {
        (ns as f64 * self.launch_scale).round() as Ns
    }

    /// The stalls that hit thread `th` between its last draw and `now`, before
    /// the step keyed `key`: each kind of event arrives as a Poisson process
    /// over the elapsed time, at most one of each per step.
    pub fn before_step(&mut self, th: usize, now: Ns, key: u64) -> Vec<Stall> {
        let elapsed_s = now.saturating_sub(self.last[th]) as f64 / 1e9;
        self.last[th] = now;
        let key = mix(self.seed ^ key ^ ((th as u64) << 48));
        let happens = |rate: f64, salt: u64| unit(key ^ salt) < 1.0 - (-rate * elapsed_s).exp();
        let mut stalls = Vec::new();
        let p = &self.params;
        if happens(p.faults_per_s, 3) {
            let (lo, hi) = p.fault_ns;
            let cost = lo + ((hi - lo) as f64 * unit(key ^ 4)) as Ns;
            let address = 0x7f3a_4000_0000 + (mix(key ^ 5) % (1 << 30)) / 4096 * 4096;
            stalls.push(Stall::PageFault { cost, address });
        }
        if happens(p.preemptions_per_s, 6) {
            stalls.push(Stall::Preempted(self.preemption_ns(unit(key ^ 7))));
        }
        stalls
    }

    /// Off-CPU time at quantile `q`, interpolated between the measured quantiles.
    fn preemption_ns(&self, q: f64) -> Ns {
        let [p10, p50, p90, max] = self.params.preemption_ns.map(|v| v as f64);
        let points = [
            (0.0, p10 * 0.5),
            (0.1, p10),
            (0.5, p50),
            (0.9, p90),
            (1.0, max),
        ];
        let i = points
            .windows(2)
            .position(|w| q <= w[1].0)
            .unwrap_or(points.len() - 2);
        let ((q0, v0), (q1, v1)) = (points[i], points[i + 1]);
        (v0 + (v1 - v0) * (q - q0) / (q1 - q0)).round() as Ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_match_the_parameters() {
        let params = NoiseParams::default();
        let mut noise = Noise::new(11, &params, 0.01, 1);
        let (mut preempted, mut faults) = (0, 0);
        // 10 000 steps 100 us apart: one thread-second.
        for i in 0..10_000u64 {
            for s in noise.before_step(0, (i + 1) * 100_000, i) {
                match s {
                    Stall::Preempted(d) => {
                        assert!((3_000..=45_500).contains(&d));
                        preempted += 1;
                    }
                    Stall::PageFault { .. } => faults += 1,
                }
            }
        }
        assert!((1..=15).contains(&preempted), "{preempted} preemptions");
        assert!((2..=18).contains(&faults), "{faults} faults");
    }

    #[test]
    fn a_quiet_host_has_no_noise() {
        let mut noise = Noise::new(11, &NoiseParams::quiet(), 0.01, 1);
        assert!((0..1000u64).all(|i| noise.before_step(0, i * 1_000_000, i).is_empty()));
        assert_eq!(noise.launch_latency(4_000), 4_000);
        assert!((990..=1_010).contains(&(noise.jitter_ns(5, 100_000) / 100)));
    }

    #[test]
    fn runs_draw_different_launch_scales() {
        let p = NoiseParams::default();
        let scales: Vec<Ns> = (0..8)
            .map(|s| Noise::new(s, &p, 0.01, 1).launch_latency(10_000))
            .collect();
        assert!(scales.windows(2).any(|w| w[0] != w[1]));
        assert!(scales.iter().all(|&s| (8_500..=11_500).contains(&s)));
    }
}
