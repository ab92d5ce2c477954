"""The BPF C source of nettop's probes, built for the running kernel.

All probes are raw tracepoints: they attach by name with no tracefs mount, run without
the tracepoint's argument copy, and read only the tracepoint's own arguments. The few
struct fields they follow (a NAPI's id and device, a device's ifindex and name, an
skb's device) are read with bpf_probe_read_kernel at offsets taken from the running
kernel's BTF, so the program compiles against any installed headers (bcc needs some)
without depending on their struct layouts.

Everything is aggregated in kernel maps and read once per sampling interval: nothing
is sent per event. Hash keys carry the CPU, so each CPU updates its own entries and the
reader can show which CPUs did the work. Only the sections of enabled probes are
emitted, so a disabled probe is neither compiled nor attached.
"""

from __future__ import annotations

from dataclasses import dataclass

from nettop.ebpf.btf import Btf

# Each probe group and the tracepoints ("category:name") it attaches to, raw.
PROBES: dict[str, tuple[str, ...]] = {
    "napi": ("napi:napi_poll",),
    "hardirq": ("irq:irq_handler_entry", "irq:irq_handler_exit"),
    "softirq": ("irq:softirq_raise", "irq:softirq_entry", "irq:softirq_exit"),
    "drops": ("skb:kfree_skb",),
}
NET_TX_SOFTIRQ, NET_RX_SOFTIRQ = 2, 3
HIST_SLOTS = 32  # log2(ns) buckets: 1 ns .. 4 s
NAPI_MAX, IRQ_MAX, DROP_MAX = 4096, 8192, 2048
IFNAMSIZ = 16


@dataclass(frozen=True, slots=True)
class Layout:
    """Offsets and argument positions found in the running kernel's BTF (-1: absent)."""

    napi_id: int
    napi_dev: int
    napi_irq: int
    dev_ifindex: int
    dev_name: int
    dev_net: int  # net_device.nd_net.net: the device's network namespace
    net_inum: int  # net.ns.inum: that namespace's inode number (as in /proc/PID/ns/net)
    skb_dev: int
    drop_reason_arg: int  # position of `enum skb_drop_reason` in kfree_skb's arguments
    reason_not_dropped: int  # SKB_NOT_DROPPED_YET
    reason_consumed: int  # SKB_CONSUMED


def _off(btf: Btf, struct_name: str, member: str) -> int:
    off = btf.member_offset(struct_name, member)
    return -1 if off is None else off


def layout_from_btf(btf: Btf) -> Layout:
    """The offsets the probes need, from `btf`."""
    args = btf.tracepoint_args("kfree_skb") or []
    reasons = {name: value for value, name in btf.enum_values("skb_drop_reason").items()}
    return Layout(
        napi_id=_off(btf, "napi_struct", "napi_id"),
        napi_dev=_off(btf, "napi_struct", "dev"),
        napi_irq=_off(btf, "napi_struct", "irq"),
        dev_ifindex=_off(btf, "net_device", "ifindex"),
        dev_name=_off(btf, "net_device", "name"),
        dev_net=_off(btf, "net_device", "nd_net.net"),
        net_inum=_off(btf, "net", "ns.inum"),
        skb_dev=_off(btf, "sk_buff", "dev"),
        drop_reason_arg=args.index("enum skb_drop_reason") if "enum skb_drop_reason" in args
        else -1,
        reason_not_dropped=reasons.get("SKB_NOT_DROPPED_YET", -1),
        reason_consumed=reasons.get("SKB_CONSUMED", -1),
    )


# The raw tracepoint signatures the probes are written for (BTF spelling, without ctx).
EXPECTED_ARGS = {
    "napi_poll": ["struct napi_struct *", "int", "int"],
    "irq_handler_entry": ["int", "struct irqaction *"],
    "irq_handler_exit": ["int", "struct irqaction *", "int"],
    "softirq_raise": ["unsigned int"],
    "softirq_entry": ["unsigned int"],
    "softirq_exit": ["unsigned int"],
    "kfree_skb": ["struct sk_buff *", "void *"],  # later kernels add reason, rx_sk
}


def signature_problem(tracepoint: str, args: list[str] | None) -> str | None:
    """Why the probe cannot attach to `tracepoint` ("cat:name") given its BTF
    arguments (None: no such tracepoint), or None when it can."""
    if args is None:
        return f"tracepoint {tracepoint} missing on this kernel"
    want = EXPECTED_ARGS.get(tracepoint.partition(":")[2])
    if want is not None and args[:len(want)] != want:
        return (f"tracepoint {tracepoint} has arguments ({', '.join(args)}), "
                f"not the ({', '.join(want)}) nettop reads")
    return None


_COMMON = """
#define PROBE(tp) int probe_##tp(struct bpf_raw_tracepoint_args *ctx)
#define KERNEL_PTR(p) ((u64)(p) >= 0xffff000000000000ULL)
static __always_inline void read_dev(void *dev, u32 *ifindex, u32 *netns, char *name)
{
    if (!KERNEL_PTR(dev))
        return;
#if OFF_DEV_IFINDEX >= 0
    bpf_probe_read_kernel(ifindex, sizeof(*ifindex), (char *)dev + OFF_DEV_IFINDEX);
#endif
#if OFF_DEV_NAME >= 0
    bpf_probe_read_kernel(name, IFNAMSIZ, (char *)dev + OFF_DEV_NAME);
#endif
#if OFF_DEV_NET >= 0 && OFF_NET_INUM >= 0
    void *net = 0;
    bpf_probe_read_kernel(&net, sizeof(net), (char *)dev + OFF_DEV_NET);
    if (KERNEL_PTR(net))
        bpf_probe_read_kernel(netns, sizeof(*netns), (char *)net + OFF_NET_INUM);
#endif
}
"""

# Per-CPU values keyed by the napi_struct's address: a poll costs one lookup of an
# 8-byte key and plain increments. The NAPI's identity (id, device, namespace) is read
# on a CPU's first poll; every 64th poll re-reads the id, and if it changed (a new NAPI
# in the memory of a deleted one) that CPU's counters restart from zero under the new
# identity.
_NAPI = """
struct napi_val { u64 polls; u64 work; u64 full; u64 empty;
                  u32 budget; u32 napi_id; u32 ifindex; s32 irq; u32 netns; u32 seen;
                  char name[IFNAMSIZ]; };
BPF_PERCPU_HASH(napi_stats, u64, struct napi_val, NAPI_MAX);

PROBE(napi_poll)
{
    u64 key = ctx->args[0];
    void *napi = (void *)key;
    int work = (int)ctx->args[1];
    int budget = (int)ctx->args[2];
    u32 id = 0;
    struct napi_val *v = napi_stats.lookup(&key);
    if (!v) {
        struct napi_val init = {};
        napi_stats.insert(&key, &init);
        v = napi_stats.lookup(&key);
        if (!v)
            return 0;
    }
    if (!v->seen || !(v->polls & 63)) {
        bpf_probe_read_kernel(&id, sizeof(id), (char *)napi + OFF_NAPI_ID);
        if (v->seen && v->napi_id == id)
            id = 0;  /* same NAPI: keep counting */
        else
            v->seen = 0;
    }
    if (!v->seen) {
        void *dev = 0;
        v->polls = 0; v->work = 0; v->full = 0; v->empty = 0;
        v->napi_id = id;
        v->ifindex = 0;
        v->netns = 0;
        v->irq = -1;
        __builtin_memset(v->name, 0, IFNAMSIZ);
        bpf_probe_read_kernel(&dev, sizeof(dev), (char *)napi + OFF_NAPI_DEV);
#if OFF_NAPI_IRQ >= 0
        bpf_probe_read_kernel(&v->irq, sizeof(v->irq), (char *)napi + OFF_NAPI_IRQ);
#endif
        read_dev(dev, &v->ifindex, &v->netns, v->name);
        v->seen = 1;
    }
    v->polls++;
    v->work += work;
    if (work >= budget)
        v->full++;
    if (work == 0)
        v->empty++;
    v->budget = budget;
    return 0;
}
"""

_HARDIRQ = """
struct irq_start { u64 ts; u32 irq; u32 pad; };
BPF_PERCPU_ARRAY(irq_start, struct irq_start, 1);
struct irq_key { u32 irq; u32 cpu; };
struct irq_val { u64 count; u64 ns; };
BPF_HASH(irq_stats, struct irq_key, struct irq_val, IRQ_MAX);

PROBE(irq_handler_entry)
{
    int zero = 0;
    struct irq_start *s = irq_start.lookup(&zero);
    if (!s)
        return 0;
    s->irq = (u32)ctx->args[0];
    s->ts = bpf_ktime_get_ns();
    return 0;
}

PROBE(irq_handler_exit)
{
    int zero = 0;
    u32 irq = (u32)ctx->args[0];
    struct irq_start *s = irq_start.lookup(&zero);
    if (!s || !s->ts || s->irq != irq)
        return 0;
    u64 delta = bpf_ktime_get_ns() - s->ts;
    s->ts = 0;
    struct irq_key k = { .irq = irq, .cpu = bpf_get_smp_processor_id() };
    struct irq_val init = {};
    struct irq_val *v = irq_stats.lookup_or_try_init(&k, &init);
    if (!v)
        return 0;
    __sync_fetch_and_add(&v->count, 1);
    __sync_fetch_and_add(&v->ns, delta);
    return 0;
}
"""

# One per-CPU record holds both vectors; index 0 is NET_TX, 1 is NET_RX. Each CPU only
# touches its own copy and a program does not nest with itself, so no atomics are needed.
# Raises and runs are always counted; clock reads are the expensive part, so when a CPU
# runs more NET softirqs than the reader wants timed, only 1 raise and 1 run in
# (mask + 1) are timed (the reader sets mask in sirq_cfg from the rates it saw).
# raise_ts = 1 marks "pending, not timed", so a later raise cannot start a shorter wait.
_SOFTIRQ = """
struct sirq_cpu {
    u64 raise_ts[2]; u64 entry_ts[2];
    u64 raised[2]; u64 runs[2]; u64 run_ns[2]; u64 waits[2]; u64 wait_ns[2]; u64 timed[2];
    u64 wait_hist[2][HIST_SLOTS]; u64 run_hist[2][HIST_SLOTS];
};
BPF_PERCPU_ARRAY(sirq, struct sirq_cpu, 1);
BPF_ARRAY(sirq_cfg, u64, 1);

static __always_inline int net_vec(u32 vec)
{
    if (vec == NET_TX_SOFTIRQ) return 0;
    if (vec == NET_RX_SOFTIRQ) return 1;
    return -1;
}

static __always_inline u32 slot_of(u64 ns)
{
    u32 slot = bpf_log2l(ns);
    return slot < HIST_SLOTS ? slot : HIST_SLOTS - 1;
}

static __always_inline u64 sample_mask(void)
{
    int zero = 0;
    u64 *m = sirq_cfg.lookup(&zero);
    return m ? *m : 0;
}

PROBE(softirq_raise)
{
    int i = net_vec((u32)ctx->args[0]);
    int zero = 0;
    if (i < 0)
        return 0;
    struct sirq_cpu *s = sirq.lookup(&zero);
    if (!s)
        return 0;
    if (!s->raise_ts[i])
        s->raise_ts[i] = (s->raised[i] & sample_mask()) ? 1 : bpf_ktime_get_ns();
    s->raised[i]++;
    return 0;
}

PROBE(softirq_entry)
{
    int i = net_vec((u32)ctx->args[0]);
    int zero = 0;
    if (i < 0)
        return 0;
    struct sirq_cpu *s = sirq.lookup(&zero);
    if (!s)
        return 0;
    u64 raised = s->raise_ts[i];
    int time_run = !(s->runs[i] & sample_mask());
    u64 now = 0;
    s->raise_ts[i] = 0;
    if (raised > 1 || time_run)
        now = bpf_ktime_get_ns();
    if (raised > 1 && now > raised) {
        u64 wait = now - raised;
        s->waits[i]++;
        s->wait_ns[i] += wait;
        s->wait_hist[i][slot_of(wait)]++;
    }
    s->entry_ts[i] = time_run ? now : 0;
    return 0;
}

PROBE(softirq_exit)
{
    int i = net_vec((u32)ctx->args[0]);
    int zero = 0;
    if (i < 0)
        return 0;
    struct sirq_cpu *s = sirq.lookup(&zero);
    if (!s)
        return 0;
    s->runs[i]++;
    if (!s->entry_ts[i])
        return 0;
    u64 run = bpf_ktime_get_ns() - s->entry_ts[i];
    s->entry_ts[i] = 0;
    s->timed[i]++;
    s->run_ns[i] += run;
    s->run_hist[i][slot_of(run)]++;
    return 0;
}
"""

# Per-CPU values keyed by reason, device address and dropping function; the device's
# name and namespace are read on a CPU's first drop there, or again when the ifindex at
# that address changed (a new device in the memory of a deleted one).
_DROPS = """
struct drop_key { u32 reason; u32 pad; u64 dev; u64 location; };
struct drop_val { u64 count; u32 ifindex; u32 netns; u32 seen; u32 pad;
                  char name[IFNAMSIZ]; };
BPF_PERCPU_HASH(drop_stats, struct drop_key, struct drop_val, DROP_MAX);

PROBE(kfree_skb)
{
    struct drop_key k = {};
    void *dev = 0;
    u32 ifindex = 0;
#if DROP_REASON_ARG >= 0
    k.reason = (u32)ctx->args[DROP_REASON_ARG];
    if (k.reason == REASON_NOT_DROPPED || k.reason == REASON_CONSUMED)
        return 0;
#endif
    k.location = ctx->args[1];
#if OFF_SKB_DEV >= 0
    bpf_probe_read_kernel(&dev, sizeof(dev), (char *)ctx->args[0] + OFF_SKB_DEV);
    if (!KERNEL_PTR(dev))
        dev = 0;
#endif
#if OFF_DEV_IFINDEX >= 0
    if (dev)
        bpf_probe_read_kernel(&ifindex, sizeof(ifindex), (char *)dev + OFF_DEV_IFINDEX);
#endif
    k.dev = (u64)dev;
    struct drop_val *v = drop_stats.lookup(&k);
    if (!v) {
        struct drop_val init = {};
        drop_stats.insert(&k, &init);
        v = drop_stats.lookup(&k);
        if (!v)
            return 0;
    }
    if (!v->seen || v->ifindex != ifindex) {
        v->count = 0;
        v->ifindex = 0;
        v->netns = 0;
        __builtin_memset(v->name, 0, IFNAMSIZ);
        if (dev)
            read_dev(dev, &v->ifindex, &v->netns, v->name);
        v->seen = 1;
    }
    v->count++;
    return 0;
}
"""

_SECTIONS = {"napi": _NAPI, "hardirq": _HARDIRQ, "softirq": _SOFTIRQ, "drops": _DROPS}


def function_name(tracepoint: str) -> str:
    """The BPF function that handles `tracepoint` ("cat:name") in the rendered text."""
    return "probe_" + tracepoint.partition(":")[2]


def render(probes: tuple[str, ...], layout: Layout) -> str:
    """BPF C text for the enabled `probes` (names from PROBES) on `layout`'s kernel."""
    defines = {
        "IFNAMSIZ": IFNAMSIZ, "HIST_SLOTS": HIST_SLOTS,
        "NAPI_MAX": NAPI_MAX, "IRQ_MAX": IRQ_MAX, "DROP_MAX": DROP_MAX,
        "NET_TX_SOFTIRQ": NET_TX_SOFTIRQ, "NET_RX_SOFTIRQ": NET_RX_SOFTIRQ,
        "OFF_NAPI_ID": layout.napi_id, "OFF_NAPI_DEV": layout.napi_dev,
        "OFF_NAPI_IRQ": layout.napi_irq,
        "OFF_DEV_IFINDEX": layout.dev_ifindex, "OFF_DEV_NAME": layout.dev_name,
        "OFF_DEV_NET": layout.dev_net, "OFF_NET_INUM": layout.net_inum,
        "OFF_SKB_DEV": layout.skb_dev, "DROP_REASON_ARG": layout.drop_reason_arg,
        "REASON_NOT_DROPPED": layout.reason_not_dropped,
        "REASON_CONSUMED": layout.reason_consumed,
    }
    head = "".join(f"#define {k} ({v})\n" for k, v in defines.items())
    # IFNAMSIZ may already come from the headers bcc includes; ours is the same value.
    head = "#undef IFNAMSIZ\n" + head
    body = "".join(_SECTIONS[p] for p in PROBES if p in probes)
    return head + _COMMON + body
