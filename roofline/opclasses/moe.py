"""Op class "moe": a mixture-of-experts layer (fused MoE, grouped expert GEMMs).

Model: roofline/models/moe.py. Stage A: M from the workload, E / top_k / hidden / inter from
config.json. Trace: no aten rule (fused MoE ops are not aten ops). Stage C: the expert GEMMs at
the average tokens per hit expert."""
from __future__ import annotations

import math

from roofline.models import moe as _model
from roofline.opclasses.base import OpClass, Problem, register
from roofline.opclasses.stage_a import cfg, fill, fill_m


def fill_stage_a(s, op_class, e, wl, config, regime, assumed) -> tuple[str, ...]:
    fill_m(s, wl, regime, assumed)
    fill(s, "E", cfg(config, "num_experts", "num_local_experts", "n_routed_experts"), "config.json", assumed)
    fill(s, "top_k", cfg(config, "num_experts_per_tok", "moe_topk", "top_k"), "config.json", assumed)
    fill(s, "hidden", cfg(config, "hidden_size", "d_model"), "config.json", assumed)
    fill(s, "inter", cfg(config, "moe_intermediate_size", "expert_intermediate_size"), "config.json", assumed)
    return ("M", "E", "top_k", "hidden", "inter")


def gemm_problems(entry: dict) -> list[Problem]:
    """The expert GEMMs at the average tokens per hit expert. NB: real routing is skewed; the
    average is the model's assumption, stated in the write-back notes."""
    sh = entry.get("shape") or {}
    if not all(k in sh for k in ("M", "E", "top_k", "hidden", "inter")):
        return []
    dt = (entry.get("dtypes") or {}).get("act", "bf16")
    pairs = int(sh["M"]) * int(sh["top_k"])
    hit = _model.experts_hit(int(sh["E"]), pairs)
    m_e = max(1, math.ceil(pairs / hit))
    hidden, inter = int(sh["hidden"]), int(sh["inter"])
    stage = sh.get("stage")
    out = []
    if stage in (None, 1):
        out.append(Problem("moe stage1 (gate/up)", m_e, 2 * inter, hidden, dt, hit))
    if stage in (None, 2):
        out.append(Problem("moe stage2 (down)", m_e, hidden, inter, dt, hit))
    return out


register(OpClass("moe", model=_model.model, fill=fill_stage_a, gemm_problems=gemm_problems,
                 shape_keys=frozenset({"M", "E", "top_k", "hidden", "inter", "stage"}),
                 dim_keys=frozenset({"M", "E", "top_k", "hidden", "inter"})))
