"""MoE / grouped expert GEMM (docs/method.md section 2). At decode the question is how many expert
weights are streamed: the expected number of distinct experts hit, or all E."""
from __future__ import annotations

from roofline.core.models import Candidate, ModelResult, wider


def experts_hit(E: int, pairs: int) -> float:
    """Expected distinct experts touched by `pairs` uniform routings: E·(1 − (1 − 1/E)^pairs).
    NB: assumes uniform, independent routing; real routers are skewed, which touches fewer."""
    return E * (1.0 - (1.0 - 1.0 / E) ** pairs)


def expert_weight_elems(hidden: int, inter: int, stage: int | None) -> int:
    """Weight elements of ONE expert for the stage: stage 1 = gate+up (2·inter·hidden),
    stage 2 = down (hidden·inter), None = both."""
    up = 2 * inter * hidden
    down = hidden * inter
    return {1: up, 2: down}.get(stage, up + down)


def expert_macs(hidden: int, inter: int, stage: int | None) -> int:
    """MACs per (token, expert) pair for the stage; same shapes as the weights."""
    return expert_weight_elems(hidden, inter, stage)


def grouped_model(shape: dict, dt: dict) -> ModelResult:
    """One grouped expert GEMM launch (torch._grouped_mm, CUTLASS grouped / ptr-array kernels): `rows`
    token-expert pairs sorted by expert, A [pairs, K] x W [E, K, N] -> [pairs, N]. Only the experts the
    rows route to are streamed (the kernel skips groups with no rows: their offsets are equal)."""
    rows, E, N, K = int(shape["pairs"]), int(shape["E"]), int(shape["N"]), int(shape["K"])
    hit = experts_hit(E, rows)
    w_elems = N * K
    # NB: A read once and C written once (rows x K, rows x N): a tile of A stays on chip for its N tiles
    acts = rows * K * dt["act_bytes"] + rows * N * dt["out_bytes"]
    flops = 2.0 * rows * N * K
    proj = shape.get("projection")
    what = f" ({proj})" if proj else ""
    # NB: one candidate. A grouped GEMM is handed the per-expert row offsets and launches no tile
    # for an expert with no rows, so "all E experts streamed" is not a plausible reading of it (ncu
    # on the corpus: DeepSeek-V3 decode, 256 rows over 256 experts, read 9.09 GB where 162 expected
    # experts x 58.7 MB = 9.51 GB and all 256 = 15.0 GB). The all-expert figure stays in info.
    cands = [Candidate("experts_hit", hit * w_elems * dt["weight_bytes"] + acts, flops,
                       f"{hit:.1f} of {E} experts' {K}x{N} weights streamed{what} (expected distinct experts "
                       f"for {rows} rows, uniform routing)")]
    return ModelResult(candidates=cands, compute_dtype=wider(dt["act"], dt["weight"]), primary="experts_hit",
                       info={"pairs": rows, "experts_hit": hit, "E": E, "stage": proj, "grouped": True,
                             "expert_weight_bytes": w_elems * dt["weight_bytes"],
                             "all_experts_bytes": E * w_elems * dt["weight_bytes"] + acts})


def model(shape: dict, dt: dict) -> ModelResult:
    if "pairs" in shape:
        return grouped_model(shape, dt)
    M, E, top_k = int(shape["M"]), int(shape["E"]), int(shape["top_k"])
    hidden, inter = int(shape["hidden"]), int(shape["inter"])
    stage = shape.get("stage")
    stage = int(stage) if stage is not None else None
    pairs = M * top_k
    hit = experts_hit(E, pairs)
    w_elems = expert_weight_elems(hidden, inter, stage)
    flops = 2.0 * pairs * expert_macs(hidden, inter, stage)
    # NB: activations: the token tensor read once (stage 1 side) and written once (stage 2 side);
    # the per-pair intermediate between the stages is pairs·inter elements, small at decode and
    # assumed L2-resident (seed: a tensor re-read within one launch that fits L2 counts once).
    act_in = M * hidden * dt["act_bytes"] if stage in (None, 1) else pairs * inter * dt["act_bytes"]
    act_out = M * hidden * dt["out_bytes"] if stage in (None, 2) else pairs * inter * dt["out_bytes"]
    acts = act_in + act_out
    cands = [
        Candidate("experts_hit", hit * w_elems * dt["weight_bytes"] + acts, flops,
                  f"{hit:.1f} of {E} experts streamed (expected distinct experts for {pairs} pairs)"),
        Candidate("all_experts", E * w_elems * dt["weight_bytes"] + acts, flops,
                  f"all {E} experts streamed regardless of routing"),
    ]
    return ModelResult(candidates=cands, compute_dtype=wider(dt["act"], dt["weight"]), primary="experts_hit",
                       info={"pairs": pairs, "experts_hit": hit, "E": E, "stage": stage,
                             "expert_weight_bytes": w_elems * dt["weight_bytes"]})
