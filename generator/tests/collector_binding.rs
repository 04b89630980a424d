//! A collector's records bound to the workload's truth (`generator::collector`,
//! baselines/COLLECTORS.md): on its own clock and with its own thread ids, a
//! collector that saw everything observes every device op and call; records of
//! other runs stay out; a collector whose records match nothing is refused.

mod common;

use generator::collector::{bind, KnownKernel};
use ground_truth::collector::{CollectorClock, CollectorRecords};
use ground_truth::trace::Record;
use ground_truth::Bundle;

const BODY: &str = r#"cause: event_wait
seed: 31
threads:
  - name: main
streams:
  - name: s0
  - name: s1
events:
  - name: ready
programs:
  - name: serve
    start: main
    requests: 2
    interval_us: 2000
    steps:
      - {op: copy, id: upload, stream: s0, direction: h2d, bytes: 1048576, memory: pinned}
      - {op: kernel, id: root, stream: s0, name: producer, duration_us: 150, grid: 32}
      - {op: event_record, event: ready, stream: s0}
      - {op: stream_wait, stream: s1, event: ready}
      - {op: kernel, id: consumer, stream: s1, name: consumer, duration_us: 100, grid: 32}
      - {op: memset, stream: s1, bytes: 4096}
      - {op: sync, target: device}
injection:
  kind: kernel_slowdown
  target: root
  magnitude_us: 600
symptom:
  step: consumer
"#;

/// CUPTI's default clock is not CLOCK_MONOTONIC: a constant apart.
const CLOCK_SHIFT: i64 = 1_733_000_000_000_000_000;
/// CUPTI's default thread ids are not the OS's.
const FOREIGN_TID: u32 = 0x7F00_0000;

fn recorded() -> Bundle {
    common::record(&common::scenario(BODY))
}

fn kernels(b: &Bundle) -> Vec<KnownKernel> {
    b.trace
        .iter()
        .filter_map(|r| match r {
            Record::Kernel {
                start, end, detail, ..
            } => Some(KnownKernel {
                name: detail.name.to_string(),
                start: *start,
                end: *end,
            }),
            _ => None,
        })
        .collect()
}

/// What a CUPTI collector on its own clock and thread ids made of the run.
fn as_collector(b: &Bundle, extra: Vec<Record>) -> CollectorRecords {
    let mut records: Vec<Record> = b
        .trace
        .iter()
        .filter(|r| {
            matches!(
                r,
                Record::Api { .. }
                    | Record::Kernel { .. }
                    | Record::Memcpy { .. }
                    | Record::Memset { .. }
            )
        })
        .cloned()
        .chain(extra)
        .collect();
    for r in &mut records {
        *r.rid_mut() = 0;
        let s = |t: &mut u64| *t = (*t as i64 + CLOCK_SHIFT) as u64;
        match r {
            Record::Api {
                tid, start, end, ..
            } => {
                *tid += FOREIGN_TID;
                s(start);
                s(end);
            }
            Record::Kernel { start, end, .. }
            | Record::Memcpy { start, end, .. }
            | Record::Memset { start, end, .. } => {
                s(start);
                s(end);
            }
            _ => {}
        }
    }
    CollectorRecords {
        schema_version: ground_truth::SCHEMA_VERSION,
        collector: "test-collector".into(),
        clock: CollectorClock::Own,
        dropped: 0,
        records,
    }
}

#[test]
fn a_collector_on_its_own_clock_and_threads_observes_every_device_op_and_call() {
    let b = recorded();
    let (bound, binding) = bind(&b, &as_collector(&b, Vec::new()), &kernels(&b)).expect("bound");
    assert_eq!(binding.offset_ns, -CLOCK_SHIFT);
    assert!(binding.threads_mapped >= 1, "{binding:?}");
    let observed_before = b
        .ground_truth
        .nodes
        .iter()
        .filter(|n| n.kind.is_device_op() && !n.rids.is_empty())
        .count();
    assert!(observed_before > 0);
    assert_eq!(
        binding.device_nodes_observed, observed_before,
        "{binding:?}"
    );
    assert!(binding.call_nodes_observed > 0, "{binding:?}");
    // Every device node's record is the one the recorder gave it, back on its clock.
    let by_rid: std::collections::HashMap<u64, &Record> =
        bound.trace.iter().map(|r| (r.rid(), r)).collect();
    for (old, new) in b.ground_truth.nodes.iter().zip(&bound.ground_truth.nodes) {
        if !old.kind.is_device_op() || old.rids.is_empty() {
            continue;
        }
        let rec = by_rid[&new.rids[0]];
        let start = match rec {
            Record::Kernel { start, .. }
            | Record::Memcpy { start, .. }
            | Record::Memset { start, .. } => *start,
            other => panic!("a device node owns {other:?}"),
        };
        let own = b
            .trace
            .iter()
            .find(|r| r.rid() == old.rids[0])
            .expect("its record");
        let own_start = match own {
            Record::Kernel { start, .. }
            | Record::Memcpy { start, .. }
            | Record::Memset { start, .. } => *start,
            _ => continue,
        };
        assert_eq!(start, own_start, "node {}", old.name);
    }
    // The symptom is asked about through the collector's record of it.
    let s = &bound.ground_truth.symptoms[0];
    assert!(bound.ground_truth.nodes[s.node as usize]
        .rids
        .contains(&s.rid));
    assert!(by_rid[&s.rid].is_device_op());
    assert_eq!(bound.manifest.collectors, vec!["own:test-collector"]);
    // The truth is the workload's.
    assert_eq!(bound.ground_truth.edges, b.ground_truth.edges);
    assert_eq!(s.cause, b.ground_truth.symptoms[0].cause);
}

#[test]
fn records_of_other_runs_stay_out() {
    let b = recorded();
    // The same kernel a second later (the workload's next run).
    let later: Vec<Record> = b
        .trace
        .iter()
        .filter(|r| matches!(r, Record::Kernel { .. }))
        .cloned()
        .map(|mut r| {
            if let Record::Kernel { start, end, .. } = &mut r {
                *start += 1_000_000_000;
                *end += 1_000_000_000;
            }
            r
        })
        .collect();
    let n_later = later.len();
    // The workload stamped that run too (workload.json lists every run).
    let mut known = kernels(&b);
    known.extend(kernels(&b).into_iter().map(|mut k| {
        k.start += 1_000_000_000;
        k.end += 1_000_000_000;
        k
    }));
    let set = as_collector(&b, later);
    let all = set.records.len();
    let (bound, binding) = bind(&b, &set, &known).expect("bound");
    assert_eq!(binding.offset_ns, -CLOCK_SHIFT);
    assert_eq!(bound.trace.len(), all - n_later);
}

#[test]
fn a_collector_that_saw_no_kernel_of_the_workload_is_refused() {
    let b = recorded();
    let mut set = as_collector(&b, Vec::new());
    for r in &mut set.records {
        if let Record::Kernel { detail, .. } = r {
            let mut d = (**detail).clone();
            d.name = "someone_elses_kernel".into();
            *detail = d.into();
        }
    }
    let e = bind(&b, &set, &kernels(&b)).expect_err("nothing to align on");
    assert!(e.contains("cannot align"), "{e}");
}
