"""The registration record of an op class and the registry it goes into (see __init__.py)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from roofline.core.opclasses import jobs


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


FLAGS = ("fusable", "compulsory_bytes", "folds_splitk_reduce")


@dataclass(frozen=True)
class OpClass:
    """What the tool knows about one op class as data, registered once; what it DOES is its jobs,
    registered per job and per class with ``@job(...)`` (jobs.py; each job is a method here that runs
    the class's registration or the job's default). Every field but ``name`` has a default, so a class
    file gives only what it has; nothing outside roofline/core/opclasses/ names a class
    (tests/test_opclasses.py scans the package for class-name literals).

    name:          the class (the artifact's `op_kind`, and the key of everything below);
    seed_class:    the contract's closed op_class enum value (SEED_CLASSES) the artifact's `op_class`
                   holds for it (norm -> elementwise; a class the contract has no word for -> unknown);
    name_rules:    ((rank, regex), ...) searched case-insensitively in the kernel name; over all
                   classes, the lowest rank that matches wins (roofline.core.classify);
    op_rules:      ((rank, regex), ...) on an op-name hint (the aten op that launched the kernel),
                   used only when no name rule matches;
    hint_aliases:  profiler classification words that mean this class ("attention" -> attn);
    shape_keys:    the shape keys the model reads, plus what `roofline topn` writes for provenance
                   (roofline.core.lint warns about the others);
    dim_keys:      those of them that are dimensions: a number or null in a Top-N, never coerced;
    missing_hint:  what gives a missing dimension, for the L2 reason ("" = the generic hint);
    not_modelled:  why the class has no model (the L2 reason), for a class without one;
    roof:          the bandwidth roof of its memory axis: "hbm" or "interconnect" (collectives);
    target_eff:    {prior key: target efficiency} (docs/method.md section 4);
    no_verdict:    why the roof gives no headroom verdict on this class ("" = it does);
    flags:         what holds of it, from FLAGS: "fusable" (a fuse lever may name it as a neighbour),
                   "compulsory_bytes" (its model counts bytes the kernel must move at least once: the
                   counters' plausibility rule 4), "folds_splitk_reduce" (a split-K reduce launched
                   right after it is half of its op);
    dtype_roles:   the dtype roles its Top-N entries speak for in the env report's starter;
    arch_class:    the model_arch_class a kernel of this class implies ("moe"), or None.
    """
    name: str
    seed_class: str = "unknown"
    name_rules: tuple = ()
    op_rules: tuple = ()
    hint_aliases: tuple = ()
    shape_keys: frozenset = frozenset()
    dim_keys: frozenset = frozenset()
    missing_hint: str = ""
    not_modelled: str = ""
    roof: str = "hbm"
    target_eff: Mapping = field(default_factory=dict)
    no_verdict: str = ""
    flags: frozenset = frozenset()
    dtype_roles: tuple = ()
    arch_class: str | None = None

    def __post_init__(self) -> None:
        bad = set(self.flags) - set(FLAGS)
        if bad:
            raise ValueError(f"op class {self.name!r}: unknown flags {sorted(bad)} (one of {FLAGS})")

    def __hash__(self) -> int:          # target_eff is a dict: one registration per name
        return hash(self.name)

    # flags
    @property
    def fusable(self) -> bool:
        return "fusable" in self.flags

    @property
    def compulsory_bytes(self) -> bool:
        return "compulsory_bytes" in self.flags

    @property
    def folds_splitk_reduce(self) -> bool:
        return "folds_splitk_reduce" in self.flags

    # the jobs (jobs.py): the class's registration, else the job's default
    def has(self, name: str) -> bool:
        """Whether the class registers its own `name` job."""
        return jobs.lookup(name, self.name) is not None

    def _run(self, name: str, default, *args):
        f = jobs.lookup(name, self.name)
        return f(*args) if f is not None else default

    def model(self, shape: dict, dt: dict):
        f = jobs.lookup("model", self.name)
        if f is None:
            raise LookupError(f"op class {self.name!r} has no byte/FLOP model")
        return f(shape, dt)

    def fill(self, shape, op_class, entry, workload, config, regime, assumed):
        return self._run("fill", None, shape, op_class, entry, workload, config, regime, assumed)

    def trace_shape(self, sig):
        return self._run("trace_shape", None, sig)

    def regime_vote(self, shape):
        return self._run("regime_vote", None, shape)

    @property
    def regime_label(self) -> str:
        return jobs.meta("regime_vote", self.name).get("label", "")

    def choose_model(self, alts, notes):
        return self._run("choose_model", None, alts, notes)

    def model_notes(self, alts, notes) -> None:
        self._run("model_notes", None, alts, notes)

    def necessary(self, shape, dt, bytes_est, ctx):
        """The class's necessity rules in rank order (jobs.rule), then its own registration."""
        for f in jobs.rules(self.name):
            n = f(shape, dt, bytes_est, ctx)
            if n is not None:
                return n
        return self._run("necessary", None, shape, dt, bytes_est, ctx)

    def kernel_evidence(self, launches) -> dict:
        return self._run("kernel_evidence", {}, launches)

    def launches(self, e, w, reg, config, notes):
        return self._run("launches", None, e, w, reg, config, notes)

    def judged_time(self, e, reg, notes):
        return self._run("judged_time", (reg, None), e, reg, notes)

    def kernel_speedup(self, split, attain, notes):
        return self._run("kernel_speedup", attain, split, attain, notes)

    def prior(self, regime: str | None, shape: dict | None = None) -> tuple[str, str | None]:
        """(the target_eff key of a kernel of this class in ``regime``, a note or None)."""
        return self._run("prior_key", (self.name, None), regime, shape or {})

    def residency(self, w, chosen, l2, notes) -> bool:
        return bool(self._run("residency", False, w, chosen, l2, notes))

    def stop_reading_levers(self, out, info) -> list:
        return self._run("stop_reading_levers", [], out, info)

    def precision_levers(self, out, dt, ctx, notes) -> list:
        return self._run("precision_levers", [], out, dt, ctx, notes)

    def latency_levers(self, entry) -> list:
        return self._run("latency_levers", [], entry)

    def finish_levers(self, out, lv, all_light, info, dt):
        """The levers `lv` (entry.Levers) after the class's last word on them (the entry `out` is read only)."""
        return self._run("finish_levers", lv, out, lv, all_light, info, dt)

    def gemm_problems(self, entry) -> list:
        return self._run("gemm_problems", [], entry)


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
               at the moved work's (None: the same roof)."""
    bytes: float | None
    flops: float | None = None
    kind: str = "as_modelled"
    evidence: list = field(default_factory=list)
    missing: str | None = None
    removable: bool = False
    lever: str | None = None
    flops_dtype: str | None = None      # the dtype whose compute roof prices `flops` (None: the kernel's own)
    covers: frozenset = frozenset()     # kernels the lever removes as well (no fusion lever with them)


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


def l2_resident(notes: list[str], what: str, bytes_est: float, l2: float, why: str, lever: str) -> bool:
    """The one L2-resident verdict of a class's `residency` rule: the op moves under half the L2 (and
    `why`, the class's own reason, in words), so its bytes come from the L2 and the HBM roof does not
    bind it: no verdict (the entry's `l2_resident`), the note naming `lever`. Returns True."""
    notes.append(f"L2-resident: {what} moves {bytes_est / 1e6:.3g} MB, under half the L2 ({l2 / 1e6:.0f} MB){why}, "
                 f"so the HBM roof does not bind it: no verdict; the lever is {lever}")
    return True

