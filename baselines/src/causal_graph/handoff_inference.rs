//! Closed mode: handoffs between threads inferred from the timing that recurs.
//!
//! Without task markers a thread that idled until another thread handed it
//! work resumes with a call whose program-order predecessor is too far back to
//! join (`host::joined_by_thread_and_time`): the walk would stop there. Which
//! thread released it is not in the view, but the program repeats. The
//! inference is refutation, as in The Mystery Machine (Chow et al., OSDI 2014;
//! baselines/README.md, step 1): for the resumes of one thread at one place
//! (entry point and user stack), every site of another thread's call that
//! ended in a resume's idle time is a hypothesis of what handed the work on,
//! and a resume whose idle time no call of that site ended in refutes it. So
//! does timing a handoff cannot have: a handoff's lag (the wake-up and the
//! task's first steps) is short and steady, so lags spread wider than the gaps
//! inside a task, or longer than a wake-up, refute the site too. Of the sites
//! left, the one that ends nearest before the resumes (smallest median lag)
//! handed the work on: a thread resumes as soon as its work arrives.

use super::graph::InferredEdge;
use super::thresholds::{
    CLOSED_HANDOFF_CONFIDENCE, HANDOFF_HYPOTHESES, HANDOFF_LAG_SPREAD_NS, HANDOFF_MAX_LAG_NS,
    HANDOFF_MIN_RESUMES,
};
use crate::index::{FastMap, Index, Pos};
use ground_truth::{EdgeType, Evidence, Ns, SharedStr};

/// Where a call is made: its entry point and user stack (empty when stacks
/// are not in the view).
type Site<'a> = (&'a str, &'a [SharedStr]);

/// A resume, and for each site of another thread's call that ended in its
/// idle time the nearest such call and how long before the resume it ended.
type Hypotheses<'a> = (Pos, FastMap<Site<'a>, (Pos, Ns)>);

/// The inferred handoff into each resume, where its thread's resumes at the
/// same site keep one hypothesis. `resumes`: calls after an idle time their
/// thread's records leave unexplained, with when their thread went idle.
/// Resumes are grouped by thread as well as site (a program that makes its
/// calls through one dispatcher has one stack for every step; a step runs on
/// its own threads); the calls that hand work on are not (a pool's members
/// take turns handing it on).
pub(super) fn inferred_handoffs(ix: &Index<'_>, resumes: &[(Pos, Ns)]) -> Vec<InferredEdge> {
    if resumes.len() < HANDOFF_MIN_RESUMES {
        return Vec::new();
    }
    let site = |p: Pos| -> Site { (ix.call_name(p), ix.stack(p).unwrap_or_default()) };
    let mut by_end: Vec<(Ns, Pos)> = ix.all_calls.iter().map(|&c| (ix.end(c), c)).collect();
    by_end.sort_unstable();
    let mut groups: FastMap<(u32, Site), Vec<Hypotheses>> = FastMap::default();
    for &(y, idle_from) in resumes {
        let tid = ix.rec(y).tid().unwrap_or(0);
        let at = ix.start(y);
        let upto = by_end.partition_point(|&(end, _)| end <= at);
        let mut near: FastMap<Site, (Pos, Ns)> = FastMap::default();
        for &(end, x) in by_end[..upto].iter().rev() {
            if end <= idle_from || near.len() >= HANDOFF_HYPOTHESES {
                break;
            }
            if ix.rec(x).tid() != Some(tid) {
                near.entry(site(x)).or_insert((x, at - end));
            }
        }
        // A resume after which nothing else ran tests no hypothesis: a root.
        if !near.is_empty() {
            groups.entry((tid, site(y))).or_default().push((y, near));
        }
    }
    let mut groups: Vec<_> = groups.into_iter().collect();
    groups.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let mut out = Vec::new();
    for (_, resumed) in groups {
        if resumed.len() < HANDOFF_MIN_RESUMES {
            continue;
        }
        let Some(from) = surviving_site(&resumed) else {
            continue;
        };
        cov_mark::hit!(handoff_inferred_by_refutation);
        for (y, near) in &resumed {
            out.push(InferredEdge {
                src: near[&from].0,
                dst: *y,
                kind: EdgeType::Handoff,
                ev: Evidence::Inferred,
                conf: CLOSED_HANDOFF_CONFIDENCE,
            });
        }
    }
    out
}

/// The site no resume refutes that ends nearest before them (smallest
/// median lag; the site itself breaks ties).
fn surviving_site<'a>(resumed: &[Hypotheses<'a>]) -> Option<Site<'a>> {
    let (_, first) = resumed.first()?;
    let mut best: Option<(Ns, Site)> = None;
    for &candidate in first.keys() {
        let Some(mut lags) = resumed
            .iter()
            .map(|(_, near)| near.get(&candidate).map(|&(_, lag)| lag))
            .collect::<Option<Vec<Ns>>>()
        else {
            continue;
        };
        lags.sort_unstable();
        let median = lags[lags.len() / 2];
        let spread = lags[lags.len() - 1] - lags[0];
        if spread as f64 > HANDOFF_LAG_SPREAD_NS || median as f64 > HANDOFF_MAX_LAG_NS {
            continue;
        }
        if best.map_or(true, |b| (median, candidate) < b) {
            best = Some((median, candidate));
        }
    }
    best.map(|(_, s)| s)
}
