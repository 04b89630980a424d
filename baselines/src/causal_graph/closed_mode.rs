//! Closed mode's host evidence joined by thread and time (baselines/README.md,
//! steps 4c and 4d): without request identity or task markers, the host
//! collector's stall records are joined to the critical path by the thread
//! and the time they share with it, and judged by their counterfactual
//! effect.

use super::counterfactual::Cone;
use super::graph::Graph;
use super::readings;
use super::thresholds::{
    CLOSED_MODE_QUEUEING, CLOSED_RULES_BEHIND_STALL, HOST_COMPUTE_ALTERNATIVE, MAX_TASK_STEPS,
    STALL_LOOKBACK_NS, STALL_NS, STALL_WORK_SHARE,
};
use crate::index::Pos;
use ground_truth::trace::Record;
use ground_truth::CauseLabel;

impl Graph<'_> {
    /// Closed mode: the largest host stall (scheduler or page-fault records of
    /// a launching thread, between a call on `path` and the thread's call
    /// before it: the stall immediately preceding that call) whose removal
    /// moves `p`'s finish beyond the noise floor and a quarter of `p`'s
    /// normal latency (the counterfactual, [`Graph::effect`], as step 4b reads
    /// device delays) and further than the largest device delay step 4b found
    /// (`device_effect`), and which is not one of the small stalls any host
    /// has ([`STALL_NS`] / [`STALL_WORK_SHARE`]). It names the
    /// cause; the rules' reading (`rules`) stays ranked behind it, and
    /// `handoff_queueing` beside it: without task markers a queue before the
    /// call cannot be seen. `None` when no joined stall moves `p` that far:
    /// the rules' reading stands, and where the path stopped at an unjoined
    /// gap the diagnosis stays `complete: false` there.
    pub(super) fn joined_stall_root(
        &self,
        p: Pos,
        path: &[Pos],
        rules: &[(CauseLabel, f64)],
        device_effect: f64,
    ) -> Option<Vec<(CauseLabel, f64)>> {
        if !self.has_ebpf {
            return None;
        }
        let ix = &self.ix;
        let floor = self.counterfactual_floor(p);
        if !floor.is_finite() {
            return None;
        }
        let device_work = path
            .iter()
            .find(|&&x| ix.rec(x).is_device_op())
            .map_or(0.0, |&x| ix.end(x).saturating_sub(ix.start(x)) as f64);
        let cone = self.cone(p);
        let mut best: Option<(CauseLabel, f64)> = None;
        for &x in path {
            if !matches!(ix.rec(x), Record::Api { .. } | Record::Uprobe { .. }) {
                continue;
            }
            let Some(tid) = ix.rec(x).tid() else { continue };
            // A call another thread handed work to was ready once the work
            // arrived (`Graph::host_measure`): a stall before that delayed
            // nothing of this path.
            let arrived = self.work_arrived(x);
            let since_previous = ix
                .prev_call(x)
                .map_or(ix.start(x).saturating_sub(STALL_LOOKBACK_NS), |c| ix.end(c));
            if arrived > since_previous {
                cov_mark::hit!(joined_stall_since_the_work_arrived);
            }
            let from = since_previous.max(arrived);
            let st = readings::host_stalls(ix, tid, from.min(ix.start(x)), ix.start(x));
            let (label, size) = readings::larger_stall(&st);
            if size < STALL_NS && size < STALL_WORK_SHARE * device_work {
                continue;
            }
            let effect = self.effect(&cone, x, size);
            if effect > floor.max(device_effect) && best.is_none_or(|(_, b)| effect > b) {
                best = Some((label, effect));
            }
        }
        if best.is_none() {
            best = self.stall_across_the_idle_gap(&cone, path, floor.max(device_effect));
        }
        let (label, effect) = best?;
        cov_mark::hit!(closed_mode_joined_stall);
        let mut out = vec![
            (label, effect),
            (CauseLabel::HandoffQueueing, effect * CLOSED_MODE_QUEUEING),
            (CauseLabel::HostCompute, effect * HOST_COMPUTE_ALTERNATIVE),
        ];
        let rules_total: f64 = rules.iter().map(|c| c.1.max(0.0)).sum();
        if rules_total > 0.0 {
            out.extend(
                rules
                    .iter()
                    .filter(|c| c.0 != label)
                    .map(|&(l, w)| (l, effect * CLOSED_RULES_BEHIND_STALL * w / rules_total)),
            );
        }
        Some(out)
    }

    /// Closed mode, where the path stops at a call whose thread idled before
    /// it (the gap the host records do not explain: work may have come from
    /// another thread through a queue the view cannot see): the largest stall
    /// of another thread while the idle thread ran its previous task (its
    /// calls the host records join back from the gap) or idled (a thread
    /// that makes no CUDA call included: a data loader's host work), read as
    /// what held the work the idle thread waited for. It is joined by time
    /// alone, so it ranks with the lowered confidence of every closed reading
    /// (`joined_stall_root`) and the path stays incomplete there. Its effect
    /// is bounded by the stall and by the gap: the call would have come at
    /// most that much earlier. Only a stall that passes what any host has
    /// ([`STALL_NS`]) counts.
    fn stall_across_the_idle_gap(
        &self,
        cone: &Cone,
        path: &[Pos],
        floor: f64,
    ) -> Option<(CauseLabel, f64)> {
        let ix = &self.ix;
        let &first = path.first()?;
        if !matches!(ix.rec(first), Record::Api { .. } | Record::Uprobe { .. }) {
            return None;
        }
        let own = ix.rec(first).tid()?;
        let gap_to = ix.start(first);
        // A thread whose first call this is idled since before the view's
        // lookback ([`STALL_LOOKBACK_NS`]) as far as its records say.
        let before = ix.prev_call(first);
        let window_from = match before {
            Some(before) => {
                // The work the idle thread waited for was made while it ran
                // its previous task: the calls joined back from the one
                // before the gap.
                let mut busy_from = before;
                for _ in 0..MAX_TASK_STEPS {
                    match ix.prev_call(busy_from) {
                        Some(c)
                            if super::host::joined_by_thread_and_time(ix, own, c, busy_from) =>
                        {
                            busy_from = c;
                        }
                        _ => break,
                    }
                }
                ix.start(busy_from)
            }
            None => {
                cov_mark::hit!(idle_since_the_threads_first_call);
                gap_to.saturating_sub(STALL_LOOKBACK_NS)
            }
        };
        let gap = gap_to.saturating_sub(before.map_or(window_from, |b| ix.end(b))) as f64;
        let mut best: Option<(CauseLabel, f64)> = None;
        for &tid in ix.threads.keys() {
            if tid == own {
                continue;
            }
            let st = readings::host_stalls(ix, tid, window_from, gap_to);
            let (label, size) = readings::larger_stall(&st);
            if size < STALL_NS {
                continue;
            }
            let effect = self.effect(cone, first, size.min(gap));
            if effect > floor && best.is_none_or(|(_, b)| effect > b) {
                best = Some((label, effect));
            }
        }
        if best.is_some() {
            cov_mark::hit!(stall_across_the_idle_gap);
        }
        best
    }
}
