//! The device model's side of a call: where each op lands on its stream, the
//! SMs and the copy engine, and the record CUPTI makes of it.

use super::*;
use crate::sim::device::PlacedCopy;

/// SMs a device-to-device copy or a memset needs to start: its blocks are
/// dispatched to whatever SMs free up, so one free SM lets it begin.
const SM_COPY_BLOCKS: u32 = 1;

impl Engine<'_> {
    /// Extra duration the plan adds to this device op (lengthening injections).
    pub(super) fn stretch(&mut self, skey: &StepKey) -> Ns {
        match self.plan {
            // The model has no bandwidth noise: it lengthens the op by the
            // magnitude itself, whatever form the GPU realises it in.
            Some(p) if p.stretches(skey) => {
                self.injections.push(InjectionRecord {
                    kind: p.kind.as_str().into(),
                    mechanism: p.mechanism.clone(),
                    requested_us: p.magnitude_ns as f64 / 1000.0,
                    measured_us: p.magnitude_ns as f64 / 1000.0,
                    fault_node: None,
                    off_cpu_us: None,
                });
                p.magnitude_ns
            }
            _ => 0,
        }
    }

    pub(super) fn lose_record(&self, skey: &StepKey) -> bool {
        self.plan.is_some_and(|p| p.lose.as_ref() == Some(skey))
    }

    /// `dev` is the stream's new tail. The tail vector is reused: one op per
    /// stream step must not allocate.
    pub(super) fn new_tail(&mut self, si: usize, dev: NodeId) {
        let tail = &mut self.streams[si].tail;
        tail.clear();
        tail.push(dev);
    }

    /// A device op of `at`'s call placed on its stream with `times`: its node
    /// and edges (`record::steps`), the stream's new tail, and what the
    /// recorder saw of it.
    pub(super) fn enqueue<F: FnOnce(Rid) -> Record>(
        &mut self,
        at: Enqueued,
        kind: NodeKind,
        name: SharedStr,
        times: DeviceTimes,
        waited_record: Option<NodeId>,
        observed: Observed<F>,
    ) -> NodeId {
        let dev = self.b.device_op(DeviceOp {
            kind,
            name,
            info: at.info,
            times,
            launch: at.launch,
            after: &self.streams[at.si].tail,
            waited_record,
        });
        self.b.observe(dev, observed, &mut self.loss);
        self.new_tail(at.si, dev);
        // An event record ends when the stream's earlier work does, so it
        // moves the stream's end no later than that work already had.
        self.streams[at.si].tail_end = times.end;
        dev
    }

    /// When stream `si`'s earlier work is done. Whoever asks depends on that
    /// time, so the stream's last op can no longer move (`place_on_sms`).
    pub(super) fn stream_ready(&mut self, si: usize) -> Ns {
        self.streams[si].waiting = None;
        self.copies.pin(si);
        self.streams[si].tail_end
    }

    /// The last ops of every stream (a device synchronize waits for them all).
    pub(super) fn all_tails(&mut self) -> Vec<NodeId> {
        let mut tails = Vec::new();
        for si in 0..self.streams.len() {
            self.stream_ready(si);
            self.streams[si].listed = false;
            tails.extend_from_slice(&self.streams[si].tail);
        }
        self.waiting_streams.clear();
        tails
    }

    /// Places SM work of stream `si` that is ready at `ready`: the earliest
    /// start at which `need` SMs are free for `dur`. Work of a higher-priority
    /// stream goes first when SMs free up (as measured on the H200,
    /// docs/gpu-facts.md "Stream priorities"): it takes the place of lower-priority work that was
    /// still waiting for SMs when it became ready, which then starts as soon
    /// as it fits again. Running work is never preempted, and work whose times
    /// something already depends on stays where it is.
    pub(super) fn place_on_sms(&mut self, si: usize, ready: Ns, need: u32, dur: Ns) -> Ns {
        let (total, now, priority) = (self.be.device.sms, self.now, self.streams[si].priority);
        let need = need.min(total);
        let streams = &mut self.streams;
        self.waiting_streams.retain(|&w| {
            let keep = streams[w].waiting.is_some();
            streams[w].listed = keep;
            keep
        });
        let mut displaced: Vec<usize> = self
            .waiting_streams
            .iter()
            .copied()
            .filter(|&w| {
                let waiting = self.streams[w].waiting.expect("retained");
                w != si && self.streams[w].priority > priority && waiting.start > ready
            })
            .collect();
        for &w in &displaced {
            let held = self.streams[w].waiting.expect("waiting");
            self.sms.release(held.start, held.dur, held.need);
        }
        let start = loop {
            let t = self.sms.earliest(ready, need, dur, total, now);
            // Work that starts before this could, or after it ends, keeps its place.
            let (kept, moved): (Vec<usize>, Vec<usize>) = displaced.iter().partition(|&&w| {
                let held = self.streams[w].waiting.expect("waiting");
                held.start < t || held.start >= t + dur
            });
            if kept.is_empty() {
                break t;
            }
            for &w in &kept {
                let held = self.streams[w].waiting.expect("waiting");
                self.sms.reserve(held.start, held.dur, held.need);
            }
            displaced = moved;
        };
        self.sms.reserve(start, dur, need);
        displaced.sort_by_key(|&w| {
            let held = self.streams[w].waiting.expect("waiting");
            (held.start, held.node)
        });
        for w in displaced {
            let mut held = self.streams[w].waiting.expect("waiting");
            held.start =
                self.sms
                    .earliest(held.ready.max(held.start), held.need, held.dur, total, now);
            self.sms.reserve(held.start, held.dur, held.need);
            self.move_waiting(w, held);
        }
        start
    }

    /// Moves the waiting op of stream `w` to `held.start`: its node, its
    /// record and the stream's end.
    fn move_waiting(&mut self, w: usize, held: WaitingForSms) {
        let end = held.start + held.dur;
        let node = &mut self.b.truth.nodes[held.node as usize];
        node.start = held.start;
        node.end = end;
        if self.b.keep_records {
            for &rid in &node.rids {
                match &mut self.b.trace[rid as usize] {
                    Record::Kernel { start, end: e, .. }
                    | Record::Memcpy { start, end: e, .. }
                    | Record::Memset { start, end: e, .. } => {
                        *start = held.start;
                        *e = end;
                    }
                    _ => {}
                }
            }
        }
        self.streams[w].tail_end = end;
        self.streams[w].waiting = Some(held);
    }

    /// Records that the op `dev` of stream `si`, ready at `ready`, waits for
    /// SMs until `start` and may still be moved by higher-priority work.
    fn note_waiting(&mut self, si: usize, dev: NodeId, ready: Ns, need: u32, dur: Ns, start: Ns) {
        if self.priorities_differ && start > ready {
            self.streams[si].waiting = Some(WaitingForSms {
                node: dev,
                ready,
                need: need.min(self.be.device.sms),
                dur,
                start,
            });
            if !self.streams[si].listed {
                self.streams[si].listed = true;
                self.waiting_streams.push(si);
            }
        }
    }

    /// The record of a device op unless the plan loses it.
    pub(super) fn observed<F: FnOnce(Rid) -> Record>(
        &self,
        skey: &StepKey,
        make: F,
    ) -> Observed<F> {
        if self.lose_record(skey) {
            Observed::Lost
        } else {
            Observed::Record(make)
        }
    }

    /// Places a kernel on the SMs after the stream's previous work.
    pub(super) fn place_kernel(
        &mut self,
        at: Enqueued,
        kernel: KernelLaunch,
        skey: &StepKey,
    ) -> NodeId {
        let KernelLaunch {
            name,
            grid,
            block,
            duration,
        } = kernel;
        let (si, queued, corr) = (at.si, at.queued, at.corr);
        let ready = queued.max(self.stream_ready(si));
        let start = self.place_on_sms(si, ready + self.be.device.dispatch_ns, grid, duration);
        let end = start + duration;
        let stream_id = self.streams[si].cupti_id;
        let record_name = name.clone();
        let observed = self.observed(skey, |rid| Record::Kernel {
            rid,
            stream: stream_id,
            correlation_id: corr,
            queued,
            submitted: ready,
            start,
            end,
            detail: ground_truth::trace::KernelDetail {
                name: record_name,
                context: 1,
                device: 0,
                graph_id: 0,
                graph_node_id: 0,
                grid: [grid, 1, 1],
                block: [block, 1, 1],
                channel: si as u32,
            }
            .into(),
        });
        let times = DeviceTimes {
            queued,
            submitted: ready,
            start,
            end,
        };
        let dev = self.enqueue(at, NodeKind::Kernel, name.clone(), times, None, observed);
        let earliest = ready + self.be.device.dispatch_ns;
        self.note_waiting(si, dev, earliest, grid, duration, start);
        dev
    }

    pub(super) fn memcpy(
        &mut self,
        at: Enqueued,
        copy: Transfer,
        skey: &StepKey,
        key: u64,
    ) -> NodeId {
        let Transfer {
            direction,
            bytes,
            memory,
        } = copy;
        let d = &self.be.device;
        let bw = match (direction, memory) {
            (CopyDirection::D2d, _) => d.d2d_bytes_per_ns,
            (_, HostMemory::Pinned) => d.pinned_bytes_per_ns,
            (CopyDirection::H2d, HostMemory::Pageable) => d.pageable_h2d_bytes_per_ns,
            (CopyDirection::D2h, HostMemory::Pageable) => d.pageable_d2h_bytes_per_ns,
        };
        let setup = d.copy_setup_ns;
        let dur = self.jitter(key ^ 0xC, setup + (bytes as f64 / bw) as Ns) + self.stretch(skey);
        let (si, queued, corr) = (at.si, at.queued, at.corr);
        let ready = queued.max(self.stream_ready(si));
        // On the H200 a device-to-device copy runs on the SMs, beside host
        // copies and not behind them (docs/gpu-facts.md, "Device-to-device
        // copies and memsets"); host↔device copies queue on the copy engine.
        let start = if direction == CopyDirection::D2d {
            self.place_on_sms(si, ready + setup, SM_COPY_BLOCKS, dur)
        } else {
            let (start, moved) = self.copies.place(direction, ready + setup, dur, self.now);
            for later in moved {
                self.move_copy(later);
            }
            start
        };
        let end = start + dur;
        let stream_id = self.streams[si].cupti_id;
        let name = self.names.memcpy(direction).clone();
        let observed = self.observed(skey, |rid| Record::Memcpy {
            rid,
            direction,
            memory,
            stream: stream_id,
            correlation_id: corr,
            queued,
            submitted: ready,
            start,
            end,
            detail: ground_truth::trace::CopyDetail {
                bytes,
                context: 1,
                device: 0,
                graph_id: 0,
                graph_node_id: 0,
                channel: 100 + si as u32,
            }
            .into(),
        });
        let times = DeviceTimes {
            queued,
            submitted: ready,
            start,
            end,
        };
        let dev = self.enqueue(at, NodeKind::Memcpy, name, times, None, observed);
        if direction == CopyDirection::D2d {
            self.note_waiting(si, dev, ready + setup, SM_COPY_BLOCKS, dur, start);
        } else {
            let placed = PlacedCopy {
                node: dev,
                stream: si,
                ready: ready + setup,
                start,
                dur,
            };
            // A pageable copy's call returns when it is done: its end is read at once.
            let movable = memory == HostMemory::Pinned;
            self.copies.insert(direction, placed, movable);
        }
        dev
    }

    /// Moves a copy that a copy ready before it displaced on its engine: its
    /// node, its record and its stream's end (nothing has read them yet).
    fn move_copy(&mut self, copy: PlacedCopy) {
        let end = copy.end();
        let node = &mut self.b.truth.nodes[copy.node as usize];
        node.start = copy.start;
        node.end = end;
        if self.b.keep_records {
            for &rid in &node.rids {
                if let Record::Memcpy { start, end: e, .. } = &mut self.b.trace[rid as usize] {
                    *start = copy.start;
                    *e = end;
                }
            }
        }
        self.streams[copy.stream].tail_end = end;
    }

    pub(super) fn memset(&mut self, at: Enqueued, bytes: u64, skey: &StepKey, key: u64) -> NodeId {
        let d = &self.be.device;
        let dur = self.jitter(
            key ^ 0xE,
            d.memset_setup_ns + (bytes as f64 / d.memset_bytes_per_ns) as Ns,
        ) + self.stretch(skey);
        let (si, queued, corr) = (at.si, at.queued, at.corr);
        let ready = queued.max(self.stream_ready(si));
        // A memset runs on the SMs too, like a D2D copy (docs/gpu-facts.md).
        let start = self.place_on_sms(si, ready + d.dispatch_ns, SM_COPY_BLOCKS, dur);
        let end = start + dur;
        let stream_id = self.streams[si].cupti_id;
        let name = self.names.memset.clone();
        let observed = self.observed(skey, |rid| Record::Memset {
            rid,
            stream: stream_id,
            correlation_id: corr,
            queued,
            submitted: ready,
            start,
            end,
            detail: ground_truth::trace::MemsetDetail {
                bytes,
                context: 1,
                device: 0,
            }
            .into(),
        });
        let times = DeviceTimes {
            queued,
            submitted: ready,
            start,
            end,
        };
        let dev = self.enqueue(at, NodeKind::Memset, name, times, None, observed);
        let earliest = ready + self.be.device.dispatch_ns;
        self.note_waiting(si, dev, earliest, SM_COPY_BLOCKS, dur, start);
        dev
    }

    pub(super) fn event_record(&mut self, at: Enqueued, ei: usize) -> NodeId {
        let (si, queued, corr) = (at.si, at.queued, at.corr);
        let done = queued.max(self.stream_ready(si));
        let name = self.names.event_record.clone();
        let sync_id = self.event_sync_id;
        self.event_sync_id += 1;
        let (event, stream) = (self.events[ei].handle, self.streams[si].cupti_id);
        let observed = Observed::Record(|rid| Record::CudaEvent {
            rid,
            event,
            event_sync_id: sync_id,
            stream,
            correlation_id: corr,
            ts: done,
        });
        let times = DeviceTimes::instant(queued, done);
        let dev = self.enqueue(at, NodeKind::EventRecord, name, times, None, observed);
        self.events[ei].last = Some((dev, done, sync_id));
        dev
    }

    pub(super) fn stream_wait(&mut self, at: Enqueued, ei: usize) -> NodeId {
        let (si, queued, corr) = (at.si, at.queued, at.corr);
        let start = queued.max(self.stream_ready(si));
        let last = self.events[ei].last;
        let waited_record = last.map(|l| l.0);
        let end = self.b.wait_end(start, waited_record);
        let name = self.names.stream_wait.clone();
        let (event, stream) = (self.events[ei].handle, self.streams[si].cupti_id);
        let event_sync_id = last.map(|l| l.2).unwrap_or(0);
        let observed = Observed::Record(|rid| Record::Sync {
            rid,
            sync_type: SyncType::StreamWaitEvent,
            stream,
            event,
            event_sync_id,
            correlation_id: corr,
            start,
            end,
        });
        let times = DeviceTimes {
            queued,
            submitted: start,
            start,
            end,
        };
        self.enqueue(
            at,
            NodeKind::StreamWait,
            name,
            times,
            waited_record,
            observed,
        )
    }

    pub(super) fn graph_launch(&mut self, at: Enqueued, gi: usize, skey: &StepKey, key: u64) {
        let Enqueued {
            si,
            launch,
            queued,
            corr,
            info,
        } = at;
        let decl = &self.sc.graphs[gi];
        let base_ready = queued.max(self.stream_ready(si));
        let tail = std::mem::take(&mut self.streams[si].tail);
        let mut ids: HashMap<&str, NodeId> = HashMap::new();
        let mut has_dependants: Vec<bool> = vec![false; decl.nodes.len()];
        for n in &decl.nodes {
            for a in &n.after {
                if let Some(j) = decl.nodes.iter().position(|m| &m.id == a) {
                    has_dependants[j] = true;
                }
            }
        }
        let exec_id = self.graphs[gi].exec_id;
        let stream_id = self.streams[si].cupti_id;
        let step_has_id = self.names.step(skey.program, skey.step).id.is_some();
        let mut sinks = Vec::new();
        let mut tail_end = base_ready;
        for (ni, n) in decl.nodes.iter().enumerate() {
            let nkey = StepKey {
                graph_node: Some(n.id.clone()),
                ..skey.clone()
            };
            let deps: Vec<NodeId> = n.after.iter().map(|a| ids[a.as_str()]).collect();
            let ready = self.b.graph_ready(base_ready, &deps);
            let dur = self.jitter(
                key ^ crate::mix(ni as u64 + 77),
                (n.kernel.duration_us * 1000.0) as Ns,
            ) + self.stretch(&nkey);
            let start = self.place_on_sms(si, ready + 1_000, n.kernel.grid, dur);
            let end = start + dur;
            let mut inf = info.clone();
            let names = self.names.step(skey.program, skey.step);
            inf.step = Some(names.graph_node_steps[ni].clone());
            let name = self.names.graph_kernel(gi, ni).clone();
            let op = DeviceOp {
                kind: NodeKind::GraphNode,
                name: name.clone(),
                info: inf,
                times: DeviceTimes {
                    queued,
                    submitted: ready,
                    start,
                    end,
                },
                launch,
                after: if n.after.is_empty() { &tail } else { &[] },
                waited_record: None,
            };
            let dev = self.b.graph_node(op, &deps);
            ids.insert(&n.id, dev);
            if !has_dependants[ni] {
                sinks.push(dev);
            }
            tail_end = tail_end.max(end);
            let graph_node_id = 0x10_0000
                + ((self.graphs[gi].generation as u64) << 16)
                + ((gi as u64) << 8)
                + ni as u64;
            let (grid, block) = ([n.kernel.grid, 1, 1], [n.kernel.block, 1, 1]);
            let observed = self.observed(&nkey, |rid| Record::Kernel {
                rid,
                stream: stream_id,
                correlation_id: corr,
                queued: 0,
                submitted: 0,
                start,
                end,
                detail: ground_truth::trace::KernelDetail {
                    name,
                    context: 1,
                    device: 0,
                    graph_id: exec_id,
                    graph_node_id,
                    grid,
                    block,
                    channel: si as u32,
                }
                .into(),
            });
            self.b.observe(dev, observed, &mut self.loss);
            if step_has_id {
                self.keys.insert(nkey, dev);
            }
        }
        self.streams[si].tail = sinks;
        self.streams[si].tail_end = tail_end;
    }
}
