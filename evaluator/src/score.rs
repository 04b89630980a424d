//! Per-case scoring: one bundle × one view × one profiler's explanation.
//! Every definition here is written out in `evaluator/METRICS.md`.

use crate::index::{fast_map, FastMap, FirstAttribution, RidIndex, MAX_NODES};
use ground_truth::scenario::AxisValue;
use ground_truth::{
    Bundle, CauseLabel, Collectors, Edge, EdgeType, Evidence, Explanation, GroundTruth, Mode,
    NodeId, Phases, Question, Rid, TraceView,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};

/// Confidence at or above which a claimed edge counts as confident (false-confidence rule).
pub const CONFIDENT: f64 = 0.8;

/// The score of one case: one line of `scores.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CaseScore {
    /// `Bundle::id()`: `scenario.rN`.
    pub bundle: String,
    pub scenario: String,
    pub family: String,
    pub variant: String,
    pub repetition: u32,
    /// `sim` or `cuda`.
    pub backend: String,
    /// The CUPTI release a GPU bundle was recorded with (`12.4`); empty for
    /// the simulator and in scores written before it was kept.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cupti: String,
    /// `explanation.meta.profiler`.
    pub profiler: String,
    #[serde(default)]
    pub profiler_version: String,
    /// The view's collectors.
    pub collectors: Collectors,
    /// The view's mode.
    pub mode: Mode,
    /// `LossSpec::label()` of the view: `none`, `5pct`, `targeted`.
    pub loss: String,
    /// Loss rate in [0, 1]; `null` for targeted loss.
    pub loss_rate: Option<f64>,
    /// `ViewSpec::label()`: `combined-instrumented-none`.
    pub view: String,
    /// Truth nodes with at least one record in the view / all truth nodes.
    pub nodes_present: u64,
    pub nodes_total: u64,
    pub edges: EdgeScore,
    pub request: RequestScore,
    /// One entry per ground-truth symptom the view asks about, in ground-truth order.
    pub symptoms: Vec<SymptomScore>,
    /// `explanation.meta.wall_ms`.
    pub analysis_ms: f64,
    /// The family instance of a generated scenario (`manifest.scenario.space`): its
    /// variants share it and only they form a pair. Absent for catalog scenarios.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<u64>,
    /// The generated scenario's sampled axes, by axis name (the per-axis breakdown,
    /// evaluator/METRICS.md). Empty for catalog scenarios.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub axes: BTreeMap<String, AxisValue>,
    /// The analyzer failed on this view (`explanation.meta.failure`, evaluator/METRICS.md
    /// "Crashes"): its message. The case is still scored (a crash answers nothing), and
    /// counted as a crash of its own beside the scores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crashed: Option<String>,
    /// What the harness measured of an external profiler's run on this view
    /// (baselines/PROTOCOL.md, "Cost"); absent for built-in profilers. Its
    /// `wall_ms` is `analysis_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invocation: Option<InvocationCost>,
    /// Scored on a hidden split: one whose seed the harness drew and no command line
    /// gave (baselines/PROTOCOL.md, "Hidden splits"). Absent: public material (the
    /// catalog, the dev split, a corpus, a split whose seed was given), which a
    /// profiler can memorize; so are scores written before it was kept.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hidden: bool,
}

/// One external profiler invocation as the harness measured it (`wait4(2)` of the
/// process it started: the program and every process that one waited for).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InvocationCost {
    /// From its start to its end, or to its kill on timeout, in milliseconds.
    pub wall_ms: f64,
    /// User plus system CPU time, in milliseconds.
    pub cpu_ms: f64,
    /// Peak resident memory of any of its processes, in KiB.
    pub max_rss_kib: u64,
    /// The profiler's own `meta.wall_ms`: its claim, shown beside the measurement
    /// only; absent when it wrote no valid explanation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reported_wall_ms: Option<f64>,
}

impl CaseScore {
    /// Key identifying the case in a result set: bundle × profiler × view.
    pub fn key(&self) -> (String, String, String) {
        (
            self.bundle.clone(),
            self.profiler.clone(),
            self.view.clone(),
        )
    }
    pub fn is_loss_free(&self) -> bool {
        self.loss == "none"
    }
    /// Every scored symptom correct (vacuously true with none).
    pub fn all_correct(&self) -> bool {
        self.symptoms.iter().all(|s| s.correct)
    }
}

/// Claim / true-positive / truth counts, overall or for one edge type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EdgeCounts {
    /// Deduplicated non-`missing` claims.
    pub claims: u64,
    /// Claims that are truth edges.
    pub true_positives: u64,
    /// Truth edges between nodes present in the view.
    pub truth: u64,
}

impl EdgeCounts {
    /// TP / claims; `None` without claims.
    pub fn precision(&self) -> Option<f64> {
        ratio(self.true_positives, self.claims)
    }
    /// TP / truth; `None` without truth edges.
    pub fn recall(&self) -> Option<f64> {
        ratio(self.true_positives, self.truth)
    }
    /// 2·TP / (claims + truth); `None` when both are 0. Equals the harmonic mean
    /// of precision and recall when both are defined, and is 0 when there are
    /// truth edges but no claims.
    pub fn f1(&self) -> Option<f64> {
        ratio(2 * self.true_positives, self.claims + self.truth)
    }
    pub fn add(&mut self, o: &EdgeCounts) {
        self.claims += o.claims;
        self.true_positives += o.true_positives;
        self.truth += o.truth;
    }
}

pub(crate) fn ratio(num: u64, den: u64) -> Option<f64> {
    (den > 0).then(|| num as f64 / den as f64)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TypeScore {
    #[serde(rename = "type")]
    pub kind: EdgeType,
    #[serde(flatten)]
    pub counts: EdgeCounts,
    pub precision: Option<f64>,
    pub recall: Option<f64>,
    pub f1: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EdgeScore {
    #[serde(flatten)]
    pub counts: EdgeCounts,
    pub precision: Option<f64>,
    pub recall: Option<f64>,
    pub f1: Option<f64>,
    /// Deduplicated claims with evidence `explicit`/`observed` that are not truth edges.
    pub false_causal_edges: u64,
    /// Mean of (confidence − 1[claim is a truth edge])² over deduplicated claims.
    pub brier: Option<f64>,
    /// The sum behind `brier` (for pooled aggregation).
    pub brier_sum: f64,
    /// Claimed edges as written, all evidence classes.
    pub raw_claims: u64,
    /// Non-`missing` claims dropped as duplicates of another (same src node, dst node, type).
    pub duplicate_claims: u64,
    /// Deduplicated claims naming a rid that is not a record of the view or is owned by no node.
    pub unmapped_claims: u64,
    /// Claims with evidence `missing` (not edge assertions).
    pub missing_claims: u64,
    /// Edge types with at least one claim or truth edge, in `EdgeType::ALL` order.
    pub by_type: Vec<TypeScore>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RequestScore {
    /// Device activities of the view (kernel, memcpy, memset) whose node belongs to a request.
    pub eligible: u64,
    pub correct: u64,
    pub wrong: u64,
    pub abstained: u64,
    pub correct_rate: Option<f64>,
    pub wrong_rate: Option<f64>,
    pub abstained_rate: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SymptomScore {
    /// Symptom / query id.
    pub id: String,
    pub question: Question,
    pub true_cause: CauseLabel,
    /// Top-ranked cause of the diagnosis, if any.
    pub claimed_cause: Option<CauseLabel>,
    /// Whether the explanation had a diagnosis for this query.
    pub diagnosed: bool,
    /// Expected answer (request token, call site, operator); `null` for cause questions.
    pub expected_answer: Option<String>,
    /// The profiler's answer to a request / call-site / operator question.
    pub claimed_answer: Option<String>,
    /// The verdict for the symptom's question.
    pub correct: bool,
    pub top1: bool,
    pub top3: bool,
    /// LCS(claimed path, true path) / |union|, in [0, 1].
    pub path_fidelity: f64,
    /// Share of lateness put on the wrong phase, in [0, 1].
    pub phase_error: f64,
    /// The phase the claim blames beyond its true share the most, when at least
    /// [`OVERBLAME_SHARE`] of the lateness is put on wrong phases ([`overblamed_phase`]).
    /// Absent in scores written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overblamed_phase: Option<String>,
    /// The true path has an unresolved boundary in this view.
    pub unresolved: bool,
    /// That boundary (truth node ids), when `unresolved`.
    pub boundary: Option<Edge>,
    /// Flagged incomplete at the right boundary (only when `unresolved`).
    pub unresolved_hit: bool,
    /// Claimed complete, or a confident edge across the boundary (only when `unresolved`).
    pub false_confident: bool,
}

/// Position of an edge type in `EdgeType::ALL`.
pub(crate) fn type_index(t: EdgeType) -> usize {
    match t {
        EdgeType::Launch => 0,
        EdgeType::StreamOrder => 1,
        EdgeType::Event => 2,
        EdgeType::Graph => 3,
        EdgeType::Handoff => 4,
        EdgeType::Request => 5,
        EdgeType::Sync => 6,
        EdgeType::Fault => 7,
        EdgeType::HostOrder => 8,
        EdgeType::Busy => 9,
        EdgeType::Backpressure => 10,
    }
}
const NTYPES: usize = EdgeType::ALL.len();

/// Confidence as scored: clamped to [0, 1], NaN as 0.
fn clamp_conf(c: f64) -> f64 {
    if c.is_nan() {
        0.0
    } else {
        c.clamp(0.0, 1.0)
    }
}

/// A claim reduced to what the edge metrics need.
#[derive(Clone, Copy)]
struct Claim<K> {
    key: K,
    conf: f64,
    asserted: bool,
    kind: u8,
}

/// Sorts claims by key and merges duplicates: max confidence, asserted if any was.
/// Returns the number of duplicates removed.
fn dedup_claims<K: Ord + Copy>(claims: &mut Vec<Claim<K>>) -> u64 {
    claims.sort_unstable_by_key(|c| c.key);
    let before = claims.len();
    claims.dedup_by(|next, kept| {
        if next.key == kept.key {
            kept.conf = kept.conf.max(next.conf);
            kept.asserted |= next.asserted;
            true
        } else {
            false
        }
    });
    (before - claims.len()) as u64
}

/// Edge metric accumulators.
#[derive(Default)]
struct EdgeAcc {
    claims: [u64; NTYPES],
    tp: [u64; NTYPES],
    truth: [u64; NTYPES],
    false_causal: u64,
    brier_sum: f64,
    duplicates: u64,
}

impl EdgeAcc {
    fn claim(&mut self, kind: u8, conf: f64, hit: bool, asserted: bool) {
        let k = kind as usize;
        self.claims[k] += 1;
        let y = if hit { 1.0 } else { 0.0 };
        self.brier_sum += (conf - y) * (conf - y);
        if hit {
            self.tp[k] += 1;
        } else if asserted {
            self.false_causal += 1;
        }
    }
}

/// Matches sorted, deduplicated claims against sorted, deduplicated truth keys.
fn match_sorted<K: Ord + Copy>(claims: &[Claim<K>], truth: &[K], acc: &mut EdgeAcc) {
    let mut t = 0usize;
    for c in claims {
        while t < truth.len() && truth[t] < c.key {
            t += 1;
        }
        let hit = t < truth.len() && truth[t] == c.key;
        acc.claim(c.kind, c.conf, hit, c.asserted);
    }
}

/// Scores edges with keys packed by `pack(src, dst, type index)`; `kind_of`
/// recovers the type index from a key.
fn score_edges_with<K: Ord + Copy>(
    gt: &GroundTruth,
    present: &[bool],
    mapped: Vec<(NodeId, NodeId, u8, f64, bool)>,
    acc: &mut EdgeAcc,
    pack: impl Fn(NodeId, NodeId, u8) -> K,
    kind_of: impl Fn(K) -> u8,
) {
    let is_present = |n: NodeId| present.get(n as usize).copied().unwrap_or(false);
    let mut truth: Vec<K> = gt
        .edges
        .iter()
        .filter(|e| is_present(e.src) && is_present(e.dst))
        .map(|e| pack(e.src, e.dst, type_index(e.kind) as u8))
        .collect();
    truth.sort_unstable();
    truth.dedup();
    for &k in &truth {
        acc.truth[kind_of(k) as usize] += 1;
    }
    let mut claims: Vec<Claim<K>> = mapped
        .into_iter()
        .map(|(s, d, k, conf, asserted)| Claim {
            key: pack(s, d, k),
            conf,
            asserted,
            kind: k,
        })
        .collect();
    acc.duplicates += dedup_claims(&mut claims);
    match_sorted(&claims, &truth, acc);
}

/// Scores one case. Never panics on any combination of inputs: rids, node ids and
/// numbers that make no sense are scored as wrong, not trusted.
///
/// In steps: which truth nodes the view shows, each asked symptom's unresolved boundary,
/// the claimed edges sorted (missing, mapped to nodes, unmapped) and matched against
/// the truth's, the request attribution, then each symptom's answers.
pub fn score_case(bundle: &Bundle, view: &TraceView, explanation: &Explanation) -> CaseScore {
    let gt = &bundle.ground_truth;
    let visible = Visible::of(gt, view);
    let queried: HashSet<&str> = view.queries.iter().map(|q| q.id.as_str()).collect();
    let symptoms: Vec<&ground_truth::Symptom> = gt
        .symptoms
        .iter()
        .filter(|s| queried.contains(s.id.as_str()))
        .collect();
    let boundaries = Boundaries::of(gt, &symptoms, &visible);
    let mut acc = EdgeAcc::default();
    let claims = SortedClaims::of(explanation, &visible.index, &boundaries, &mut acc);
    let edges = edge_score(
        gt,
        &visible,
        claims.mapped,
        acc,
        &claims.counts,
        explanation,
    );
    let attributions = Attributions::of(explanation);
    let request = request_score(gt, view, &visible.index, &attributions);
    let out_symptoms = symptoms
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let boundary = SymptomBoundary {
                edge: boundaries.edges[i],
                missing_hit: claims.missing_hit[i],
                confident_across: claims.confident_across[i],
            };
            symptom_score(gt, s, explanation, &visible, &attributions, boundary)
        })
        .collect();

    let m = &bundle.manifest;
    let spec = &view.spec;
    let rate = spec.loss.rate();
    CaseScore {
        bundle: bundle.id(),
        scenario: m.scenario.name.clone(),
        family: m.scenario.family.clone(),
        variant: m.scenario.variant.clone(),
        repetition: m.repetition,
        backend: m.backend.clone(),
        cupti: m.cupti_release(),
        profiler: explanation.meta.profiler.clone(),
        profiler_version: explanation.meta.version.clone(),
        collectors: spec.collectors,
        mode: spec.mode,
        loss: spec.loss.label(),
        loss_rate: rate.is_finite().then_some(rate),
        view: spec.label(),
        nodes_present: visible.nodes_present,
        nodes_total: gt.nodes.len() as u64,
        edges,
        request,
        symptoms: out_symptoms,
        analysis_ms: if explanation.meta.wall_ms.is_finite() {
            explanation.meta.wall_ms
        } else {
            0.0
        },
        instance: m.scenario.space.as_ref().map(|p| p.instance),
        axes: m
            .scenario
            .space
            .as_ref()
            .map(|p| p.axes.clone())
            .unwrap_or_default(),
        // Only the harness knows where a seed came from: `run` marks its cases.
        hidden: false,
        crashed: explanation.meta.failure.clone(),
        invocation: None,
    }
}

/// Which truth nodes the view shows: the rid index (marked with the view's records) and
/// each node's presence.
struct Visible {
    index: RidIndex,
    present: Vec<bool>,
    nodes_present: u64,
}

impl Visible {
    fn of(gt: &GroundTruth, view: &TraceView) -> Visible {
        let n_nodes = gt.nodes.len().min(MAX_NODES);
        let mut index = RidIndex::new(gt);
        let mut present = vec![false; n_nodes];
        for r in &view.records {
            if let Some(n) = index.mark_in_view(r.rid()) {
                if let Some(p) = present.get_mut(n as usize) {
                    *p = true;
                }
            }
        }
        let nodes_present = present.iter().filter(|&&p| p).count() as u64;
        Visible {
            index,
            present,
            nodes_present,
        }
    }

    fn is_present(&self, n: NodeId) -> bool {
        self.present.get(n as usize).copied().unwrap_or(false)
    }
}

/// The asked symptoms' unresolved boundaries in this view.
struct Boundaries {
    /// Per asked symptom, its boundary edge, when its true path has one.
    edges: Vec<Option<Edge>>,
    /// Truth edges into a boundary's dst: a confident claim that is one of them is
    /// correct, not false confidence.
    into_boundary: HashSet<(NodeId, NodeId, EdgeType)>,
    /// Boundary dst node → indices of the symptoms with that boundary.
    by_dst: FastMap<NodeId, Vec<usize>>,
}

impl Boundaries {
    fn of(gt: &GroundTruth, symptoms: &[&ground_truth::Symptom], visible: &Visible) -> Self {
        // Same walk as GroundTruth::first_unresolved: the first window (from the late end)
        // whose source is not visible; the edge kind is the first truth edge src→dst.
        let candidates: Vec<Option<(NodeId, NodeId)>> = symptoms
            .iter()
            .map(|s| {
                s.critical_path
                    .windows(2)
                    .rev()
                    .find(|w| !visible.is_present(w[0]))
                    .map(|w| (w[0], w[1]))
            })
            .collect();
        let mut pair_kind: HashMap<(NodeId, NodeId), Option<EdgeType>> =
            candidates.iter().flatten().map(|&p| (p, None)).collect();
        let mut into_boundary: HashSet<(NodeId, NodeId, EdgeType)> = HashSet::new();
        if !pair_kind.is_empty() {
            let dsts: HashSet<NodeId> = pair_kind.keys().map(|&(_, d)| d).collect();
            for e in &gt.edges {
                if let Some(k @ None) = pair_kind.get_mut(&(e.src, e.dst)) {
                    *k = Some(e.kind);
                }
                if dsts.contains(&e.dst) {
                    into_boundary.insert((e.src, e.dst, e.kind));
                }
            }
        }
        let edges: Vec<Option<Edge>> = candidates
            .iter()
            .map(|c| {
                c.and_then(|(src, dst)| pair_kind[&(src, dst)].map(|kind| Edge { src, dst, kind }))
            })
            .collect();
        let mut by_dst: FastMap<NodeId, Vec<usize>> = fast_map(edges.len());
        for (i, b) in edges.iter().enumerate() {
            if let Some(e) = b {
                by_dst.entry(e.dst).or_default().push(i);
            }
        }
        Boundaries {
            edges,
            into_boundary,
            by_dst,
        }
    }
}

/// Claim counts the edge score reports beside the matching.
struct ClaimCounts {
    unmapped: u64,
    missing: u64,
}

/// The explanation's claimed edges sorted: `missing` claims (which may flag a
/// boundary), claims between visible nodes (matched next), and the rest (scored as
/// wrong, into `acc`).
struct SortedClaims {
    mapped: Vec<(NodeId, NodeId, u8, f64, bool)>,
    counts: ClaimCounts,
    /// Per asked symptom: a `missing` claim names its boundary's dst.
    missing_hit: Vec<bool>,
    /// Per asked symptom: a confident claim crosses its boundary from elsewhere.
    confident_across: Vec<bool>,
}

impl SortedClaims {
    fn of(
        explanation: &Explanation,
        index: &RidIndex,
        boundaries: &Boundaries,
        acc: &mut EdgeAcc,
    ) -> SortedClaims {
        let by_dst = &boundaries.by_dst;
        let mut sorted = SortedClaims {
            mapped: Vec::with_capacity(explanation.edges.len()),
            counts: ClaimCounts {
                unmapped: 0,
                missing: 0,
            },
            missing_hit: vec![false; boundaries.edges.len()],
            confident_across: vec![false; boundaries.edges.len()],
        };
        let mut unmapped: Vec<Claim<(Rid, Rid, u8)>> = Vec::new();
        for c in &explanation.edges {
            let conf = clamp_conf(c.confidence);
            let kind = type_index(c.kind) as u8;
            if c.evidence == Evidence::Missing {
                sorted.counts.missing += 1;
                if !by_dst.is_empty() {
                    if let Some(list) = index.owner(c.dst).and_then(|d| by_dst.get(&d)) {
                        for &i in list {
                            sorted.missing_hit[i] = true;
                        }
                    }
                }
                continue;
            }
            if conf >= CONFIDENT && !by_dst.is_empty() {
                if let Some((d, list)) = index
                    .owner(c.dst)
                    .and_then(|d| by_dst.get(&d).map(|l| (d, l)))
                {
                    let src = index.owner(c.src);
                    let true_edge =
                        src.is_some_and(|s| boundaries.into_boundary.contains(&(s, d, c.kind)));
                    for &i in list {
                        if let Some(b) = boundaries.edges[i] {
                            if src != Some(b.src) && !true_edge {
                                sorted.confident_across[i] = true;
                            }
                        }
                    }
                }
            }
            let asserted = c.evidence.is_asserted();
            match (index.visible_owner(c.src), index.visible_owner(c.dst)) {
                (Some(s), Some(d)) => sorted.mapped.push((s, d, kind, conf, asserted)),
                _ => unmapped.push(Claim {
                    key: (c.src, c.dst, kind),
                    conf,
                    asserted,
                    kind,
                }),
            }
        }
        acc.duplicates += dedup_claims(&mut unmapped);
        sorted.counts.unmapped = unmapped.len() as u64;
        for c in &unmapped {
            acc.claim(c.kind, c.conf, false, c.asserted);
        }
        sorted
    }
}

/// The mapped claims matched against the truth's visible edges, and the edge score.
fn edge_score(
    gt: &GroundTruth,
    visible: &Visible,
    mapped: Vec<(NodeId, NodeId, u8, f64, bool)>,
    mut acc: EdgeAcc,
    counts: &ClaimCounts,
    explanation: &Explanation,
) -> EdgeScore {
    let n_nodes = gt.nodes.len().min(MAX_NODES);
    let present = &visible.present;
    // Pack (dst, src·9 + type) into a u64 when it fits, else u128.
    if (n_nodes as u64) * (NTYPES as u64) < (1u64 << 32) {
        score_edges_with(
            gt,
            present,
            mapped,
            &mut acc,
            |s, d, k| (u64::from(d) << 32) | (u64::from(s) * NTYPES as u64 + u64::from(k)),
            |key| ((key & 0xffff_ffff) % NTYPES as u64) as u8,
        );
    } else {
        score_edges_with(
            gt,
            present,
            mapped,
            &mut acc,
            |s, d, k| (u128::from(d) << 64) | (u128::from(s) << 8) | u128::from(k),
            |key| (key & 0xff) as u8,
        );
    }
    let mut total = EdgeCounts::default();
    let mut by_type = Vec::new();
    for (i, &t) in EdgeType::ALL.iter().enumerate() {
        let c = EdgeCounts {
            claims: acc.claims[i],
            true_positives: acc.tp[i],
            truth: acc.truth[i],
        };
        total.add(&c);
        if c.claims > 0 || c.truth > 0 {
            by_type.push(TypeScore {
                kind: t,
                counts: c,
                precision: c.precision(),
                recall: c.recall(),
                f1: c.f1(),
            });
        }
    }
    EdgeScore {
        counts: total,
        precision: total.precision(),
        recall: total.recall(),
        f1: total.f1(),
        false_causal_edges: acc.false_causal,
        brier: (total.claims > 0).then(|| acc.brier_sum / total.claims as f64),
        brier_sum: acc.brier_sum,
        raw_claims: explanation.edges.len() as u64,
        duplicate_claims: acc.duplicates,
        unmapped_claims: counts.unmapped,
        missing_claims: counts.missing,
        by_type,
    }
}

/// The explanation's request attribution (the first attribution of a rid wins).
struct Attributions<'e> {
    explanation: &'e Explanation,
    first: FirstAttribution,
}

impl<'e> Attributions<'e> {
    fn of(explanation: &'e Explanation) -> Self {
        Attributions {
            explanation,
            first: FirstAttribution::new(&explanation.attribution),
        }
    }

    /// The request the explanation attributes `rid` to (`unknown` included).
    fn attributed(&self, rid: Rid) -> Option<&'e str> {
        let explanation = self.explanation;
        self.first
            .get(rid)
            .map(|i| explanation.attribution[i].request.as_str())
    }

    /// The request claimed for `rid`: an attribution other than `unknown`.
    fn claimed_token(&self, rid: Rid) -> Option<&'e str> {
        self.attributed(rid)
            .filter(|t| *t != ground_truth::Attribution::UNKNOWN)
    }
}

/// Request attribution of the view's device ops whose truth node has a request.
fn request_score(
    gt: &GroundTruth,
    view: &TraceView,
    index: &RidIndex,
    attributions: &Attributions,
) -> RequestScore {
    let (mut eligible, mut correct, mut wrong) = (0u64, 0u64, 0u64);
    for r in view.records.iter().filter(|r| r.is_device_op()) {
        let Some(token) = index
            .owner(r.rid())
            .and_then(|n| gt.nodes.get(n as usize))
            .and_then(|n| n.request.as_deref())
        else {
            continue;
        };
        eligible += 1;
        match attributions.claimed_token(r.rid()) {
            Some(t) if t == token => correct += 1,
            Some(_) => wrong += 1,
            None => {}
        }
    }
    let abstained = eligible - correct - wrong;
    RequestScore {
        eligible,
        correct,
        wrong,
        abstained,
        correct_rate: ratio(correct, eligible),
        wrong_rate: ratio(wrong, eligible),
        abstained_rate: ratio(abstained, eligible),
    }
}

/// One symptom's unresolved boundary and what the claims said of it.
#[derive(Clone, Copy)]
struct SymptomBoundary {
    edge: Option<Edge>,
    missing_hit: bool,
    confident_across: bool,
}

/// One asked symptom: the answer to its question, the cause ranking, the critical
/// path, the phases and the unresolved boundary.
fn symptom_score(
    gt: &GroundTruth,
    s: &ground_truth::Symptom,
    explanation: &Explanation,
    visible: &Visible,
    attributions: &Attributions,
    boundary: SymptomBoundary,
) -> SymptomScore {
    let index = &visible.index;
    let diag = explanation.diagnoses.iter().find(|d| d.query == s.id);
    let labels: Vec<CauseLabel> = diag
        .map(|d| d.causes.iter().map(|c| c.label).collect())
        .unwrap_or_default();
    let top1 = labels.first() == Some(&s.cause);
    let top3 = labels.iter().take(3).any(|&l| l == s.cause);
    let (expected_answer, claimed_answer, correct) = match s.question {
        Question::Cause => (None, None, top1),
        Question::Request => {
            let expected = s.answer.clone().or_else(|| {
                gt.nodes
                    .get(s.node as usize)
                    .and_then(|n| n.request.as_deref().map(str::to_string))
            });
            let claimed = attributions.attributed(s.rid).map(|t| t.to_string());
            let ok = matches!((&expected, attributions.claimed_token(s.rid)), (Some(e), Some(c)) if e == c);
            (expected, claimed, ok)
        }
        Question::CallSite | Question::Operator => {
            let claimed = diag.and_then(|d| d.answer.clone());
            let ok = matches!((&s.answer, &claimed), (Some(e), Some(c)) if e == c);
            (s.answer.clone(), claimed, ok)
        }
    };
    let truth_path: Vec<NodeId> = s
        .critical_path
        .iter()
        .copied()
        .filter(|&n| visible.is_present(n))
        .collect();
    let path_fidelity = match diag {
        Some(d) => {
            let claimed: Vec<NodeId> = d
                .critical_path
                .iter()
                .filter_map(|&r| index.visible_owner(r))
                .collect();
            path_fidelity(&claimed, &truth_path)
        }
        None => path_fidelity(&[], &truth_path),
    };
    let claimed_phases = diag.map(|d| d.phases).unwrap_or_default();
    let phase_error = phase_error(&claimed_phases, &s.phases);
    let overblamed_phase = overblamed_phase(&claimed_phases, &s.phases).map(str::to_string);
    let (unresolved_hit, false_confident) = match boundary.edge {
        Some(b) => {
            let complete = diag.is_some_and(|d| d.complete);
            let flagged = diag
                .and_then(|d| d.first_unresolved)
                .and_then(|r| index.owner(r))
                == Some(b.dst);
            let hit = diag.is_some() && !complete && (flagged || boundary.missing_hit);
            (hit, complete || boundary.confident_across)
        }
        None => (false, false),
    };
    SymptomScore {
        id: s.id.clone(),
        question: s.question,
        true_cause: s.cause,
        claimed_cause: labels.first().copied(),
        diagnosed: diag.is_some(),
        expected_answer,
        claimed_answer,
        correct,
        top1,
        top3,
        path_fidelity,
        phase_error,
        overblamed_phase,
        unresolved: boundary.edge.is_some(),
        boundary: boundary.edge,
        unresolved_hit,
        false_confident,
    }
}

/// Critical-path fidelity: LCS(claimed, truth) / |set(claimed) ∪ set(truth)|, 1 when
/// both are empty. Consecutive repeats in `claimed` (two records of one node) are
/// collapsed; `truth` keeps the first occurrence of each node. Because the truth
/// elements are then distinct, the LCS is the longest strictly increasing run of
/// truth positions among the claimed nodes (O(n log n)).
pub fn path_fidelity(claimed: &[NodeId], truth: &[NodeId]) -> f64 {
    let mut pos: HashMap<NodeId, usize> = HashMap::with_capacity(truth.len());
    for &n in truth {
        let next = pos.len();
        pos.entry(n).or_insert(next);
    }
    let mut claimed_set: HashSet<NodeId> = HashSet::new();
    let mut tails: Vec<usize> = Vec::new();
    let mut prev: Option<NodeId> = None;
    for &n in claimed {
        if prev == Some(n) {
            continue;
        }
        prev = Some(n);
        claimed_set.insert(n);
        if let Some(&p) = pos.get(&n) {
            let i = tails.partition_point(|&t| t < p);
            if i == tails.len() {
                tails.push(p);
            } else {
                tails[i] = p;
            }
        }
    }
    let union = pos.len() + claimed_set.iter().filter(|n| !pos.contains_key(n)).count();
    if union == 0 {
        1.0
    } else {
        tails.len() as f64 / union as f64
    }
}

/// Names of the four phases, in `Phases::as_array` order.
pub const PHASE_NAMES: [&str; 4] = [
    "host_enqueue",
    "queued_to_submitted",
    "submitted_to_start",
    "execution",
];

/// The least share of lateness on wrong phases for which [`overblamed_phase`] names one.
pub const OVERBLAME_SHARE: f64 = 0.25;

/// Positive, finite parts of the phases, as shares of their total; `None` for a zero total.
fn phase_shares(p: &Phases) -> Option<[f64; 4]> {
    let parts = p
        .as_array()
        .map(|v| if v.is_finite() && v > 0.0 { v } else { 0.0 });
    let total: f64 = parts.iter().sum();
    (total > 0.0 && total.is_finite()).then(|| parts.map(|v| v / total))
}

/// The phase whose claimed share exceeds its true share the most, when both totals
/// are positive and the phase-blame error is at least [`OVERBLAME_SHARE`]
/// (evaluator/METRICS.md §1.5).
pub fn overblamed_phase(claimed: &Phases, truth: &Phases) -> Option<&'static str> {
    let (p, q) = (phase_shares(claimed)?, phase_shares(truth)?);
    if phase_error(claimed, truth) < OVERBLAME_SHARE {
        return None;
    }
    (0..4)
        .max_by(|&a, &b| (p[a] - q[a]).total_cmp(&(p[b] - q[b])))
        .map(|i| PHASE_NAMES[i])
}

/// Phase-blame error: half the L1 distance between the claimed and true phase
/// shares (positive parts, normalized). True total 0: 0 if the claimed total is 0,
/// else 1. Claimed total 0 with a nonzero true total: 1. Non-finite values count as 0.
pub fn phase_error(claimed: &Phases, truth: &Phases) -> f64 {
    let pos = |p: &Phases| {
        p.as_array()
            .map(|v| if v.is_finite() && v > 0.0 { v } else { 0.0 })
    };
    let (p, q) = (pos(claimed), pos(truth));
    let (sp, sq): (f64, f64) = (p.iter().sum(), q.iter().sum());
    if !(sq > 0.0 && sq.is_finite()) {
        return if sp > 0.0 { 1.0 } else { 0.0 };
    }
    if !(sp > 0.0 && sp.is_finite()) {
        return 1.0;
    }
    let e: f64 = p
        .iter()
        .zip(q.iter())
        .map(|(a, b)| (a / sp - b / sq).abs())
        .sum::<f64>()
        * 0.5;
    e.clamp(0.0, 1.0)
}
