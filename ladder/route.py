"""The ladder's route as `roofline ladder advise` walks it: the levels built (registry.LEVELS)
and, after them, the levels of the book's nine-level route not built yet (named, never numbered
twice), with what each level changes, its resource budget and what goes wrong when it is added."""
from __future__ import annotations

from . import registry

SEED_ROUTE: dict[int, tuple[str, str]] = {
    1: ("single tile", "a single 128x128 output tile: synchronous copy, one MMA, accumulator readback, store"),
    2: ("K loop", "K-loop accumulation: initial accumulator, per-K-tile accumulation, the K tail"),
    3: ("spatial tiling", "multiple CTAs covering M/N: grid -> tile mapping, boundary masks"),
    4: ("TMA", "TMA async load/store: descriptor/swizzle, load barrier, store drain"),
    5: ("multi-stage pipeline", "PIPE_DEPTH stages: prologue/steady/epilogue, stage/phase ledger"),
    6: ("persistent scheduler", "a fixed set of resident CTAs walks the tiles; tail and tile order"),
    7: ("warp specialization", "producer/MMA/writeback roles, the four classes of handoff, warpgroup-scoped sync"),
    8: ("2-CTA cluster", "cluster tile, DSMEM/multicast, remote barrier"),
    9: ("multi-consumer", "several consumers partition the output so one staged operand feeds more MMA"),
}
SEED_LAST = max(SEED_ROUTE)

# What goes wrong when a level is added, and what to fall back to.
RISKS: dict[int, tuple[str, ...]] = {
    1: ("descriptor/layout errors show up as plausible wrong numbers: check element-wise, not just the norm",),
    2: ("the K tail (K not a multiple of the K tile) and the first-step accumulator init",),
    3: ("edge tiles: masks on loads and stores when M, N are not multiples of the tile",),
    4: ("TMA needs 16-byte row strides (K % 8 for bf16) and a matching swizzle; misaligned K needs a padded "
        "copy or the synchronous path", "the store drain: a TMA store still in flight when the CTA exits"),
    5: ("stage/phase ledger errors deadlock or read a stage before it lands (racecheck, synccheck)",
        "shared memory: more stages mean fewer CTAs per SM; the single-CTA tile loses small shapes"),
    6: ("tail and tile order: wave quantization, and an order that re-streams an operand bigger than L2",
        "the epilogue stalls the MMA unless the next tile's loads overlap it"),
    7: ("warp specialization is not a guaranteed speedup: the added roles cost occupancy and the handoffs "
        "cost sync", "register split (setmaxnreg) and the producer's empty-barrier waits"),
    8: ("needs cluster launch (sm_90+) and remote barriers; a CTA that exits while its partner still reads "
        "its shared memory", "multicast only pays when both CTAs of the pair need the same operand tile"),
    9: ("write conflicts between consumers, register pressure of the larger accumulator",),
}


def built_levels() -> dict[int, registry.Level]:
    return {lv.id: lv for lv in registry.LEVELS}


def next_level_id(level: int) -> int | None:
    """The level after `level`: the next registry level, else the route's next, else None."""
    later = sorted(i for i in built_levels() if i > level)
    if later:
        return later[0]
    return level + 1 if level + 1 <= SEED_LAST else None


def level_name(level: int) -> str:
    lv = built_levels().get(level)
    if lv is not None:
        return lv.name
    return SEED_ROUTE[level][0] if level in SEED_ROUTE else f"level {level}"


def resource_budget(level: int) -> dict:
    lv = built_levels().get(level)
    if lv is None:
        return {"built": False, "text": "not built: no registry entry yet; the new entry must state regs_max, "
                "smem_bytes, dyn_smem_bytes and no_spills, which tests/test_ladder_build.py then checks against ptxas"}
    return {"built": True, "threads": lv.threads, "regs_max": lv.regs_max, "smem_bytes_total": lv.total_smem_bytes,
            "no_spills": lv.no_spills, "tile_mnk": list(lv.tile_mnk),
            "text": f"registers <= {lv.regs_max}/thread, {lv.threads} threads, shared memory {lv.total_smem_bytes} B "
                    f"(static {lv.smem_bytes} + dynamic {lv.dyn_smem_bytes}), "
                    f"{'0 spills' if lv.no_spills else 'spills allowed'} (registry.py, checked by tests/test_ladder_build.py)"}


def what_changes(level: int) -> str:
    lv = built_levels().get(level)
    if lv is not None:
        return f"{lv.adds} ({lv.description})"
    return SEED_ROUTE.get(level, ("?", "not in the route"))[1]
