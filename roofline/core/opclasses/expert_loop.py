"""An eager per-expert loop (docs/method.md section 13): the rule that says the small GEMMs of
transformers' `experts_implementation="eager"` are the reference path of one grouped GEMM.

The eager experts run, per layer and step, for each expert hit: a `nonzero` / `where` for its tokens, an
`index` gathering them, `linear` for gate/up and for down (M = that expert's tokens: a few rows), the
activation, the routing-weight `mul` and an `index_add_`. The GEMMs read each routed expert's weights once,
as a grouped GEMM would: their bytes are needed. What is not needed is the loop: one launch per expert and
projection, each too small to fill the GPU or to reach the HBM roof, and the glue between them. A grouped
GEMM (`experts_implementation="grouped_mm"`, a fused MoE kernel) moves the same bytes in one launch per
projection at a grouped GEMM's pace.

The rule, on evidence, all required:
1. config.json is an MoE: E experts of hidden h and expert width mi (origin.expert_dims);
2. the entry's GEMMs are [M, K] x [K, N] with (N, K) one expert's projection (gate/up [2 mi, h] or [mi, h],
   down [h, mi]), launched by aten::mm / linear (not a grouped or batched GEMM);
3. the loop shows in the shapes: at least two distinct M (each expert's token count), every M at most the
   step's tokens x top_k.
The saving is priced by the measured time (roofline.core.necessary.record): the launches' time against
the same bytes at the class's target efficiency (what one grouped launch reaches); the bytes stay."""
from __future__ import annotations

from roofline.core.opclasses import expert_gather, origin
from roofline.core.opclasses.base import Necessary
from roofline.core.opclasses.jobs import rule

KIND = "per_expert_loop"
LEVER = ("run the experts as one grouped GEMM per projection{hf} (or a fused MoE kernel) instead of a loop of one small "
         "GEMM per expert with nonzero / index / index_add_ between them: the same weights read once, in one launch")
MIN_SHAPES = 2


def _projection(N: int, K: int, h: int, mi: int) -> str | None:
    return {(2 * mi, h): "gate/up", (mi, h): "gate or up", (h, mi): "down"}.get((N, K))


@rule("gemm", rank=35)
def necessary(shape: dict, dt: dict, bytes_est: float, ctx) -> Necessary | None:
    """The verdict on one shape of a GEMM of an eager per-expert loop; None where the shapes show no loop."""
    d = origin.expert_dims(ctx.config)
    k = expert_gather._top_k(ctx.config)
    M, N, K = shape.get("M"), shape.get("N"), shape.get("K")
    if d is None or not k or shape.get("batch", 1) != 1 or not all(isinstance(x, int) for x in (M, N, K)):
        return None
    E, h, mi = d
    proj = _projection(N, K, h, mi)
    ops = set(ctx.aten_ops or {})
    if proj is None or (ops and not ops & {"aten::mm", "aten::linear", "aten::addmm", "aten::matmul"}):
        return None
    ms = sorted({s.get("M") for s in ctx.shapes if isinstance(s.get("M"), int)
                 and _projection(s.get("N"), s.get("K"), h, mi) is not None and s.get("batch", 1) == 1})
    if len(ms) < MIN_SHAPES:
        return None
    ev = [f"{len(ms)} GEMM shapes [M, {K}] x [{K}, {N}] with M = {', '.join(map(str, ms[:8]))}{' ...' if len(ms) > 8 else ''}: "
          f"one expert's {proj} projection (config.json {E} experts, hidden_size {h}, expert intermediate {mi}, "
          f"top_k {k}) per launch, M its tokens",
          "the eager per-expert loop (transformers' experts_implementation=\"eager\"): one launch per expert hit and "
          "projection; each routed expert's weights are read once, as a grouped GEMM reads them (the bytes stay)",
          "priced by its measured time: these launches against the same bytes at the class's target efficiency (one "
          "grouped launch per projection)"]
    hf = ' (transformers: experts_implementation="grouped_mm")' if "transformers_version" in (ctx.config or {}) else ""
    return Necessary(float(bytes_est), None, KIND, ev, lever=LEVER.format(hf=hf), time_priced=True)
