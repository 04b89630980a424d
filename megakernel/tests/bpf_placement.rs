//! Where a GPU runs a task-end-only program set (kernels/src/cuda/mk_bpf.cu,
//! `mk_bpf_defers`; megakernel/README.md, "Compiled monitors on the H200"):
//! the perturbation study measures each diagnosis program both deferred and
//! inline, interleaved, on an executor that defers, and leaves every other
//! arm and the next launches at the default placement; the simulator, which
//! runs every program inline, gets no inline arms.

use ground_truth::megakernel::{Capture, MonitorConfig};
use megakernel::bpf::diagnosis;
use megakernel::bpf::evaluate::{Placement, ProgramExecutor, SimPrograms};
use megakernel::bpf::perturbation::perturbation;
use megakernel::bpf::{programs, Attachment};
use megakernel::schedule::Schedule;
use megakernel::sim::SimCosts;

/// The simulator, saying it defers and noting each launch's program and placement.
struct Deferring {
    sim: SimPrograms,
    placement: Placement,
    launches: Vec<(Option<String>, Placement)>,
}

impl ProgramExecutor for Deferring {
    fn defers(&self) -> bool {
        true
    }
    fn set_placement(&mut self, p: Placement) {
        self.placement = p;
    }
    fn launch_programs(
        &mut self,
        s: &Schedule,
        cfg: &MonitorConfig,
        seed: u64,
        programs: Option<&mut Attachment>,
    ) -> Result<Capture, String> {
        let name = programs.as_ref().map(|a| a.set.name.clone());
        self.launches.push((name, self.placement));
        self.sim.launch_programs(s, cfg, seed, programs)
    }
}

fn schedule() -> Schedule {
    let sc = megakernel::catalog::load().unwrap();
    megakernel::schedule::build(&sc[0], 8, None)
}

#[test]
fn diagnosis_programs_are_measured_deferred_and_inline_where_the_executor_defers() {
    if let Some(why) = programs::unavailable() {
        eprintln!("SKIP: {why}");
        return;
    }
    let s = schedule();
    let mut ex = Deferring {
        sim: SimPrograms(SimCosts::default()),
        placement: Placement::Deferred,
        launches: Vec::new(),
    };
    let arms = perturbation(&mut ex, &s, 1).unwrap();
    let names: Vec<&str> = arms
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["monitor"].as_str())
        .collect();
    for d in diagnosis::ALL {
        let default = format!("diagnosis:{}", d.monitor);
        let inline = format!("{default}:inline");
        assert!(names.contains(&default.as_str()), "{names:?}");
        assert!(names.contains(&inline.as_str()), "{names:?}");
        let placements: Vec<Placement> = ex
            .launches
            .iter()
            .filter(|(p, _)| p.as_deref() == Some(d.program))
            .map(|l| l.1)
            .collect();
        assert_eq!(placements, vec![Placement::Deferred, Placement::Inline]);
    }
    // Every other launch at the default placement, and the default restored.
    assert!(ex
        .launches
        .iter()
        .filter(|(p, _)| !p.as_deref().is_some_and(|p| p.starts_with("diagnose")))
        .all(|l| l.1 == Placement::Deferred));
    assert_eq!(ex.placement, Placement::Deferred);
}

#[test]
fn the_simulator_gets_no_inline_arms() {
    if let Some(why) = programs::unavailable() {
        eprintln!("SKIP: {why}");
        return;
    }
    let mut sim = SimPrograms(SimCosts::default());
    let arms = perturbation(&mut sim, &schedule(), 1).unwrap();
    assert!(arms
        .as_array()
        .unwrap()
        .iter()
        .all(|a| !a["monitor"].as_str().unwrap_or("").ends_with(":inline")));
}
