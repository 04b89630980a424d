// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
//
// causalbench eBPF host recorder.
//
// One ring buffer (`events`) carries three kinds of records for one target
// process (tgid):
//   EV_UPROBE  entry/return of a probed user function: tid, enter, exit, first
//              argument, user stack id (BPF_MAP_TYPE_STACK_TRACE, BPF_F_USER_STACK)
//              and the return address read from the stack at entry (the call
//              site, in case the kernel's unwinder misses it at function entry);
//   EV_SCHED   a switch-out/switch-in interval of one thread (sched_switch),
//              with the reason derived from the switch-out state and the CPU
//              it was switched out on;
//   EV_FAULT   a user page fault (exceptions/page_fault_user) with its address;
//              when fexit/handle_mm_fault can be attached (fault_timing = 1),
//              its duration (tracepoint -> final handle_mm_fault return) and
//              whether it was major (VM_FAULT_MAJOR on any attempt, or a retried
//              fault, as the kernel's own maj_flt accounting counts it);
//              otherwise (fault_timing = 0) duration 0 and major derived from the
//              thread's maj_flt counter between this fault and its next fault
//              or switch-out.
//   EV_STACK_COPY (only with stack_copy_bytes > 0) at a uprobe's entry: the
//              registers an unwinder starts from (ip, sp, bp) and up to
//              stack_copy_bytes of the user stack from sp, tied to the call's
//              uprobe record by (tid, enter, function index); user space unwinds
//              it with the DWARF unwind tables (src/user_unwind.rs), which reaches
//              callers that keep no frame pointers.
// Every failed ring-buffer reservation is counted in `counters[CNT_RB_DROPPED]`
// (a stack copy that finds no room: `counters[CNT_STACK_COPIES_DROPPED]`; its
// uprobe record is still emitted, with the frame-pointer stack).
//
// The user-stack walk is the one part of a uprobe hit whose cost grows with the
// program (one user-memory read per frame, then a hash of the whole stack): with
// `stack_mode = STACK_PER_SITE` a call site, identified by the return address at
// entry and the next return addresses of the frame-pointer chain, is walked once
// and later hits from it record the same stack id (recorder-ebpf/README.md,
// "Cost per probe hit").

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define EV_UPROBE 1
#define EV_SCHED 2
#define EV_FAULT 3
#define EV_STACK_COPY 4

#define REASON_PREEMPTED 0
#define REASON_BLOCKED 1
#define REASON_TRACED 2

#define CNT_RB_DROPPED 0
#define CNT_STACK_ERRORS 1
#define CNT_FAULTS_UNTIMED 2
#define CNT_STACK_WALKS 3
#define CNT_STACK_REUSED 4
#define CNT_STACK_COPIES 5
#define CNT_STACK_COPIES_DROPPED 6
#define CNT_MAX 8

// How a uprobe's user stack is captured (`stack_mode`).
#define STACK_EVERY_HIT 0 // walk the user stack on every hit
#define STACK_PER_SITE 1  // walk it the first time a call site is seen, reuse its id after
#define STACK_NONE 2      // no walk: the call-site frame read at entry only

#define FAULT_MAJOR 1
#define FAULT_TIMED 2

// Task state bits (include/linux/sched.h); stable ABI of the tracepoint.
#define CB_TASK_RUNNING 0x0000
#define CB_TASK_STOPPED 0x0004
#define CB_TASK_TRACED 0x0008

// vm_fault_t bits and fault flags (include/linux/mm_types.h, mm.h).
#define CB_VM_FAULT_MAJOR 0x0004
#define CB_VM_FAULT_RETRY 0x0400
#define CB_FAULT_FLAG_TRIED 0x0020

// Must match `RawEvent` in src/raw.rs (64 bytes).
struct event {
	__u32 kind;
	__u32 tid;
	__u64 t0;       // uprobe: enter;  sched: switch-out;  fault: tracepoint time
	__u64 t1;       // uprobe: exit;   sched: switch-in;   fault: handled (0 = unknown)
	__u64 arg;      // uprobe: handle argument;           fault: address
	__u64 ret_addr; // uprobe: return address at entry;   fault: error code
	__s64 stack_id; // uprobe: user stack id (< 0: error); others: 0
	__u32 aux;      // uprobe: function index (attach cookie); sched: cpu; fault: flags
	__u32 reason;   // sched: REASON_*
	__u64 extra;    // sched: raw prev_state
};

// Must match `StackCopyHead` in src/raw.rs (48 bytes), followed by the
// stack_copy_bytes reserved for the copy (`len` of them valid).
struct stack_copy {
	__u32 kind;
	__u32 tid;
	__u64 enter; // the call's uprobe record has the same `t0`
	__u32 fn;    // and the same function index (`aux`)
	__u32 len;   // bytes copied from sp upward
	__u64 ip;
	__u64 sp;
	__u64 bp;
	__u8 data[];
};

// Largest stack copy; copies go in chunks so that one crossing the top of the
// stack loses at most STACK_COPY_FINE bytes.
#define STACK_COPY_MAX (64 * 1024)
#define STACK_COPY_CHUNK 1024
#define STACK_COPY_FINE 64

// How to read the recorded handle of probed function `i` (array index = cookie).
#define HANDLE_NONE 0
#define HANDLE_ARG 1       // the n-th integer argument (1-based)
#define HANDLE_ARG_FIELD 2 // a u64 at `offset` in the struct the n-th argument points to
#define MAX_FUNCS 4096

struct handle_spec {
	__u32 kind;
	__u32 arg;
	__u32 offset;
	__u32 pad;
};

struct call_state {
	__u64 enter;
	__u64 arg;
	__u64 ret_addr;
	__s64 stack_id;
};

struct out_state {
	__u64 ts;
	__u64 state;
	__u32 cpu;
	__u32 reason;
};

struct fault_state {
	__u64 ts;
	__u64 address;
	__u64 error_code;
	__u64 maj_flt; // the thread's maj_flt at the fault (fallback mode)
	__u32 major;
	__u32 pad;
};

// Set by user space before load.
const volatile __u32 target_tgid = 0;
const volatile __u32 fault_timing = 0;
const volatile __u32 stack_mode = STACK_EVERY_HIT;
// No return probes (a cost study's knob): the entry emits the record, exit = enter.
const volatile __u32 entry_only = 0;
// Bytes of user stack copied at each uprobe entry (0: none; a multiple of
// STACK_COPY_CHUNK, at most STACK_COPY_MAX). Read-only after load, so the
// verifier knows it as a constant: the ring-buffer reservation below has the
// constant size it requires, and with 0 the copy is dead code.
const volatile __u32 stack_copy_bytes = 0;
// The recorder's polling thread (excluded: it may be a thread of the target).
const volatile __u32 self_tid = 0;
// Wake the poller only once this much data waits; otherwise it drains on its own
// schedule (avoids one wake-up per record).
const volatile __u64 wakeup_bytes = 4 * 1024 * 1024;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 * 1024 * 1024);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_FUNCS);
	__type(key, __u32);
	__type(value, struct handle_spec);
} handle_specs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 16384);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, 127 * sizeof(__u64));
} stacks SEC(".maps");

// STACK_PER_SITE: the stack id of each call site seen (key: `site_key`).
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, __s64);
} site_stacks SEC(".maps");

// In-flight probed calls, keyed by (tid << 32 | function index).
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct call_state);
} calls SEC(".maps");

// Threads of the target currently switched out, keyed by tid.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct out_state);
} switched_out SEC(".maps");

// Page faults being handled (or, in fallback mode, awaiting the major verdict), by tid.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct fault_state);
} faults SEC(".maps");

static __always_inline void count(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &idx);
	if (v)
		__sync_fetch_and_add(v, 1);
}

static __always_inline struct event *reserve(void)
{
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(CNT_RB_DROPPED);
		return NULL;
	}
	__builtin_memset(e, 0, sizeof(*e));
	return e;
}

static __always_inline __u64 submit_flags(void)
{
	return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wakeup_bytes ? BPF_RB_FORCE_WAKEUP
									     : BPF_RB_NO_WAKEUP;
}

// The current thread belongs to the target and is not the recorder itself.
static __always_inline int is_target(__u64 id)
{
	return (id >> 32) == target_tgid && (__u32)id != self_tid;
}

// ---------------------------------------------------------------- uprobes

// The n-th integer argument (System V x86-64: six in registers, then the stack;
// at the first instruction, 0(%rsp) is the return address).
// (The _CORE accessors read through bpf_probe_read_kernel: with a variable
// argument index the compiler folds the plain ones into a computed ctx offset,
// which the verifier rejects.)
static __always_inline __u64 read_arg(struct pt_regs *ctx, __u32 n)
{
	__u64 v = 0;
	switch (n) {
	case 1: return PT_REGS_PARM1_CORE(ctx);
	case 2: return PT_REGS_PARM2_CORE(ctx);
	case 3: return PT_REGS_PARM3_CORE(ctx);
	case 4: return PT_REGS_PARM4_CORE(ctx);
	case 5: return PT_REGS_PARM5_CORE(ctx);
	case 6: return PT_REGS_PARM6_CORE(ctx);
	default:
		if (n > 6 && n < 32)
			bpf_probe_read_user(&v, sizeof(v), (void *)(PT_REGS_SP_CORE(ctx) + 8 * (n - 6)));
		return v;
	}
}

static __always_inline __u64 read_handle(struct pt_regs *ctx, __u32 fn)
{
	struct handle_spec *spec = bpf_map_lookup_elem(&handle_specs, &fn);
	if (!spec || spec->kind == HANDLE_NONE)
		return 0;
	__u64 v = read_arg(ctx, spec->arg);
	if (spec->kind == HANDLE_ARG_FIELD) {
		__u64 field = 0;
		if (v)
			bpf_probe_read_user(&field, sizeof(field), (void *)(v + spec->offset));
		v = field;
	}
	return v;
}

#define SITE_DEPTH 3

// A call site's identity for STACK_PER_SITE: the probed function, the return
// address at entry and the next SITE_DEPTH return addresses of the frame-pointer
// chain (at the first instruction the frame pointer is still the caller's). The
// walk reaches no further than these frames anyway when the callers keep no frame
// pointers; when they do, callers that differ deeper than this share a stack.
static __always_inline __u64 site_key(struct pt_regs *ctx, __u64 ret_addr, __u32 fn)
{
	__u64 key = ret_addr * 0x9E3779B97F4A7C15ULL ^ fn;
	__u64 frame = PT_REGS_FP(ctx);
	for (int i = 0; i < SITE_DEPTH; i++) {
		__u64 next[2] = {0, 0}; // saved frame pointer, return address
		if (!frame || bpf_probe_read_user(next, sizeof(next), (void *)frame))
			break;
		key = (key ^ next[1]) * 0x9E3779B97F4A7C15ULL;
		if (next[0] <= frame)
			break; // the chain must go up the stack
		frame = next[0];
	}
	return key;
}

static __always_inline __s64 walk_stack(struct pt_regs *ctx)
{
	__s64 id = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);
	count(CNT_STACK_WALKS);
	if (id < 0)
		count(CNT_STACK_ERRORS);
	return id;
}

static __always_inline __s64 user_stack(struct pt_regs *ctx, __u64 ret_addr, __u32 fn)
{
	if (stack_mode == STACK_NONE)
		return -1;
	if (stack_mode != STACK_PER_SITE)
		return walk_stack(ctx);
	__u64 key = site_key(ctx, ret_addr, fn);
	__s64 *known = bpf_map_lookup_elem(&site_stacks, &key);
	if (known) {
		count(CNT_STACK_REUSED);
		return *known;
	}
	__s64 id = walk_stack(ctx);
	if (id >= 0)
		bpf_map_update_elem(&site_stacks, &key, &id, BPF_ANY);
	return id;
}

// The user stack from sp upward into a ring-buffer record of its own. One read
// of the whole size first (the usual case: the stack goes on above it); when
// that fails the copy would cross the top of the stack (the main thread's, whose
// mapping ends there), so it is redone in chunks up to the first that fails,
// and that one in finer pieces.
static __always_inline void copy_stack(struct pt_regs *ctx, __u32 tid, __u64 enter, __u32 fn)
{
	if (!stack_copy_bytes || stack_copy_bytes > STACK_COPY_MAX)
		return;
	struct stack_copy *c =
		bpf_ringbuf_reserve(&events, sizeof(struct stack_copy) + stack_copy_bytes, 0);
	if (!c) {
		count(CNT_STACK_COPIES_DROPPED);
		return;
	}
	__u64 sp = PT_REGS_SP(ctx);
	__u32 len = 0;
	if (bpf_probe_read_user(c->data, stack_copy_bytes, (void *)sp) == 0) {
		len = stack_copy_bytes;
	} else {
		for (__u32 i = 0; i < STACK_COPY_MAX / STACK_COPY_CHUNK; i++) {
			__u32 off = i * STACK_COPY_CHUNK;
			if (off + STACK_COPY_CHUNK > stack_copy_bytes)
				break;
			if (bpf_probe_read_user(c->data + off, STACK_COPY_CHUNK, (void *)(sp + off)))
				break;
			len = off + STACK_COPY_CHUNK;
		}
		for (__u32 j = 0; j < STACK_COPY_CHUNK / STACK_COPY_FINE; j++) {
			__u32 off = len;
			if (off + STACK_COPY_FINE > stack_copy_bytes)
				break;
			if (bpf_probe_read_user(c->data + off, STACK_COPY_FINE, (void *)(sp + off)))
				break;
			len = off + STACK_COPY_FINE;
		}
	}
	c->kind = EV_STACK_COPY;
	c->tid = tid;
	c->enter = enter;
	c->fn = fn;
	c->len = len;
	c->ip = PT_REGS_IP(ctx);
	c->sp = sp;
	c->bp = PT_REGS_FP(ctx);
	bpf_ringbuf_submit(c, submit_flags());
	count(CNT_STACK_COPIES);
}

static __always_inline int on_enter(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	if (!is_target(id))
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u32 fn = (__u32)bpf_get_attach_cookie(ctx);
	__u64 key = ((id & 0xffffffffULL) << 32) | fn;
	struct call_state st = {};
	st.enter = now;
	st.arg = read_handle(ctx, fn);
	// At the first instruction of the function the return address is at the
	// top of the stack.
	bpf_probe_read_user(&st.ret_addr, sizeof(st.ret_addr), (void *)PT_REGS_SP(ctx));
	st.stack_id = user_stack(ctx, st.ret_addr, fn);
	copy_stack(ctx, (__u32)id, now, fn);
	if (entry_only) {
		struct event *e = reserve();
		if (e) {
			e->kind = EV_UPROBE;
			e->tid = (__u32)id;
			e->t0 = now;
			e->t1 = now;
			e->arg = st.arg;
			e->ret_addr = st.ret_addr;
			e->stack_id = st.stack_id;
			e->aux = fn;
			bpf_ringbuf_submit(e, submit_flags());
		}
		return 0;
	}
	bpf_map_update_elem(&calls, &key, &st, BPF_ANY);
	return 0;
}

static __always_inline int on_exit(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	if (!is_target(id))
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u64 cookie = bpf_get_attach_cookie(ctx) & 0xffffffffULL;
	__u64 key = ((id & 0xffffffffULL) << 32) | cookie;
	struct call_state *st = bpf_map_lookup_elem(&calls, &key);
	if (!st)
		return 0; // entered before the recorder started
	struct event *e = reserve();
	if (e) {
		e->kind = EV_UPROBE;
		e->tid = (__u32)id;
		e->t0 = st->enter;
		e->t1 = now;
		e->arg = st->arg;
		e->ret_addr = st->ret_addr;
		e->stack_id = st->stack_id;
		e->aux = (__u32)cookie;
		bpf_ringbuf_submit(e, submit_flags());
	}
	bpf_map_delete_elem(&calls, &key);
	return 0;
}

// One uprobe link per probed function (any kernel with uprobes), or one
// uprobe_multi link for all of them (kernel 6.6+): the multi links are
// registered and, what matters more, unregistered as one batch, where one link
// per function costs the kernel a synchronization each at detach (about 0.1 s a
// link measured here: seconds for the CUDA driver's entry points).
SEC("uprobe")
int BPF_KPROBE(uprobe_enter)
{
	return on_enter(ctx);
}

SEC("uretprobe")
int BPF_KRETPROBE(uprobe_exit)
{
	return on_exit(ctx);
}

SEC("uprobe.multi")
int BPF_KPROBE(uprobe_multi_enter)
{
	return on_enter(ctx);
}

SEC("uretprobe.multi")
int BPF_KRETPROBE(uprobe_multi_exit)
{
	return on_exit(ctx);
}

// ------------------------------------------------------------ page faults

static __always_inline void emit_fault(__u32 tid, struct fault_state *f, __u64 end, __u32 flags)
{
	struct event *e = reserve();
	if (!e)
		return;
	e->kind = EV_FAULT;
	e->tid = tid;
	e->t0 = f->ts;
	e->t1 = end;
	e->arg = f->address;
	e->ret_addr = f->error_code;
	e->aux = flags;
	bpf_ringbuf_submit(e, submit_flags());
}

// Fallback mode: the fault pending for `tid` gets its major verdict from the
// thread's maj_flt counter, which the kernel bumps when the fault is accounted.
static __always_inline void flush_untimed(__u32 tid, __u64 maj_flt_now)
{
	struct fault_state *f = bpf_map_lookup_elem(&faults, &tid);
	if (!f)
		return;
	__u32 flags = maj_flt_now > f->maj_flt ? FAULT_MAJOR : 0;
	emit_fault(tid, f, 0, flags);
	count(CNT_FAULTS_UNTIMED);
	bpf_map_delete_elem(&faults, &tid);
}

SEC("tp_btf/page_fault_user")
int BPF_PROG(on_page_fault_user, unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
	__u64 id = bpf_get_current_pid_tgid();
	if (!is_target(id))
		return 0;
	__u32 tid = (__u32)id;
	__u64 now = bpf_ktime_get_ns();
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 maj = BPF_CORE_READ(task, maj_flt);

	// A fault still pending here never reached a final handle_mm_fault return
	// (signal, bad access) or, in fallback mode, awaits its verdict.
	flush_untimed(tid, maj);

	struct fault_state f = {};
	f.ts = now;
	f.address = address;
	f.error_code = error_code;
	f.maj_flt = maj;
	bpf_map_update_elem(&faults, &tid, &f, BPF_ANY);
	return 0;
}

SEC("fexit/handle_mm_fault")
int BPF_PROG(on_handle_mm_fault_exit, struct vm_area_struct *vma, unsigned long address,
	     unsigned int flags, struct pt_regs *regs, unsigned int ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	if (!is_target(id))
		return 0;
	__u32 tid = (__u32)id;
	struct fault_state *f = bpf_map_lookup_elem(&faults, &tid);
	if (!f || f->address != address)
		return 0; // a fault on behalf of a syscall (GUP), not a user fault
	if (ret & CB_VM_FAULT_MAJOR)
		f->major = 1;
	if (ret & CB_VM_FAULT_RETRY)
		return 0; // handle_mm_fault runs again (lock dropped for I/O, or VMA-lock fallback)
	__u32 out = FAULT_TIMED;
	if (f->major || (flags & CB_FAULT_FLAG_TRIED))
		out |= FAULT_MAJOR;
	emit_fault(tid, f, bpf_ktime_get_ns(), out);
	bpf_map_delete_elem(&faults, &tid);
	return 0;
}

// -------------------------------------------------------------- scheduler

SEC("tp_btf/sched_switch")
int BPF_PROG(on_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	__u32 tgid = target_tgid;
	int prev_hit = BPF_CORE_READ(prev, tgid) == tgid && BPF_CORE_READ(prev, pid) != self_tid;
	int next_hit = BPF_CORE_READ(next, tgid) == tgid && BPF_CORE_READ(next, pid) != self_tid;
	if (!prev_hit && !next_hit)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u32 cpu = bpf_get_smp_processor_id();

	if (prev_hit) {
		__u32 tid = BPF_CORE_READ(prev, pid);
		struct out_state st = {};
		st.ts = now;
		st.state = prev_state;
		st.cpu = cpu;
		if (preempt || prev_state == CB_TASK_RUNNING)
			st.reason = REASON_PREEMPTED;
		else if (prev_state & (CB_TASK_TRACED | CB_TASK_STOPPED))
			st.reason = REASON_TRACED;
		else
			st.reason = REASON_BLOCKED;
		bpf_map_update_elem(&switched_out, &tid, &st, BPF_ANY);
		if (!fault_timing)
			flush_untimed(tid, BPF_CORE_READ(prev, maj_flt));
	}
	if (next_hit) {
		__u32 tid = BPF_CORE_READ(next, pid);
		struct out_state *st = bpf_map_lookup_elem(&switched_out, &tid);
		if (st) {
			struct event *e = reserve();
			if (e) {
				e->kind = EV_SCHED;
				e->tid = tid;
				e->t0 = st->ts;
				e->t1 = now;
				e->aux = st->cpu;
				e->reason = st->reason;
				e->extra = st->state;
				bpf_ringbuf_submit(e, submit_flags());
			}
			bpf_map_delete_elem(&switched_out, &tid);
		}
	}
	return 0;
}
