"""docs/method.md sections 4-5: target_eff priors, the routing table, the shippability gate and the
byte-reduction levers. Every prior lives in TARGET_EFF and nowhere else."""
from __future__ import annotations

from roofline.core import opclasses
from roofline.io.values import UNKNOWN

# target_eff: how close a WELL-implemented kernel of this class gets to its roofline bound. Set by
# access regularity. Priors, not constants: `roofline playbook` proposes corrections (docs/method.md
# section 9). Each class states its own (roofline/core/opclasses/<class>.py, `target_eff`); this is all of them.
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
    out += oc.latency_levers(entry)
    return out


def route_by_gain(entry: dict) -> str:
    """The routing table (route), then the larger gain decides (docs/method.md section 5): when
    removing the avoidable bytes saves more than tuning the kernel would, the route is the byte-
    reduction track whatever the headroom class (a copy at 25% of the roof that need not run is no
    tuning job)."""
    r = route(entry)
    avoid, tune = entry.get("avoidable_gain_pct"), entry.get("expected_e2e_gain_pct")
    if avoid is not None and avoid > 0 and avoid > (tune or 0.0):
        return "byte_reduction"
    return r


def route_reason(entry: dict, route_: str) -> str:
    """The route (`route_`, the entry's) in words; a route the avoidable gain decided says both gains."""
    text = ROUTES[route_]
    avoid, tune = entry.get("avoidable_gain_pct"), entry.get("expected_e2e_gain_pct")
    if route_ == "byte_reduction" and avoid and avoid > (tune or 0.0):
        text += (f" - removing the avoidable bytes saves {avoid:.2f}% of GPU time, tuning the kernel "
                 + (f"{tune:.2f}%" if tune is not None else "an unknown share (no verdict)"))
        if entry.get("editable") is False:
            text += "; the kernel is not editable: the change is at its call site"
    return text
