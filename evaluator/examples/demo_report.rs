//! Writes a synthetic result set (scores, leaderboard, plots) into the directory
//! given as argument, to look at the report's layout without running the pipeline:
//! `cargo run -p evaluator --example demo_report -- /tmp/demo`.

#[path = "../tests/common/mod.rs"]
mod common;

use common::*;
use evaluator::{score_case, write_results};
use ground_truth::view::LossSpec;
use ground_truth::{CauseLabel, Collectors, Mode, RankedCause};

fn main() {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "demo-results".into());
    let families = [
        (
            "late-launch-vs-device-queueing",
            CauseLabel::CpuDeschedule,
            CauseLabel::OccupancyPressure,
        ),
        (
            "dependency-vs-overlap",
            CauseLabel::EventWait,
            CauseLabel::None,
        ),
        (
            "slow-copy-vs-blocked-consumer",
            CauseLabel::PcieContention,
            CauseLabel::StreamBacklog,
        ),
        (
            "host-page-fault-vs-cpu-stall",
            CauseLabel::HostPageFault,
            CauseLabel::CpuDeschedule,
        ),
        (
            "graph-replay-vs-direct-launch",
            CauseLabel::GraphDependency,
            CauseLabel::StreamBacklog,
        ),
    ];
    let profilers = [
        "causal-graph",
        "cupti-correlation",
        "ebpf-host",
        "nvtx-enclosure",
        "timestamp-join",
    ];
    // Deterministic pseudo-random skill per profiler.
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut scores = Vec::new();
    for (fam, ca, cb) in families {
        for (variant, cause) in [("a", ca), ("b", cb)] {
            for rep in 0..3 {
                let f = Fixture::with(Rids::DENSE, fam, variant, cause, rep);
                for col in Collectors::ALL {
                    for mode in [Mode::Instrumented, Mode::Closed] {
                        for (loss, drop) in [
                            (LossSpec::None, vec![]),
                            (
                                LossSpec::Uniform {
                                    rate: 0.01,
                                    seed: 1,
                                },
                                vec![],
                            ),
                            (
                                LossSpec::Uniform {
                                    rate: 0.05,
                                    seed: 1,
                                },
                                vec![60],
                            ),
                            (LossSpec::Uniform { rate: 0.2, seed: 1 }, vec![20, 60]),
                        ] {
                            let mut view = f.view(&drop, loss);
                            view.spec.collectors = col;
                            view.spec.mode = mode;
                            for (pi, p) in profilers.iter().enumerate() {
                                let skill = 0.95 - 0.15 * pi as f64;
                                let mut x = f.perfect(p);
                                x.meta.wall_ms = 1.0 + 10.0 * rnd();
                                if rnd() > skill {
                                    x.diagnoses[0].causes = vec![RankedCause {
                                        label: CauseLabel::HostCompute,
                                        score: 1.0,
                                    }];
                                }
                                let keep = ((skill + 0.1 * rnd()) * x.edges.len() as f64) as usize;
                                x.edges.truncate(keep);
                                if !drop.is_empty() && rnd() < skill {
                                    x.diagnoses[0].complete = false;
                                    x.diagnoses[0].first_unresolved = Some(f.r(40));
                                    x.diagnoses[1].complete = false;
                                    x.diagnoses[1].first_unresolved = Some(f.r(50));
                                }
                                scores.push(score_case(&f.bundle, &view, &x));
                            }
                        }
                    }
                }
            }
        }
    }
    let rep = write_results(std::path::Path::new(&dir), &scores).expect("write results");
    println!("{} cases → {}", rep.cases, dir);
    for f in rep.files {
        println!("  {}", f.display());
    }
}
