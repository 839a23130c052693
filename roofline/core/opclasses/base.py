"""The registration record of an op class and the registry it goes into (see __init__.py)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping


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


# the contract's closed op_class enum (the artifact's `op_class`, docs/artifact.md): every class maps into it
SEED_CLASSES = ("gemm", "moe", "attn", "elementwise", "unknown")


@dataclass(frozen=True)
class OpClass:
    """Everything the tool knows about one op class, registered once. Every field but ``name`` has
    a default, so a class file gives only what it does; nothing outside roofline/core/opclasses/ names
    a class (tests/test_opclasses.py scans the package for class-name literals).

    Identity
    name:          the class (the artifact's `op_kind`, and the key of everything below);
    seed_class:    the contract's closed op_class enum value (SEED_CLASSES) the artifact's `op_class`
                   holds for it (norm -> elementwise; a class the contract has no word for -> unknown).

    Classification (roofline.core.classify builds its tables from these, ordered by rank)
    name_rules:    ((rank, regex), ...) searched case-insensitively in the kernel name; over all
                   classes, the lowest rank that matches wins (a class may hold rows at several ranks);
    op_rules:      ((rank, regex), ...) on an op-name hint (the aten op that launched the kernel),
                   used only when no name rule matches;
    hint_aliases:  profiler classification words that mean this class ("attention" -> attn); the
                   class's own name always does.

    Shape
    fill:          stage-A fill of one shape from the workload and config.json:
                   fill(shape, op_class, entry, workload, config, regime, assumed) -> the keys it
                   needs (roofline.core.shapes.resolve_shapes checks them);
    trace_shape:   a recorded aten-op signature (roofline.ingest.trace_tables.OpSig) ->
                   (shape, dtypes) or None (roofline topn);
    shape_keys:    the shape keys the model reads, plus what `roofline topn` writes for provenance
                   (roofline.core.lint warns about the others);
    dim_keys:      those of them that are dimensions: a number or null in a Top-N, never coerced;
    missing_hint:  what gives a missing dimension, for the L2 reason ("" = the generic hint);
    regime_vote:   shape of a recorded op -> (regime, evidence) or None: what the op's shape says
                   about prefill / decode (roofline.ingest.regime_shapes); classes vote in
                   regime_vote_rank order, and regime_label names them in the evidence.

    Byte/FLOP model
    model:         (shape, dtypes) -> roofline.core.models.ModelResult, a pure byte/FLOP model whose
                   candidates are the class's byte models;
    not_modelled:  why the class has no model (the L2 reason), for a class without one;
    choose_model:  (alternatives, notes) -> the chosen alternative, or None for the generic rule
                   (the largest feasible candidate; docs/method.md section 2);
    model_notes:   (alternatives, notes) -> None: what the class says about its candidates once the
                   figures are recorded;
    roof:          the bandwidth roof of its memory axis: "hbm" (the peak table's hbm_bw_bytes_s) or
                   "interconnect" (interconnect_bw_bytes_s: collectives);
    compulsory_bytes: its model counts bytes the kernel must move at least once (the counters'
                   plausibility rule 4: DRAM bytes far under them are implausible).

    Time and launches
    launches:      (entry, work, regime record, config, notes) -> launches per logical op, or None
                   (the Top-N's launches_per_logical_op);
    judged_time:   (entry, regime record, out, notes) -> (the regime record the roofline judges,
                   a split passed to kernel_speedup): the part of the kernel time the roof judges;
    kernel_speedup: (split, speedup of the judged part, out, notes) -> the kernel's speedup.

    Prior and verdict
    target_eff:    {prior key: target efficiency}: how close a well-implemented kernel of this
                   class gets to its roofline bound (docs/method.md section 4; routing.TARGET_EFF
                   is every class's);
    prior_key:     (regime, shape) -> (prior key, note or None); None: the class's name;
    residency:     (work, chosen alternative, L2 bytes, out, notes) -> whether the L2, not HBM,
                   serves the op (True: no verdict); notes where DRAM bytes above the model are expected;
    no_verdict:    why the roof gives no headroom verdict on this class ("" = it does): the figures
                   are shown, the note says this, the class's levers stand.

    Levers (roofline.core.routing; docs/method.md section 5)
    fusable:       a kernel of this class may be fused into its producer / consumer (named by the
                   fuse lever of a neighbouring saturated kernel);
    stop_reading_levers: (entry, model info) -> levers: bytes read that the work does not use;
    precision_levers: (entry, dtypes, NecessaryCtx, notes) -> [(kind, text, evidence, share of the bytes
                   saved)]: lower-precision levers (LOSSY) of the operand the class's origin rule says is a
                   weight or the KV cache, with their saving (opclasses/origin.py, levers.operand_levers);
                   none, with a note, where the origin is unknown;
    latency_levers: (entry) -> extra levers of a latency-bound kernel;
    finish_levers: (out, model info, dtypes) -> None: the class's last word on the levers (it may
                   replace them: collectives).

    Elsewhere
    gemm_problems: an artifact entry -> the GEMMs of one logical op (list[Problem]) for the
                   stage-C re-run (roofline.rerun);
    folds_splitk_reduce: a split-K reduce kernel launched right after it is half of its op;
    dtype_roles:   the dtype roles its Top-N entries speak for in the env report's starter
                   ("weight": model_dtype; "kv": kv_cache_dtype);
    arch_class:    the model_arch_class a kernel of this class implies ("moe"), or None.
    kernel_evidence: {kernel name: launches} of the whole trace -> {key: record} for the Top-N's
                   trace_evidence (roofline topn), read back by the necessary jobs (NecessaryCtx);
    necessary:     (shape, dtypes, bytes the model moves, NecessaryCtx) -> Necessary: the fewest bytes
                   (and FLOPs) the same result needs for one launch of that shape, with the trace
                   evidence that says so (roofline.core.necessary); None: the model's bytes are the fewest.
    """
    name: str
    seed_class: str = "unknown"
    # classification
    name_rules: tuple = ()
    op_rules: tuple = ()
    hint_aliases: tuple = ()
    # shape
    fill: Callable | None = None
    trace_shape: Callable | None = None
    shape_keys: frozenset = frozenset()
    dim_keys: frozenset = frozenset()
    missing_hint: str = ""
    regime_vote: Callable | None = None
    regime_vote_rank: int = 0
    regime_label: str = ""
    # byte/FLOP model
    model: Callable | None = None
    not_modelled: str = ""
    choose_model: Callable | None = None
    model_notes: Callable | None = None
    necessary: Callable | None = None
    kernel_evidence: Callable | None = None
    roof: str = "hbm"
    compulsory_bytes: bool = False
    # time and launches
    launches: Callable | None = None
    judged_time: Callable | None = None
    kernel_speedup: Callable | None = None
    # prior and verdict
    target_eff: Mapping = field(default_factory=dict)
    prior_key: Callable | None = None
    residency: Callable | None = None
    no_verdict: str = ""
    # levers
    fusable: bool = False
    stop_reading_levers: Callable | None = None
    precision_levers: Callable | None = None
    latency_levers: Callable | None = None
    finish_levers: Callable | None = None
    # elsewhere
    gemm_problems: Callable | None = None
    folds_splitk_reduce: bool = False
    dtype_roles: tuple = ()
    arch_class: str | None = None

    def __hash__(self) -> int:          # target_eff is a dict: one registration per name
        return hash(self.name)

    def prior(self, regime: str | None, shape: dict | None = None) -> tuple[str, str | None]:
        """(the target_eff key of a kernel of this class in ``regime``, a note or None)."""
        return self.prior_key(regime, shape or {}) if self.prior_key is not None else (self.name, None)



@dataclass
class NecessaryCtx:
    """What a class's necessary job and precision levers may read besides its shape: config.json, the
    workload, the analysed regime, every shape of the entry in that regime (with its launches: how
    shapes change step by step; its dtypes and launch weights), the regime's step count, the
    trace-level evidence `roofline topn` wrote (Top-N `trace_evidence`: the KV caches and how they
    are written), the aten ops that launched the kernel, the model's bytes per launch, the run's
    tensor-parallel degree where the Top-N gives evidence of it (roofline.core.necessary.tp_degree), and the
    kernel's name."""
    config: dict | None
    workload: dict
    regime: str
    shapes: list
    launches: list | None
    steps: float | None
    trace_evidence: dict
    dts: list = field(default_factory=list)           # each shape's dtypes (act/weight/out and their bytes)
    weights: list = field(default_factory=list)       # each shape's launch weight (sum 1)
    aten_ops: dict = field(default_factory=dict)      # Top-N aten_ops: launching op -> launches
    bytes_per_launch: float | None = None             # the chosen byte model's bytes per launch (launch-weighted)
    tp: int | None = None                             # the run's tensor-parallel degree where evidence gives it
    tp_evidence: str = ""                             # where tp comes from (None: why it is not known)
    kernel: str | None = None                         # the entry's kernel name (the trace evidence names kernels)


@dataclass
class Necessary:
    """The fewest bytes the same result needs, for ONE launch of one shape (the unit of bytes_est).

    bytes:     None when the evidence is absent (`missing` says what is missing; no guess);
    flops:     None: the model's FLOPs are the useful ones;
    kind:      what makes part of the bytes avoidable ("as_modelled": nothing found);
    evidence:  what the trace / config / counters say, in words (each claim checkable);
    removable: the launch need not run at all (a copy its consumer could read in place);
    lever:     the byte-reduction lever, in words, when some bytes are avoidable;
    covers:    kernels whose work the same lever removes as well (a fused attention removes every op of an
               eager attention's score chain): no fusion lever names them (one lever per cause);
    flops_dtype: the necessary FLOPs run at that dtype's roof (a fused kernel's tensor-core matmuls), not
               at the moved work's (None: the same roof);
    time_priced: the same bytes, but the launches that move them need not be this many: the saving is the
               measured time against those bytes at the class's target efficiency (roofline.core.necessary.record)."""
    bytes: float | None
    flops: float | None = None
    kind: str = "as_modelled"
    evidence: list = field(default_factory=list)
    missing: str | None = None
    removable: bool = False
    lever: str | None = None
    flops_dtype: str | None = None      # the dtype whose compute roof prices `flops` (None: the kernel's own)
    covers: frozenset = frozenset()     # kernels the lever removes as well (no fusion lever with them)
    time_priced: bool = False           # the saving is the launches' measured time against the same bytes at the
                                        # class's target (an eager per-expert loop), not bytes avoided


REGISTRY: dict[str, OpClass] = {}


def register(oc: OpClass) -> OpClass:
    """Add an op class; a second registration of the same name, or a seed class outside the
    seed's enum, is an error."""
    if oc.seed_class not in SEED_CLASSES:
        raise ValueError(f"op class {oc.name!r}: seed_class {oc.seed_class!r} is not in the contract's enum {SEED_CLASSES}")
    if oc.name in REGISTRY:
        raise ValueError(f"op class {oc.name!r} is registered twice")
    REGISTRY[oc.name] = oc
    return oc


def l2_resident(out: dict, notes: list[str], what: str, bytes_est: float, l2: float, why: str, lever: str) -> bool:
    """The one L2-resident verdict of a class's `residency` rule: the op moves under half the L2 (and
    `why`, the class's own reason, in words), so its bytes come from the L2 and the HBM roof does not
    bind it: `l2_resident` set, no verdict, the note naming `lever`. Returns True (no verdict)."""
    out["l2_resident"] = True
    notes.append(f"L2-resident: {what} moves {bytes_est / 1e6:.3g} MB, under half the L2 ({l2 / 1e6:.0f} MB){why}, "
                 f"so the HBM roof does not bind it: no verdict; the lever is {lever}")
    return True

