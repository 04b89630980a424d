//! The ring-buffer record layout shared with src/bpf/recorder.bpf.c.

pub const EV_UPROBE: u32 = 1;
pub const EV_SCHED: u32 = 2;
pub const EV_FAULT: u32 = 3;
pub const EV_STACK_COPY: u32 = 4;

pub const REASON_PREEMPTED: u32 = 0;
pub const REASON_BLOCKED: u32 = 1;
pub const REASON_TRACED: u32 = 2;

pub const CNT_RB_DROPPED: u32 = 0;
pub const CNT_STACK_ERRORS: u32 = 1;
pub const CNT_FAULTS_UNTIMED: u32 = 2;
pub const CNT_STACK_WALKS: u32 = 3;
pub const CNT_STACK_REUSED: u32 = 4;
pub const CNT_STACK_COPIES: u32 = 5;
pub const CNT_STACK_COPIES_DROPPED: u32 = 6;

/// `STACK_COPY_MAX` and `STACK_COPY_CHUNK` of recorder.bpf.c.
pub const STACK_COPY_MAX: u32 = 64 * 1024;
pub const STACK_COPY_CHUNK: u32 = 1024;

pub const FAULT_MAJOR: u32 = 1;
pub const FAULT_TIMED: u32 = 2;

pub const HANDLE_NONE: u32 = 0;
pub const HANDLE_ARG: u32 = 1;
pub const HANDLE_ARG_FIELD: u32 = 2;
pub const MAX_FUNCS: usize = 4096;

/// `struct event` of recorder.bpf.c.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RawEvent {
    pub kind: u32,
    pub tid: u32,
    pub t0: u64,
    pub t1: u64,
    pub arg: u64,
    pub ret_addr: u64,
    pub stack_id: i64,
    pub aux: u32,
    pub reason: u32,
    pub extra: u64,
}

pub const RAW_EVENT_SIZE: usize = 64;

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_ne_bytes(b[o..o + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_ne_bytes(b[o..o + 8].try_into().unwrap())
}

impl RawEvent {
    pub fn parse(b: &[u8]) -> Option<RawEvent> {
        if b.len() < RAW_EVENT_SIZE {
            return None;
        }
        Some(RawEvent {
            kind: u32_at(b, 0),
            tid: u32_at(b, 4),
            t0: u64_at(b, 8),
            t1: u64_at(b, 16),
            arg: u64_at(b, 24),
            ret_addr: u64_at(b, 32),
            stack_id: u64_at(b, 40) as i64,
            aux: u32_at(b, 48),
            reason: u32_at(b, 52),
            extra: u64_at(b, 56),
        })
    }
}

/// `struct stack_copy` of recorder.bpf.c: a uprobe entry's registers and the
/// user stack copied from `sp` upward.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StackCopy<'a> {
    pub tid: u32,
    /// The call's uprobe record has the same `t0` ...
    pub enter: u64,
    /// ... and the same function index (`aux`).
    pub function: u32,
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
    /// The bytes at `sp..sp + stack.len()`.
    pub stack: &'a [u8],
}

pub const STACK_COPY_HEAD_SIZE: usize = 48;

impl<'a> StackCopy<'a> {
    pub fn parse(b: &'a [u8]) -> Option<StackCopy<'a>> {
        if b.len() < STACK_COPY_HEAD_SIZE || u32_at(b, 0) != EV_STACK_COPY {
            return None;
        }
        let len = u32_at(b, 20) as usize;
        let data = &b[STACK_COPY_HEAD_SIZE..];
        Some(StackCopy {
            tid: u32_at(b, 4),
            enter: u64_at(b, 8),
            function: u32_at(b, 16),
            ip: u64_at(b, 24),
            sp: u64_at(b, 32),
            bp: u64_at(b, 40),
            stack: &data[..len.min(data.len())],
        })
    }
}

/// `struct fault_state` of recorder.bpf.c (values of the `faults` map).
pub fn parse_fault_state(b: &[u8]) -> Option<(u64, u64, u64)> {
    (b.len() >= 24).then(|| (u64_at(b, 0), u64_at(b, 8), u64_at(b, 16)))
}

/// `struct handle_spec` of recorder.bpf.c.
pub fn handle_spec_bytes(kind: u32, arg: u32, offset: u32) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[0..4].copy_from_slice(&kind.to_ne_bytes());
    b[4..8].copy_from_slice(&arg.to_ne_bytes());
    b[8..12].copy_from_slice(&offset.to_ne_bytes());
    b
}

/// Frames of a BPF_MAP_TYPE_STACK_TRACE value (zero-terminated u64 array).
pub fn parse_stack(b: &[u8]) -> Vec<u64> {
    b.chunks_exact(8)
        .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
        .take_while(|&a| a != 0)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_roundtrip() {
        let mut b = vec![0u8; 64];
        b[0..4].copy_from_slice(&EV_SCHED.to_ne_bytes());
        b[4..8].copy_from_slice(&77u32.to_ne_bytes());
        b[8..16].copy_from_slice(&100u64.to_ne_bytes());
        b[16..24].copy_from_slice(&200u64.to_ne_bytes());
        b[40..48].copy_from_slice(&(-14i64).to_ne_bytes());
        b[48..52].copy_from_slice(&3u32.to_ne_bytes());
        b[52..56].copy_from_slice(&REASON_TRACED.to_ne_bytes());
        let e = RawEvent::parse(&b).unwrap();
        assert_eq!(
            (e.kind, e.tid, e.t0, e.t1, e.stack_id, e.aux, e.reason),
            (EV_SCHED, 77, 100, 200, -14, 3, REASON_TRACED)
        );
        assert!(RawEvent::parse(&b[..63]).is_none());
        let mut s = vec![0u8; 32];
        s[0..8].copy_from_slice(&5u64.to_ne_bytes());
        s[8..16].copy_from_slice(&6u64.to_ne_bytes());
        assert_eq!(parse_stack(&s), vec![5, 6]);
    }

    #[test]
    fn stack_copy_roundtrip() {
        let mut b = vec![0u8; STACK_COPY_HEAD_SIZE + 32];
        b[0..4].copy_from_slice(&EV_STACK_COPY.to_ne_bytes());
        b[4..8].copy_from_slice(&9u32.to_ne_bytes());
        b[8..16].copy_from_slice(&1234u64.to_ne_bytes());
        b[16..20].copy_from_slice(&2u32.to_ne_bytes());
        b[20..24].copy_from_slice(&16u32.to_ne_bytes());
        b[24..32].copy_from_slice(&0x1000u64.to_ne_bytes());
        b[32..40].copy_from_slice(&0x7000u64.to_ne_bytes());
        b[40..48].copy_from_slice(&0x7100u64.to_ne_bytes());
        b[48] = 0xaa;
        let c = StackCopy::parse(&b).unwrap();
        assert_eq!(
            (
                c.tid,
                c.enter,
                c.function,
                c.ip,
                c.sp,
                c.bp,
                c.stack.len(),
                c.stack[0]
            ),
            (9, 1234, 2, 0x1000, 0x7000, 0x7100, 16, 0xaa)
        );
        // A length past the record is cut to what is there.
        b[20..24].copy_from_slice(&4096u32.to_ne_bytes());
        assert_eq!(StackCopy::parse(&b).unwrap().stack.len(), 32);
        b[0..4].copy_from_slice(&EV_UPROBE.to_ne_bytes());
        assert!(StackCopy::parse(&b).is_none());
    }
}
