"""Op class "moe": a mixture-of-experts layer (fused MoE, grouped expert GEMMs).

Model: roofline/models/moe.py. Two shapes:
- a grouped expert GEMM (one launch per projection): `rows` (token-expert pairs), `E`, `N`, `K`,
  from the aten grouped-GEMM ops below (transformers' `grouped_mm` experts backend, torch's
  `_grouped_mm` / `_scaled_grouped_mm`); config.json only names the projection (gate_up: K =
  hidden_size; down: N = hidden_size);
- a fused MoE layer (vLLM / SGLang `fused_moe_kernel`: no aten shapes): M from the workload, E /
  top_k / hidden / inter from config.json (stage A).
Stage C: the expert GEMMs at the average rows per hit expert."""
from __future__ import annotations

from roofline.models import moe as _model
from roofline.opclasses.base import OpClass, Problem, register
from roofline.opclasses.aten import dtype_of
from roofline.opclasses.stage_a import cfg, fill, fill_m


# Grouped GEMM ops: op -> (index of A [rows, K], index of W [E, K, N]). NB: W is the logical
# [E, K, N] operand; a model storing [E, N, K] passes a transposed view, whose recorded dims are
# the view's.
GROUPED_OPS = {"aten::_grouped_mm": (0, 1), "aten::_scaled_grouped_mm": (0, 1), "aten::grouped_mm": (0, 1)}


def trace_shape(sig):
    """rows, E, N, K of a recorded grouped expert GEMM, with its operand dtypes."""
    spec = GROUPED_OPS.get(sig.name)
    if spec is None or len(sig.dims) <= max(spec):
        return None
    a, w = sig.dims[spec[0]], sig.dims[spec[1]]
    if not (isinstance(a, tuple) and isinstance(w, tuple)) or len(w) != 3 or len(a) not in (2, 3):
        return None
    if len(a) == 3:                      # batched form [E, m, K] x [E, K, N] (no offsets)
        rows, k = int(a[0]) * int(a[1]), int(a[2])
    else:
        rows, k = int(a[0]), int(a[1])
    if k != int(w[1]):
        return None
    out = {"pairs": rows, "E": int(w[0]), "N": int(w[2]), "K": k}
    ta = sig.types[spec[0]] if spec[0] < len(sig.types) else ""
    tw = sig.types[spec[1]] if spec[1] < len(sig.types) else ""
    dt = {"act": dtype_of(ta), "weight": dtype_of(tw), "out": dtype_of(ta)}
    if sig.name == "aten::_scaled_grouped_mm":
        dt["out"] = None                 # out_dtype is an argument the trace does not type
    return out, {kk: v for kk, v in dt.items() if v}


def _projection(s: dict, config, assumed) -> None:
    """Name a grouped GEMM's projection from config.json (no effect on its bytes: K x N per expert)."""
    hidden = cfg(config, "hidden_size", "d_model")
    if hidden is None or "projection" in s:
        return
    if int(s["K"]) == int(hidden):
        s["projection"] = "gate_up" if int(s["N"]) != int(hidden) else "gate_up or down"
    elif int(s["N"]) == int(hidden):
        s["projection"] = "down"


def fill_stage_a(s, op_class, e, wl, config, regime, assumed) -> tuple[str, ...]:
    if "pairs" in s:
        fill(s, "E", cfg(config, "num_experts", "num_local_experts", "n_routed_experts"), "config.json", assumed)
        if all(k in s for k in ("N", "K")):
            _projection(s, config, assumed)
        return ("pairs", "E", "N", "K")
    fill_m(s, wl, regime, assumed)
    fill(s, "E", cfg(config, "num_experts", "num_local_experts", "n_routed_experts"), "config.json", assumed)
    fill(s, "top_k", cfg(config, "num_experts_per_tok", "moe_topk", "top_k"), "config.json", assumed)
    fill(s, "hidden", cfg(config, "hidden_size", "d_model"), "config.json", assumed)
    fill(s, "inter", cfg(config, "moe_intermediate_size", "expert_intermediate_size"), "config.json", assumed)
    return ("M", "E", "top_k", "hidden", "inter")


def gemm_problems(entry: dict) -> list[Problem]:
    """The grouped GEMMs of one logical op: pairs = M x top_k rows over E experts (stage 1 gate/up
    N = 2 inter, K = hidden; stage 2 down N = hidden, K = inter), or the recorded grouped form."""
    sh = entry.get("shape") or {}
    dt = (entry.get("dtypes") or {}).get("act", "bf16")
    if all(k in sh for k in ("pairs", "E", "N", "K")):
        # the launch-weighted mix of the captured grouped shapes (gate_up and down run under one
        # kernel name), as the analysis weighs them (roofline.shapes.work_mix)
        mix = [(u["shape"], float(u["weight"])) for u in entry.get("shapes_used") or []
               if all(k in (u.get("shape") or {}) for k in ("pairs", "E", "N", "K"))] or [(sh, 1.0)]
        return [Problem(f"grouped {s.get('projection') or ''}".strip(), int(s["pairs"]), int(s["N"]), int(s["K"]), dt,
                        w, E=int(s["E"]), experts_hit_model=_model.experts_hit(int(s["E"]), int(s["pairs"])))
                for s, w in mix]
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
                 shape_keys=frozenset({"M", "E", "top_k", "hidden", "inter", "stage", "pairs", "N", "K",
                                       "projection"}),
                 dim_keys=frozenset({"M", "E", "top_k", "hidden", "inter", "pairs", "N", "K"})))
