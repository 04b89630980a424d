//! The reference's counterfactual reading (`src/causal_graph/candidates.rs`,
//! `counterfactual.rs`; baselines/README.md, "The algorithm" step 6) on the
//! pipelined micro-batches of the dev split recorded on the simulator: a slow
//! stage 2 of an earlier micro-batch reaches the asked stage 1 through the
//! events between them, so every later micro-batch is late with it and the
//! symptom's peers show no lateness; removing the slow stage from the graph
//! moves the symptom, and the event it passed through names it. In the
//! harmless variant of the same instance (unrelated work on a stream of its
//! own) no candidate moves the symptom.

use baselines::builtin;
use ground_truth::view::{LossSpec, ViewSpec};
use ground_truth::{Bundle, CauseLabel, Collectors, Mode, Scenario};
use scenario_space::{generate, Split, DEV_SEED};

#[path = "gpu_support/split_bundle.rs"]
mod gpu_support;
use gpu_support::split_bundle;

const COMBINED: ViewSpec = ViewSpec {
    collectors: Collectors::Combined,
    mode: Mode::Instrumented,
    loss: LossSpec::None,
};

fn record(sc: &Scenario) -> Bundle {
    generator::select_backend(generator::BackendKind::Sim)
        .unwrap()
        .record(sc, 0)
        .unwrap()
}

/// The dev split's first pipelined micro-batches instance, by variant name.
fn pipeline_variant(variant: &str) -> Scenario {
    generate(Split::Dev, DEV_SEED, 300)
        .into_iter()
        .find(|s| s.name.starts_with("pipelined-microbatches.") && s.name.ends_with(variant))
        .expect("the dev split has a pipelined micro-batches instance")
}

/// (the symptom's true cause, causal-graph's top cause) in `bundle`'s view `spec`.
fn verdict_in(bundle: &Bundle, spec: ViewSpec) -> (CauseLabel, CauseLabel) {
    let view = views::derive(bundle, spec).view;
    let explanation = builtin("causal-graph").unwrap().explain(&view);
    let score = evaluator::score_case(bundle, &view, &explanation);
    (
        score.symptoms[0].true_cause,
        explanation.diagnoses[0].causes[0].label,
    )
}

/// (the symptom's true cause, causal-graph's top cause) in the combined
/// instrumented view.
fn verdict(sc: &Scenario) -> (CauseLabel, CauseLabel) {
    verdict_in(&record(sc), COMBINED)
}

/// `sc`'s true cause and causal-graph's top cause are both `cause`, which
/// the counterfactual named.
fn counterfactual_names(sc: &Scenario, cause: CauseLabel) {
    let (truth, claimed) = {
        cov_mark::check!(counterfactual_root);
        verdict(sc)
    };
    assert_eq!(truth, cause, "{}", sc.name);
    assert_eq!(claimed, cause, "{}", sc.name);
}

#[test]
fn a_slow_stage_upstream_is_found_by_removing_it() {
    counterfactual_names(
        &pipeline_variant(".upstream-stage-slow"),
        CauseLabel::EventWait,
    );
}

/// Must not: the harmless variant's unrelated work, on a stream of its own,
/// gates nothing the symptom waits for, so no candidate moves it and the
/// counterfactual names nothing. The symptom still waits for its gate longer
/// than its peers (micro-batches deeper in the pipeline wait for more stages
/// ahead of them): with no delay upstream that moves it, that wait is its
/// place in the program, and nothing is late.
#[test]
fn unrelated_work_moves_nothing() {
    let sc = pipeline_variant(".harmless");
    cov_mark::check_count!(counterfactual_root, 0);
    cov_mark::check!(gate_wait_is_the_place);
    let (truth, claimed) = verdict(&sc);
    assert_eq!(truth, CauseLabel::None, "{}", sc.name);
    assert_eq!(claimed, CauseLabel::None, "{}", sc.name);
}

/// Work of no request queued ahead of the symptom in its own stream (a
/// backlog another thread launched) is delay all of it: removing it moves
/// the symptom, and it met the micro-batch's work by stream order, so it is
/// `stream_backlog` whatever event the micro-batch also waited for.
#[test]
fn a_backlog_ahead_in_the_stream_is_added_work() {
    counterfactual_names(
        &pipeline_variant(".own-stream-backlog"),
        CauseLabel::StreamBacklog,
    );
}

/// The loader thread was preempted while it decoded the asked step's batch:
/// its enqueue came late, the main thread waited for it, and every later
/// step with it, so the symptom's peers are late too. The stall record in
/// the gap before the loader's enqueue marker is a candidate; removing it
/// moves the step's forward kernel through the handoff.
#[test]
fn a_preempted_loader_reaches_the_step_through_its_handoff() {
    counterfactual_names(
        &training_step_variant(".loader-preempted"),
        CauseLabel::CpuDeschedule,
    );
}

/// The main thread was still blocked in the previous step's loss readback
/// when this step's batch was handed to it: the inferred `busy` edge from
/// that call to the step's task carries the lengthened optimizer kernel's
/// delay (the call returns when its copy ends) to the symptom, and the
/// truth's `busy` edges are all claimed.
#[test]
fn the_previous_steps_fence_holds_the_next_step_through_the_busy_thread() {
    let sc = training_step_variant(".previous-step-fence");
    let bundle = record(&sc);
    let view = views::derive(&bundle, COMBINED).view;
    let explanation = builtin("causal-graph").unwrap().explain(&view);
    let score = evaluator::score_case(&bundle, &view, &explanation);
    assert_eq!(score.symptoms[0].true_cause, CauseLabel::ImplicitSync);
    assert_eq!(
        explanation.diagnoses[0].causes[0].label,
        CauseLabel::ImplicitSync,
        "{}",
        sc.name
    );
    let busy = score
        .edges
        .by_type
        .iter()
        .find(|t| t.kind == ground_truth::EdgeType::Busy)
        .expect("the truth has busy edges");
    assert!(busy.counts.truth > 0, "{busy:?}");
    assert_eq!(busy.counts.true_positives, busy.counts.truth, "{busy:?}");
    assert_eq!(busy.counts.claims, busy.counts.truth, "{busy:?}");
}

const CLOSED: ViewSpec = ViewSpec {
    collectors: Collectors::Combined,
    mode: Mode::Closed,
    loss: LossSpec::None,
};

/// The dev split's first training-step instance, by variant name.
fn training_step_variant(variant: &str) -> Scenario {
    generate(Split::Dev, DEV_SEED, 300)
        .into_iter()
        .find(|s| s.name.starts_with("training-step.") && s.name.ends_with(variant))
        .expect("the dev split has a training-step instance")
}

/// (the symptom's true cause, causal-graph's top cause) in the combined
/// closed view: no request tokens, no markers; the host collector's records
/// join the main thread's calls by thread and time.
fn closed_verdict(sc: &Scenario) -> (CauseLabel, CauseLabel) {
    verdict_in(&record(sc), CLOSED)
}

/// Closed mode: the previous step's loss readback (a pageable copy, blocking
/// its launch call) waited for a kernel the injection lengthened, and this
/// step's work was launched only after that call returned. The call returns
/// when its copy ends, so removing the kernel's excess moves the symptom
/// through the call (the blocked call's coupling in `counterfactual.rs`), and
/// the `sync` the delay passed through names it.
#[test]
fn closed_mode_finds_the_previous_steps_fence_through_the_blocked_call() {
    cov_mark::check!(counterfactual_blocked_call);
    closed_mode_names(
        &training_step_variant(".previous-step-fence"),
        CauseLabel::ImplicitSync,
    );
}

/// `sc`'s true cause and causal-graph's top cause in the closed view are
/// both `cause`.
fn closed_mode_names(sc: &Scenario, cause: CauseLabel) {
    let (truth, claimed) = closed_verdict(sc);
    assert_eq!(truth, cause, "{}", sc.name);
    assert_eq!(claimed, cause, "{}", sc.name);
}

/// Must not: in the harmless variant of the same instance nothing upstream
/// ran long against its peers, and the symptom's launch is joined to the
/// thread's previous call (its host gap measured), so `none` comes first.
#[test]
fn closed_mode_reads_none_where_every_measured_phase_is_clean() {
    cov_mark::check_count!(stall_across_the_idle_gap, 0);
    closed_mode_names(&training_step_variant(".harmless"), CauseLabel::None);
}

/// Closed mode: the main thread idled before the step's first call (its
/// batch came late through a queue the view cannot see). The loader
/// thread's preemption inside that idle gap is the stall joined to it by
/// time (`stall_across_the_idle_gap`), named with a closed reading's
/// lowered confidence.
#[test]
fn closed_mode_joins_another_threads_stall_to_the_idle_gap_by_time() {
    cov_mark::check!(stall_across_the_idle_gap);
    cov_mark::check!(closed_mode_joined_stall);
    closed_mode_names(
        &training_step_variant(".loader-preempted"),
        CauseLabel::CpuDeschedule,
    );
}

/// The dev split's first instance of `family`, by variant name.
fn dev_variant(family: &str, variant: &str) -> Scenario {
    generate(Split::Dev, DEV_SEED, 300)
        .into_iter()
        .find(|s| s.name.starts_with(&format!("{family}.")) && s.name.ends_with(variant))
        .unwrap_or_else(|| panic!("the dev split has a {family} instance"))
}

/// Closed mode, a serving loop: an earlier request's host work grew on the
/// thread that serves every request, and the asked request waited for that
/// thread, as did its peers (the requests after it). The launch call after
/// the grown work started later after the thread's previous call than its
/// peers' calls did, the thread on the CPU all along: removing that growth
/// moves the symptom. The thread launched the grown call's operation again
/// before the symptom's, so the growth was another request's:
/// `handoff_queueing`. The batches' kernels run longer with the batch, so
/// the norms are batches of the same size: a request is the thread's stretch
/// of calls up to its next wait for the device.
#[test]
fn closed_mode_finds_another_requests_grown_host_work() {
    cov_mark::check!(host_gap_of_another_request);
    cov_mark::check!(closed_mode_request_by_stretch);
    closed_mode_names(
        &dev_variant("continuous-batching", ".queued-behind-earlier-request"),
        CauseLabel::HandoffQueueing,
    );
}

/// Must not: in the harmless variant of the same serving loop no launch
/// came later after its thread's previous call than its peers, and no
/// batch's kernel ran longer than those of batches of its size.
#[test]
fn closed_mode_reads_none_in_a_serving_loop_without_a_delay() {
    cov_mark::check_count!(host_gap_of_another_request, 0);
    closed_mode_names(
        &dev_variant("continuous-batching", ".harmless"),
        CauseLabel::None,
    );
}

/// Closed mode: the second op's launch came late after host work grew in
/// the same request (no other launch of its operation came between it and
/// the symptom's), so the growth is the symptom's own request's:
/// `host_compute`, not queueing.
#[test]
fn closed_mode_reads_grown_host_work_of_the_own_request_as_host_compute() {
    cov_mark::check!(host_gap_of_the_own_request);
    cov_mark::check_count!(host_gap_of_another_request, 0);
    // The first instance whose host gap the rules alone read as clean.
    closed_mode_names(
        &dev_variant("dependency-vs-overlap.dev00052", ".independent"),
        CauseLabel::HostCompute,
    );
}

/// A serving loop's scheduler thread was preempted for 390 µs before it
/// launched the asked kernel, while the stream still ran the request's
/// previous kernel: launched on time, the kernel would have started when
/// that one ended, 47 µs sooner. Its peers (the same kernel in batches of
/// other requests) finish over a wider range than that, so only the
/// counterfactual reads it, and a stall is a record: its effect need only
/// pass the noise floor, not a quarter of the kernel's 400 µs.
#[test]
fn a_recorded_stall_needs_to_pass_only_the_noise() {
    cov_mark::check!(recorded_stall_under_the_share_floor);
    counterfactual_names(
        &dev_variant("continuous-batching.dev00017", ".own-launch-descheduled"),
        CauseLabel::CpuDeschedule,
    );
}

/// Must not: the harmless variant of the same loop has no stall on the
/// asked kernel's path, and nothing else moves it.
#[test]
fn no_stall_on_the_path_names_nothing_under_the_share_floor() {
    cov_mark::check_count!(recorded_stall_under_the_share_floor, 0);
    let (truth, claimed) = verdict(&dev_variant("continuous-batching.dev00017", ".harmless"));
    assert_eq!(truth, CauseLabel::None);
    assert_eq!(claimed, CauseLabel::None);
}

/// Closed mode, a serving loop on the H200: an earlier request's host work
/// grew by 1.36 ms before its first launch, and the asked request waited
/// behind it. That launch's only peer of its batch size is the first
/// request in the view, whose gap no call before it times: every peer's
/// gap is the norm then (a request's host work grows little with its
/// batch), the growth is a candidate, and removing it moves the symptom.
#[test]
fn a_host_gap_with_no_timed_peer_of_its_size_is_read_against_every_size() {
    cov_mark::check!(host_gap_norm_of_every_size);
    split_reads(
        "test-corpus/h200-580-20261205",
        "continuous-batching.test00177.queued-behind-earlier-request",
        CLOSED,
        CauseLabel::HandoffQueueing,
    );
}

/// Must not: in the harmless variant of the same instance no launch gap
/// stands out against the peers of any size.
#[test]
fn a_serving_loop_without_grown_host_work_reads_none_against_every_size() {
    split_reads(
        "test-corpus/h200-580-20261205",
        "continuous-batching.test00177.harmless",
        CLOSED,
        CauseLabel::None,
    );
}

/// On an H100 the concurrent work's last kernel ended 1.2 µs after the
/// asked kernel started (CUPTI's kernel ends and starts agree only to the
/// clocks' 2 µs): it still handed the SMs over, so the wait is an
/// interference edge from it, and the 456 µs the kernel waited to start
/// is the SMs held by other work, not a record lost from the view.
#[test]
fn work_that_ends_as_the_kernel_starts_held_the_sms() {
    split_reads(
        "test-corpus/h100-580-20261206-4",
        "concurrent-work.test00046.harmful",
        COMBINED,
        CauseLabel::OccupancyPressure,
    );
}

/// On an H100, a harmless pipeline's asked synchronize was enqueued 80 µs
/// later than its two peers' since its request began, none of it a stall:
/// beyond the peers' spread, but within what any host's jitter is
/// (`readings::host_jitter`), as grown host work is judged in the
/// counterfactual. Two peers' spread says little of a host's noise: no
/// host phase is late, and the symptom reads `none`.
#[test]
fn a_host_phase_within_the_hosts_jitter_is_no_lateness() {
    cov_mark::check!(host_phase_within_host_jitter);
    split_reads(
        "test-corpus/h100-580-20261206",
        "concurrent-work.test00216.harmless",
        COMBINED,
        CauseLabel::None,
    );
}

/// Must not: a request queued behind an earlier request's grown host work
/// (1.1 ms on the H200) waited far beyond any host's jitter: the wait is
/// lateness, and reads `handoff_queueing` (the jitter holds back the smaller
/// gaps of other ops on the way).
#[test]
fn a_wait_beyond_the_hosts_jitter_stays_late() {
    cov_mark::check!(host_phase_within_host_jitter);
    h200_reads(
        "dev-corpus",
        "continuous-batching.dev00067.queued-behind-earlier-request",
        COMBINED,
        CauseLabel::HandoffQueueing,
    );
}

/// Closed mode, on the H200: a serving loop's negative control. The asked
/// launch follows a call its thread's records do not join, by a gap longer
/// than its peers' launches had beyond their spread, but within what any
/// host's gaps stray by (`readings::host_jitter`), as a measured gap's
/// excess is read: it hid nothing, and the symptom reads `none`.
#[test]
fn an_unjoined_gap_within_the_hosts_jitter_hides_nothing() {
    cov_mark::check!(unjoined_gap_within_host_jitter);
    h200_reads(
        "test-corpus",
        "continuous-batching.test00027.harmless",
        CLOSED,
        CauseLabel::None,
    );
}

/// Closed mode, on the H200: a serving loop's earlier request ran its MLP
/// kernel long, and the readback queued behind it in the stream held that
/// request's synchronize, after which the scheduler launched the asked
/// request. The blocking call is the first gate other than stream order on
/// the kernel's way to the symptom: `implicit_sync`, not the stream the
/// readback waited in (`stream_backlog`).
#[test]
fn a_blocking_call_behind_a_long_kernel_is_an_implicit_sync() {
    cov_mark::check!(blocking_call_waited_behind_a_long_kernel);
    h200_reads(
        "dev-corpus",
        "continuous-batching.dev00127.earlier-batch-fence",
        CLOSED,
        CauseLabel::ImplicitSync,
    );
}

/// Bundle `name` of the H200 corpus `results/{corpus}/h200-580` (recorded on
/// the GPU), in view `spec`: its symptom's true cause and causal-graph's top
/// cause are both `cause`.
fn h200_reads(corpus: &str, name: &str, spec: ViewSpec, cause: CauseLabel) {
    split_reads(&format!("{corpus}/h200-580"), name, spec, cause);
}

/// Bundle `name` of the GPU split `results/{split}` in view `spec`: its
/// symptom's true cause and causal-graph's top cause are both `cause`.
fn split_reads(split: &str, name: &str, spec: ViewSpec, cause: CauseLabel) {
    let (truth, claimed) = verdict_in(&split_bundle(split, name), spec);
    assert_eq!(truth, cause, "{name}");
    assert_eq!(claimed, cause, "{name}");
}

/// On the H200 the loader ran behind: the asked step waited in the loader's
/// queue behind earlier batches longer than its peers (steps at other places
/// in that queue), so its host phase reads late and the wait reads as
/// `handoff_queueing`. A wait for a handoff is lateness only as far as no
/// delay upstream explains it: the loader's preemption inside the asked
/// batch's decode is a candidate whose removal moves the step, and it names
/// the cause.
#[test]
fn a_handoff_wait_a_preempted_loader_explains_is_no_queueing() {
    cov_mark::check!(handoff_wait_explained_upstream);
    h200_reads(
        "test-corpus",
        "training-step.test00029.loader-preempted",
        COMBINED,
        CauseLabel::CpuDeschedule,
    );
}

/// The same wait reached upstream: the step's kernel asked about was on time
/// behind its batch's copy, whose launch waited for the batch in the queue.
/// The walk reaches the copy, and its wait is read like the asked op's own:
/// the loader's preemption while it built that batch is the candidate whose
/// removal moves the kernel, not the queue.
#[test]
fn a_handoff_wait_upstream_of_the_symptom_is_explained_too() {
    cov_mark::check!(handoff_wait_explained_upstream);
    h200_reads(
        "test-corpus",
        "training-step.test00069.loader-preempted",
        COMBINED,
        CauseLabel::CpuDeschedule,
    );
}

/// On the H200, closed mode: bulk copies of other work held the copy engine,
/// so the asked chain's root copy started long after its stream let it go.
/// That start wait beyond its peers' is a candidate, and removing it moves
/// the synchronize asked about further than anything else upstream: the
/// link's contention, as the start phase's cause.
#[test]
fn a_copy_engine_held_by_other_work_is_a_candidate() {
    cov_mark::check!(resource_held_by_other_work);
    h200_reads(
        "test-corpus",
        "slow-copy-vs-blocked-consumer.test00053.own-copy-contended",
        CLOSED,
        CauseLabel::PcieContention,
    );
}

/// On the H200, closed mode: the request's first stage ran on a thread that
/// was preempted, and its hand-off reached a worker whose first call this
/// was (it had idled since the view began). That thread's idle gap has no
/// call before it; the other thread's stall in the lookback before its first
/// call is joined to it by time and names the cause.
#[test]
fn a_stall_joins_a_threads_first_call_by_time() {
    cov_mark::check!(idle_since_the_threads_first_call);
    h200_reads(
        "dev-corpus",
        "host-page-fault-vs-cpu-stall.dev00011.preempted",
        CLOSED,
        CauseLabel::CpuDeschedule,
    );
}

/// Must not: on the H200 a serving loop's negative control has an earlier
/// request whose schedule step took 25 µs longer than its peers' (58 µs
/// against 33 µs): host jitter under what any host has (`STALL_NS`), so the
/// held chain finds nothing late and the symptom reads `none`.
#[test]
fn a_serving_loops_host_jitter_is_no_queueing() {
    cov_mark::check!(held_chain_gap_within_host_jitter);
    h200_reads(
        "test-corpus",
        "continuous-batching.test00027.harmless",
        COMBINED,
        CauseLabel::None,
    );
}

/// Must not: a request queued behind an earlier request whose host work grew
/// waited for the handoff, and no stall or lengthened op upstream explains
/// that wait, so it stays `handoff_queueing`.
#[test]
fn a_handoff_wait_nothing_upstream_explains_stays_queueing() {
    h200_reads(
        "test-corpus",
        "continuous-batching.test00027.queued-behind-earlier-request",
        COMBINED,
        CauseLabel::HandoffQueueing,
    );
}

/// Closed mode: the work the injection added ahead of the symptom's stage 1, on
/// its stream, runs once in the view while the pipeline's operations recur. No
/// token says it is no request's; that it recurs nowhere says it (`added_work`
/// in `candidates.rs`), and the counterfactual names it by how it met the
/// pipeline's work: ahead of it in its stream.
#[test]
fn closed_mode_reads_work_that_recurs_nowhere_as_added() {
    cov_mark::check!(closed_mode_work_of_no_repetition);
    assert_eq!(
        closed_verdict(&pipeline_variant(".own-stream-backlog")),
        (CauseLabel::StreamBacklog, CauseLabel::StreamBacklog)
    );
}

/// Must not: the same pipeline with nothing added ahead of the symptom.
#[test]
fn closed_mode_finds_no_added_work_in_the_harmless_pipeline() {
    assert_eq!(
        closed_verdict(&pipeline_variant(".harmless")),
        (CauseLabel::None, CauseLabel::None)
    );
}

/// On the H200, one request whose kernels have no peers: work no request
/// launched ran on another stream beside the path's first kernel, which had
/// started already and never waited for it. Without peers nothing else says
/// the path was late, and the one outside influence held nothing: `none`.
#[test]
fn work_beside_the_path_that_held_nothing_is_no_cause() {
    cov_mark::check!(foreign_work_beside_the_path_held_nothing);
    h200_reads(
        "dev-corpus",
        "concurrent-work.dev00006.harmless",
        COMBINED,
        CauseLabel::None,
    );
}

/// Must not: the same instance's harmful variant, whose first kernel waited
/// to start while that work held the SMs, stays occupancy pressure.
#[test]
fn work_beside_the_path_that_held_it_stays_the_cause() {
    cov_mark::check_count!(foreign_work_beside_the_path_held_nothing, 0);
    h200_reads(
        "dev-corpus",
        "concurrent-work.dev00006.harmful",
        COMBINED,
        CauseLabel::OccupancyPressure,
    );
}

/// Must not: work no request launched queued ahead of the path in its own
/// stream is on the path; it held the path, so the gate it held it through
/// names the cause.
#[test]
fn work_no_request_launched_on_the_path_is_a_backlog() {
    cov_mark::check_count!(foreign_work_beside_the_path_held_nothing, 0);
    h200_reads(
        "test-corpus",
        "graph-replay-vs-direct-launch.test00045.backlogged-launch",
        COMBINED,
        CauseLabel::StreamBacklog,
    );
}

/// On the H200, closed mode: a serving loop's symptom whose launch follows a
/// program-order gap the host collector's records do not join (the thread
/// may have idled, or worked), and no phase of it is late against its peers.
/// The peers' launches followed the same kind of gap, no shorter: the gap
/// held nothing they were not held by too, so `none` is the finding, not the
/// gate before the launch.
#[test]
fn an_unjoined_gap_no_longer_than_the_peers_is_no_delay() {
    cov_mark::check!(unjoined_gap_within_peers);
    h200_reads(
        "test-corpus",
        "concurrent-work.test00026.harmless",
        CLOSED,
        CauseLabel::None,
    );
}

/// Must not: host work injected before the launch made its unjoined gap
/// longer than the peers' gaps beyond their spread: the gap may hold the
/// delay, and the gate before the launch (host work) stays the reading.
#[test]
fn an_unjoined_gap_longer_than_the_peers_keeps_the_gate() {
    cov_mark::check!(unjoined_gap_longer_than_the_peers);
    cov_mark::check_count!(unjoined_gap_within_peers, 0);
    h200_reads(
        "dev-corpus",
        "dependency-vs-overlap.dev00002.independent",
        CLOSED,
        CauseLabel::HostCompute,
    );
}

/// On the H200, a serving loop: an earlier request's kernel ran 567 µs longer
/// than its peers, and that request's pageable readback, queued behind it,
/// returned 395 µs after its copy ended (its peers 5 µs), with no stall
/// record on its thread. The call still blocked on its copy, so removing the
/// kernel's excess moves it, and the requests the thread served after it,
/// down to the symptom's: the readback blocked on the kernel
/// (`implicit_sync`). Bounding how late after its copy such a call may
/// return cut that path and read `none`.
#[test]
fn a_call_that_returned_late_after_its_copy_still_blocked_on_it() {
    cov_mark::check!(counterfactual_blocked_call);
    split_reads(
        "test-corpus/h200-580-20261205-2",
        "continuous-batching.test00167.earlier-batch-fence",
        COMBINED,
        CauseLabel::ImplicitSync,
    );
}

/// Must not: the same instance without the lengthened kernel; every earlier
/// request ran as its peers did, so the held chain moves nothing.
#[test]
fn a_call_blocked_on_a_copy_on_time_moves_nothing() {
    split_reads(
        "test-corpus/h200-580-20261205-2",
        "continuous-batching.test00167.harmless",
        COMBINED,
        CauseLabel::None,
    );
}

/// On the H200, a readback whose transfer ran 79 µs longer than five placed
/// peers (the same copy at the same place in the other requests, 1 µs apart)
/// in requests whose finishes spread over 200 µs from host jitter. Its own
/// execution is its last phase: nothing after it absorbed the excess, so it
/// is lateness whatever the finish spread says (`finished_on_time`), and the copy's own
/// transfer names it.
#[test]
fn a_readback_longer_than_its_placed_peers_is_late() {
    cov_mark::check!(own_execution_is_lateness);
    split_reads(
        "test-corpus/h200-580-20261205",
        "implicit-synchronization.test00164.slow-transfer",
        COMBINED,
        CauseLabel::SlowCopy,
    );
}

/// Must not: the same instance's fence variant, whose readback ran as long
/// as its peers; the host synchronization before it waited on the root.
#[test]
fn a_readback_on_time_behind_a_fence_is_the_fence() {
    cov_mark::check_count!(own_execution_is_lateness, 0);
    split_reads(
        "test-corpus/h200-580-20261205",
        "implicit-synchronization.test00164.copy-forced-fence",
        COMBINED,
        CauseLabel::ImplicitSync,
    );
}

/// Must not: without request identity the peers are every op of the name at
/// the call site, batches of every size; a larger batch's kernel runs longer
/// than their median, and the own-execution reading would read it as the SMs held (closed
/// `continuous-batching` harmless, H200 test corpus). It stays off there.
#[test]
fn without_request_identity_a_longer_execution_is_no_lateness() {
    cov_mark::check_count!(own_execution_is_lateness, 0);
    h200_reads(
        "test-corpus",
        "continuous-batching.test00037.harmless",
        CLOSED,
        CauseLabel::None,
    );
}

/// On the H200, a program run once (no peers): the asked memset's path
/// begins at an untimed minor fault of the thread that launched its root,
/// 2 µs after that thread's task began, because the fault's record ended
/// after the work arrived. The thread that handed the task on had been
/// preempted for 1.7 ms before it did: past the fault, the path to what let
/// the task begin holds the larger stall, and it names the cause.
#[test]
fn a_stall_upstream_of_the_fault_at_the_paths_root_is_the_larger_stall() {
    cov_mark::check!(structural_walk_past_a_stall);
    split_reads(
        "test-corpus/h200-580-20261205",
        "host-page-fault-vs-cpu-stall.test00011.preempted",
        COMBINED,
        CauseLabel::CpuDeschedule,
    );
}

/// Must not: the same instance's page-fault variant. The walk goes past the
/// fault at the path's root too, and finds no larger stall upstream: the
/// fault stays the cause.
#[test]
fn a_fault_at_the_paths_root_with_nothing_larger_upstream_stays_the_cause() {
    cov_mark::check!(structural_walk_past_a_stall);
    split_reads(
        "test-corpus/h200-580-20261205",
        "host-page-fault-vs-cpu-stall.test00011.page-fault",
        COMBINED,
        CauseLabel::HostPageFault,
    );
}

/// On an H100, a program run once (no peers): the asked copy's path runs
/// through a launch whose thread spent 111 µs on the CPU before it, where
/// the path's other host calls took 7–45 µs. The run's own host pace is the
/// norm a peerless op has: that gap held the path, and the request's host
/// work is the cause, not the event the next kernel then waited on.
#[test]
fn a_host_gap_beyond_the_paths_own_pace_is_host_work() {
    cov_mark::check!(structural_host_gap_held_the_path);
    split_reads(
        "test-corpus/h100-580-20261205-3",
        "dependency-vs-overlap.test00112.independent",
        COMBINED,
        CauseLabel::HostCompute,
    );
}

/// Must not: the same instance's event-edge variant, whose path has one host
/// gap and nothing to compare it with. The producer ran as long as it did and
/// the event after it names the delay.
#[test]
fn a_host_gap_with_no_other_on_the_path_sets_no_pace() {
    cov_mark::check_count!(structural_host_gap_held_the_path, 0);
    split_reads(
        "test-corpus/h100-580-20261205-3",
        "dependency-vs-overlap.test00112.event-edge",
        COMBINED,
        CauseLabel::EventWait,
    );
}

/// Must not: a graph launch whose host gap is longer than the graph's own
/// kernels but within the path's host pace. Host pace is measured against
/// host gaps, not against device work: the graph's lengthened node, passed
/// on through its graph edge, is the cause (an H100 split; read as
/// `host_compute` while the norm was the path's typical kernel).
#[test]
fn a_host_gap_within_the_paths_pace_holds_nothing() {
    cov_mark::check_count!(structural_host_gap_held_the_path, 0);
    split_reads(
        "test-corpus/h100-580-20261205",
        "graph-replay-vs-direct-launch.test00045.graph-dependency",
        COMBINED,
        CauseLabel::GraphDependency,
    );
}

/// Must not: a task's first launch 113 µs after its task began, where the
/// path's calls followed one another by 6–19 µs. The gap before a task's
/// first call holds the thread's wake-up and the task's setup, no part of
/// the pace between its calls: nothing held this harmless serving step (the
/// CUPTI 13.0 replay of the H200 corpus, `results/corpus`).
#[test]
fn a_tasks_first_call_sets_no_host_pace() {
    cov_mark::check_count!(structural_host_gap_held_the_path, 0);
    split_reads(
        "corpus/h200-580-cupti13.0-toolkit",
        "concurrent-work.dev00006.harmless",
        COMBINED,
        CauseLabel::None,
    );
}
