"""MoE / grouped expert GEMM (docs/method.md section 2). At decode the question is how many expert
weights are streamed: the expected number of distinct experts hit, or all E."""
from __future__ import annotations

from roofline.models import Candidate, ModelResult, wider


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


def model(shape: dict, dt: dict) -> ModelResult:
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
