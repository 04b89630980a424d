//! CUPTI as the one truth builder's observer (`record::truth::Observer`):
//! each call's name and span from its API record, each device op's times
//! from its activity record (the kernels' own `%globaltimer` log where the
//! record is missing), and every bound record owned by the node it observes.

use super::*;
use crate::record::log::Op as StepOp;
use crate::record::truth::{Measured, Observer};

impl<'a> CuptiObserver<'a> {
    fn own(&self, op: &StepOp) -> &'a Op {
        self.ops[&op.id]
    }

    /// What the recorder made of a bound record `rec` of `o` (lost when the
    /// plan drops the record of `key`).
    pub(super) fn observed(
        &mut self,
        rec: Option<usize>,
        o: &Op,
        key: Option<&StepKey>,
    ) -> Observed<impl FnOnce(Rid) -> Record> {
        let Some(i) = rec else {
            return Observed::Nothing;
        };
        self.used.insert(i);
        if self.lost(key) {
            return Observed::Lost;
        }
        match self.convert(i, o) {
            Some(r) => Observed::Record(move |rid| with_rid(r, rid)),
            None => Observed::Nothing,
        }
    }

    /// Counts a missing record as loss when the loaded CUPTI cannot produce
    /// its activity kind at all (docs/cupti-versions.md): the op stays in the
    /// ground truth, its evidence is accounted missing.
    pub(super) fn unobservable(&mut self, rec: Option<usize>, kind: u32) {
        if rec.is_none() && !self.rec.observes(kind) {
            self.loss.cupti_unobservable += 1;
        }
    }

    pub(super) fn lost(&self, k: Option<&StepKey>) -> bool {
        match (self.plan.and_then(|p| p.lose.as_ref()), k) {
            (Some(l), Some(k)) => l == k,
            _ => false,
        }
    }

    /// The op's API records, earliest first (the first is its call).
    fn api_records(&self, op: u64) -> Vec<usize> {
        let mut apis: Vec<usize> = self
            .raws_of(op)
            .into_iter()
            .filter(|&i| matches!(self.raw(i), Raw::Api { .. }))
            .collect();
        apis.sort_by_key(|&i| match self.raw(i) {
            Raw::Api { start, .. } => *start,
            _ => 0,
        });
        apis
    }

    /// The activity record of a kernel, copy or memset.
    fn device_record(&self, o: &Op) -> Option<usize> {
        self.raws_of(o.id).into_iter().find(|&i| {
            matches!(
                (self.raw(i), &o.what),
                (Raw::Kernel { .. }, What::Kernel { .. })
                    | (Raw::Memcpy { .. }, What::Copy { .. })
                    | (Raw::Memset { .. }, What::Memset { .. })
            )
        })
    }

    fn cuda_event_activity(&self, o: &Op) -> Option<usize> {
        self.raws_of(o.id)
            .into_iter()
            .find(|&i| matches!(self.raw(i), Raw::CudaEvent { .. }))
    }

    /// The event record's device timestamp, when CUPTI gave one in the host
    /// clock domain (else it is "not provided").
    fn event_ts(&self, rec: Option<usize>, queued: Ns) -> Option<Ns> {
        let ts = match rec.map(|i| self.raw(i)) {
            Some(Raw::CudaEvent { ts, .. }) => *ts,
            _ => 0,
        };
        let ts_ok = ts > 0 && ts + 1_000_000 >= queued && ts <= self.log.end + 10_000_000_000;
        ts_ok.then_some(ts)
    }

    /// The kernel record of each node of the graph launch `o` (computed once
    /// per launch).
    fn graph_records(&mut self, o: &Op, gi: usize) -> &[Option<usize>] {
        if self.graph_assigned.0 != o.id {
            self.graph_assigned = (o.id, self.graph_assignment(gi, o.id));
        }
        &self.graph_assigned.1
    }
}

impl Observer for CuptiObserver<'_> {
    fn call(&mut self, op: &StepOp) -> (String, (Ns, Ns)) {
        let o = self.own(op);
        let apis = self.api_records(o.id);
        let primary = apis.first().map(|&i| self.raw(i));
        let span = match primary {
            Some(Raw::Api { start, end, .. }) => (*start, *end),
            _ => (o.t0, o.t1),
        };
        self.stats.api_ops += 1;
        if primary.is_some() {
            self.stats.api_bound += 1;
        }
        let name = match primary {
            Some(Raw::Api { driver, cbid, .. }) => self.rec.api_name(*driver, *cbid),
            _ => expected_api(&o.what).to_string(),
        };
        (name, span)
    }

    fn call_records(&mut self, b: &mut RunBuilder, op: &StepOp, call: NodeId) {
        let o = self.own(op);
        for i in self.api_records(o.id) {
            self.used.insert(i);
            if let Some(r) = self.convert(i, o) {
                b.record(Some(call), |rid| with_rid(r, rid));
            }
        }
        self.request_records(b, o.id);
    }

    fn device_times(&mut self, op: &StepOp, call_end: Ns) -> Measured {
        let o = self.own(op);
        let rec = self.device_record(o);
        self.stats.device_ops += 1;
        if rec.is_some() {
            self.stats.bound += 1;
        } else if self.stats.unbound.len() < 20 {
            self.stats.unbound.push(format!(
                "op {} ({}) on thread {}{}",
                o.id,
                expected_api(&o.what),
                o.tid,
                o.error
                    .as_ref()
                    .map(|e| format!(": {e}"))
                    .unwrap_or_default()
            ));
        }
        match rec.map(|i| self.raw(i)) {
            Some(Raw::Kernel {
                queued,
                submitted,
                start,
                end,
                ..
            }) => Measured::Recorded {
                queued: (*queued > 0).then_some(*queued),
                submitted: (*submitted > 0).then_some(*submitted),
                start: *start,
                end: *end,
            },
            Some(Raw::Memcpy { start, end, .. }) | Some(Raw::Memset { start, end, .. }) => {
                Measured::Recorded {
                    queued: None,
                    submitted: None,
                    start: *start,
                    end: *end,
                }
            }
            _ => {
                let (start, end) = self.fallback_times(o.slot, o.id, call_end);
                Measured::Recorded {
                    queued: None,
                    submitted: None,
                    start,
                    end,
                }
            }
        }
    }

    fn device_records(&mut self, b: &mut RunBuilder, op: &StepOp, dev: NodeId) {
        let o = self.own(op);
        let rec = self.device_record(o);
        if let (
            Some(_),
            What::Kernel {
                kind: KernelKind::Spin,
                dur_ns,
                ..
            },
        ) = (&o.skey, &o.what)
        {
            if *dur_ns >= 100_000 && rec.is_some() {
                let n = &b.truth.nodes[dev as usize];
                self.stats
                    .spin
                    .push((*dur_ns, n.end.saturating_sub(n.start)));
            }
        }
        let kind = match &o.what {
            What::Kernel { .. } => cupti::activity::KIND_CONCURRENT_KERNEL,
            What::Copy { .. } => cupti::activity::KIND_MEMCPY,
            _ => cupti::activity::KIND_MEMSET,
        };
        self.unobservable(rec, kind);
        let observed = self.observed(rec, o, o.skey.as_ref());
        b.observe(dev, observed, &mut self.loss);
    }

    fn event_reached(&mut self, op: &StepOp, queued: Ns) -> Option<Ns> {
        let o = self.own(op);
        self.event_ts(self.cuda_event_activity(o), queued)
    }

    fn event_records(&mut self, b: &mut RunBuilder, op: &StepOp, dev: NodeId, queued: Ns) {
        let o = self.own(op);
        let rec = self.cuda_event_activity(o);
        let ts_ok = self.event_ts(rec, queued).is_some();
        self.unobservable(rec, cupti::activity::KIND_CUDA_EVENT);
        let record = rec.and_then(|i| {
            self.used.insert(i);
            self.convert(i, o)
        });
        let observed = match record {
            Some(mut r) => {
                // A timestamp outside the host clock domain is "not provided".
                if let (false, Record::CudaEvent { ts, .. }) = (ts_ok, &mut r) {
                    *ts = 0;
                }
                Observed::Record(move |rid| with_rid(r, rid))
            }
            None => Observed::Nothing,
        };
        b.observe(dev, observed, &mut self.loss);
    }

    fn wait_records(&mut self, b: &mut RunBuilder, op: &StepOp, dev: NodeId) {
        let o = self.own(op);
        let rec = self.raws_of(o.id).into_iter().find(|&i| {
            matches!(self.raw(i), Raw::Sync { sync_type, .. } if *sync_type == SYNC_STREAM_WAIT_EVENT)
        });
        self.unobservable(rec, cupti::activity::KIND_SYNCHRONIZATION);
        let observed = self.observed(rec, o, None);
        b.observe(dev, observed, &mut self.loss);
    }

    fn graph_node_times(
        &mut self,
        op: &StepOp,
        gi: usize,
        ni: usize,
        replay: usize,
        ready: Ns,
    ) -> (Ns, Ns) {
        let o = self.own(op);
        let rec = self.graph_records(o, gi).get(ni).copied().flatten();
        self.stats.device_ops += 1;
        match rec.map(|i| self.raw(i)) {
            Some(Raw::Kernel { start, end, .. }) => {
                self.stats.bound += 1;
                (*start, *end)
            }
            _ => {
                if self.stats.unbound.len() < 20 {
                    self.stats.unbound.push(format!(
                        "graph {} node {} of launch op {}",
                        self.sc.graphs[gi].name, self.sc.graphs[gi].nodes[ni].id, o.id
                    ));
                }
                // This replay's ring entry; a plain slot holds some replay's.
                let slot = self.log.graphs[gi].replay_slot(ni, replay, true);
                self.fallback_times(slot, graph_op_id(gi, ni), ready)
            }
        }
    }

    fn graph_node_records(
        &mut self,
        b: &mut RunBuilder,
        op: &StepOp,
        ni: usize,
        dev: NodeId,
        key: Option<&StepKey>,
    ) {
        let o = self.own(op);
        let rec = self.graph_assigned.1.get(ni).copied().flatten();
        let observed = self.observed(rec, o, key);
        b.observe(dev, observed, &mut self.loss);
    }

    fn sync_records(&mut self, b: &mut RunBuilder, op: &StepOp, call: NodeId) {
        let o = self.own(op);
        let What::Sync { target } = o.what else {
            return;
        };
        let want = match target {
            SyncTarget::Stream => SYNC_STREAM_SYNCHRONIZE,
            SyncTarget::Event => SYNC_EVENT_SYNCHRONIZE,
            SyncTarget::Device => SYNC_CONTEXT_SYNCHRONIZE,
        };
        let rec = self
            .raws_of(o.id)
            .into_iter()
            .find(|&i| matches!(self.raw(i), Raw::Sync { sync_type, .. } if *sync_type == want));
        self.unobservable(rec, cupti::activity::KIND_SYNCHRONIZATION);
        if let Some(i) = rec {
            self.used.insert(i);
            if let Some(r) = self.convert(i, o) {
                b.record(Some(call), |rid| with_rid(r, rid));
            }
        }
    }

    fn leftover_records(&mut self, b: &mut RunBuilder) {
        self.leftovers(b);
    }
}
