//! The device side of a call: its device node(s) from what CUPTI measured,
//! through the shared per-step rules (`record::steps`).

use super::*;
use crate::record::contention::memcpy_node_name;

impl<'a> Builder<'a> {
    /// When stream order and waits let `op`'s work start: its predecessors' completion.
    pub(super) fn ready(&self, queued: Ns, prev: &[DevRef]) -> Ns {
        prev.iter()
            .filter_map(|p| self.node_of(p))
            .map(|n| self.end_of(n))
            .fold(queued, Ns::max)
    }

    /// `dev` is the device node of `o` (not a graph launch): a stream
    /// predecessor of later ops, and the node of its step.
    pub(super) fn placed(&mut self, o: &Op, dev: NodeId) {
        self.dev_nodes.insert(
            DevRef {
                op: o.id,
                gnode: None,
            },
            dev,
        );
        if let Some(k) = &o.skey {
            crate::keys::remember(&mut self.keys, self.sc, k, dev);
        }
    }

    /// The device nodes `op` follows on its stream (its `stream_order` predecessors).
    pub(super) fn after(&self, prev: &[DevRef]) -> Vec<NodeId> {
        prev.iter().filter_map(|p| self.node_of(p)).collect()
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

    pub(super) fn device_op(&mut self, o: &'a Op, api: NodeId, info: NodeInfo, queued_default: Ns) {
        let raws = self.raws_of(o.id);
        let rec = raws.iter().copied().find(|&i| {
            matches!(
                (self.raw(i), &o.what),
                (Raw::Kernel { .. }, What::Kernel { .. })
                    | (Raw::Memcpy { .. }, What::Copy { .. })
                    | (Raw::Memset { .. }, What::Memset { .. })
            )
        });
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
        let api_end = self.b.truth.nodes[api as usize].end;
        let (q, sub, st, en) = match rec.map(|i| self.raw(i)) {
            Some(Raw::Kernel {
                queued,
                submitted,
                start,
                end,
                ..
            }) => (*queued, *submitted, *start, *end),
            Some(Raw::Memcpy { start, end, .. }) | Some(Raw::Memset { start, end, .. }) => {
                (0, 0, *start, *end)
            }
            _ => {
                let (s, e) = self.fallback_times(o.slot, o.id, api_end);
                (0, 0, s, e)
            }
        };
        let queued = if q > 0 { q } else { queued_default };
        let ready = self.ready(queued, o.prev.as_slice());
        let submitted = if sub > 0 {
            sub
        } else {
            ready.min(st.max(queued))
        };
        let (kind, name) = match &o.what {
            What::Kernel { name, .. } => (NodeKind::Kernel, name.to_string()),
            What::Copy { direction, .. } => {
                (NodeKind::Memcpy, memcpy_node_name(*direction).to_string())
            }
            _ => (NodeKind::Memset, "memset".to_string()),
        };
        let after = self.after(o.prev.as_slice());
        let dev = self.b.device_op(DeviceOp {
            kind,
            name: name.into(),
            info,
            times: DeviceTimes {
                queued,
                submitted,
                start: st,
                end: en,
            },
            launch: api,
            after: &after,
            waited_record: None,
        });
        self.placed(o, dev);
        if o.injected && o.delays_target {
            self.injected_devs.push(dev);
        }
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
                self.stats.spin.push((*dur_ns, en.saturating_sub(st)));
            }
        }
        if let Some(k) = &o.skey {
            self.stretch_record(k, st, en);
        }
        let kind = match &o.what {
            What::Kernel { .. } => cupti::activity::KIND_CONCURRENT_KERNEL,
            What::Copy { .. } => cupti::activity::KIND_MEMCPY,
            _ => cupti::activity::KIND_MEMSET,
        };
        self.unobservable(rec, kind);
        let observed = self.observed(rec, o, o.skey.as_ref());
        self.b.observe(dev, observed, &mut self.loss);
    }

    /// Injection record of a lengthened target: the measured extra duration.
    pub(super) fn stretch_record(&mut self, k: &StepKey, st: Ns, en: Ns) {
        let record = self
            .plan
            .and_then(|p| crate::record::faults::stretch_injection(p, k, st, en));
        self.injections.extend(record);
    }

    pub(super) fn event_record(&mut self, o: &'a Op, api: NodeId, info: NodeInfo, queued: Ns) {
        let raws = self.raws_of(o.id);
        let rec = raws
            .iter()
            .copied()
            .find(|&i| matches!(self.raw(i), Raw::CudaEvent { .. }));
        let ready = self.ready(queued, o.prev.as_slice());
        let ts = match rec.map(|i| self.raw(i)) {
            Some(Raw::CudaEvent { ts, .. }) => *ts,
            _ => 0,
        };
        // The device timestamp, when CUPTI gave one in the host clock domain.
        let ts_ok = ts > 0 && ts + 1_000_000 >= queued && ts <= self.log.end + 10_000_000_000;
        let done = if ts_ok { ts.max(queued) } else { ready };
        let after = self.after(o.prev.as_slice());
        let dev = self.b.device_op(DeviceOp {
            kind: NodeKind::EventRecord,
            name: "event record".into(),
            info,
            times: DeviceTimes::instant(queued, done),
            launch: api,
            after: &after,
            waited_record: None,
        });
        self.placed(o, dev);
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
        self.b.observe(dev, observed, &mut self.loss);
    }

    pub(super) fn stream_wait(&mut self, o: &'a Op, api: NodeId, info: NodeInfo, queued: Ns) {
        let raws = self.raws_of(o.id);
        let rec = raws.iter().copied().find(|&i| {
            matches!(self.raw(i), Raw::Sync { sync_type, .. } if *sync_type == SYNC_STREAM_WAIT_EVENT)
        });
        let start = self.ready(queued, o.prev.as_slice());
        let src = o
            .event_src
            .and_then(|e| self.node_of(&DevRef { op: e, gnode: None }));
        let end = self.b.wait_end(start, src);
        let after = self.after(o.prev.as_slice());
        let dev = self.b.device_op(DeviceOp {
            kind: NodeKind::StreamWait,
            name: "stream wait".into(),
            info,
            times: DeviceTimes {
                queued,
                submitted: start,
                start,
                end,
            },
            launch: api,
            after: &after,
            waited_record: src,
        });
        self.placed(o, dev);
        self.unobservable(rec, cupti::activity::KIND_SYNCHRONIZATION);
        let observed = self.observed(rec, o, None);
        self.b.observe(dev, observed, &mut self.loss);
    }

    pub(super) fn graph_launch(
        &mut self,
        o: &'a Op,
        gi: usize,
        api: NodeId,
        info: NodeInfo,
        queued: Ns,
    ) {
        let decl = &self.sc.graphs[gi];
        let assigned = self.graph_assignment(gi, o.id);
        let base = self.ready(queued, o.prev.as_slice());
        let skey = o.skey.clone();
        let step_id = skey.as_ref().and_then(|k| skey_step_id(self.sc, k));
        let mut ids: Vec<NodeId> = Vec::new();
        for (ni, n) in decl.nodes.iter().enumerate() {
            let nkey = skey.as_ref().map(|k| StepKey {
                graph_node: Some(n.id.clone()),
                ..k.clone()
            });
            let deps: Vec<NodeId> = n
                .after
                .iter()
                .filter_map(|a| decl.nodes.iter().position(|m| &m.id == a))
                .filter_map(|j| ids.get(j).copied())
                .collect();
            let ready = self.b.graph_ready(base, &deps);
            let rec = assigned.get(ni).copied().flatten();
            self.stats.device_ops += 1;
            let (st, en) = match rec.map(|i| self.raw(i)) {
                Some(Raw::Kernel { start, end, .. }) => {
                    self.stats.bound += 1;
                    (*start, *end)
                }
                _ => {
                    if self.stats.unbound.len() < 20 {
                        self.stats.unbound.push(format!(
                            "graph {} node {} of launch op {}",
                            decl.name, n.id, o.id
                        ));
                    }
                    let slot = self.log.graphs[gi].slots[ni];
                    self.fallback_times(Some(slot), graph_op_id(gi, ni), ready)
                }
            };
            let mut inf = info.clone();
            inf.step = Some(format!("{}/{}", step_id.clone().unwrap_or_default(), n.id).into());
            let after = if n.after.is_empty() {
                self.after(o.prev.as_slice())
            } else {
                Vec::new()
            };
            let op = DeviceOp {
                kind: NodeKind::GraphNode,
                name: n.kernel.name.as_str().into(),
                info: inf,
                times: DeviceTimes {
                    queued,
                    submitted: ready.min(st.max(queued)),
                    start: st,
                    end: en,
                },
                launch: api,
                after: &after,
                waited_record: None,
            };
            let dev = self.b.graph_node(op, &deps);
            ids.push(dev);
            self.dev_nodes.insert(
                DevRef {
                    op: o.id,
                    gnode: Some(ni as u32),
                },
                dev,
            );
            if let Some(k) = &nkey {
                if step_id.is_some() {
                    self.keys.insert(k.clone(), dev);
                }
                self.stretch_record(k, st, en);
            }
            let observed = self.observed(rec, o, nkey.as_ref());
            self.b.observe(dev, observed, &mut self.loss);
        }
    }

    pub(super) fn sync(&mut self, o: &'a Op, target: SyncTarget, node: NodeId) {
        let raws = self.raws_of(o.id);
        let want = match target {
            SyncTarget::Stream => SYNC_STREAM_SYNCHRONIZE,
            SyncTarget::Event => SYNC_EVENT_SYNCHRONIZE,
            SyncTarget::Device => SYNC_CONTEXT_SYNCHRONIZE,
        };
        let rec = raws
            .iter()
            .copied()
            .find(|&i| matches!(self.raw(i), Raw::Sync { sync_type, .. } if *sync_type == want));
        let waited = self.after(&o.waited);
        self.b.sync_waits(node, &waited);
        self.unobservable(rec, cupti::activity::KIND_SYNCHRONIZATION);
        if let Some(i) = rec {
            self.used.insert(i);
            if let Some(r) = self.convert(i, o) {
                self.b.record(Some(node), |rid| with_rid(r, rid));
            }
        }
    }
}
