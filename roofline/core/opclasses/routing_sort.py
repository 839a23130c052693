"""Op class "routing_sort": the sort / top-k / histogram kernels of MoE routing (torch.topk's
gatherTopK, torch.sort's bitonic / radix sorts, cub's DeviceRadixSort* passes, histc / bincount's
histograms): which experts each token goes to, and the tokens grouped per expert.

Small and latency-bound by nature: a routing step moves a few KB to MB (router logits, expert ids)
in several dependent passes (a radix sort: histogram, exclusive sum, one sweep per digit), each
launch far from any roof. The bytes are the streaming (copy) model's, shown for reference, never an
HBM verdict: the headroom is unknown (a routing launch's utilizations are low, so its bound type is
latency by the contract's own definition; it is not forced, since the contract defines it by the utilizations). Its lever is fewer launches: fuse
the routing into one kernel, only where the launch stream shows the routing steps next to each other.

seed_class "elementwise": the contract's closed enum (gemm|moe|attn|elementwise|unknown) has no routing
class; "unknown" there means "not recognised, not modelled" (docs/method.md, the degradation ladder's L2), which a routing
sort is not (recognised by name, its bytes counted by the streaming model, as the contract's elementwise
section counts them: input + output elements), and it is what the artifact said for these kernels
before the class existed (they were elementwise), so a consumer's routing on op_class is unchanged.
"""
from __future__ import annotations

from dataclasses import replace

from roofline.core.models import elementwise as _model
from roofline.core.opclasses.jobs import job
from roofline.core.opclasses.base import OpClass, register
from roofline.core.opclasses.stream import fill_no_guess, trace_shape


def _is_me(o: dict) -> bool:
    return (o.get("op_kind") or o.get("op_class")) == "routing_sort"


@job("finish_levers", "routing_sort")
def finish_levers(out: dict, lv, all_entries: list[dict], info: dict, dt: dict):
    """Fuse the routing into one kernel, only with launch-stream evidence: other routing steps of
    the Top-N launched right before or after this one (its `adjacent` kernels); the fused MoE
    router is named only where the Top-N also holds an MoE kernel (the routing is MoE routing)."""
    me = next((o for o in all_entries if o.get("name") == out.get("name")), {})
    adj = me.get("adjacent") or set()
    steps = sorted((o for o in all_entries if o.get("name") != out.get("name") and o.get("name") in adj
                    and _is_me(o)), key=lambda o: -float(o.get("pct_gpu_time") or 0.0))
    if not steps:
        return lv
    pct = float(out.get("pct_gpu_time") or 0.0) + sum(float(o.get("pct_gpu_time") or 0.0) for o in steps)
    names = ", ".join(o.get("short_name") or o["name"] for o in steps[:3])
    moe = any((o.get("op_kind") or o.get("op_class")) == "moe" for o in all_entries)
    return replace(lv, other_levers=lv.other_levers + [
        f"fuse the routing into one kernel: {names} run next to this one in the launch stream and are routing steps "
        f"too (sort / top-k / histogram, {pct:.2f}% GPU together, each launch latency-bound)"
        + ("; a fused MoE router (top-k and the per-expert grouping in one or two launches, e.g. vLLM's "
           "topk_softmax + moe_align_block_size) replaces them" if moe else "")])


register(OpClass(
    "routing_sort", seed_class="elementwise",
    # after every other class but the streaming catch-all (whose row says sort|topk): sorts, top-k,
    # histograms by kernel name (PyTorch's and cub's)
    name_rules=((80, r"radix_?sort|sort_?kv|bitonic_?sort|segmented_?sort|\bsort|gather_?topk|sbtopk|mbtopk|"
                     r"\btopk|histogram|histc|bincount"),),
    op_rules=((65, r"^aten::(sort|argsort|topk|histc|bincount|msort)$"),),
    shape_keys=frozenset({"elems_in", "elems_out", "shape"}), dim_keys=frozenset({"elems_in", "elems_out"}),
    # NB: no source figure for a routing sort's efficiency: no verdict is given, so no prior is used
    no_verdict=("routing step (sort / top-k / histogram): latency-bound by nature (a few small dependent passes), so "
                "the copy model's bytes are shown for reference and the HBM roof gives no verdict")))
job("model", "routing_sort")(_model.model)
job("trace_shape", "routing_sort")(trace_shape)
job("fill", "routing_sort")(fill_no_guess)
