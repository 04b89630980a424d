//! Every numeric threshold and weight of the reference's diagnosis, in one table.
//!
//! Each entry says its value and unit (in its name and type), why it has that
//! value, and where it was measured. The diagnosis files (`DIAGNOSIS_FILES`)
//! name these constants and hold no bare numeric literal besides 0, 1 and 2 as
//! counts or indices (`tests/thresholds.rs` holds it). These are the
//! reference's own: the shared code's constants (`crate::analysis`) serve the
//! other profilers, so tuning one here moves no other profiler's row.

use ground_truth::Ns;

/// The diagnosis files, relative to `src/causal_graph/`: the sources whose
/// numeric literals must come from this table, the graph-building passes
/// included (their edges' confidences and clock tolerances are thresholds
/// the diagnosis reads). `text.rs` is left out: its numbers (`1e3`, `1e6`)
/// are unit conversions for printing, not thresholds.
pub const DIAGNOSIS_FILES: &[&str] = &[
    "attribution.rs",
    "candidates.rs",
    "closed_mode.rs",
    "counterfactual.rs",
    "critical_path.rs",
    "diagnosis.rs",
    "event_sync.rs",
    "gating.rs",
    "graph.rs",
    "graph_launch.rs",
    "handoff_inference.rs",
    "host.rs",
    "interference.rs",
    "launch.rs",
    "mod.rs",
    "peers.rs",
    "readings.rs",
    "requests.rs",
    "stream_order.rs",
    "structural.rs",
    "upstream.rs",
];

// ---- Noise and clocks ----

/// Lateness below this is noise. Unit: ns (20 µs). Why: the simulator's and
/// the H200's background preemptions and jitter stay below it between quiet
/// runs of small scenarios (docs/scenario-space.md, "Noise floor"). Also the
/// floor of a host stall that earns a `fault` edge and of a phase excess.
pub const NOISE_NS: f64 = 20_000.0;

/// The clock agreement a device-timed difference is trusted to. Unit: ns
/// (2 µs). Why: the GPU's CUPTI and `%globaltimer` agree within it
/// (docs/gpu-facts.md), the label check's granularity too
/// (docs/scenario-space.md, "Noise floor").
pub const CLOCK_NS: f64 = 2_000.0;

/// How many times the peers' own spread a host-side lateness must pass.
/// Unit: times the spread. Why: the label check calls a symptom late only
/// beyond three times the drift between two quiet runs (docs/scenario-space.md,
/// "Labels from the truth"); a profiler's only sample of that noise is how far
/// the peers stray from each other, so it asks the same margin of it where the
/// noise is the threads' wake-up jitter (rules 7, 7b, 7c).
pub const SPREAD_MARGIN: f64 = 3.0;

// ---- Host records ----

/// How far back before a call with no host predecessor on its thread that
/// thread's scheduler and page-fault records still count as stalls of the
/// call. Unit: ns (50 ms). Why: longer than any stall the scenarios inject
/// (docs/scenario-space.md), short enough not to reach the previous request.
pub const STALL_LOOKBACK_NS: Ns = 50_000_000;

/// Longest time the thread's last untimed page fault counts (rule 7g). Unit:
/// ns (200 µs). Why: a major fault's order of magnitude, the same cap the
/// shared index puts on an untimed fault before another fault
/// (`index::UNTIMED_FAULT_CAP_NS`). Measured: after 72 faults in 180 µs on
/// the H200 dev corpus the last one held its thread 395 µs.
pub const LAST_UNTIMED_FAULT_CAP_NS: Ns = 200_000;

// ---- Cause weights ----

/// Weight of `pcie_contention` for a copy that waited to start while no other
/// copy was seen on the link. Unit: times the late phase. Why: the wait is
/// still the copy engine's most likely, but nothing shows who held it.
pub const UNSEEN_LINK_CONTENTION: f64 = 0.5;

/// Weight of `occupancy_pressure` for a kernel that waited to start while no
/// other kernel was seen running. Unit: times the late phase. Why: as
/// [`UNSEEN_LINK_CONTENTION`], for the SMs.
pub const UNSEEN_SM_CONTENTION: f64 = 0.6;

/// Factor on `slow_copy`'s alternative weight for a copy that waited to start
/// with no other copy seen on the link. Unit: times its table weight
/// (`analysis::phase_causes`). Why: without contention seen, the copy itself
/// is the likelier culprit.
pub const UNSEEN_CONTENTION_SLOW_COPY: f64 = 2.0;

/// Weight of `cpu_deschedule` beside `host_compute` for a launch that came
/// late with no host record in the view to say why (no eBPF collector, or
/// records lost). Unit: times the host excess. Why: the stall that delayed it
/// may be a deschedule or a page fault the view cannot show; both stay ranked.
pub const UNSEEN_HOST_DESCHEDULE: f64 = 0.5;

/// Weight of `host_page_fault` in the same case. Unit: times the host excess.
/// Why: as [`UNSEEN_HOST_DESCHEDULE`], a little below it (faults are the rarer
/// stall in the scenarios' background noise, docs/records.md).
pub const UNSEEN_HOST_PAGE_FAULT: f64 = 0.4;

/// Weight of `host_compute` as the alternative beside `none` (nothing late)
/// or beside a host stall the records show. Unit: share of the ranking. Why:
/// a host cause the records cannot show is always possible; it stays ranked,
/// well below.
pub const HOST_COMPUTE_ALTERNATIVE: f64 = 0.2;

/// A wait or event record asked about with an `event` edge in: `event_wait`,
/// and `stream_backlog` as the alternative. Unit: share of the ranking.
pub const WAIT_RECORD_EVENT: f64 = 0.6;
pub const WAIT_RECORD_BACKLOG: f64 = 0.2;

/// A wait or event record asked about with no `event` edge in:
/// `stream_backlog`, and `none` as the alternative. Unit: share of the ranking.
pub const UNGATED_RECORD_BACKLOG: f64 = 0.5;
pub const UNGATED_RECORD_NONE: f64 = 0.3;

/// Weight of `none` when nothing is late against clean peers. Unit: share of
/// the ranking. Why: with peers, no lost records and every phase measured,
/// `none` is a finding (rule 8); the gates stay ranked below it.
pub const NONE_WHEN_CLEAN: f64 = 0.7;

/// Weight of `none` when nothing is late but there is no norm to be late
/// against (no peers, records plausibly lost, an unjoined host gap longer
/// than the peers' in closed mode). Unit: share of the ranking. Why: the op's
/// timing is then explained by what gated it, `none` the close second (rule
/// 8).
pub const NONE_WHEN_UNSURE: f64 = 0.45;

/// Weight of a gate's causes beside `none` when nothing is late. Unit: times
/// the gate's weight, itself capped at 1. Why: a gate passing on its own
/// excess (nanoseconds, not a share) outranked `none` (rule 8).
pub const NOT_LATE_GATE: f64 = 0.6;

/// Weight of the causes of a late phase that is not the dominant one. Unit:
/// times that phase's excess. Why: secondary phases stay ranked, below the
/// dominant phase's causes.
pub const SECONDARY_PHASE: f64 = 0.3;

/// Weight of the causes of the copy behind an implicit fence, beside
/// `implicit_sync`. Unit: times the copy's cause weight, itself capped at 1.
pub const FENCED_COPY_CAUSE: f64 = 0.3;

/// A gate of unknown kind (a blocking call's wait on something that is no
/// device op; a device op launched with no visible launch call): `event_wait`
/// and `stream_backlog` weigh the same. Unit: times the lateness (or share).
pub const UNKNOWN_GATE: f64 = 0.5;

/// A blocking call with no `sync` edge in: `none` and `implicit_sync` weigh
/// the same. Unit: share of the ranking.
pub const UNGATED_SYNC: f64 = 0.5;

/// Weight of the other gate kind when the gate is behind a lost record (its
/// kind is a guess). Unit: times the lateness.
pub const LOST_GATE_ALTERNATIVE: f64 = 0.4;

/// Weight of an upstream gate's own reason passed on, against the gate's
/// kind. Unit: times the lateness. Why: a gate late for a reason of its own
/// names the root (rule 6b), so its reason must outrank the gate's kind.
pub const PASSED_ON_REASON: f64 = 1.2;

/// Weight of `handoff_queueing` added in closed mode. Unit: share of the
/// ranking. Why: queues are invisible without markers, so queueing stays a
/// candidate however the host chain reads.
pub const CLOSED_MODE_QUEUEING: f64 = 0.4;

/// Weight of `none` beside the structural reading of an op without peers.
/// Unit: share of the ranking. Why: without peers nothing says the op was
/// late at all (rule 5a).
pub const STRUCTURAL_NONE: f64 = 0.3;

/// How many device ops starting before an interval's end are scanned back
/// for one of another origin running in it (`structural::foreign_work_held_nothing`).
/// Unit: ops. Why: ops are sorted by start, so a long op that began well
/// before the interval is found within a bounded window; the same bound as
/// `analysis::overlap_by_others`, which every profiler's overlap reading uses.
/// The stream-order pass scans back the same window for the device op whose
/// completion let a fenced copy go (`stream_order::unexplained_gating`).
pub const OVERLAP_SCAN_OPS: usize = 4096;

/// Weight of `none` beside the candidates of the counterfactual reading
/// (`candidates.rs`). Unit: times the floor an effect had to pass. Why: a
/// candidate that just passes the floor is about as likely noise as a cause;
/// one that moves the symptom twice as far clearly outranks `none`.
pub const COUNTERFACTUAL_NONE: f64 = 1.0;

// ---- Lateness ----

/// The share of a lateness a cause must explain. Unit: fraction. Why: a cause
/// must explain the lateness (docs/scenario-space.md, "Labels from the
/// truth"): a late phase of the op's own under half of how much later it
/// finished than its peers is not what made it late (rule 7a); a stall record
/// or an upstream op's excess passed along the path must explain half of it
/// (rules 7, 7d).
pub const LATENESS_SHARE: f64 = 0.5;

/// Share of an op's typical execution below which a device-side delay is not
/// lateness. Unit: fraction. Why: smaller device-side delays are what the
/// application's own concurrent work causes, and the benchmark scores
/// lateness from 0.3× the normal latency up (docs/design.md, rule 4).
pub const DEVICE_SHARE: f64 = 0.25;

// ---- The structural reading (no peers, rule 5a) ----

/// A stall shorter than this and than [`STALL_WORK_SHARE`] of the device
/// work after it is what any host has. Unit: ns (50 µs). Why: natural
/// preemptions and faults last tens of µs (docs/records.md, "Background
/// noise").
pub const STALL_NS: f64 = 50_000.0;

/// The share of the device work after it a stall must reach to name a host
/// cause when it is under [`STALL_NS`]. Unit: fraction. Why: as
/// [`DEVICE_SHARE`].
pub const STALL_WORK_SHARE: f64 = 0.25;

/// The share of its own work a path's first op must wait to start, while
/// other streams' work of its kind ran, to name contention. Unit: fraction.
/// Why: as [`DEVICE_SHARE`].
pub const START_WAIT_WORK_SHARE: f64 = 0.25;

/// The share of its path's time a copy's own transfer must take to be what
/// held the path, when it is also longer than any other op on the path. Unit:
/// fraction. Why: most of the path's time (rule 5a).
pub const TRANSFER_SHARE: f64 = 0.5;

/// The share that is enough when the transfer is [`TRANSFER_MARGIN`] times the
/// longest other op on the path. Unit: fraction. Why: half of
/// [`TRANSFER_SHARE`]; a copy about as long as the kernel before it says
/// nothing about which of them held the path.
pub const TRANSFER_SHARE_CLEARLY_LONGEST: f64 = 0.25;

/// How much longer than the longest other op on its path a transfer must be
/// to hold the path with [`TRANSFER_SHARE_CLEARLY_LONGEST`]. Unit: times.
pub const TRANSFER_MARGIN: f64 = 1.5;

/// The share of a copy's transfer other streams' copies must share the link
/// for to name `pcie_contention` rather than `slow_copy`. Unit: fraction.
pub const LINK_SHARED_SHARE: f64 = 0.25;

// ---- Walk bounds (guards against a malformed view, far above any real chain) ----

/// Gating hops a cause is passed along (rule 6b). Unit: hops.
pub const MAX_HOPS: u32 = 256;

/// Links of one gating chain through waits and event records. Unit: links.
pub const MAX_GATE_LINKS: usize = 64;

/// Handoffs followed back from a call to its request. Unit: handoffs.
pub const MAX_HANDOFF_LINKS: usize = 64;

/// Host-order steps followed back from a host operation to its task's begin
/// marker. Unit: steps.
pub const MAX_TASK_STEPS: usize = 100_000;

/// Records of a symptom's ancestors the counterfactual re-evaluates
/// (`counterfactual.rs`), the nearest first; those beyond count as unmoved.
/// Unit: records. Why: a scenario's whole graph is a few thousand records
/// (docs/scenario-space.md), while a large case's symptom can have millions
/// of ancestors through its stream and thread: the bound keeps each
/// symptom's cost constant (issue 35's cost target).
pub const MAX_CONE_NODES: usize = 16_384;

/// Device ops of a symptom's ancestors, the nearest first, whose norms the
/// counterfactual reading reads for candidates (`candidates.rs`). Unit: ops.
/// Why: reading an op's peers scans its operation's instances, millions in a
/// large case (`causalbench measure large`: ten million launches of one
/// kernel); a pipeline's or a batch's delay lies within a few requests, eight
/// ops or fewer on the dev split's shapes.
pub const MAX_CANDIDATE_OPS: usize = 32;

/// Share of its peers' gap that a launch call's gap since its thread's
/// previous call must pass it by to count as grown host work (`candidates.rs`
/// `grown_host_gap`, `requests.rs` `late_gap`). Unit: ratio. Why: a thread
/// that waits for its next task on the CPU (no scheduler record shows the
/// wait) waits as long as the work takes to arrive, which varies in
/// proportion: on the H200 dev corpus, gaps of 2.4–4.6 ms before a task's
/// first launch strayed 0.3–0.5 ms from their peers' median in device-cause
/// and stall variants alike, while grown host work of the shapes
/// (docs/scenario-space.md) grows gaps of tens of microseconds several-fold.
pub const HOST_GAP_SHARE: f64 = 0.5;

/// Calls of a thread read between grown host work and the symptom's launch to
/// tell whether the thread moved on to another request meanwhile
/// (`candidates.rs` `same_repetition`, closed mode). Unit: calls. Why: a
/// serving loop's or training loop's next request launches its first
/// operation again within one period, a few dozen calls on the shapes of
/// docs/scenario-space.md; work further apart than this bound is taken as
/// another request's, and the bound keeps the scan constant in a trace of
/// millions of calls.
pub const MAX_REPETITION_CALLS: usize = 4_096;

/// Instances of an operation above which the counterfactual reading leaves
/// its ops to the rules (`candidates.rs`). Unit: ops. Why: reading one op's
/// peers scans every instance; the dev split's scenarios have at most a few
/// dozen, the large case ten million of one kernel.
/// The cross-request reading leaves such ops of a held chain unread
/// (`requests.rs`): the chain of a launch-bound loop is every earlier request.
pub const MAX_CANDIDATE_INSTANCES: usize = 4096;

/// Role-mates' kept hypotheses a lone resume is tested against
/// (`handoff_inference`). Unit: threads' groups of resumes. Why: a pool's
/// members that keep a hypothesis keep the same one, so a few say what the
/// rest would; a pool of thousands of threads would otherwise test each lone
/// resume against every member, quadratic in the pool.
pub const MAX_ROLE_MATES: usize = 8;

/// Peer calls measured for a host call's excess. Unit: calls. Why: their
/// median and spread are stable long before, and a name called millions of
/// times would make each measure quadratic.
pub const MAX_HOST_PEERS: usize = 512;

/// Blocking calls followed through the device work they waited for (a
/// synchronize waiting on a copy behind a fence). Unit: calls.
pub const MAX_BLOCKING_DEPTH: u32 = 2;

// ---- Cross-request holds (requests.rs) ----

/// Weight of `none` when no request of a held chain has a late phase of its
/// own: the chain's timing is its normal backlog. Unit: score share.
pub const CROSS_REQUEST_CLEAN: f64 = 1.0;
/// Weight of `none`, as a share of the root's excess, beside a late root in a
/// held chain: the close alternative when the excess is near its floor. Unit:
/// share of the excess.
pub const CROSS_REQUEST_ALTERNATIVE: f64 = 0.1;

// ---- Closed mode (no request identity, no NVTX or task markers) ----

/// The longest gap between two calls of one thread, less the thread's stall
/// records in it, across which the host collector joins them in closed mode
/// (`host::joined_by_thread_and_time`). Unit: ns (50 µs). Why: inside a task
/// a thread goes from call to call with at most this much unexplained time;
/// a longer gap may be idling until a handoff. Measured on the H200 corpora's
/// combined instrumented views, whose task markers say which consecutive
/// calls share a task (`results/dev-corpus/h200-580`: 21,899 gaps inside a
/// task, 2,672 across a task boundary; `results/test-corpus/h200-580`: 12,218
/// and 1,523): 99.4 % and 99.5 % of the gaps inside a task less their stalls
/// (preemptions and page faults, as the join counts them) are at most 50 µs
/// (97.7 % and 98.3 % at most 30 µs: a real host's jitter), against 22 % and
/// 25 % of the gaps across a task boundary (a thread going straight on to its
/// next task, which the truth's `busy` edge joins too).
/// The simulator has no host jitter: 99.8 % of its gaps inside a task are at
/// most 30 µs (`--suite dev`, 22,924 gaps), and 23 % of its gaps across a
/// boundary at most 50 µs (16 % at most 30 µs).
pub const CLOSED_JOIN_GAP_NS: f64 = 50_000.0;

/// Confidence of a program-order edge the host collector's records join in
/// closed mode. Unit: probability. Why: below 0.8, as every inferred edge
/// (rule 1), above [`CLOSED_UNJOINED_CONFIDENCE`]: most gaps it joins lie
/// inside one task (see [`CLOSED_JOIN_GAP_NS`]).
pub const CLOSED_JOINED_CONFIDENCE: f64 = 0.75;

/// Confidence of a program-order edge with no task markers and no join by
/// the host collector's records. Unit: probability. Why: the call before on
/// the thread may belong to another task (rule 1, rule 9).
pub const CLOSED_UNJOINED_CONFIDENCE: f64 = 0.6;

/// Weight of the rules' own reading behind a host stall the host collector
/// joined to the path in closed mode (`diagnosis::joined_stall_root`). Unit:
/// times the stall's effect, shared among the rules' causes by their weights.
/// Why: the rules read the gates without the request's beginning, so their
/// verdict is the runner-up, not discarded: a wrong join still leaves it
/// ranked.
pub const CLOSED_RULES_BEHIND_STALL: f64 = 0.5;

/// How many calls that ended before a resume, nearest first, are read as
/// hypotheses of what handed it work (`handoff_inference`). Unit: calls.
/// Why: bounds the work per resume; the call that hands work on ends within
/// the last few calls before the resume.
pub const HANDOFF_HYPOTHESES: usize = 32;

/// How many resumes of one thread at one site a handoff needs before it is
/// inferred (`handoff_inference`). Unit: resumes. Why: one resume refutes
/// nothing (every call in its idle time is a hypothesis); a second one
/// refutes what does not recur, and the lag bounds refute the rest (the
/// recorded cases run two to twelve requests, so a stage thread resumes
/// twice in the smallest).
pub const HANDOFF_MIN_RESUMES: usize = 2;

/// Confidence of a handoff inferred by refutation in closed mode. Unit:
/// probability. Why: as an unjoined program-order edge
/// ([`CLOSED_UNJOINED_CONFIDENCE`]): timing that recurs, not a record of the
/// handoff.
pub const CLOSED_HANDOFF_CONFIDENCE: f64 = CLOSED_UNJOINED_CONFIDENCE;

/// How far the lags from a site's calls to the resumes they hand work on
/// may spread (`handoff_inference`). Unit: ns. Why: a handoff's lag is the
/// wake-up and the task's first steps, as steady as the gaps inside a task
/// ([`CLOSED_JOIN_GAP_NS`]); a call that merely ran before each resume ends
/// at lags spread over the idle times.
pub const HANDOFF_LAG_SPREAD_NS: f64 = CLOSED_JOIN_GAP_NS;

/// The longest median lag from a site's calls to the resumes it hands work
/// on (`handoff_inference`). Unit: ns (200 µs). Why: a handoff's lag is a
/// wake-up and the task's first steps. On the dev splits (H200 corpus and
/// simulator, closed combined views) the handoffs the truth confirms lag at
/// most 102 µs (H200, 99th percentile; simulator 39 µs), the refuted ones
/// 0.43 ms and 0.88 ms at the median: threads whose requests arrive on one
/// schedule resume in step without handing each other anything. A wake-up
/// slower than this (a futex on a loaded machine) leaves the resume without
/// an inferred handoff, and the walk stops there as before.
pub const HANDOFF_MAX_LAG_NS: f64 = 200_000.0;

// ---- Graph building: edge evidence and tolerances ----
//
// A confidence is the probability an edge (or a `missing` claim) states of
// itself. Unit: probability. The diagnosis does not weigh by it: it goes out
// with each claim, where the evaluator scores it (Brier, and a claim of 0.8
// or more counts as confident: evaluator/METRICS.md §1.2, §1.6). The
// evidence classes (baselines/README.md, "The rules", "Evidence classes")
// keep an `inferred` edge's always below 0.8; a reference to them below reads
// "evidence classes". Unless an entry says more, a value here was not
// measured: it is the value the pass was written with.

/// Rank of `explicit` evidence when the critical path picks among
/// predecessors that let a record proceed at the same moment
/// (`critical_path::strength`): above `observed` (2), `inferred` (1) and
/// `missing` (0). Unit: rank (an order, no magnitude). Why: what a record
/// states beats what is seen, which beats a guess (evidence classes).
pub const EXPLICIT_EVIDENCE_RANK: u8 = 3;

/// Confidence of a `missing` claim when records may have been lost (the
/// collectors counted losses, or the view's loss spec is not `none`;
/// `Graph::missing_conf`). Why: a record the semantics require is then most
/// likely lost, not absent. Not measured.
pub const MISSING_CONFIDENCE_LOSS_PLAUSIBLE: f64 = 0.9;

/// Confidence of a `missing` claim in a view where no loss is plausible. Why:
/// with no loss counted or injected, an absent required record is less
/// likely lost. Not measured.
pub const MISSING_CONFIDENCE_NO_LOSS: f64 = 0.6;

/// Confidence of an `inferred` `launch` edge from a surviving launch uprobe to
/// a device op whose API record was lost (`launch::launch_edges`). Why: eBPF
/// has no correlation id, the call is found by time alone; below 0.8 as every
/// inferred edge (evidence classes). Not measured.
pub const UPROBE_LAUNCH_CONFIDENCE: f64 = 0.75;

/// How far outside a launch uprobe's call a device op's `queued` time may lie
/// for the call to count as the one that launched it
/// (`launch::uprobe_for_lost_launch`). Unit: ns (2 µs), on both ends of the
/// call. Why: eBPF's uprobe timestamps and CUPTI's are taken by different
/// collectors. Not measured: the value the rule was written with (equal to
/// [`CLOCK_NS`], but that agreement is measured between CUPTI and
/// `%globaltimer`, not between eBPF and CUPTI).
pub const UPROBE_QUEUED_SLACK_NS: Ns = 2_000;

/// Calls (API records and uprobes, by start) scanned back from a lost
/// launch's `queued` time for the uprobe that launched it
/// (`launch::uprobe_for_lost_launch`). Unit: calls. Why: a walk bound; the
/// launching call is among the last calls before its op was queued, and the
/// bound keeps each lookup constant in a trace of millions of calls.
pub const LOST_LAUNCH_SCAN_CALLS: usize = 256;

/// Cap on the confidence of a visible edge into a record whose predecessor of
/// the same kind is claimed missing (`launch::distrust_edges_into_gaps`).
/// Why: the lost record is likely the real gate, the visible one likely not:
/// at most even odds. Not measured.
pub const DISTRUSTED_EDGE_CONFIDENCE: f64 = 0.5;

/// Confidence of an observed `stream_order` edge when records may have been
/// lost (`StreamPass::base_conf`; 1 when no loss is plausible). Why: a lost
/// item between two visible ones would make the visible predecessor the wrong
/// one. Not measured.
pub const STREAM_ORDER_CONFIDENCE_LOSS_PLAUSIBLE: f64 = 0.9;

/// Confidence of a `stream_order` edge into an item whose stream predecessor
/// is claimed missing: a launch between them left no record, or something
/// unseen held the item back (`stream_order_into`). Why: the visible
/// predecessor is then likely not the gate; below
/// [`DISTRUSTED_EDGE_CONFIDENCE`]. Not measured.
pub const STREAM_ORDER_BESIDE_MISSING_CONFIDENCE: f64 = 0.4;

/// Cap on the confidence of a `stream_order` edge into or out of a graph
/// launch of several nodes, which is `inferred` (`stream_order_into`). Why:
/// which nodes enter and exit the launch follows from its inferred topology
/// (graph topology is inferred); below 0.8 (evidence classes). Not measured.
pub const GRAPH_UNIT_STREAM_ORDER_CONFIDENCE: f64 = 0.7;

/// Confidence of the `inferred` `stream_order` edge from the item before a
/// graph launch, on another of its nodes' streams, to an entry node of the
/// launch (`graph_launch_entry_edges`). Why: the launch's stream is not in
/// its API record, so that item stands for it (baselines/README.md, "A graph launch
/// enters its stream as one unit", gives it as 0.7); below 0.8 (evidence classes). Not measured.
pub const GRAPH_LAUNCH_ENTRY_CONFIDENCE: f64 = 0.7;

/// How long before a stream item was submitted its predecessor may have
/// completed and still explain its wait (`stream_order::unexplained_gating`):
/// this, plus [`RELEASE_SLACK_WAIT_SHARE`] of the wait. Unit: ns (10 µs).
/// Why: a stream lets an item go soon after its gate completes, not at once;
/// a wait the predecessors left unexplained is a missing predecessor. Not
/// measured: the value the rule was written with.
pub const RELEASE_SLACK_NS: f64 = 10_000.0;

/// The share of an item's queued→submitted wait added to
/// [`RELEASE_SLACK_NS`]. Unit: fraction (2 %). Why: the longer the wait, the
/// looser its end's timing. Not measured.
pub const RELEASE_SLACK_WAIT_SHARE: f64 = 0.02;

/// Confidence of an `inferred` `event` edge into a stream wait without
/// `event_sync_id`, from the last record of its event handle enqueued before
/// the call (`event_sync::event_and_sync_edges`). Why: right unless a
/// record of that handle was lost (handles are reused); below 0.8 (evidence classes).
/// Not measured.
pub const EVENT_BY_HANDLE_CONFIDENCE: f64 = 0.6;

/// Confidence of an `observed` `sync` edge from an event record to an event
/// synchronize without `event_sync_id`, joined the same way, whose work was
/// still running when the call began. Why: the call was seen waiting while
/// it ran, but which record of the handle it waited for is the join's guess.
/// Not measured.
pub const EVENT_SYNC_BY_HANDLE_CONFIDENCE: f64 = 0.8;

/// Confidence of an `observed` `sync` edge from device work a stream or
/// context synchronize (or an implicit copy fence) waited for: the last unit
/// of the stream enqueued before the call, still running when it began. Why:
/// seen directly, not stated by a record (`observed`, evidence classes). Not measured.
pub const SYNC_WAITED_ON_CONFIDENCE: f64 = 0.9;

/// Confidence of an `observed` `sync` edge from a blocking (pageable) copy to
/// its thread's next host operation. Why: the host could not go on until the
/// copy finished, as its call's return shows. Not measured.
pub const BLOCKING_COPY_CONFIDENCE: f64 = 0.8;

/// How long before a pageable copy ended its call may have returned and still
/// count as blocking on it (`event_sync::event_and_sync_edges`). Unit: ns
/// (1 µs). Why: the call's return is a host timestamp, the copy's end a
/// device one; a call that returned earlier did not wait for the copy. Not measured: the value the rule was written
/// with.
pub const BLOCKING_COPY_RETURN_SLACK_NS: Ns = 1_000;

/// Confidence of an `observed` `fault` edge from a thread's scheduler or
/// page-fault record to the call it delayed (`host.rs`, `stall_edges`), once
/// the stall passes [`NOISE_NS`] (a page fault also when major). Why: seen directly, a record of the calling
/// thread between its previous call and this one (a scheduler switch is
/// `observed`, evidence classes). Not measured.
pub const STALL_EDGE_CONFIDENCE: f64 = 0.9;

/// Confidence of an `inferred` `fault` edge from device work of another
/// stream that held the SMs or the copy engine while an op waited to start
/// (`interference.rs`). Why: contention is read off timing alone; below 0.8
/// (evidence classes). Not measured.
pub const INTERFERENCE_CONFIDENCE: f64 = 0.7;

/// How long before a waiting op started the other stream's work that held
/// its resource may have ended and still be what handed the resource over
/// (`interference.rs`): this, plus the op's submitted→start wait divided by
/// [`HANDOVER_SLACK_WAIT_DIVISOR`]. Unit: ns (10 µs). Why: the engine or the
/// SMs are handed over at once; a culprit that ended earlier was not the last
/// one holding them, and a record lost from the view is claimed beside its
/// edge. Not measured: the value the rule was written with.
pub const HANDOVER_SLACK_NS: Ns = 10_000;

/// Divisor of the submitted→start wait whose quotient is added to
/// [`HANDOVER_SLACK_NS`] (integer division). Unit: 1 / fraction (50: 2 % of
/// the wait). Why: the longer the wait, the looser its end's timing. Not
/// measured.
pub const HANDOVER_SLACK_WAIT_DIVISOR: Ns = 50;

/// Clock tolerance between one graph node's end and another node's start
/// when inferring dependencies inside a graph launch
/// (`graph_launch::infer_graph_edges`): a node that ended no later than this
/// after another started still ended before it. Unit: ns (1 µs). Why: an
/// overlap this small is the timestamps' jitter, not two nodes running
/// together. Not measured: the value the rule was written with.
pub const GRAPH_NODE_CLOCK_SLACK_NS: f64 = 1_000.0;

/// Confidence of an `inferred` `graph` edge inside a graph launch, before the
/// replays' agreement ([`GRAPH_EDGE_AGREEMENT_CONFIDENCE`]) is added. Why:
/// CUPTI does not report graph topology; a dependency is read off timing
/// consistent over the replays (graph topology is inferred). Not measured.
pub const GRAPH_EDGE_BASE_CONFIDENCE: f64 = 0.5;

/// Confidence added to [`GRAPH_EDGE_BASE_CONFIDENCE`] times the share of the
/// graph's replays in which the predecessor ended before the node started.
/// Unit: probability per share of replays. Why: however many replays agree,
/// timing never makes it certain: at most 0.75, below 0.8 (evidence classes). Not
/// measured.
pub const GRAPH_EDGE_AGREEMENT_CONFIDENCE: f64 = 0.25;

/// Confidence of the `missing` claim for a launch that left no activity
/// record (an orphan), when the stream it targeted is found by its uprobe's
/// raw stream handle and records may have been lost
/// (`stream_order::orphan_launches`). Why: the handle names the stream, and
/// the loss explains the absent record. Not measured.
pub const ORPHAN_BY_HANDLE_CONFIDENCE_LOSS_PLAUSIBLE: f64 = 0.9;

/// The same claim, stream found by handle, where no loss is plausible. Not
/// measured.
pub const ORPHAN_BY_HANDLE_CONFIDENCE: f64 = 0.7;

/// The same claim when the orphan's stream is only guessed as the one its
/// thread launched on nearest in time. Why: a thread may launch on several
/// streams: even odds. Not measured.
pub const ORPHAN_BY_THREAD_CONFIDENCE: f64 = 0.5;
