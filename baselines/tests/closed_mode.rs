//! The reference in closed mode (no request identity, no NVTX or task markers):
//! a thread's program order is joined by thread and time from the host
//! collector, and a host stall joined to the symptom's critical path is judged
//! by its counterfactual effect (baselines/README.md, step 4c). Must: the
//! stall scenarios read their stall in the combined/closed view. Must not: a
//! view without host records (nothing to join), an instrumented view (the
//! rules have the request's beginning) and a negative control.
//! Handoffs between threads inferred from timing that recurs (step 1): must on
//! a two-stage pipeline, must not on two programs at rates of their own; a
//! pool member's one resume tested with its role-mates' (must on the H200,
//! must not where every thread resumes often).
//! A program run once, read from its critical path alone (step 4j), on the
//! GPU corpora: where its request began, across its one handoff and its
//! unjoined gaps; must not where the thread ran before, nor in instrumented
//! views. A readback longer than anything else on its path held it, in
//! either mode; must not behind a backlog of work of no request. An op
//! upstream of the symptom is read once per diagnosis. A graph launch that
//! queued behind another thread's kernels in its stream is a backlog, however
//! its own nodes then passed the wait on; must not where a node of the graph
//! itself ran long (the program's own thread launched it). A thread's untimed page fault ends by its next call, and
//! a stall of a thread handed its work counts from the work's arrival: an
//! isolated fault milliseconds before the path is no stall of it. Device
//! work of a thread that no handoff joins to the program is added work, as
//! tokens would say; must not where tokens say whose work is whose.

use baselines::builtin;
use ground_truth::view::{LossSpec, ViewSpec};
use ground_truth::{Bundle, CauseLabel, Collectors, EdgeType, Evidence, Mode, Readable, Scenario};
use std::path::PathBuf;

#[path = "gpu_support/split_bundle.rs"]
mod gpu_support;
use gpu_support::split_bundle;

fn scenario(name: &str) -> Scenario {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let own = here.join(format!("tests/scenarios/{name}.yaml"));
    let path = if own.exists() {
        own
    } else {
        here.join(format!("../catalog/{name}.yaml"))
    };
    Scenario::read(&path).unwrap()
}

fn record(name: &str) -> Bundle {
    generator::select_backend(generator::BackendKind::Sim)
        .unwrap()
        .record(&scenario(name), 0)
        .unwrap()
}

fn view(collectors: Collectors, mode: Mode) -> ViewSpec {
    ViewSpec {
        collectors,
        mode,
        loss: LossSpec::None,
    }
}

/// (true cause, claimed top cause) of every symptom of `name` in `spec`.
fn verdicts(name: &str, spec: ViewSpec) -> Vec<(CauseLabel, Option<CauseLabel>)> {
    let b = record(name);
    let v = views::derive(&b, spec).view;
    let x = builtin("causal-graph").unwrap().explain(&v);
    let s = evaluator::score_case(&b, &v, &x);
    assert!(!s.symptoms.is_empty(), "{name}: no symptom");
    s.symptoms
        .iter()
        .map(|y| (y.true_cause, y.claimed_cause))
        .collect()
}

const STALLS: [&str; 4] = [
    "host-page-fault-vs-cpu-stall.page-fault",
    "host-page-fault-vs-cpu-stall.preempted",
    "host-stall-before-long-kernel.deschedule",
    "host-stall-before-long-kernel.page-fault",
];

/// The thread's own stall before the late launch: the rules read it against
/// the chain's beginning (`host::chain_beginnings`), the stand-in for the
/// request's; another thread's stall across an idle gap goes through
/// `joined_stall_root` (`tests/counterfactual.rs`).
#[test]
fn a_stall_joined_by_thread_and_time_names_the_cause_in_closed_mode() {
    for name in STALLS {
        for (truth, claimed) in verdicts(name, view(Collectors::Combined, Mode::Closed)) {
            assert_eq!(Some(truth), claimed, "{name}, combined/closed");
        }
    }
}

#[test]
fn without_host_records_nothing_is_joined() {
    cov_mark::check_count!(closed_mode_joined_stall, 0);
    for name in STALLS {
        let b = record(name);
        let v = views::derive(&b, view(Collectors::Cupti, Mode::Closed)).view;
        let x = builtin("causal-graph").unwrap().explain(&v);
        for d in &x.diagnoses {
            let top = d.causes.first().map(|c| c.label);
            assert!(
                !matches!(
                    top,
                    Some(CauseLabel::CpuDeschedule | CauseLabel::HostPageFault)
                ) || !d.complete,
                "{name}, cupti/closed: a host stall named with no host record: {d:?}"
            );
        }
    }
}

#[test]
fn instrumented_views_keep_their_own_reading() {
    cov_mark::check_count!(closed_mode_joined_stall, 0);
    for name in STALLS {
        for (truth, claimed) in verdicts(name, view(Collectors::Combined, Mode::Instrumented)) {
            assert_eq!(Some(truth), claimed, "{name}, combined/instrumented");
        }
    }
}

#[test]
fn unrelated_work_is_no_stall() {
    // A negative control: no stall is injected, the natural ones are small.
    cov_mark::check_count!(closed_mode_joined_stall, 0);
    let _ = verdicts(
        "concurrent-work.harmless",
        view(Collectors::Combined, Mode::Closed),
    );
}

#[test]
fn joined_program_order_stays_inferred_below_observed_confidence() {
    let b = record("host-page-fault-vs-cpu-stall.page-fault");
    let v = views::derive(&b, view(Collectors::Combined, Mode::Closed)).view;
    let x = builtin("causal-graph").unwrap().explain(&v);
    let host_order: Vec<_> = x
        .edges
        .iter()
        .filter(|e| e.kind == EdgeType::HostOrder)
        .collect();
    assert!(!host_order.is_empty());
    for e in host_order {
        assert_eq!(e.evidence, Evidence::Inferred, "{e:?}");
        assert!(e.confidence < 0.8, "{e:?}");
    }
}

/// The handoffs causal-graph infers between threads in `name`'s combined
/// closed view (`src/causal_graph/handoff_inference.rs`), as (src, dst) rids,
/// with the bundle and the explanation's top cause.
fn inferred_handoffs(name: &str, mode: Mode) -> (Bundle, Vec<(u64, u64)>, Option<CauseLabel>) {
    let b = record(name);
    let v = views::derive(&b, view(Collectors::Combined, mode)).view;
    let x = builtin("causal-graph").unwrap().explain(&v);
    let handoffs = x
        .edges
        .iter()
        .filter(|e| e.kind == EdgeType::Handoff && e.evidence == Evidence::Inferred)
        .map(|e| (e.src, e.dst))
        .collect();
    let top = x.diagnoses[0].causes.first().map(|c| c.label);
    (b, handoffs, top)
}

/// Whether the truth leads from the call recorded as `src` to the call
/// recorded as `dst` through host-side edges whose nodes in between are
/// no calls (the enqueue, the task it begins): the handoff the view hides.
fn truth_hands_on(b: &Bundle, src: u64, dst: u64) -> bool {
    use ground_truth::NodeKind;
    let gt = &b.ground_truth;
    let node_of = |rid: u64| {
        gt.nodes
            .iter()
            .find(|n| n.rids.contains(&rid))
            .map(|n| n.id)
    };
    let (Some(from), Some(to)) = (node_of(src), node_of(dst)) else {
        return false;
    };
    let mut frontier = vec![from];
    for _ in 0..4 {
        let mut next = Vec::new();
        for e in &gt.edges {
            if !frontier.contains(&e.src)
                || !matches!(
                    e.kind,
                    EdgeType::HostOrder | EdgeType::Handoff | EdgeType::Busy | EdgeType::Request
                )
            {
                continue;
            }
            if e.dst == to {
                return true;
            }
            let kind = gt.nodes.iter().find(|n| n.id == e.dst).map(|n| n.kind);
            if matches!(
                kind,
                Some(NodeKind::HostTask | NodeKind::QueueHandoff | NodeKind::Request)
            ) {
                next.push(e.dst);
            }
        }
        frontier = next;
    }
    false
}

/// Must: stage 2 resumes a steady lag after stage 1's wait returns, request
/// after request, while other calls end at lags that drift: the refutation
/// leaves stage 1's wait as what handed each request on. Every inferred
/// handoff is one the truth has, and the walk reaches the held kernel of
/// stage 1 across it.
#[test]
fn a_handoff_between_threads_is_inferred_from_timing_that_recurs() {
    cov_mark::check!(handoff_inferred_by_refutation);
    let (b, handoffs, top) = inferred_handoffs("closed-handoff.staged", Mode::Closed);
    assert!(handoffs.len() >= 3, "{handoffs:?}");
    for &(src, dst) in &handoffs {
        assert!(
            truth_hands_on(&b, src, dst),
            "rid {src} -> rid {dst} is no handoff of the truth"
        );
    }
    assert_eq!(top, Some(CauseLabel::CpuDeschedule));
}

/// Must not: two programs at rates of their own resume at lags that drift,
/// so nothing is inferred between their threads; and with task markers the
/// handoffs are observed, not inferred.
#[test]
fn threads_that_drift_apart_hand_nothing_on() {
    cov_mark::check_count!(handoff_inferred_by_refutation, 0);
    let (_, handoffs, _) = inferred_handoffs("closed-handoff.drifting", Mode::Closed);
    assert!(handoffs.is_empty(), "{handoffs:?}");
    let (_, handoffs, _) = inferred_handoffs("closed-handoff.staged", Mode::Instrumented);
    assert!(handoffs.is_empty(), "{handoffs:?}");
}

/// In H200 test corpus bundle `name`'s closed combined view causal-graph
/// infers handoffs, each one the truth has, and reads the symptom as the
/// event wait it is.
fn pool_handoffs_lead_to_the_event_chain(name: &str) {
    let corpus = "test-corpus/h200-580";
    let b = split_bundle(corpus, name);
    let v = views::derive(&b, view(Collectors::Combined, Mode::Closed)).view;
    let x = builtin("causal-graph").unwrap().explain(&v);
    let handoffs: Vec<(u64, u64)> = x
        .edges
        .iter()
        .filter(|e| e.kind == EdgeType::Handoff && e.evidence == Evidence::Inferred)
        .map(|e| (e.src, e.dst))
        .collect();
    assert!(!handoffs.is_empty());
    for &(src, dst) in &handoffs {
        assert!(
            truth_hands_on(&b, src, dst),
            "rid {src} -> rid {dst} is no handoff of the truth"
        );
    }
    gpu_reads(corpus, name, Mode::Closed, CauseLabel::EventWait);
}

/// Must, on the H200: the consumer stage is a pool of two threads that take
/// turns, and the request asked about is the one turn of its thread in the
/// view. Alone it tests no hypothesis; with its role-mate's three resumes
/// (a thread making the same calls) the refutation keeps the producer's
/// wait, so the walk crosses into the producer's event chain that held it.
/// Every inferred handoff is one the truth has.
#[test]
fn a_pool_members_one_resume_joins_its_role_mates_hypothesis() {
    cov_mark::check!(handoff_resume_of_a_pool);
    pool_handoffs_lead_to_the_event_chain(
        "slow-copy-vs-blocked-consumer.test00033.blocked-elsewhere",
    );
}

/// Must, on the H200: every member of the consumer pool takes one turn in
/// the view, so no thread's resumes test anything alone and no role-mate
/// keeps a hypothesis to join. Together (one role, one site) they keep the
/// producer's wait, and the walk reaches the event chain that held the
/// request. Every inferred handoff is one the truth has.
#[test]
fn a_pool_whose_members_each_resume_once_is_read_together() {
    cov_mark::check!(handoff_pool_of_single_turns);
    pool_handoffs_lead_to_the_event_chain(
        "slow-copy-vs-blocked-consumer.test00013.blocked-elsewhere",
    );
}

/// Must not: in a two-stage pipeline each stage's thread resumes request
/// after request, so no resume is alone: none borrows another thread's
/// hypothesis, and no pool of single turns is read together.
#[test]
fn threads_that_resume_often_keep_their_own_hypothesis() {
    cov_mark::check_count!(handoff_resume_of_a_pool, 0);
    cov_mark::check_count!(handoff_pool_of_single_turns, 0);
    let (_, handoffs, _) = inferred_handoffs("closed-handoff.staged", Mode::Closed);
    assert!(handoffs.len() >= 3, "{handoffs:?}");
}

/// (true cause, causal-graph's top cause) of the one symptom of GPU corpus
/// bundle `name` in the combined view of `mode`.
fn gpu_verdict(corpus: &str, name: &str, mode: Mode) -> (CauseLabel, Option<CauseLabel>) {
    let b = split_bundle(corpus, name);
    let v = views::derive(&b, view(Collectors::Combined, mode)).view;
    let x = builtin("causal-graph").unwrap().explain(&v);
    let s = evaluator::score_case(&b, &v, &x);
    (s.symptoms[0].true_cause, s.symptoms[0].claimed_cause)
}

/// GPU corpus bundle `name`'s symptom is `cause`, and causal-graph's top
/// cause in the combined view of `mode` is too.
fn gpu_reads(corpus: &str, name: &str, mode: Mode, cause: CauseLabel) {
    let (truth, claimed) = gpu_verdict(corpus, name, mode);
    assert_eq!(truth, cause, "{name}");
    assert_eq!(claimed, Some(truth), "{name}");
}

/// On the H200, closed mode, a program run once (no peers): the path from
/// the symptom back stops at its thread's first call, which no other
/// thread's call ended just before. Nothing handed that thread its work, so
/// the request began there, and the path from it is what an instrumented
/// view walks from the request's beginning marker: the pageable readback
/// queued behind the request's first kernel was fenced by it.
#[test]
fn a_threads_first_call_nothing_was_handed_to_begins_the_request() {
    cov_mark::check!(structural_request_begin_unseen);
    gpu_reads(
        "test-corpus/h200-580",
        "implicit-synchronization.test00014.copy-forced-fence",
        Mode::Closed,
        CauseLabel::ImplicitSync,
    );
}

/// Closed mode, a program run once: the path stops at a worker thread's
/// first call, and one other thread's call (its last) ended a wake-up
/// before it. That thread handed the work on: the walk goes on from its
/// call to the event chain that held the request.
#[test]
fn the_one_thread_that_just_called_handed_the_work_on() {
    cov_mark::check!(structural_sole_handoff);
    gpu_reads(
        "test-corpus/h200-580",
        "dependency-vs-overlap.test00102.event-edge",
        Mode::Closed,
        CauseLabel::EventWait,
    );
}

/// Must not: the launch asked about follows its thread's blocking call by a
/// gap too long to join (59 µs). Its thread ran before it, so it is no
/// request's beginning: the page faults before the request's first launch,
/// which the blocking call waited behind, stay the reading.
#[test]
fn a_call_after_an_unjoined_gap_is_no_request_beginning() {
    cov_mark::check_count!(structural_request_begin_unseen, 0);
    gpu_reads(
        "test-corpus/h200-580",
        "host-page-fault-vs-cpu-stall.test00001.page-fault",
        Mode::Closed,
        CauseLabel::HostPageFault,
    );
}

/// Must not: an instrumented view has the request's beginning; the walk
/// needs neither reading.
#[test]
fn instrumented_views_walk_from_the_request_marker() {
    cov_mark::check_count!(structural_request_begin_unseen, 0);
    cov_mark::check_count!(structural_sole_handoff, 0);
    gpu_reads(
        "test-corpus/h200-580",
        "dependency-vs-overlap.test00102.event-edge",
        Mode::Instrumented,
        CauseLabel::EventWait,
    );
}

/// On the H200, closed mode: a serving loop's worker thread polls on the CPU
/// between tasks, and its task's first launch follows its previous call by
/// 28 ms. The handoff into it, inferred from timing that recurs, says when
/// its work arrived: its host gap counts from there, as a task's first call
/// counts from its task marker, and the idle polling is no grown host work.
#[test]
fn a_handed_on_call_is_ready_when_its_work_arrives() {
    cov_mark::check!(ready_when_handed_work);
    gpu_reads(
        "test-corpus/h200-580-20261205",
        "concurrent-work.test00036.harmless",
        Mode::Closed,
        CauseLabel::None,
    );
}

/// On the H200, closed mode, a program run once: a thread's program order
/// has a gap too long to join (59 µs) in the middle of its request. Without
/// peers no serving loop's next request can have begun there: the walk goes
/// on across it, to the copy that shared the link with the asked one's
/// transfer.
#[test]
fn a_run_once_is_walked_across_its_unjoined_gaps() {
    cov_mark::check!(structural_unjoined_gap_crossed);
    cov_mark::check_count!(structural_host_gap_held_the_path, 0);
    gpu_reads(
        "test-corpus/h200-580-20261205",
        "slow-copy-vs-blocked-consumer.test00143.own-copy-contended",
        Mode::Closed,
        CauseLabel::PcieContention,
    );
}

/// The crossed gap is the request's own host work when the thread spent it
/// on the CPU far beyond the path's other gaps: 82 µs where they take 5–12.
/// Its event-edge twin, with no host work injected, crosses no such gap and
/// reads the event chain.
#[test]
fn a_crossed_gap_beyond_the_paths_own_is_host_work() {
    {
        cov_mark::check!(structural_host_gap_held_the_path);
        gpu_reads(
            "test-corpus/h200-580-20261205",
            "dependency-vs-overlap.test00222.independent",
            Mode::Closed,
            CauseLabel::HostCompute,
        );
    }
    cov_mark::check_count!(structural_host_gap_held_the_path, 0);
    gpu_reads(
        "test-corpus/h200-580-20261205",
        "dependency-vs-overlap.test00222.event-edge",
        Mode::Closed,
        CauseLabel::EventWait,
    );
}

/// A program run once whose readback's own transfer held its path most: on
/// the H200, 3.9 ms of transfer after eight kernels on as many streams, the
/// longest 2.6 ms, none of which waited to start. The copy is a fifth of the
/// path's time (a request handed through five threads), yet removing any
/// other element would move the symptom less: the transfer held it (slow
/// copy), in either mode. Its fence twin, whose first kernel grew instead
/// (3.4 ms beside a 1 ms copy), reads the fence.
#[test]
fn a_transfer_longer_than_anything_else_on_its_path_held_it() {
    for mode in [Mode::Instrumented, Mode::Closed] {
        cov_mark::check!(transfer_longest_on_path);
        gpu_reads(
            "test-corpus/h200-580-20261205-2",
            "implicit-synchronization.test00074.slow-transfer",
            mode,
            CauseLabel::SlowCopy,
        );
    }
    cov_mark::check_count!(transfer_longest_on_path, 0);
    gpu_reads(
        "test-corpus/h200-580-20261205-2",
        "implicit-synchronization.test00074.copy-forced-fence",
        Mode::Instrumented,
        CauseLabel::ImplicitSync,
    );
}

/// Must not: a readback longer than any one kernel on its path, behind a
/// backlog of kernels no request launched (4.6 ms of them on its path, each
/// shorter than the copy). The backlog held the path; the tokens say it is
/// work of no request, so the copy's length is not read as what held it.
#[test]
fn a_backlog_on_the_path_is_not_read_as_the_copy() {
    cov_mark::check_count!(transfer_longest_on_path, 0);
    gpu_reads(
        "test-corpus/h200-580-20261205-2",
        "late-launch-vs-device-queueing.test00010.stream-backlog",
        Mode::Instrumented,
        CauseLabel::StreamBacklog,
    );
}

/// An op upstream of the symptom is read once per diagnosis: in this serving
/// loop (an H100 split, CUPTI records alone, closed), each late op's walk
/// reads the ops its path shares with the others', and read afresh every
/// time the diagnosis took over a minute on 162 records (exponential in the
/// path's depth). Read once, the verdict is the same and quick.
#[test]
fn an_upstream_op_is_read_once_per_diagnosis() {
    cov_mark::check!(upstream_reading_reused);
    let b = split_bundle(
        "test-corpus/h100-580-20261205-4",
        "continuous-batching.test00017.harmless",
    );
    let v = views::derive(&b, view(Collectors::Cupti, Mode::Closed)).view;
    let x = builtin("causal-graph").unwrap().explain(&v);
    assert_eq!(x.diagnoses.len(), 1);
}

/// On the H200, closed mode: another thread launched kernels onto the stream
/// just before the program's graph launch, and the graph's first node waited
/// for them; the kernels share their names with the program's, so without
/// tokens they read as the program's kernels run long, named by the graph
/// edge after them. That thread is joined to no other by a handoff: its work
/// is added work, a backlog whatever gate it then passed.
#[test]
fn a_graph_launch_behind_another_threads_work_is_a_backlog() {
    cov_mark::check!(work_of_a_thread_alone);
    gpu_reads(
        "test-corpus/h200-580-20261205",
        "graph-replay-vs-direct-launch.test00025.backlogged-launch",
        Mode::Closed,
        CauseLabel::StreamBacklog,
    );
}

/// Must not: the same instance with a node of the graph itself lengthened
/// (the program's own thread launched it) is named by the graph edge after it.
#[test]
fn a_node_of_the_graph_that_ran_long_is_a_graph_dependency() {
    cov_mark::check_count!(work_of_a_thread_alone, 0);
    gpu_reads(
        "test-corpus/h200-580-20261205",
        "graph-replay-vs-direct-launch.test00025.graph-dependency",
        Mode::Closed,
        CauseLabel::GraphDependency,
    );
}

/// On the H200, closed mode: a readback behind a chain of handed-on kernels,
/// the first of them lengthened and fenced by a synchronize (`implicit_sync`).
/// One thread of the chain took a single untimed minor fault 6 ms before the
/// path, and made calls since. That fault counted as 200 µs (the cap for a
/// thread's last fault) and read as what held the work across an idle gap
/// (`host_page_fault`); it lasted no longer than until the thread's next call,
/// and a stall of a thread counts only from when its work arrived.
#[test]
fn an_untimed_fault_ends_by_its_threads_next_call() {
    cov_mark::check!(untimed_fault_ends_by_the_next_call);
    cov_mark::check!(joined_stall_since_the_work_arrived);
    gpu_reads(
        "test-corpus/h200-580-20261205",
        "implicit-synchronization.test00114.copy-forced-fence",
        Mode::Closed,
        CauseLabel::ImplicitSync,
    );
}

/// On an H100, closed mode: kernels a thread working alone (no handoff joins
/// it to any other thread) launched onto the symptom's stream ahead of it.
/// Their names recur in the program, so they are no operation run once;
/// without tokens they read as the program's own work and the symptom's wait
/// was named by the event after it. A thread joined to nothing is no part of
/// the program's requests: its work is added work, all of it delay to what it
/// held (`stream_backlog`).
#[test]
fn work_of_a_thread_joined_to_nothing_is_added_work() {
    cov_mark::check!(work_of_a_thread_alone);
    gpu_reads(
        "test-corpus/h100-580-20261205",
        "late-launch-vs-device-queueing.test00080.stream-backlog",
        Mode::Closed,
        CauseLabel::StreamBacklog,
    );
}

/// Must not: with request tokens the same work is known to be of no request
/// from its tokens, not its thread.
#[test]
fn with_tokens_a_threads_work_is_judged_by_its_tokens() {
    cov_mark::check_count!(work_of_a_thread_alone, 0);
    gpu_reads(
        "test-corpus/h100-580-20261205",
        "late-launch-vs-device-queueing.test00080.stream-backlog",
        Mode::Instrumented,
        CauseLabel::StreamBacklog,
    );
}

/// On an H100, closed mode: the backlog ahead of a graph launch came from a
/// thread that handoffs join to the program, so it is no thread working
/// alone; its kernels read as run long. Their delay entered the graph's work
/// by stream order, so it is the stream's backlog, not the graph edges the
/// graph's own nodes passed it on through.
#[test]
fn a_backlog_that_entered_a_graph_launch_by_stream_order_is_a_backlog() {
    cov_mark::check!(entered_the_launch_by_stream_order);
    gpu_reads(
        "test-corpus/h100-580-20261205-3",
        "graph-replay-vs-direct-launch.test00145.backlogged-launch",
        Mode::Closed,
        CauseLabel::StreamBacklog,
    );
}

/// On the H200, closed mode, a serving loop: an earlier request's kernel ran
/// long, and that request's readback waited behind it in their stream; its
/// synchronize then held the thread, and the requests after it. The upstream walk
/// finds the kernel's finish within its peers' spread (batches of every
/// size), and reads the readback's stream wait instead. That wait is the
/// kernel's delay, reached by stream order: it is named as the kernel's own
/// would be, by the synchronize it went on through (`implicit_sync`), not by
/// the stream (`stream_backlog`).
#[test]
fn a_stream_wait_behind_a_long_kernel_of_its_own_thread_is_that_kernels_delay() {
    cov_mark::check!(queued_behind_a_long_kernel);
    gpu_reads(
        "test-corpus/h200-580-20261205-2",
        "continuous-batching.test00147.earlier-batch-fence",
        Mode::Closed,
        CauseLabel::ImplicitSync,
    );
}

/// Must not: a backlog another thread queued ahead of the symptom's root in
/// its stream. The wait behind it is the stream's own mechanism, whatever
/// gate the delay passed after it (`stream_backlog`).
#[test]
fn a_stream_wait_behind_another_threads_kernel_stays_a_backlog() {
    cov_mark::check_count!(queued_behind_a_long_kernel, 0);
    gpu_reads(
        "test-corpus/h200-580",
        "late-launch-vs-device-queueing.test00060.stream-backlog",
        Mode::Closed,
        CauseLabel::StreamBacklog,
    );
}
