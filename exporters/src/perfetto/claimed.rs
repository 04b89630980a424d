//! The claimed model: a flow per claimed edge, named by evidence class and marked
//! right or wrong against the ground truth.

use super::layout::Group;
use super::model::{Arg, Model, Slice};
use super::slices::{add_flow, base, enum_str};
use ground_truth::{Bundle, EdgeType, Evidence, Explanation, NodeId, TraceView};
use std::collections::HashSet;

pub(super) fn evidence_str(e: Evidence) -> String {
    enum_str(&e)
}

/// A profiler's claims: slices for the shown records, a flow per claimed edge, named by
/// evidence class and marked ✓ (in the ground truth) or ✗.
pub fn claimed_model(bundle: &Bundle, view: Option<&TraceView>, x: &Explanation) -> Model {
    let title = format!(
        "{} · claimed by {} · view {}",
        bundle.id(),
        x.meta.profiler,
        x.meta.view.label()
    );
    let mut base = base(bundle, view, title);
    let truth = &bundle.ground_truth;
    let owner = truth.rid_owner();
    let true_edges: HashSet<(NodeId, NodeId, EdgeType)> =
        truth.edges.iter().map(|e| (e.src, e.dst, e.kind)).collect();
    for c in &x.edges {
        let ok = match (owner.get(&c.src), owner.get(&c.dst)) {
            (Some(&s), Some(&d)) => true_edges.contains(&(s, d, c.kind)),
            _ => false,
        };
        let mark = if ok { "✓" } else { "✗" };
        let (Some(&to), from) = (base.slice_of_rid.get(&c.dst), base.slice_of_rid.get(&c.src))
        else {
            base.b.model.skipped.push(format!(
                "{} {}→{}: rid {} not shown",
                c.kind.as_str(),
                c.src,
                c.dst,
                c.dst
            ));
            continue;
        };
        let args = vec![
            ("type", Arg::text(c.kind.as_str())),
            ("evidence", Arg::text(evidence_str(c.evidence))),
            ("confidence", Arg::F(c.confidence)),
            ("src_rid", Arg::U(c.src)),
            ("dst_rid", Arg::U(c.dst)),
            ("in_truth", Arg::B(ok)),
        ];
        if c.evidence == Evidence::Missing || c.src == c.dst {
            let t = base.b.model.slices[to].start;
            let g = base.b.group[to].clone();
            base.b.add(
                g,
                Slice::instant(
                    0,
                    t,
                    format!(
                        "missing predecessor (claimed {} {})",
                        c.kind.as_str(),
                        evidence_str(c.evidence)
                    ),
                    "missing",
                    args,
                ),
            );
            continue;
        }
        let Some(&from) = from else {
            base.b.model.skipped.push(format!(
                "{} {}→{}: rid {} not shown",
                c.kind.as_str(),
                c.src,
                c.dst,
                c.src
            ));
            continue;
        };
        add_flow(
            &mut base.b,
            from,
            to,
            format!(
                "← {} · {} {:.2} {mark}",
                c.kind.as_str(),
                evidence_str(c.evidence),
                c.confidence
            ),
            args,
        );
    }
    // One instant per diagnosis on the profiler's track, at the queried record.
    let label = format!("{} · diagnoses", x.meta.profiler);
    for d in &x.diagnoses {
        let sym = truth.symptoms.iter().find(|s| s.id == d.query);
        let rid = sym.map(|s| s.rid);
        let t = rid
            .and_then(|r| base.slice_of_rid.get(&r))
            .map(|&i| base.b.model.slices[i].start)
            .unwrap_or(0);
        let claimed = d
            .causes
            .first()
            .map(|c| format!("{} ({:.2})", c.label, c.score))
            .unwrap_or_else(|| "no cause".into());
        let verdict = match (sym, d.causes.first()) {
            (Some(s), Some(c)) if s.cause == c.label => format!("✓ true cause {}", s.cause),
            (Some(s), _) => format!("✗ true cause {}", s.cause),
            _ => String::new(),
        };
        base.b.add(
            Group::Cb(label.clone()),
            Slice::instant(
                0,
                t,
                format!("{}: {claimed} {verdict}", d.query),
                "diagnosis",
                vec![
                    ("query", Arg::text(d.query.clone())),
                    ("complete", Arg::B(d.complete)),
                    ("critical_path", Arg::text(format!("{:?}", d.critical_path))),
                    (
                        "causes",
                        Arg::text(
                            d.causes
                                .iter()
                                .map(|c| format!("{} {:.3}", c.label, c.score))
                                .collect::<Vec<_>>()
                                .join(", "),
                        ),
                    ),
                    ("answer", Arg::text(d.answer.clone().unwrap_or_default())),
                ],
            ),
        );
    }
    base.b.layout();
    base.b.model
}
