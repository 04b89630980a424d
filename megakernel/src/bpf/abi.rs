//! The hook program type's ABI: context layout, hooks, map kinds and
//! helpers. Mirrors `megakernel/monitors/mk_bpf.h` and the device
//! interpreter's `mk_bpf_*` structs in `kernels/src/cuda/mk_bpf.cu`.

/// Bytes of the context a program receives in r1.
pub const CTX_SIZE: usize = 80;
/// Bytes of a program's stack (r10 points one past its end).
pub const STACK_SIZE: usize = 512;
/// Instructions a program may have (the device keeps programs in one bank of this many words).
pub const MAX_INSNS: usize = 1024;
/// Programs one set may attach (one per hook at most).
pub const MAX_PROGRAMS: usize = 3;
/// Maps one set may declare.
pub const MAX_MAPS: usize = 8;
/// Bytes of map storage one set may declare (the device arena holds two sets: the active one and the next).
pub const MAX_MAP_BYTES: usize = 64 * 1024;
/// Bytes of a ring map's header (u32 reservations, u32 dropped, 8 reserved) before its records.
pub const RING_HEADER: usize = 16;

/// `lddw` source register marking a map reference (the relocation's map index in imm).
pub const PSEUDO_MAP: u8 = 1;

/// Helper ids (the Linux kernel's ids for the same semantics).
pub const HELPER_MAP_LOOKUP: i32 = 1;
pub const HELPER_MAP_UPDATE: i32 = 2;
pub const HELPER_RING_OUTPUT: i32 = 130;

/// One declared context field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CtxField {
    pub name: &'static str,
    pub offset: usize,
    pub size: usize,
    /// Scheduler state: never written by an observation program.
    pub scheduler_state: bool,
    /// Writable by a scheduling program.
    pub writable: bool,
}

const fn field(name: &'static str, offset: usize, size: usize) -> CtxField {
    CtxField {
        name,
        offset,
        size,
        scheduler_state: false,
        writable: false,
    }
}

/// The context's fields, in layout order (`struct mk_bpf_ctx`).
pub const CTX_FIELDS: &[CtxField] = &[
    field("task", 0, 4),
    field("class_id", 4, 4),
    field("task_gen", 8, 4),
    field("req_gen", 12, 4),
    field("worker", 16, 4),
    field("dep_event", 20, 4),
    field("ts_start", 24, 8),
    field("ts_end", 32, 8),
    field("wait_ns", 40, 8),
    field("hook", 48, 4),
    CtxField {
        scheduler_state: true,
        ..field("queue_depth", 52, 4)
    },
    CtxField {
        scheduler_state: true,
        writable: true,
        ..field("route_hint", 56, 4)
    },
    CtxField {
        scheduler_state: true,
        writable: true,
        ..field("priority", 60, 4)
    },
    field("notify_ns", 64, 8),
    field("queue_ns", 72, 8),
];

/// Where a program runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Hook {
    TaskBegin = 0,
    TaskEnd = 1,
    DepWait = 2,
}

impl Hook {
    pub const ALL: [Hook; 3] = [Hook::TaskBegin, Hook::TaskEnd, Hook::DepWait];

    pub fn section(self) -> &'static str {
        match self {
            Hook::TaskBegin => "mk/task_begin",
            Hook::TaskEnd => "mk/task_end",
            Hook::DepWait => "mk/dep_wait",
        }
    }

    pub fn from_section(name: &str) -> Option<Hook> {
        Hook::ALL.into_iter().find(|h| h.section() == name)
    }
}

/// What a program may do to scheduler state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgramType {
    /// Observes only: the whole context is read-only (every monitor is one).
    Observation,
    /// May also write the writable scheduler-state fields (not run by this track yet).
    Scheduling,
}

/// Map kinds (`MK_MAP_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapKind {
    /// u32 keys in [0, max_entries), values of value_size bytes, zeroed at attach.
    Array,
    /// A bounded ring of max_entries records of value_size bytes; a full ring drops and counts.
    Ring,
}

impl MapKind {
    pub fn id(self) -> u32 {
        match self {
            MapKind::Array => 2,
            MapKind::Ring => 27,
        }
    }
}

/// One declared map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapDef {
    pub name: String,
    pub kind: MapKind,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
}

impl MapDef {
    /// Bytes of its storage in the map arena (8-byte aligned).
    pub fn storage_bytes(&self) -> usize {
        let body = self.value_size as usize * self.max_entries as usize;
        let header = if self.kind == MapKind::Ring {
            RING_HEADER
        } else {
            0
        };
        (header + body).div_ceil(8) * 8
    }
}

/// One program: its symbol, its hook and its relocated bytecode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    pub name: String,
    pub hook: Hook,
    /// 8-byte instructions; map references are `lddw rX, map_index` with src = [`PSEUDO_MAP`].
    pub code: Vec<u8>,
}

impl Program {
    pub fn insns(&self) -> usize {
        self.code.len() / 8
    }
}

/// The programs and maps of one ELF object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramSet {
    pub name: String,
    pub programs: Vec<Program>,
    pub maps: Vec<MapDef>,
}

impl ProgramSet {
    pub fn program(&self, hook: Hook) -> Option<&Program> {
        self.programs.iter().find(|p| p.hook == hook)
    }

    pub fn map_index(&self, name: &str) -> Option<usize> {
        self.maps.iter().position(|m| m.name == name)
    }

    /// Byte offset of each map in the arena, and the arena's size.
    pub fn layout(&self) -> (Vec<usize>, usize) {
        let mut at = 0;
        let offs = self
            .maps
            .iter()
            .map(|m| {
                let o = at;
                at += m.storage_bytes();
                o
            })
            .collect();
        (offs, at)
    }
}

/// The context of one hook (`struct mk_bpf_ctx`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Context {
    pub task: u32,
    pub class_id: u32,
    pub task_gen: u32,
    pub req_gen: u32,
    pub worker: u32,
    pub dep_event: u32,
    pub ts_start: u64,
    pub ts_end: u64,
    pub wait_ns: u64,
    pub hook: u32,
    pub queue_depth: u32,
    pub route_hint: u32,
    pub priority: u32,
    /// The task's dispatch latency: ready − its dependency event's completion.
    pub notify_ns: u64,
    /// The task's queueing: taken up − ready.
    pub queue_ns: u64,
}

impl Context {
    pub fn to_bytes(&self) -> [u8; CTX_SIZE] {
        let mut b = [0u8; CTX_SIZE];
        let mut put = |off: usize, v: &[u8]| b[off..off + v.len()].copy_from_slice(v);
        put(0, &self.task.to_le_bytes());
        put(4, &self.class_id.to_le_bytes());
        put(8, &self.task_gen.to_le_bytes());
        put(12, &self.req_gen.to_le_bytes());
        put(16, &self.worker.to_le_bytes());
        put(20, &self.dep_event.to_le_bytes());
        put(24, &self.ts_start.to_le_bytes());
        put(32, &self.ts_end.to_le_bytes());
        put(40, &self.wait_ns.to_le_bytes());
        put(48, &self.hook.to_le_bytes());
        put(52, &self.queue_depth.to_le_bytes());
        put(56, &self.route_hint.to_le_bytes());
        put(60, &self.priority.to_le_bytes());
        put(64, &self.notify_ns.to_le_bytes());
        put(72, &self.queue_ns.to_le_bytes());
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_tile_the_context_without_overlap() {
        let mut at = 0;
        for f in CTX_FIELDS {
            assert_eq!(f.offset, at, "{}", f.name);
            at += f.size;
        }
        assert_eq!(at, CTX_SIZE);
        let c = Context {
            priority: 0xdead_beef,
            ..Context::default()
        };
        assert_eq!(&c.to_bytes()[60..64], &0xdead_beefu32.to_le_bytes());
        let c = Context {
            queue_ns: 0x0123_4567_89ab_cdef,
            ..Context::default()
        };
        assert_eq!(
            &c.to_bytes()[72..80],
            &0x0123_4567_89ab_cdefu64.to_le_bytes()
        );
    }
}
