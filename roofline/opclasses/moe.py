"""Op class "moe": a mixture-of-experts layer (fused MoE, grouped expert GEMMs).

Model: roofline/models/moe.py. Stage A: M from the workload, E / top_k / hidden / inter from
config.json. Trace: aten::_grouped_mm / aten::_scaled_grouped_mm (A [pairs, K], B [E, K, N],
offsets [E]) give the grouped form {pairs, E, N, K} (fused MoE ops are not aten ops). Stage C:
grouped problems (rows over E experts), re-run on the grouped ladder level beside
torch._grouped_mm with a drawn routing (ladder.routing)."""
from __future__ import annotations

from roofline.models import moe as _model
from roofline.opclasses.aten import dtype_of
from roofline.opclasses.base import OpClass, Problem, register
from roofline.opclasses.stage_a import cfg, fill, fill_m


def fill_stage_a(s, op_class, e, wl, config, regime, assumed) -> tuple[str, ...]:
    if "pairs" in s:                     # the grouped form from a trace: nothing to fill
        return ("pairs", "E", "N", "K")
    fill_m(s, wl, regime, assumed)
    fill(s, "E", cfg(config, "num_experts", "num_local_experts", "n_routed_experts"), "config.json", assumed)
    fill(s, "top_k", cfg(config, "num_experts_per_tok", "moe_topk", "top_k"), "config.json", assumed)
    fill(s, "hidden", cfg(config, "hidden_size", "d_model"), "config.json", assumed)
    fill(s, "inter", cfg(config, "moe_intermediate_size", "expert_intermediate_size"), "config.json", assumed)
    return ("M", "E", "top_k", "hidden", "inter")


GROUPED_OPS = ("aten::_grouped_mm", "aten::_scaled_grouped_mm")


def trace_shape(sig):
    """The grouped form of a recorded grouped GEMM: A [pairs, K] x B [E, K, N] with offsets [E].
    NB: the trace has logical sizes only; W's storage order is taken as [E, N, K] (K contiguous, the
    nn.Linear weights stacked), the layout the grouped levels read."""
    if sig.name not in GROUPED_OPS or len(sig.dims) < 2:
        return None
    a, b = sig.dims[0], sig.dims[1]
    if not (isinstance(a, tuple) and isinstance(b, tuple) and len(a) == 2 and len(b) == 3):
        return None
    ta = sig.types[0] if sig.types else ""
    tb = sig.types[1] if len(sig.types) > 1 else ""
    shp = {"pairs": int(a[0]), "E": int(b[0]), "N": int(b[2]), "K": int(b[1])}
    dt = {"act": dtype_of(ta), "weight": dtype_of(tb), "out": "bf16" if sig.name.endswith("_scaled_grouped_mm") else dtype_of(ta)}
    return shp, {k: v for k, v in dt.items() if v}


def gemm_problems(entry: dict) -> list[Problem]:
    """The grouped GEMMs of one logical op: pairs = M x top_k rows over E experts (stage 1 gate/up
    N = 2 inter, K = hidden; stage 2 down N = hidden, K = inter), or the recorded grouped form."""
    sh = entry.get("shape") or {}
    dt = (entry.get("dtypes") or {}).get("act", "bf16")
    if all(k in sh for k in ("pairs", "E", "N", "K")):
        p, E = int(sh["pairs"]), int(sh["E"])
        return [Problem("grouped", p, int(sh["N"]), int(sh["K"]), dt, 1.0, E=E,
                        experts_hit_model=_model.experts_hit(E, p))]
    if not all(k in sh for k in ("M", "E", "top_k", "hidden", "inter")):
        return []
    M, E, k = int(sh["M"]), int(sh["E"]), int(sh["top_k"])
    pairs = M * k
    hit = _model.experts_hit(E, pairs)
    hidden, inter = int(sh["hidden"]), int(sh["inter"])
    stage = sh.get("stage")
    out = []
    kw = dict(E=E, tokens=M, top_k=k, experts_hit_model=hit)
    if stage in (None, 1):
        out.append(Problem("moe stage1 (gate/up)", pairs, 2 * inter, hidden, dt, 1.0, **kw))
    if stage in (None, 2):
        out.append(Problem("moe stage2 (down)", pairs, hidden, inter, dt, 1.0, **kw))
    return out


register(OpClass("moe", model=_model.model, fill=fill_stage_a, trace_shape=trace_shape, gemm_problems=gemm_problems,
                 shape_keys=frozenset({"M", "E", "top_k", "hidden", "inter", "stage", "pairs", "N", "K"}),
                 dim_keys=frozenset({"M", "E", "top_k", "hidden", "inter", "pairs", "N", "K"})))
