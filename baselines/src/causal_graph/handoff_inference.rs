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
//! handed the work on: a thread resumes as soon as its work arrives. The
//! members of a pool (threads that call the same sites: one role) take turns
//! at a step, so a member's few resumes are read with its role-mates'.

use super::graph::InferredEdge;
use super::thresholds::{
    CLOSED_HANDOFF_CONFIDENCE, HANDOFF_HYPOTHESES, HANDOFF_LAG_SPREAD_NS, HANDOFF_MAX_LAG_NS,
    HANDOFF_MIN_RESUMES, MAX_ROLE_MATES,
};
use crate::index::{FastMap, Index, Pos};
use ground_truth::{EdgeType, Evidence, Ns, SharedStr};
use std::collections::{BTreeMap, BTreeSet};

/// Where a call is made: its entry point and user stack (empty when stacks
/// are not in the view).
type Site<'a> = (&'a str, &'a [SharedStr]);

/// A resume, and for each site of another thread's calls that ended in its
/// idle time, no longer than a wake-up before it ([`HANDOFF_MAX_LAG_NS`]),
/// those calls and how long before the resume each ended.
type Hypotheses<'a> = (Pos, FastMap<Site<'a>, Vec<(Pos, Ns)>>);

/// The inferred handoff into each resume, where its thread's resumes at the
/// same site keep one hypothesis. `resumes`: calls after an idle time their
/// thread's records leave unexplained, with when their thread went idle.
/// Resumes are grouped by thread as well as site (a program that makes its
/// calls through one dispatcher has one stack for every step; a step runs on
/// its own threads); the calls that hand work on are not (a pool's members
/// take turns handing it on). A member of a pool takes its turn at a step
/// too, so it may resume only once in a view: such a resume is tested
/// against the hypothesis its role-mates (threads that make the same calls)
/// kept at the same site, and joins it where its own timing does not refute
/// it. Where every member took one turn, the turns of one role at one site
/// test hypotheses together.
pub(super) fn inferred_handoffs(ix: &Index<'_>, resumes: &[(Pos, Ns)]) -> Vec<InferredEdge> {
    if resumes.len() < HANDOFF_MIN_RESUMES {
        return Vec::new();
    }
    let site = |p: Pos| -> Site { (ix.call_name(p), ix.stack(p).unwrap_or_default()) };
    let mut by_end: Vec<(Ns, Pos)> = ix.all_calls.iter().map(|&c| (ix.end(c), c)).collect();
    by_end.sort_unstable();
    let mut groups: BTreeMap<(u32, Site), Vec<Hypotheses>> = BTreeMap::new();
    for &(y, idle_from) in resumes {
        let tid = ix.rec(y).tid().unwrap_or(0);
        let at = ix.start(y);
        let upto = by_end.partition_point(|&(end, _)| end <= at);
        let mut near: FastMap<Site, Vec<(Pos, Ns)>> = FastMap::default();
        for (read, &(end, x)) in by_end[..upto].iter().rev().enumerate() {
            let lag = at - end;
            if end <= idle_from || lag as f64 > HANDOFF_MAX_LAG_NS || read >= HANDOFF_HYPOTHESES {
                break;
            }
            if ix.rec(x).tid() != Some(tid) {
                near.entry(site(x)).or_default().push((x, lag));
            }
        }
        // A resume after which nothing else ran tests no hypothesis: a root.
        if !near.is_empty() {
            groups.entry((tid, site(y))).or_default().push((y, near));
        }
    }
    let (kept, lone): (Vec<_>, Vec<_>) = groups
        .into_iter()
        .partition(|(_, resumed)| resumed.len() >= HANDOFF_MIN_RESUMES);
    // Roles are read only where a resume is left alone.
    let role = if lone.is_empty() {
        FastMap::default()
    } else {
        roles(ix, site)
    };
    let mut out = Vec::new();
    let mut push = |y: Pos, x: Pos| {
        out.push(InferredEdge {
            src: x,
            dst: y,
            kind: EdgeType::Handoff,
            ev: Evidence::Inferred,
            conf: CLOSED_HANDOFF_CONFIDENCE,
        })
    };
    let mut held: Vec<((u32, Site), &[Hypotheses])> = Vec::new();
    for (key, resumed) in &kept {
        let Some((_, from)) = surviving_site(resumed) else {
            continue;
        };
        cov_mark::hit!(handoff_inferred_by_refutation);
        held.push((*key, resumed));
        for (y, x) in from {
            push(y, x);
        }
    }
    // Resumes no role-mate's hypothesis takes: a pool whose every member
    // took one turn. Together, by role and site, they test hypotheses as one
    // thread's resumes do.
    let mut pooled: BTreeMap<(usize, Site), Vec<Hypotheses>> = BTreeMap::new();
    for ((tid, at), resumed) in lone {
        let mates = held
            .iter()
            .filter(|((mate, mate_at), _)| *mate_at == at && role.get(mate) == role.get(&tid))
            .take(MAX_ROLE_MATES);
        // With the mates' resumes the refutation runs again; of the mates
        // that keep a hypothesis with this resume, the nearest handed on.
        let joined = mates
            .filter_map(|(_, mates)| {
                let mut with: Vec<Hypotheses> = mates.to_vec();
                with.extend(resumed.iter().cloned());
                surviving_site(&with)
            })
            .min_by_key(|(median, _)| *median);
        let Some((_, from)) = joined else {
            if let Some(&role) = role.get(&tid) {
                pooled.entry((role, at)).or_default().extend(resumed);
            }
            continue;
        };
        cov_mark::hit!(handoff_resume_of_a_pool);
        for (y, x) in from {
            if resumed.iter().any(|(r, _)| *r == y) {
                push(y, x);
            }
        }
    }
    for resumed in pooled.into_values() {
        let threads: BTreeSet<Option<u32>> =
            resumed.iter().map(|(y, _)| ix.rec(*y).tid()).collect();
        if threads.len() < HANDOFF_MIN_RESUMES {
            continue;
        }
        let Some((_, from)) = surviving_site(&resumed) else {
            continue;
        };
        cov_mark::hit!(handoff_pool_of_single_turns);
        for (y, x) in from {
            push(y, x);
        }
    }
    out
}

/// Each thread's role: threads that call the same set of sites share one
/// (numbered in order of their smallest thread id, so the grouping is the
/// same on every run).
fn roles<'a>(ix: &Index<'a>, site: impl Fn(Pos) -> Site<'a>) -> FastMap<u32, usize> {
    let mut sites: BTreeMap<u32, BTreeSet<Site<'a>>> = BTreeMap::new();
    for &c in &ix.all_calls {
        if let Some(tid) = ix.rec(c).tid() {
            sites.entry(tid).or_default().insert(site(c));
        }
    }
    let mut numbered: Vec<BTreeSet<Site<'a>>> = Vec::new();
    let mut role = FastMap::default();
    for (tid, set) in sites {
        let n = match numbered.iter().position(|s| *s == set) {
            Some(n) => n,
            None => {
                numbered.push(set);
                numbered.len() - 1
            }
        };
        role.insert(tid, n);
    }
    role
}

/// The calls that handed each resume on: of the sites no resume refutes,
/// the one whose lags, a call of it per resume, stay within
/// [`HANDOFF_LAG_SPREAD_NS`] of each other, with the smallest median lag (the
/// site itself breaks ties). As that median and (resume, call) pairs.
fn surviving_site(resumed: &[Hypotheses<'_>]) -> Option<(Ns, Vec<(Pos, Pos)>)> {
    let (_, first) = resumed.first()?;
    let mut best: Option<(Ns, Site, Vec<(Pos, Pos)>)> = None;
    for (&candidate, anchors) in first {
        for &(_, anchor) in anchors {
            let Some(picked) = resumed
                .iter()
                .map(|(y, near)| {
                    let calls = near.get(&candidate)?;
                    let &(x, lag) = calls.iter().min_by_key(|(_, lag)| lag.abs_diff(anchor))?;
                    Some((*y, x, lag))
                })
                .collect::<Option<Vec<(Pos, Pos, Ns)>>>()
            else {
                continue;
            };
            let mut lags: Vec<Ns> = picked.iter().map(|&(_, _, lag)| lag).collect();
            lags.sort_unstable();
            let median = lags[lags.len() / 2];
            if (lags[lags.len() - 1] - lags[0]) as f64 > HANDOFF_LAG_SPREAD_NS {
                continue;
            }
            if best
                .as_ref()
                .map_or(true, |(m, s, _)| (median, candidate) < (*m, *s))
            {
                let pairs = picked.iter().map(|&(y, x, _)| (y, x)).collect();
                best = Some((median, candidate, pairs));
            }
        }
    }
    best.map(|(median, _, pairs)| (median, pairs))
}
