//! Public marks (baselines/PROTOCOL.md, "Hidden splits"): every leaderboard row scored
//! on public material says so, and where a hidden split's cases exist the ranking uses
//! them only.

mod common;

use common::*;
use evaluator::{score_case, CaseScore, Leaderboard, Material};

/// Cases of `profiler` on `instances` generated instances (variants a and b), each
/// told apart iff `right`, scored on a hidden split or not.
fn cases(profiler: &str, instances: u64, right: bool, hidden: bool) -> Vec<CaseScore> {
    let f = Fixture::new(Rids::DENSE);
    let base = score_case(&f.bundle, &f.full_view(), &f.perfect(profiler));
    let mut out = Vec::new();
    for i in 0..instances {
        for variant in ["a", "b"] {
            let mut c = base.clone();
            let tag = if hidden { "hid" } else { "pub" };
            c.scenario = format!("gen-{tag}.i{i}.{variant}");
            c.bundle = format!("{}.r0", c.scenario);
            c.family = format!("gen-{tag}");
            c.variant = variant.into();
            c.instance = Some(i);
            c.hidden = hidden;
            for s in &mut c.symptoms {
                s.correct = right || variant == "a";
            }
            out.push(c);
        }
    }
    out
}

#[test]
fn rows_of_public_material_are_marked_public_memorizable() {
    let scores = cases("honest", 4, true, false);
    let lb = Leaderboard::from_scores(&scores);
    assert!(lb.rows.iter().all(|r| r.material == Material::Public));
    let md = lb.to_markdown();
    assert!(md.contains("honest *(public — memorizable)*"), "{md}");
    assert!(
        md.replace('\n', " ").contains("scored on public material"),
        "{md}"
    );
    // Read back from leaderboard.json, the mark stays.
    let json: serde_json::Value = serde_json::from_str(&lb.to_json()).unwrap();
    assert_eq!(json["rows"][0]["material"], "public");
}

#[test]
fn with_a_hidden_split_the_ranking_uses_it_only() {
    // A memorizer is perfect on public material and wrong on the hidden split; an
    // honest profiler is right on both.
    let mut scores = cases("memorizer", 6, true, false);
    scores.extend(cases("memorizer", 6, false, true));
    scores.extend(cases("honest", 6, true, true));
    let lb = Leaderboard::from_scores(&scores);
    let hidden: Vec<&str> = lb
        .rows
        .iter()
        .filter(|r| r.material == Material::Hidden)
        .map(|r| r.profiler.as_str())
        .collect();
    assert_eq!(hidden, ["honest", "memorizer"]);
    let public: Vec<&str> = lb
        .rows
        .iter()
        .filter(|r| r.material == Material::Public)
        .map(|r| r.profiler.as_str())
        .collect();
    assert_eq!(public, ["memorizer"]);
    let (collectors, mode) = lb.headline_view().unwrap();
    let ranked: Vec<(&str, Option<f64>)> = lb
        .ranked_view(collectors, mode)
        .iter()
        .map(|r| (r.row.profiler.as_str(), r.row.pair_accuracy))
        .collect();
    assert_eq!(ranked, [("honest", Some(1.0)), ("memorizer", Some(0.0))]);
    let md = lb.to_markdown();
    assert!(
        md.replace('\n', " ")
            .contains("scored on the hidden split only"),
        "{md}"
    );
    assert!(md.contains("memorizer *(public — memorizable)*"), "{md}");
    // The family tables come from the hidden split only.
    assert!(
        lb.families.iter().all(|f| f.family == "gen-hid"),
        "{:?}",
        lb.families
    );
}
