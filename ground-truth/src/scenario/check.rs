//! [`Scenario::check`]: the references and invariants the types can't express, one
//! validator per section of the scenario. Problems are reported in the order the
//! sections are checked here (declarations, queues, graphs, programs, symptom, names,
//! injection, then the totals), which tests and users' error output rely on.

use super::limits;
use super::{
    InjectionKind, KernelSpec, ObjectKind, Scenario, ScenarioProblem, Step, SyncTarget,
    MAX_EVENT_RING,
};
use crate::labels::Question;
use std::collections::HashSet;

/// The names each kind of declared object has, for the references to them.
struct Declared {
    threads: HashSet<String>,
    queues: HashSet<String>,
    streams: HashSet<String>,
    events: HashSet<String>,
    graphs: HashSet<String>,
}

impl Scenario {
    /// Checks references and invariants that the types can't express.
    pub fn check(&self) -> Vec<ScenarioProblem> {
        let mut out = Vec::new();
        let mut bad = |path: String, message: String| out.push(ScenarioProblem { path, message });
        self.check_schema_version(&mut bad);
        let declared = self.check_declarations(&mut bad);
        self.check_counts(&mut bad);
        self.check_queues(&declared, &mut bad);
        self.check_graphs(&mut bad);
        self.check_programs(&declared, &mut bad);
        self.check_symptom(&mut bad);
        self.check_kernel_names(&mut bad);
        self.check_injection(&mut bad);
        // Totals last: a value past the limit on its own is reported at its path.
        limits::size_problems(self, &mut bad);
        out
    }

    fn check_schema_version(&self, bad: &mut dyn FnMut(String, String)) {
        if self.schema_version != crate::SCHEMA_VERSION {
            bad(
                "schema_version".into(),
                format!(
                    "expected {}, found {}",
                    crate::SCHEMA_VERSION,
                    self.schema_version
                ),
            );
        }
    }

    /// Duplicate names of every kind of object, and event rings of a size that can't be.
    fn check_declarations(&self, bad: &mut dyn FnMut(String, String)) -> Declared {
        let threads = unique_names(
            self.threads.iter().map(|t| t.name.as_str()),
            "thread",
            "threads",
            bad,
        );
        let queues = unique_names(
            self.queues.iter().map(|t| t.name.as_str()),
            "queue",
            "queues",
            bad,
        );
        let streams = unique_names(
            self.streams.iter().map(|t| t.name.as_str()),
            "stream",
            "streams",
            bad,
        );
        let events = unique_names(
            self.events.iter().map(|t| t.name.as_str()),
            "event",
            "events",
            bad,
        );
        for (i, e) in self.events.iter().enumerate() {
            if !(1..=MAX_EVENT_RING).contains(&e.count) {
                bad(
                    format!("events[{i}].count"),
                    format!("an event ring holds 1 to {MAX_EVENT_RING} events"),
                );
            }
        }
        let graphs = unique_names(
            self.graphs.iter().map(|t| t.name.as_str()),
            "graph",
            "graphs",
            bad,
        );
        // Program names are only checked for duplicates.
        unique_names(
            self.programs.iter().map(|t| t.name.as_str()),
            "program",
            "programs",
            bad,
        );
        Declared {
            threads,
            queues,
            streams,
            events,
            graphs,
        }
    }

    /// Repetitions, programs and thread pools: at least one of each.
    fn check_counts(&self, bad: &mut dyn FnMut(String, String)) {
        if self.repetitions == 0 {
            bad("repetitions".into(), "must be at least 1".into());
        }
        if self.programs.is_empty() {
            bad("programs".into(), "at least one program is required".into());
        }
        for (i, t) in self.threads.iter().enumerate() {
            if t.count == 0 {
                bad(
                    format!("threads[{i}].count"),
                    "a thread pool needs at least one thread".into(),
                );
            }
        }
    }

    /// Each queue's consumer and capacity, then whether bounded queues could deadlock.
    fn check_queues(&self, declared: &Declared, bad: &mut dyn FnMut(String, String)) {
        for (i, q) in self.queues.iter().enumerate() {
            if !declared.threads.contains(&q.consumer) {
                bad(
                    format!("queues[{i}].consumer"),
                    format!("no thread named `{}`", q.consumer),
                );
            }
            if q.capacity == Some(0) {
                bad(
                    format!("queues[{i}].capacity"),
                    "a bounded queue holds at least one item (leave `capacity` out for an unbounded one)".into(),
                );
            }
        }
        if let Some((path, message)) = self.bounded_queue_cycle() {
            bad(path, message);
        }
    }

    /// Graph nodes: unique ids, dependencies on earlier nodes only, valid kernels.
    fn check_graphs(&self, bad: &mut dyn FnMut(String, String)) {
        for (gi, g) in self.graphs.iter().enumerate() {
            let mut ids: Vec<&str> = Vec::new();
            for (ni, n) in g.nodes.iter().enumerate() {
                if ids.contains(&n.id.as_str()) {
                    bad(
                        format!("graphs[{gi}].nodes[{ni}].id"),
                        format!("duplicate graph node id `{}`", n.id),
                    );
                }
                for (ai, a) in n.after.iter().enumerate() {
                    // Dependencies must name earlier nodes: this makes cycles impossible.
                    if !ids.contains(&a.as_str()) {
                        bad(
                            format!("graphs[{gi}].nodes[{ni}].after[{ai}]"),
                            format!("`{a}` is not an earlier node of graph `{}` (dependencies must be acyclic)", g.name),
                        );
                    }
                }
                check_kernel(&n.kernel, &format!("graphs[{gi}].nodes[{ni}].kernel"), bad);
                ids.push(&n.id);
            }
            if g.nodes.is_empty() {
                bad(
                    format!("graphs[{gi}].nodes"),
                    "a graph needs at least one node".into(),
                );
            }
        }
    }

    /// Each program's start thread, requests and times, then its steps in order.
    fn check_programs(&self, declared: &Declared, bad: &mut dyn FnMut(String, String)) {
        // (program, step id) of every step with an id so far: ids are unique per program.
        let mut step_ids: Vec<(String, String)> = Vec::new();
        for (pi, p) in self.programs.iter().enumerate() {
            if !declared.threads.contains(&p.start) {
                bad(
                    format!("programs[{pi}].start"),
                    format!("no thread named `{}`", p.start),
                );
            }
            if p.requests == 0 {
                bad(
                    format!("programs[{pi}].requests"),
                    "must be at least 1".into(),
                );
            }
            limits::check_time(p.interval_us, &format!("programs[{pi}].interval_us"), bad);
            limits::check_time(p.offset_us, &format!("programs[{pi}].offset_us"), bad);
            // NVTX ranges open at this step: a pop needs a push before it.
            let mut depth = 0i32;
            for (si, s) in p.steps.iter().enumerate() {
                let path = format!("programs[{pi}].steps[{si}]");
                if let Some(id) = s.id() {
                    if step_ids
                        .iter()
                        .any(|(prog, sid)| prog == &p.name && sid == id)
                    {
                        bad(
                            format!("{path}.id"),
                            format!("duplicate step id `{id}` in program `{}`", p.name),
                        );
                    }
                    step_ids.push((p.name.clone(), id.to_string()));
                }
                self.check_step(s, &path, declared, &mut depth, bad);
            }
        }
    }

    /// One step's references, sizes and times; `depth` is the NVTX depth before it.
    fn check_step(
        &self,
        s: &Step,
        path: &str,
        declared: &Declared,
        depth: &mut i32,
        bad: &mut dyn FnMut(String, String),
    ) {
        let stream_ref = |s: &str, bad: &mut dyn FnMut(String, String)| {
            if !declared.streams.contains(s) {
                bad(format!("{path}.stream"), format!("no stream named `{s}`"));
            }
        };
        let event_ref = |e: &str, bad: &mut dyn FnMut(String, String)| {
            if !declared.events.contains(e) {
                bad(format!("{path}.event"), format!("no event named `{e}`"));
            }
        };
        match s {
            Step::HostWork { duration_us, .. } => {
                limits::check_time(*duration_us, &format!("{path}.duration_us"), bad)
            }
            Step::Handoff { queue } => {
                if !declared.queues.contains(queue) {
                    bad(format!("{path}.queue"), format!("no queue named `{queue}`"));
                }
            }
            Step::Kernel { stream, .. } => {
                stream_ref(stream, bad);
                check_kernel(&s.kernel_spec().expect("kernel step"), path, bad);
            }
            Step::Copy { stream, bytes, .. } => {
                stream_ref(stream, bad);
                if *bytes == 0 {
                    bad(
                        format!("{path}.bytes"),
                        "a copy needs at least one byte".into(),
                    );
                }
                limits::check_bytes(*bytes, &format!("{path}.bytes"), bad);
            }
            Step::Memset { stream, bytes, .. } => {
                stream_ref(stream, bad);
                limits::check_bytes(*bytes, &format!("{path}.bytes"), bad);
            }
            Step::EventRecord {
                event,
                stream,
                request_offset,
                ..
            }
            | Step::StreamWait {
                event,
                stream,
                request_offset,
                ..
            } => {
                stream_ref(stream, bad);
                event_ref(event, bad);
                let count = self
                    .events
                    .iter()
                    .find(|e| &e.name == event)
                    .map_or(1, |e| e.count);
                if request_offset.unsigned_abs() >= count {
                    bad(
                        format!("{path}.request_offset"),
                        format!("{request_offset} reaches past the {count} event(s) of `{event}`: a ring of N events reaches at most N - 1 requests away"),
                    );
                }
            }
            Step::GraphLaunch { graph, stream, .. } => {
                stream_ref(stream, bad);
                if !declared.graphs.contains(graph) {
                    bad(format!("{path}.graph"), format!("no graph named `{graph}`"));
                }
            }
            Step::Sync {
                target,
                stream,
                event,
                ..
            } => match target {
                SyncTarget::Stream => match stream {
                    Some(s) => stream_ref(s, bad),
                    None => bad(
                        format!("{path}.stream"),
                        "a stream sync needs `stream`".into(),
                    ),
                },
                SyncTarget::Event => match event {
                    Some(e) => event_ref(e, bad),
                    None => bad(
                        format!("{path}.event"),
                        "an event sync needs `event`".into(),
                    ),
                },
                SyncTarget::Device => {}
            },
            Step::NvtxPush { .. } => *depth += 1,
            Step::NvtxPop => {
                *depth -= 1;
                if *depth < 0 {
                    bad(
                        path.to_string(),
                        "nvtx_pop without a matching nvtx_push".into(),
                    );
                }
            }
            Step::Recreate { object, name } => {
                let known = match object {
                    ObjectKind::Stream => &declared.streams,
                    ObjectKind::Event => &declared.events,
                    ObjectKind::Graph => &declared.graphs,
                };
                if !known.contains(name) {
                    bad(
                        format!("{path}.name"),
                        format!("no {object:?} named `{name}`").to_lowercase(),
                    );
                }
            }
        }
    }

    /// The symptom's step exists and is something lateness can be asked of; call-site
    /// and operator questions carry their answer.
    fn check_symptom(&self, bad: &mut dyn FnMut(String, String)) {
        match self.find_step(
            &self.symptom.program,
            &self.symptom.step,
            self.symptom.request,
        ) {
            Ok(s) => {
                if !(s.is_device_op() || matches!(s, Step::Sync { .. } | Step::Copy { .. })) {
                    bad(
                        "symptom.step".into(),
                        format!(
                            "a symptom must be a device operation or a blocking call, not `{}`",
                            s.op_name()
                        ),
                    );
                }
            }
            Err(m) => bad("symptom.step".into(), m),
        }
        if matches!(
            self.symptom.question,
            Question::CallSite | Question::Operator
        ) && self.symptom.answer.is_none()
        {
            bad(
                "symptom.answer".into(),
                "call_site and operator questions need an expected `answer`".into(),
            );
        }
    }

    fn check_kernel_names(&self, bad: &mut dyn FnMut(String, String)) {
        for (i, n) in self.names.iter().enumerate() {
            if n.is_empty() {
                bad(
                    format!("names[{i}]"),
                    "a kernel name cannot be empty".into(),
                );
            }
        }
    }

    /// The injection's magnitude, and its target: a step, or a graph node for a
    /// graph-dependency injection.
    fn check_injection(&self, bad: &mut dyn FnMut(String, String)) {
        if let Some(inj) = &self.injection {
            limits::check_time(inj.magnitude_us, "injection.magnitude_us", bad);
            let in_graph = inj.kind == InjectionKind::GraphDependency
                && self
                    .graphs
                    .iter()
                    .any(|g| g.nodes.iter().any(|n| n.id == inj.target));
            if !in_graph {
                if let Err(m) = self.find_step(&inj.program, &inj.target, inj.request) {
                    bad("injection.target".into(), m);
                }
            }
        }
    }

    /// The step with id `step` of a program (the first when `program` is `None`), if the
    /// program has that request; otherwise why not.
    fn find_step(
        &self,
        program: &Option<String>,
        step: &str,
        request: u32,
    ) -> Result<&Step, String> {
        let p = self.program(program.as_deref()).ok_or_else(|| {
            format!(
                "no program named `{}`",
                program.as_deref().unwrap_or("<first>")
            )
        })?;
        if request >= p.requests {
            return Err(format!(
                "program `{}` has {} requests; request {request} does not exist",
                p.name, p.requests
            ));
        }
        p.steps
            .iter()
            .find(|s| s.id() == Some(step))
            .ok_or_else(|| format!("no step with id `{step}` in program `{}`", p.name))
    }

    /// A push onto a bounded queue that could wait for room forever: its
    /// thread waits for the queue's consumer to take an item, and that thread
    /// itself waits, through pushes onto bounded queues, for the first (its
    /// own consumer included). The path of the push and why.
    fn bounded_queue_cycle(&self) -> Option<(String, String)> {
        // (pushing thread, consumer thread, path, queue) of every push onto a bounded queue.
        let mut waits: Vec<(&str, &str, String, &str)> = Vec::new();
        for (pi, p) in self.programs.iter().enumerate() {
            let mut on = p.start.as_str();
            for (si, s) in p.steps.iter().enumerate() {
                let Step::Handoff { queue } = s else { continue };
                let Some(decl) = self.queues.iter().find(|q| &q.name == queue) else {
                    break;
                };
                if decl.capacity.is_some() {
                    let path = format!("programs[{pi}].steps[{si}].queue");
                    waits.push((on, decl.consumer.as_str(), path, queue.as_str()));
                }
                on = decl.consumer.as_str();
            }
        }
        for (from, to, path, queue) in &waits {
            let mut seen = HashSet::new();
            let mut stack = vec![*to];
            while let Some(t) = stack.pop() {
                if t == *from {
                    return Some((
                        path.clone(),
                        format!(
                            "thread `{from}` pushes onto bounded queue `{queue}`, whose consumer `{to}` \
                             waits for room that only `{from}` makes (through bounded queues): \
                             both could wait forever"
                        ),
                    ));
                }
                if seen.insert(t) {
                    stack.extend(waits.iter().filter(|w| w.0 == t).map(|w| w.1));
                }
            }
        }
        None
    }
}

/// The names of one kind of object, each duplicate reported at its `path[i].name`.
fn unique_names<'a>(
    names: impl Iterator<Item = &'a str>,
    what: &str,
    path: &str,
    bad: &mut dyn FnMut(String, String),
) -> HashSet<String> {
    let mut seen = HashSet::new();
    for (i, n) in names.enumerate() {
        if !seen.insert(n.to_string()) {
            bad(
                format!("{path}[{i}].name"),
                format!("duplicate {what} name `{n}`"),
            );
        }
    }
    seen
}

fn check_kernel(k: &KernelSpec, path: &str, bad: &mut dyn FnMut(String, String)) {
    limits::check_time(k.duration_us, &format!("{path}.duration_us"), bad);
    limits::check_shape(k.grid, k.block, path, bad);
}
