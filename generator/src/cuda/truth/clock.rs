//! CUPTI's timestamps against the kernels' own `%globaltimer` log: the
//! run's clock check, and device times for ops CUPTI gave no record of.

use super::*;

impl<'a> CuptiObserver<'a> {
    /// CUPTI vs %globaltimer, offset-calibrated (kernels with a record and a log entry).
    pub(super) fn clock_check(&mut self) {
        let mut pairs: Vec<(i64, i64)> = Vec::new();
        let entry = |slot: u32, id: u64| {
            self.log
                .device_log
                .get(slot as usize)
                .filter(|e| e.is_written_for(id))
                .copied()
        };
        let mut graph_launches: HashMap<usize, Vec<(Ns, u64)>> = HashMap::new();
        for op in self.ops.values() {
            match &op.what {
                What::Kernel { .. } => {
                    let (Some(slot), Some(&k)) = (op.slot, self.kernel_records(op.id).first())
                    else {
                        continue;
                    };
                    if let (Raw::Kernel { start, end, .. }, Some(e)) =
                        (self.raw(k), entry(slot, op.id))
                    {
                        pairs.push((
                            *start as i64 - e.start_ns as i64,
                            *end as i64 - e.last_end_ns.max(e.end_ns) as i64,
                        ));
                    }
                }
                What::GraphLaunch { graph, .. } => {
                    graph_launches
                        .entry(*graph)
                        .or_default()
                        .push((op.t0, op.id));
                }
                _ => {}
            }
        }
        // Replays of one graph exec run in launch order, so the r-th launch
        // wrote each node's r-th ring entry (a plain slot: the last launch).
        for (&gi, launches) in &mut graph_launches {
            launches.sort_unstable();
            let meta = &self.log.graphs[gi];
            for (replay, &(_, op)) in launches.iter().enumerate() {
                let last = replay + 1 == launches.len();
                let recs = self.graph_assignment(gi, op);
                for (ni, r) in recs.into_iter().enumerate() {
                    let (Some(r), Some(slot)) = (r, meta.replay_slot(ni, replay, last)) else {
                        continue;
                    };
                    if let (Raw::Kernel { start, end, .. }, Some(e)) =
                        (self.raw(r), entry(slot, graph_op_id(gi, ni)))
                    {
                        pairs.push((
                            *start as i64 - e.start_ns as i64,
                            *end as i64 - e.last_end_ns.max(e.end_ns) as i64,
                        ));
                    }
                }
            }
        }
        if pairs.is_empty() {
            return;
        }
        let off = median(pairs.iter().map(|p| p.0).collect());
        let devs: Vec<i64> = pairs
            .iter()
            .map(|&(s, e)| (s - off).abs().max((e - off).abs()))
            .collect();
        self.stats.clock = ClockCheck {
            kernels: pairs.len(),
            offset_ns: off,
            max_start_dev_ns: pairs.iter().map(|p| (p.0 - off).abs()).max().unwrap_or(0),
            max_end_dev_ns: pairs.iter().map(|p| (p.1 - off).abs()).max().unwrap_or(0),
            within_2us: devs.iter().filter(|&&d| d <= 2_000).count() as f64 / devs.len() as f64,
            devs,
        };
        self.clock_offset = Some(off);
    }

    pub(super) fn fallback_times(&self, slot: Option<u32>, id: u64, api_end: Ns) -> (Ns, Ns) {
        let e = slot
            .and_then(|s| self.log.device_log.get(s as usize))
            .filter(|e| e.is_written_for(id));
        match (e, self.clock_offset) {
            (Some(e), Some(off)) => (
                (e.start_ns as i64 + off).max(0) as Ns,
                (e.last_end_ns.max(e.end_ns) as i64 + off).max(0) as Ns,
            ),
            _ => (api_end, api_end),
        }
    }
}
