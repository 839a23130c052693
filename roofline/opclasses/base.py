"""The registration record of an op class and the registry it goes into (see __init__.py)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


@dataclass
class Problem:
    """One GEMM of a head's logical op, as the stage-C re-run times it."""
    label: str        # "dense", "moe stage1 (gate/up)", ...
    M: int
    N: int
    K: int
    dtype: str
    count: float      # how many such GEMMs make up one logical op
    # a grouped (MoE) GEMM: M token-expert rows over E experts (torch._grouped_mm); the re-run
    # draws the rows per expert (ladder.routing): top_k distinct experts per token when tokens
    # and top_k are known, else each row's expert uniform
    E: int | None = None
    tokens: int | None = None
    top_k: int | None = None
    w_layout: str = "enk"        # W [E, N, K] (K contiguous); "ekn": [E, K, N]
    experts_hit_model: float | None = None   # models.moe.experts_hit, for the entry beside the drawn one

    @property
    def grouped(self) -> bool:
        return self.E is not None


@dataclass(frozen=True)
class OpClass:
    """Everything the tool knows about one op class, registered once.

    model:         (shape, dtypes) -> roofline.models.ModelResult, a pure byte/FLOP model;
    fill:          stage-A fill of one shape from the workload and config.json:
                   fill(shape, op_class, entry, workload, config, regime, assumed) -> the keys it
                   needs (roofline.shapes.resolve_shapes checks them);
    trace_shape:   a recorded aten-op signature (roofline.ingest.trace_tables.OpSig) ->
                   (shape, dtypes) or None (roofline topn);
    gemm_problems: an artifact entry -> the GEMMs of one logical op (list[Problem]) for the
                   stage-C re-run (roofline.rerun);
    shape_keys:    the shape keys the model reads, plus what `roofline topn` writes for provenance
                   (roofline.lint warns about the others);
    dim_keys:      those of them that are dimensions: a number or null in a Top-N, never coerced
                   (roofline.inputs refuses "64" or true there);
    missing_hint:  what gives a missing dimension, for the L2 reason ("" = the generic hint);
    not_modelled:  why the class has no model (the L2 reason), for a class without one;
    roof:          the bandwidth roof of its memory axis: "hbm" (the peak table's hbm_bw_bytes_s) or
                   "interconnect" (interconnect_bw_bytes_s: collectives);
    necessary:     (shape, dtypes, bytes the model moves, NecessaryCtx) -> Necessary: the fewest bytes
                   (and FLOPs) the same result needs for one launch of that shape, with the trace
                   evidence that says so (roofline.necessary); None: the model's bytes are the fewest.
    """
    name: str
    model: Callable | None = None
    fill: Callable | None = None
    trace_shape: Callable | None = None
    gemm_problems: Callable | None = None
    shape_keys: frozenset = frozenset()
    dim_keys: frozenset = frozenset()
    missing_hint: str = ""
    not_modelled: str = ""
    roof: str = "hbm"
    necessary: Callable | None = None


@dataclass
class NecessaryCtx:
    """What a class's necessary job may read besides its shape: config.json, the workload, the
    analysed regime, every shape of the entry in that regime (with its launches: how shapes change
    step by step), the regime's step count, and the trace-level evidence `roofline topn` wrote
    (Top-N `trace_evidence`: the KV caches and how they are written)."""
    config: dict | None
    workload: dict
    regime: str
    shapes: list
    launches: list | None
    steps: float | None
    trace_evidence: dict


@dataclass
class Necessary:
    """The fewest bytes the same result needs, for ONE launch of one shape (the unit of bytes_est).

    bytes:     None when the evidence is absent (`missing` says what is missing; no guess);
    flops:     None: the model's FLOPs are the useful ones;
    kind:      what makes part of the bytes avoidable ("as_modelled": nothing found);
    evidence:  what the trace / config / counters say, in words (each claim checkable);
    removable: the launch need not run at all (a copy its consumer could read in place);
    lever:     the byte-reduction lever, in words, when some bytes are avoidable."""
    bytes: float | None
    flops: float | None = None
    kind: str = "as_modelled"
    evidence: list = field(default_factory=list)
    missing: str | None = None
    removable: bool = False
    lever: str | None = None


REGISTRY: dict[str, OpClass] = {}


def register(oc: OpClass) -> OpClass:
    """Add an op class; a second registration of the same name is an error."""
    if oc.name in REGISTRY:
        raise ValueError(f"op class {oc.name!r} is registered twice")
    REGISTRY[oc.name] = oc
    return oc
