"""Expert weights gathered per (token, expert) pair (docs/method.md section 13): the rule that says the
gather need not run and the batched GEMM after it needs each routed expert once.

transformers' `experts_implementation="batched_mm"` runs an MoE layer as `W[expert_ids]` -> a
[pairs, N, K] copy of the expert weights (pairs = tokens x top_k), then `aten::bmm` of that copy with the
pairs' activations. Both move the weights once per pair: the gather reads and writes pairs x N x K
elements, the bmm reads them again. A grouped GEMM (`experts_implementation="grouped_mm"`, a fused MoE
kernel in serving) reads each routed expert's weights once, in place.

The rule, on evidence, all required:
1. the trace: an `aten::index` whose table is [E, N, K] and whose output [rows, N, K] is an operand of the
   op launched after it (roofline.ingest.gathers; Top-N trace_evidence.expert_gathers);
2. config.json: E is the number of experts and (N, K) one expert's projection (gate/up [2 x inter,
   hidden], down [hidden, inter], either order), rows a multiple of top_k (rows = tokens x top_k);
3. for the batched GEMM: its batch is those rows and its [batch, M, K] operand is the gathered copy
   (trace_evidence says the gather's consumer is aten::bmm).
Then the gather's bytes_necessary is 0 (the launch need not run) and the batched GEMM's is the routed
experts' weights once (E x (1 - (1 - top_k / E)^tokens) experts hit, uniform routing: a real router's skew
hits fewer) plus its activations and output."""
from __future__ import annotations

from roofline.core.opclasses import origin
from roofline.core.opclasses.base import Necessary
from roofline.core.opclasses.jobs import rule

KIND_GATHER = "expert_weight_gather"
KIND_GEMM = "per_pair_expert_gemm"
EVIDENCE_KEY = "expert_gathers"
TOP_K_KEYS = ("num_experts_per_tok", "num_experts_per_token", "moe_topk", "top_k", "experts_per_token")
LEVER = ("read each routed expert's weights once: a grouped GEMM over the experts{hf} (or a fused MoE kernel) instead "
         "of gathering the expert weights per (token, expert) pair into a [pairs, N, K] copy and running a batched "
         "GEMM over the copy")
HF = " (transformers: experts_implementation=\"grouped_mm\")"


def _top_k(config: dict | None) -> int | None:
    c = config or {}
    sub = c.get("text_config") if isinstance(c.get("text_config"), dict) else {}
    for k in TOP_K_KEYS:
        v = c.get(k, sub.get(k))
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return None


def experts(table, ctx) -> tuple[int, int, str, str] | None:
    """(E, top_k, the projection, the config words) where `table` [E, N, K] is config.json's expert weights."""
    d, k = origin.expert_dims(ctx.config), _top_k(ctx.config)
    if d is None or k is None or len(table) != 3:
        return None
    E, h, mi = d
    proj = {(2 * mi, h): "gate/up", (h, 2 * mi): "gate/up", (h, mi): "down", (mi, h): "down"}.get(tuple(table[1:]))
    if table[0] != E or proj is None:
        return None
    return E, k, proj, f"config.json {E} experts, top_k {k}, hidden_size {h}, expert intermediate {mi}"


def _hf(ctx) -> str:
    return HF if "transformers_version" in (ctx.config or {}) else ""


@rule("elementwise", "norm", "quant", rank=30)
def gather_necessary(shape: dict, dt: dict, bytes_est: float, ctx) -> Necessary | None:
    """The verdict on a per-pair gather of the expert weights; None where the shape is no such gather."""
    tab, rows = shape.get("gather_table"), shape.get("gather_rows")
    if not isinstance(tab, str) or not isinstance(rows, int):
        return None
    table = [int(x) for x in tab.split("x")]
    ex = experts(table, ctx)
    if ex is None or rows % ex[1]:
        return None
    E, k, proj, words = ex
    ev = [f"aten::index gathers [{rows}, {table[1]}, {table[2]}] from the [{tab.replace('x', ', ')}] table (its rows "
          f"from its consumer, {shape.get('gather_consumer', '?')}, whose operand it is)",
          f"{words}: the table is the {E} experts' {proj} weights and {rows} rows = {rows // k} tokens x top_k {k}: "
          "the weights copied once per (token, expert) pair",
          "necessary: none, a grouped GEMM reads the routed experts' weights in place: the launch need not run"]
    return Necessary(0.0, 0.0, KIND_GATHER, ev, removable=True, lever=LEVER.format(hf=_hf(ctx)))


@rule("gemm", rank=20)
def gemm_necessary(shape: dict, dt: dict, bytes_est: float, ctx) -> Necessary | None:
    """The verdict on a batched GEMM over a per-pair copy of the expert weights; None where none feeds it."""
    B, M, N, K = shape.get("batch"), shape.get("M"), shape.get("N"), shape.get("K")
    if not all(isinstance(x, int) and x > 0 for x in (B, M, N, K)):
        return None
    for r in ctx.trace_evidence.get(EVIDENCE_KEY) or []:
        t = r.get("table") or []
        if r.get("rows") != B or r.get("consumer") not in ("aten::bmm", "aten::baddbmm") or tuple(t[1:]) != (M, K):
            continue
        ex = experts(t, ctx)
        if ex is None or B % ex[1]:
            continue
        E, k, proj, words = ex
        tokens = B // k
        hit = E * (1.0 - (1.0 - k / E) ** tokens)
        w = hit * M * K * dt["act_bytes"]
        act = B * K * N * dt["weight_bytes"] + B * M * N * dt["out_bytes"]
        ev = [f"its [{B}, {M}, {K}] operand is the per-pair copy of the {E} experts' {proj} weights an aten::index wrote "
              f"(trace_evidence.expert_gathers: [{', '.join(map(str, t))}] -> {B} rows)",
              f"{words}: {B} pairs = {tokens} tokens x top_k {k}",
              f"necessary: each routed expert's weights once, {hit:.1f} of {E} experts hit (E x (1 - (1 - top_k/E)^tokens), "
              f"uniform routing; a skewed router hits fewer) x {M}x{K} = {w / 1e6:.4g} MB, plus the activations and "
              f"output {act / 1e6:.4g} MB, against the {B} copies read ({B * M * K * dt['act_bytes'] / 1e6:.4g} MB)"]
        return Necessary(w + act, None, KIND_GEMM, ev, lever=LEVER.format(hf=_hf(ctx)))
    return None
