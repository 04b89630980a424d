use super::*;
use crate::backend::Backend;
use crate::sim::SimBackend;
use ground_truth::io::Readable;

fn catalog(name: &str) -> Scenario {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../catalog")
        .join(format!("{name}.yaml"));
    Scenario::read(&path).expect("catalog scenario")
}

fn keyed_path_node(keys: &Keys, path: &[NodeId]) -> StepKey {
    let key_of: std::collections::HashMap<NodeId, &StepKey> =
        keys.iter().map(|(k, &n)| (n, k)).collect();
    path.iter()
        .find_map(|n| key_of.get(n))
        .map(|&k| k.clone())
        .expect("a keyed path node")
}

/// Two quiet runs that drifted apart by a millisecond before the anchor
/// (a late thread wake-up upstream) and not at all after it: measured
/// from the origin that is 3 ms of noise, measured from the anchor none.
#[test]
fn drift_upstream_of_the_anchor_is_not_noise() {
    let mut sc = catalog("late-launch-vs-device-queueing.host-deschedule");
    sc.injection = None;
    let (bundle, keys) = SimBackend::default()
        .record_with_keys(&sc, 0)
        .expect("recorded");
    let truth = &bundle.ground_truth;
    let mut shifted = truth.clone();
    for n in &mut shifted.nodes {
        n.start += 1_000_000;
        n.end += 1_000_000;
    }
    let a = QuietRun {
        truth,
        keys: &keys,
        origin: 0,
    };
    let b = QuietRun {
        truth: &shifted,
        keys: &keys,
        origin: 0,
    };
    let anchor = keyed_path_node(&keys, &truth.symptoms[0].critical_path);
    assert!(noise_floor(&sc, &a, &b, None) >= 3.0 * 1_000_000.0);
    assert_eq!(
        noise_floor(&sc, &a, &b, Some(&anchor)),
        FAULT_END_TOLERANCE_NS as f64
    );
}

/// The anchor is a keyed ancestor of the symptom that started before the
/// injected stall; a scenario without an injection has none.
#[test]
fn the_anchor_precedes_the_injection() {
    let sc = catalog("host-page-fault-vs-cpu-stall.preempted");
    let (bundle, keys) = SimBackend::default()
        .record_with_keys(&sc, 0)
        .expect("recorded");
    let truth = &bundle.ground_truth;
    let fault = truth
        .injections
        .iter()
        .find_map(|i| i.fault_node)
        .expect("a fault node");
    let fault_start = truth.nodes[fault as usize].start;
    let path = &truth.symptoms[0].critical_path;
    let (_, node) = onset_anchor(&sc, truth, &keys, path).expect("an anchor");
    assert!(truth.nodes[node as usize].start < fault_start);
    assert_eq!(truth.nodes[node as usize].step.as_deref(), Some("prep"));
    let mut quiet = sc.clone();
    quiet.injection = None;
    assert!(onset_anchor(&quiet, truth, &keys, path).is_none());
}

/// A deschedule is the cause only when the victim was switched out for
/// at least half the lateness; otherwise the case is dropped.
#[test]
fn a_deschedule_the_victim_did_not_feel_is_dropped() {
    let sc = catalog("late-launch-vs-device-queueing.host-deschedule");
    let bundle = SimBackend::default().record(&sc, 0).expect("recorded");
    let label = bundle.ground_truth.symptoms[0]
        .label
        .clone()
        .expect("checked");
    assert_eq!(label.verdict, LabelVerdict::Kept, "{}", label.reason);
    let lateness_us = bundle.ground_truth.symptoms[0].lateness_ns / 1e3;
    let verdict_with = |off_cpu_us: f64| {
        let mut truth = bundle.ground_truth.clone();
        for inj in &mut truth.injections {
            inj.off_cpu_us = Some(off_cpu_us);
        }
        truth.symptoms[0].cause = sc.cause;
        truth.symptoms[0].label = None;
        // A deschedule's mechanism is its fault node; no step lookup is needed.
        check_and_apply(&sc, &mut truth, &Keys::new(), label.noise_floor_ns, None);
        truth.symptoms[0].label.clone().unwrap()
    };
    let short = verdict_with(0.2 * lateness_us);
    assert_eq!(short.verdict, LabelVerdict::Dropped, "{}", short.reason);
    assert!(
        short.reason.contains("switched out for only"),
        "{}",
        short.reason
    );
    assert_eq!(verdict_with(lateness_us).verdict, LabelVerdict::Kept);
}

/// A negative control (declared `none`) is kept only while its symptom
/// is not late: late beyond the floor with the unrelated work off the
/// path, something the truth does not name moved it.
#[test]
fn a_late_negative_control_is_dropped() {
    let sc = catalog("concurrent-work.harmless");
    let (bundle, keys) = SimBackend::default()
        .record_with_keys(&sc, 0)
        .expect("recorded");
    let label = bundle.ground_truth.symptoms[0]
        .label
        .clone()
        .expect("checked");
    assert_eq!(label.verdict, LabelVerdict::Kept, "{}", label.reason);
    // A floor of 30 µs: the quiet runs drifted 10 µs apart.
    let floor = 30_000.0;
    let verdict_at = |lateness_ns: f64| {
        let mut truth = bundle.ground_truth.clone();
        truth.symptoms[0].lateness_ns = lateness_ns;
        truth.symptoms[0].label = None;
        check_and_apply(&sc, &mut truth, &keys, floor, None);
        truth.symptoms[0].label.clone().unwrap()
    };
    let late = verdict_at(10.0 * floor);
    assert_eq!(late.verdict, LabelVerdict::Dropped, "{}", late.reason);
    assert!(late.reason.contains("does not name"), "{}", late.reason);
    assert_eq!(verdict_at(0.2 * floor).verdict, LabelVerdict::Kept);
    let between = verdict_at(0.5 * floor);
    assert_eq!(
        between.verdict,
        LabelVerdict::Indeterminate,
        "{}",
        between.reason
    );
    // Late as much, but the same run without the injection ends where the
    // injected one does: the twin's noise made it late, which is no gap in
    // the truth and establishes nothing; moved by the injection itself, it
    // is.
    let with_effect = |effect_ns: f64| {
        let mut truth = bundle.ground_truth.clone();
        truth.symptoms[0].lateness_ns = 10.0 * floor;
        truth.symptoms[0].label = None;
        check_and_apply(&sc, &mut truth, &keys, floor, Some(effect_ns));
        truth.symptoms[0].label.clone().unwrap()
    };
    let noise = with_effect(0.0);
    assert_eq!(
        noise.verdict,
        LabelVerdict::Indeterminate,
        "{}",
        noise.reason
    );
    assert!(noise.reason.contains("twin's noise"), "{}", noise.reason);
    let moved = with_effect(10.0 * floor);
    assert_eq!(moved.verdict, LabelVerdict::Dropped, "{}", moved.reason);
}

/// An injection smaller than the noise floor the twin and the quiet run
/// measure is raised to `SIZE_MARGIN` times that floor; a larger one, and a
/// negative control's work, keep their asked magnitude.
#[test]
fn an_injection_under_the_noise_floor_is_sized_up_to_clear_it() {
    let mut sc = catalog("host-page-fault-vs-cpu-stall.page-fault");
    let backend = SimBackend::default();
    let (twin, keys) = {
        let mut quiet_sc = sc.clone();
        quiet_sc.injection = None;
        backend.record_with_keys(&quiet_sc, 0).expect("recorded")
    };
    // A second quiet run whose symptom ended 40 µs later: the floor is
    // three times that drift.
    let mut other = twin.ground_truth.clone();
    let symptom = keys[&crate::keys::symptom_key(&sc).unwrap()];
    for n in &mut other.nodes {
        if n.id == symptom {
            n.end += 40_000;
        }
    }
    let run = |truth| QuietRun {
        truth,
        keys: &keys,
        origin: 0,
    };
    let floor_us = noise_floor(&sc, &run(&twin.ground_truth), &run(&other), None) / 1e3;
    assert!(floor_us >= 120.0, "floor {floor_us} µs");
    sc.injection.as_mut().unwrap().magnitude_us = 10.0;
    let sized = sized_injection(&sc, &run(&twin.ground_truth), &run(&other)).unwrap();
    assert!(
        (sized.magnitude_us - SIZE_MARGIN * floor_us).abs() < 0.2,
        "{} µs for a floor of {floor_us} µs",
        sized.magnitude_us
    );
    sc.injection.as_mut().unwrap().magnitude_us = 5000.0;
    let kept = sized_injection(&sc, &run(&twin.ground_truth), &run(&other)).unwrap();
    assert_eq!(kept.magnitude_us, 5000.0);
    let mut control = sc.clone();
    control.injection.as_mut().unwrap().kind = InjectionKind::UnrelatedWork;
    control.injection.as_mut().unwrap().magnitude_us = 10.0;
    let same = sized_injection(&control, &run(&twin.ground_truth), &run(&other)).unwrap();
    assert_eq!(same.magnitude_us, 10.0);
}

/// A lateness within the floor is `none` only up to the drift the quiet
/// runs showed; between that drift and the floor (the margin) it is
/// indeterminate and not scored, and beyond the floor the label holds.
#[test]
fn a_lateness_within_the_margin_is_indeterminate() {
    let sc = catalog("host-page-fault-vs-cpu-stall.page-fault");
    let (bundle, keys) = SimBackend::default()
        .record_with_keys(&sc, 0)
        .expect("recorded");
    let floor = 300_000.0;
    let verdict_for = |sc: &Scenario, lateness_ns: f64| {
        let mut truth = bundle.ground_truth.clone();
        truth.symptoms[0].lateness_ns = lateness_ns;
        truth.symptoms[0].cause = sc.cause;
        truth.symptoms[0].label = None;
        // The run's injection as the scenario asks it.
        for i in &mut truth.injections {
            i.requested_us = sc.injection.as_ref().unwrap().magnitude_us;
        }
        check_and_apply(sc, &mut truth, &keys, floor, None);
        let symptom = &truth.symptoms[0];
        (symptom.label.clone().unwrap(), symptom.cause)
    };
    let verdict_at = |lateness_ns: f64| verdict_for(&sc, lateness_ns);
    let (quiet, cause) = verdict_at(0.3 * floor);
    assert_eq!(
        quiet.verdict,
        LabelVerdict::RelabelledNone,
        "{}",
        quiet.reason
    );
    assert_eq!(cause, CauseLabel::None);
    let (between, cause) = verdict_at(0.6 * floor);
    assert_eq!(
        between.verdict,
        LabelVerdict::Indeterminate,
        "{}",
        between.reason
    );
    assert!(!between.verdict.is_scored());
    assert_eq!(
        cause, sc.cause,
        "an indeterminate case keeps its declared label"
    );
    let (late, _) = verdict_at(1.5 * floor);
    assert_eq!(late.verdict, LabelVerdict::Kept, "{}", late.reason);
    // On the path, no later than the drift, but the injection is no more than
    // twice the drift: the twin cannot tell, so nothing is established.
    let mut small = sc.clone();
    small.injection.as_mut().unwrap().magnitude_us = 2.0 * floor / NOISE_MARGIN / 1e3;
    let (unresolved, cause) = verdict_for(&small, 0.3 * floor);
    assert_eq!(quiet.mechanism_on_path, Some(true), "{}", quiet.reason);
    assert_eq!(
        unresolved.verdict,
        LabelVerdict::Indeterminate,
        "{}",
        unresolved.reason
    );
    assert_eq!(cause, sc.cause);
    // At the clock's granularity nothing is measurable: `none`.
    let (tiny, _) = verdict_at(FAULT_END_TOLERANCE_NS as f64);
    let mut truth = bundle.ground_truth.clone();
    truth.symptoms[0].lateness_ns = FAULT_END_TOLERANCE_NS as f64;
    truth.symptoms[0].label = None;
    check_and_apply(
        &sc,
        &mut truth,
        &keys,
        3.0 * FAULT_END_TOLERANCE_NS as f64,
        None,
    );
    assert_eq!(tiny.verdict, LabelVerdict::RelabelledNone);
    assert_eq!(
        truth.symptoms[0].label.as_ref().unwrap().verdict,
        LabelVerdict::RelabelledNone
    );
}
