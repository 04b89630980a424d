//! Where a profiler loses (the HTML leaderboard's "where it loses"): the phase a wrong
//! phase blame lands on (evaluator/METRICS.md §1.5) and the tallies by family, question
//! type and phase, on hand-built case scores.

mod common;

use common::*;
use evaluator::{overblamed_phase, score_case, shortfalls, CaseScore};
use ground_truth::Phases;

fn phases(p: [f64; 4]) -> Phases {
    Phases {
        host_enqueue: p[0],
        queued_to_submitted: p[1],
        submitted_to_start: p[2],
        execution: p[3],
    }
}

#[test]
fn the_overblamed_phase_is_the_one_given_most_beyond_its_share() {
    // METRICS.md's example: half the lateness on the wrong phase, host enqueue blamed.
    let claimed = phases([10.0, 0.0, 0.0, 10.0]);
    let truth = phases([0.0, 0.0, 20.0, 20.0]);
    assert_eq!(overblamed_phase(&claimed, &truth), Some("host_enqueue"));
    // Blame in proportion (error 0) and a small shift (under a quarter) name none.
    assert_eq!(overblamed_phase(&truth, &truth), None);
    let near = phases([0.0, 0.0, 22.0, 18.0]);
    assert_eq!(overblamed_phase(&near, &truth), None);
    // No claimed phases: no phase was blamed.
    assert_eq!(overblamed_phase(&Phases::default(), &truth), None);
    let to_execution = phases([0.0, 0.0, 1.0, 9.0]);
    let late_start = phases([0.0, 0.0, 9.0, 1.0]);
    assert_eq!(
        overblamed_phase(&to_execution, &late_start),
        Some("execution")
    );
}

fn case(family: &str, profiler: &str, right: bool, blamed: Option<&str>) -> CaseScore {
    let f = Fixture::new(Rids::DENSE);
    let mut c = score_case(&f.bundle, &f.full_view(), &f.perfect(profiler));
    c.family = family.into();
    c.bundle = format!("{family}.r0");
    for s in &mut c.symptoms {
        s.correct = right;
        s.overblamed_phase = blamed.map(str::to_string);
    }
    c
}

#[test]
fn shortfalls_tally_families_questions_and_blamed_phases_per_profiler_and_view() {
    let scores = vec![
        case("alpha", "p", true, None),
        case("alpha", "p", false, Some("execution")),
        case("beta", "p", false, Some("execution")),
        case("beta", "p", false, Some("host_enqueue")),
        case("beta", "q", true, None),
    ];
    let symptoms = scores[0].symptoms.len() as u64;
    assert!(symptoms > 0, "the fixture asks something");
    let all = shortfalls(&scores);
    assert_eq!(all.len(), 2, "one per profiler × view");
    let p = all.iter().find(|s| s.profiler == "p").unwrap();
    let by = |key: &str| p.by_family.iter().find(|t| t.key == key).unwrap();
    assert_eq!(
        (by("alpha").symptoms, by("alpha").correct),
        (2 * symptoms, symptoms)
    );
    assert_eq!((by("beta").symptoms, by("beta").correct), (2 * symptoms, 0));
    assert_eq!(p.total().symptoms, 4 * symptoms);
    assert_eq!(
        p.by_question.iter().map(|t| t.symptoms).sum::<u64>(),
        4 * symptoms
    );
    // Most blamed first.
    let blamed: Vec<(&str, u64)> = p
        .overblamed
        .iter()
        .map(|t| (t.key.as_str(), t.wrong()))
        .collect();
    assert_eq!(
        blamed,
        vec![("execution", 2 * symptoms), ("host_enqueue", symptoms)]
    );
    let q = all.iter().find(|s| s.profiler == "q").unwrap();
    assert!(q.overblamed.is_empty());
    assert_eq!(q.total().accuracy(), Some(1.0));
}
