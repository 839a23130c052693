"""docs/method.md sections 4-5: target_eff priors, the routing table, the shippability gate and the
byte-reduction levers. Every prior lives in TARGET_EFF and nowhere else."""
from __future__ import annotations

# target_eff: how close a WELL-implemented kernel of this class gets to its roofline bound. Set by
# access regularity. Priors, not constants: `roofline playbook` proposes corrections (docs/method.md section 9).
TARGET_EFF: dict[str, float] = {
    "gemm": 0.90,          # regular, dense compute
    "moe": 0.90,           # decode weight streaming is essentially a memcpy
    "elementwise": 0.85,   # pure streaming: trivial streams top out near 0.85 of the pin rate
    "norm": 0.85,          # (seed: 0.85-0.90; the low end, since a row reduction adds a dependency)
    "quant": 0.85,
    "attn_decode": 0.50,   # irregular paged KV access, occupancy-sensitive
    "attn_prefill": 0.70,  # NB: no source figure; flash-style prefill reaches ~0.6-0.75 of the tensor roof on Hopper
}

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


def target_eff_for(op_class: str, regime: str) -> float | None:
    if op_class == "attn":
        return TARGET_EFF["attn_prefill" if regime == "prefill" else "attn_decode"]
    return TARGET_EFF.get(op_class)


def target_notes(op_class: str, regime: str, shape: dict | None) -> list[str]:
    """What the entry's notes say about its prior when the prior was set for another case."""
    if op_class == "attn" and regime == "decode" and isinstance(shape, dict) and shape.get("paged") is False:
        return [f"target_eff {TARGET_EFF['attn_decode']:.2f} is the decode-attention prior, set for paged KV "
                "gathers; this kernel reads a contiguous KV cache (paged: false), which streams more regularly, so a "
                "good kernel may reach more: its headroom is a lower bound (docs/method.md section 4)"]
    return []


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
    if entry.get("dispatch_bound"):
        return "fusion_or_graph"
    hc, bt = entry.get("headroom_class"), entry.get("bound_type")
    if hc in (None, "unknown") or entry.get("confidence") == "low":
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
    if entry.get("dispatch_bound"):
        return ["fusion: fold this launch into a neighbouring kernel",
                "graph capture: take the per-launch dispatch cost off the critical path"]
    if entry.get("bound_type") != "latency":
        return []
    out = ["occupancy: more resident warps/CTAs per SM (smaller tiles, fewer registers)",
           "shorter dependency chains: more independent work in flight per warp",
           "fusion with a neighbouring kernel"]
    if entry.get("op_class") in ("gemm", "moe") and entry.get("regime") == "decode":
        out.append("split-K: more CTAs for a skinny decode GEMM")
    return out


_FUSABLE = ("elementwise", "norm", "quant")
MAX_FUSE_LEVERS = 5  # fuse levers named one by one; the rest are summed in one line
_NARROWER = {"fp32": "bf16", "bf16": "fp8", "fp16": "fp8", "fp8": "fp4"}


def byte_reduction_levers(entry: dict, all_entries: list[dict], model_info: dict, dtypes: dict) -> list[str]:
    """docs/method.md section 5 (`byte_reduction`): levers that make a saturated kernel move fewer bytes for the same work."""
    levers: list[str] = []
    # 1. fuse an adjacent op away: prologue/epilogue kernels that appear separately in the Top-N
    fusable = sorted((o for o in all_entries if o is not entry and o.get("name") != entry.get("name")
                      and (o.get("op_kind") or o.get("op_class")) in _FUSABLE),  # (never "fuse this kernel into itself")
                     key=lambda o: -o["pct_gpu_time"])
    for other in fusable[:MAX_FUSE_LEVERS]:  # the largest few: a 100,000-entry Top-N lists no 100,000 levers
        kind = other.get("op_kind") or other.get("op_class")
        levers.append(
            f"fuse {other['short_name']} ({kind}, {other['pct_gpu_time']:.2f}% GPU) into "
            "this kernel: removes an activation round-trip and that kernel's own time")
    if len(fusable) > MAX_FUSE_LEVERS:
        rest = fusable[MAX_FUSE_LEVERS:]
        levers.append(f"fuse: {len(rest)} more small fusable entries in the Top-N "
                      f"({sum(o['pct_gpu_time'] for o in rest):.2f}% GPU together)")
    # 2. stop reading what isn't used
    if entry.get("op_class") == "moe" and model_info.get("experts_hit") is not None:
        hit, E = model_info["experts_hit"], model_info["E"]
        if hit < E - 0.5:
            waste = (E - hit) * model_info["expert_weight_bytes"]
            levers.append(
                f"stop reading unrouted experts: routing touches ~{hit:.0f} of {E} experts; streaming all "
                f"of them moves {waste / 1e6:.0f} MB more per logical op")
    # 3. layout / packing
    waste_ratio = entry.get("padding_waste_ratio")
    if waste_ratio is not None and waste_ratio > 1.05:
        levers.append(f"layout/packing: the hardware issued {waste_ratio:.2f}x the useful FLOPs (padding); "
                      "remove padding waste, improve coalescing and L2 reuse between stages")
    else:
        levers.append("layout/packing: remove padding waste, improve coalescing, improve L2 reuse between "
                      "stages of the same logical op")
    # 4. lower precision (lossy)
    op = entry.get("op_class")
    if op == "attn":
        kv = dtypes.get("kv")
        if kv in _NARROWER:
            levers.append(f"lower-precision KV cache ({kv} -> {_NARROWER[kv]}): halves KV bytes; LOSSY, must "
                          "pass the accuracy gate")
    else:
        w = dtypes.get("weight")
        if op in ("gemm", "moe") and w in _NARROWER:
            levers.append(f"lower-precision weights ({w} -> {_NARROWER[w]}): halves weight bytes; LOSSY, must "
                          "pass the accuracy gate")
    return levers
