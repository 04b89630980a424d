//! Which CUPTI records belong to which op: by correlation id, through the
//! recorder-private external correlation id every call carried; records no
//! node owns; conversion into trace records.

use super::*;

impl<'a> CuptiObserver<'a> {
    /// Raw records bound to `op` (by its correlation ids), not yet consumed.
    pub(super) fn raws_of(&self, op: u64) -> Vec<usize> {
        let mut v = Vec::new();
        if let Some(cs) = self.corrs.get(&op) {
            for c in cs {
                if let Some(ix) = self.by_corr.get(c) {
                    v.extend(ix.iter().copied());
                }
            }
        }
        v
    }

    pub(super) fn raw(&self, i: usize) -> &'a Raw {
        &self.log.flushed.records[i]
    }

    pub(super) fn kernel_records(&self, op: u64) -> Vec<usize> {
        self.raws_of(op)
            .into_iter()
            .filter(|&i| matches!(self.raw(i), Raw::Kernel { .. }))
            .collect()
    }

    /// The kernel record of each node of graph `gi` for launch `op`, matched
    /// by entry name (ties in start order, in declaration order).
    pub(super) fn graph_assignment(&self, gi: usize, op: u64) -> Vec<Option<usize>> {
        let meta = &self.log.graphs[gi];
        let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
        for r in self.kernel_records(op) {
            if let Raw::Kernel { name, .. } = self.raw(r) {
                by_name.entry(name.as_str()).or_default().push(r);
            }
        }
        for v in by_name.values_mut() {
            v.sort_by_key(|&r| match self.raw(r) {
                Raw::Kernel { start, .. } => *start,
                _ => 0,
            });
            v.reverse();
        }
        meta.entries
            .iter()
            .map(|e| by_name.get_mut(e.as_str()).and_then(|v| v.pop()))
            .collect()
    }

    /// External correlation records carrying the request token.
    pub(super) fn request_records(&self, b: &mut RunBuilder, op: u64) {
        if !self.instrumented {
            return;
        }
        let cs = self.corrs.get(&op).cloned().unwrap_or_default();
        for c in cs {
            for id in self.tokens.get(&c).cloned().unwrap_or_default() {
                b.record(None, |rid| Record::ExternalCorrelation {
                    rid,
                    external_kind: "request".into(),
                    external_id: id,
                    correlation_id: c,
                });
            }
        }
    }

    /// Bound records no node consumed (e.g. the calls of a recreate step):
    /// kept in the trace, owned by no node.
    pub(super) fn leftovers(&mut self, b: &mut RunBuilder) {
        let mut ops: Vec<&Op> = self.ops.values().copied().collect();
        ops.sort_by_key(|o| o.id);
        for o in ops {
            if matches!(o.what, What::Recreate) {
                self.request_records(b, o.id);
            }
            for i in self.raws_of(o.id) {
                if self.used.contains(&i) {
                    continue;
                }
                self.used.insert(i);
                let r = self.convert(i, o);
                if let Some(r) = r {
                    b.record(None, |rid| with_rid(r, rid));
                }
            }
        }
    }

    /// A bound CUPTI record as a trace record (rid 0), with what the op knows
    /// and CUPTI does not (the raw event handle, the copy it asked for).
    pub(super) fn convert(&self, i: usize, o: &Op) -> Option<Record> {
        let copy = match &o.what {
            What::Copy {
                direction, memory, ..
            } => (*direction, *memory),
            _ => CallFacts::default().copy,
        };
        let facts = CallFacts {
            event_handle: o.handle,
            copy,
        };
        recorder_cupti::to_record(self.raw(i), &facts, self.rec)
    }
}
