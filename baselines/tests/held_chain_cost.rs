//! The reference's cross-request reading (`src/causal_graph/requests.rs`) on
//! a chain longer than its cost bound: a thread serving requests back to back,
//! all arrived at once, holds each behind every earlier one, so the chain of
//! the last is every request. An op whose operation has more than
//! `MAX_CANDIDATE_INSTANCES` instances is left unread (its peers alone would
//! be a scan of them all per op, quadratic over the chain: minutes at a
//! hundred thousand launches, `causalbench measure large`), and such a chain
//! with no late phase read is no finding; below the bound the same chain is
//! read whole.

use baselines::builtin;
use baselines::causal_graph::thresholds::MAX_CANDIDATE_INSTANCES;
use baselines::synth::{ViewBuilder, US};
use ground_truth::trace::{MarkerPhase, SyncType};
use ground_truth::{CauseLabel, Question, TraceView};

const MS: u64 = 1_000_000;

/// `requests` requests served back to back by thread 10, arriving 10 µs apart
/// (each takes about 260 µs, so each waits for the one before): a host gap,
/// one `decode` kernel and a stream synchronize each; request 1's gap is
/// 400 µs longer. The query: the last request's kernel.
fn served(requests: u64) -> TraceView {
    let mut b = ViewBuilder::new();
    let base = 10 * MS;
    let mut free = base + 20 * US;
    let mut symptom = 0;
    for r in 0..requests {
        let arrival = base + r * 10 * US;
        b.marker(10, MarkerPhase::RequestBegin, "", &r.to_string(), arrival);
        let gap = if r == 1 { 400 * US } else { 0 };
        let at = free.max(arrival + US) + 50 * US + gap;
        let dur = 200 * US;
        let l = b.launch_at(
            10,
            "cudaLaunchKernel",
            at,
            1,
            "decode",
            None,
            None,
            dur,
            "serve.py:12",
        );
        b.ext(l.corr, r);
        let end = at + 7 * US + dur;
        let (_, corr) = b.api(10, "cudaStreamSynchronize", at + 6 * US, end + 5 * US);
        b.sync(corr, SyncType::StreamSynchronize, 1, 0, 0, at + 6 * US, end);
        b.ext(corr, r);
        free = end + 5 * US;
        symptom = l.op;
    }
    b.query("q", symptom, Question::Cause);
    b.build()
}

fn top_cause(v: &TraceView) -> CauseLabel {
    let e = builtin("causal-graph").unwrap().explain(v);
    e.diagnoses[0].causes[0].label
}

#[test]
fn a_chain_within_the_bound_is_read_whole() {
    cov_mark::check_count!(held_chain_unread, 0);
    cov_mark::check!(held_by_earlier_request);
    assert_eq!(top_cause(&served(4)), CauseLabel::HandoffQueueing);
}

#[test]
fn a_chain_of_an_operation_beyond_the_bound_is_no_finding() {
    cov_mark::check!(held_chain_unread);
    cov_mark::check_count!(held_chain_clean, 0);
    let v = served(MAX_CANDIDATE_INSTANCES as u64 + 8);
    // The rest of the diagnosis judges the symptom: no cross-request label.
    assert_ne!(top_cause(&v), CauseLabel::HandoffQueueing);
}
