"""docs/method.md sections 4-5: target_eff priors, the routing table, the shippability gate and the
byte-reduction levers. Every prior lives in TARGET_EFF and nowhere else."""
from __future__ import annotations

from roofline import opclasses
from roofline.values import UNKNOWN

# target_eff: how close a WELL-implemented kernel of this class gets to its roofline bound. Set by
# access regularity. Priors, not constants: `roofline playbook` proposes corrections (docs/method.md
# section 9). Each class states its own (roofline/opclasses/<class>.py, `target_eff`); this is all of them.
TARGET_EFF: dict[str, float] = opclasses.target_eff()

# Headroom bands, against target_eff (docs/method.md section 4).
SATURATED_FRAC = 0.9
MODERATE_FRAC = 0.6
# pct_gpu_time at or above which a head counts as "high" in the routing table. The head threshold
# already drops what is below the noise band, so every analysed head is high by default.
HIGH_PCT_GPU_TIME = 5.0

ROUTES = {
    "kernel_track_top": "kernel track, top priority: real micro-optimization headroom",
    "kernel_track_latency": "kernel track: the lever is occupancy / dependency chain / fusion / split-K, not byte reduction",
    "kernel_track_moderate": "kernel track, after the underperforming heads: moderate headroom",
    "byte_reduction": "byte-reduction / algorithmic track (NOT dropped): move fewer bytes for the same work",
    "fewer_bytes_or_fusion": "occupancy/access pattern is the ceiling: fewer bytes (e.g. fp8 KV) or fusion; not more tuning",
    "fewer_flops": "compute-saturated: fewer or cheaper FLOPs (lower precision, algorithmic change); not more tuning",
    "fusion_or_graph": "dispatch-bound: fuse it away or capture it in a graph; kernel tuning cannot help",
    "host_side": "host-side track only (not editable): dispatch/path selection, tuning DB, backend swap",
    "low_priority": "low priority (ordinary Amdahl)",
    "pct_fallback": "no verdict: fall back to pct_gpu_time ordering",
}


def target_prior(op_class: str, regime: str, paged: bool | None = None) -> str:
    """The TARGET_EFF key for a kernel (its class's prior_key: attention by regime and KV access)."""
    return opclasses.prior_key(op_class, regime, {"paged": paged})


def target_eff_for(op_class: str, regime: str, paged: bool | None = None) -> float | None:
    return TARGET_EFF.get(target_prior(op_class, regime, paged))


def headroom_class(roofline_pct: float, target_eff: float) -> str:
    if roofline_pct >= SATURATED_FRAC * target_eff:
        return "saturated"
    if roofline_pct >= MODERATE_FRAC * target_eff:
        return "moderate"
    return "underperforming"


def route(entry: dict) -> str:
    """The routing table of docs/method.md section 5, applied after the shippability gate. Returns a ROUTES key."""
    if entry.get("editable") is False:
        return "host_side"
    if entry.get("dispatch_bound") or (entry.get("l2_resident") and entry.get("headroom_class") in (None, UNKNOWN)):
        return "fusion_or_graph"
    hc, bt = entry.get("headroom_class"), entry.get("bound_type")
    if hc in (None, UNKNOWN) or entry.get("confidence") == "low":
        return "pct_fallback"
    if entry.get("pct_gpu_time", 0.0) < HIGH_PCT_GPU_TIME:
        return "low_priority"
    if hc == "underperforming":
        return "kernel_track_latency" if bt == "latency" else "kernel_track_top"
    if hc == "moderate":
        return "kernel_track_latency" if bt == "latency" else "kernel_track_moderate"
    # saturated
    if bt == "memory":
        return "byte_reduction"
    if bt == "latency":
        return "fewer_bytes_or_fusion"
    return "fewer_flops"


def other_levers(entry: dict) -> list[str]:
    """Levers that are NOT byte reduction (docs/method.md section 5 routing rows): latency-bound heads are
    fixed by occupancy / dependency chain / fusion / split-K, dispatch-bound ones by fusion or
    graph capture. byte_reduction_levers stays for saturated heads only (docs/artifact.md)."""
    if entry.get("dispatch_bound") or entry.get("l2_resident"):
        return ["fusion: fold this launch into a neighbouring kernel",
                "graph capture: take the per-launch dispatch cost off the critical path"]
    if entry.get("bound_type") != "latency":
        return []
    out = ["occupancy: more resident warps/CTAs per SM (smaller tiles, fewer registers)",
           "shorter dependency chains: more independent work in flight per warp",
           "fusion with a neighbouring kernel"]
    oc = opclasses.of(opclasses.kind_of(entry))
    if oc.latency_levers is not None:
        out += oc.latency_levers(entry)
    return out


MAX_FUSE_LEVERS = 5  # fuse levers named one by one; the rest are summed in one line


def copy_levers(entry: dict, me: dict) -> list[str]:
    """A concatenation whose size grows step by step (torch.cat of a KV cache: one more token each
    decode step, so one captured shape per step) re-copies the whole cache to append one token: the
    lever is to stop copying, not to fuse."""
    ops = me.get("aten_ops") or set()
    if ops & {"aten::cat", "aten::_cat", "aten::concat", "aten::concatenate"} and me.get("n_shapes", 0) >= 3 \
            and entry.get("regime") == "decode":
        return ["stop copying the cache: torch.cat re-copies the whole KV cache every decode step to append one "
                "token (its captured shapes grow step by step); a preallocated (static) or paged cache appends "
                "in place (index_copy_ / paged writes move only the new token's K and V)"]
    return []


def byte_reduction_levers(entry: dict, all_entries: list[dict], model_info: dict, dtypes: dict) -> list[str]:
    """docs/method.md section 5 (`byte_reduction`): levers that make a saturated kernel move fewer bytes for the same work."""
    levers: list[str] = []
    me = next((o for o in all_entries if o.get("name") == entry.get("name")), {})
    # 0. a KV cache grown with torch.cat copies the whole cache every step to append one token
    levers += copy_levers(entry, me)
    # 1. fuse an adjacent op away: a prologue/epilogue kernel that appears separately in the Top-N
    # AND runs next to this kernel in the launch stream (launched just before or after it: the
    # producer or consumer of its tensors). Without launch-order evidence no kernel is named.
    adj = me.get("adjacent") or set()
    fusable = sorted((o for o in all_entries if o is not entry and o.get("name") != entry.get("name")
                      and opclasses.of(opclasses.kind_of(o)).fusable  # (never "fuse this kernel into itself")
                      and o.get("name") in adj),
                     key=lambda o: -o["pct_gpu_time"])
    for other in fusable[:MAX_FUSE_LEVERS]:  # the largest few: a 100,000-entry Top-N lists no 100,000 levers
        kind = opclasses.kind_of(other)
        levers.append(
            f"fuse {other['short_name']} ({kind}, {other['pct_gpu_time']:.2f}% GPU) into "
            "this kernel: removes an activation round-trip and that kernel's own time")
    if len(fusable) > MAX_FUSE_LEVERS:
        rest = fusable[MAX_FUSE_LEVERS:]
        levers.append(f"fuse: {len(rest)} more small fusable entries in the Top-N "
                      f"({sum(o['pct_gpu_time'] for o in rest):.2f}% GPU together)")
    # 2. stop reading what isn't used (the class says what its kernel reads that the work does not use)
    oc = opclasses.of(opclasses.kind_of(entry))
    if oc.stop_reading_levers is not None:
        levers += oc.stop_reading_levers(entry, model_info)
    # 3. layout / packing
    waste_ratio = entry.get("padding_waste_ratio")
    if waste_ratio is not None and waste_ratio > 1.05:
        levers.append(f"layout/packing: the hardware issued {waste_ratio:.2f}x the useful FLOPs (padding); "
                      "remove padding waste, improve coalescing and L2 reuse between stages")
    else:
        levers.append("layout/packing: remove padding waste, improve coalescing, improve L2 reuse between "
                      "stages of the same logical op")
    # 4. lower precision (lossy): of what the class's bytes are (weights, KV cache)
    if oc.precision_levers is not None:
        levers += oc.precision_levers(entry, dtypes)
    return levers
