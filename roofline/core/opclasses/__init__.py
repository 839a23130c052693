"""One registration per op class, the way torch.utils.flop_counter registers one formula per op.

An op class (classify.py: gemm, moe, attn, elementwise, norm, quant, comm, unknown) is what the
tool knows about a kind of kernel. Each one is registered once, in its module here: its data with
``register(OpClass(...))`` (base.py) and each of its jobs with ``@job("<job>", "<class>")`` (jobs.py: one
registration per job and class; the job's default where a class registers none). Everything else asks
the record: ``of(op_class).necessary(...)``, ``of(op_class).judged_time(...)``, ... (docs/opclasses.md).

Modules: gemm.py, moe.py, attn.py, stream.py (elementwise, norm, quant), comm.py (collectives, on
the interconnect roof), routing_sort.py, recurrent.py and chunk_scan.py (linear-attention /
state-space layers: the decode state update and the chunked prefill; linear_cfg.py holds what they
share), causal_conv.py, scatter_add.py, unmodelled.py (unknown); aten.py and stage_a.py hold what the shape rules
and the fills share; ssd_reference.py the rule that tells Mamba2's chunk scan run as torch ops (streaming
ops' necessary bytes, the Top-N's trace_evidence.ssm_kernels); eager_attention.py the rule that tells an eager
attention's materialised score matrix (streaming ops' and batched GEMMs' necessary bytes, the Top-N's
trace_evidence.score_chains, which roofline/ingest/score_chains.py writes). A new op class is one module here (and a row in classify.RULES);
tests/test_opclasses.py checks that every class classify.py returns is registered exactly once and
that nothing else wires these jobs.
"""
from __future__ import annotations

from roofline.core.opclasses.base import REGISTRY, OpClass, Problem, register  # noqa: F401
from roofline.core.opclasses import jobs
from roofline.core.opclasses.jobs import job  # noqa: F401


# the class of a kernel no rule recognised (unmodelled.py registers it): listed, never guessed
FALLBACK = "unknown"


def get(op_class: str) -> OpClass | None:
    """The registration of ``op_class``, or None for a name that is no op class."""
    return REGISTRY.get(op_class)


def of(op_class: str | None) -> OpClass:
    """The registration of ``op_class``; the fallback class for None or a name that is no class."""
    return REGISTRY.get(op_class) if op_class in REGISTRY else REGISTRY[FALLBACK]


def seed_class(op_class: str | None) -> str:
    """The contract's closed op_class enum value of a class (the artifact's `op_class`)."""
    return of(op_class).seed_class


def kind_of(entry: dict) -> str | None:
    """An artifact entry's op class (its op_kind; an older artifact's op_class)."""
    return entry.get("op_kind") or entry.get("op_class")


def on_interconnect(op_class: str | None) -> bool:
    """Whether a class's memory axis is the interconnect roof (collectives), not HBM."""
    return of(op_class).roof == "interconnect"


def memory_roof(peaks, op_class: str) -> tuple[float | None, str]:
    """(bytes/s, what it is) of the roof an op class's memory axis is judged against."""
    if on_interconnect(op_class):
        return peaks.interconnect_bw_bytes_s, "interconnect"
    return peaks.hbm_bw_bytes_s, "hbm"


def missing_roof_reason(peaks, op_class: str) -> str | None:
    """The L2 reason when the class's memory roof is absent, else None."""
    bw, what = memory_roof(peaks, op_class)
    if bw is not None:
        return None
    if what == "interconnect":
        return (f"no interconnect roof for {peaks.device} (the peak table has no interconnect_bw_bytes_s): a "
                "collective is judged against the link, not HBM")
    return f"no memory peak for {peaks.device}"


def target_eff() -> dict[str, float]:
    """Every class's priors: prior key -> target efficiency (docs/method.md section 4)."""
    out: dict[str, float] = {}
    for oc in REGISTRY.values():
        for k, v in oc.target_eff.items():
            if k in out:
                raise ValueError(f"prior {k!r} is given by two op classes")
            out[k] = v
    return out


def prior_key(op_class: str | None, regime: str | None, shape: dict | None = None) -> str:
    """The target_eff key of a kernel of ``op_class`` in ``regime``."""
    return of(op_class).prior(regime, shape)[0]


def regime_voters() -> list[OpClass]:
    """The classes whose recorded ops' shapes say the regime, in the order they decide."""
    return sorted((REGISTRY[c] for c in jobs.serving("regime_vote")), key=lambda oc: jobs.meta("regime_vote", oc.name)["rank"])


def with_role(role: str) -> frozenset:
    """The classes whose Top-N entries speak for a dtype role ("weight", "kv")."""
    return frozenset(oc.name for oc in REGISTRY.values() if role in oc.dtype_roles)


def arch_of(classes) -> str | None:
    """The model_arch_class the kernels' classes imply (an MoE kernel: "moe"), or None."""
    return next((REGISTRY[c].arch_class for c in sorted(c for c in classes if c in REGISTRY)
                 if REGISTRY[c].arch_class), None)


def not_modelled_reason(op_class: str, raw: dict) -> str:
    """The L2 reason of an entry whose class has no model, saying what would give a verdict: the
    classes a `classification` may name, and the op its launches ran inside where the trace says."""
    oc = REGISTRY.get(op_class)
    ops = ", ".join(raw.get("aten_ops") or {}) if isinstance(raw.get("aten_ops"), dict) else ""
    return ((oc.not_modelled if oc is not None and oc.not_modelled else f"op class {op_class!r} cannot be modelled: "
             "no guess is made") + " (classification: one of "
            + ", ".join(c for c, x in REGISTRY.items() if x.has("model")) + ")"
            + (f"; its launches ran inside {ops} (the op the trace records around them)" if ops else ""))


def kernel_evidence(launches: dict) -> dict:
    """What the classes read from the trace's kernel names ({name: launches}) for the Top-N's
    trace_evidence (each class's kernel_evidence job; a key given twice is an error)."""
    out: dict = {}
    for oc in REGISTRY.values():
        for k, v in oc.kernel_evidence(launches).items():
            if k in out:
                raise ValueError(f"trace evidence {k!r} is given by two op classes")
            out[k] = v
    return out


def trace_shape(op_class: str, sig):
    """(shape dict, dtypes dict) for a kernel of ``op_class`` launched by ``sig``, or None."""
    oc = REGISTRY.get(op_class)
    return oc.trace_shape(sig) if oc is not None else None


def dim_keys() -> frozenset:
    """Every shape key that is a dimension in some op class (roofline.core.inputs validates them as numbers)."""
    return frozenset().union(*(oc.dim_keys for oc in REGISTRY.values()))


def rerunnable(op_class: str | None) -> bool:
    """Whether stage C can re-run a head of this class on the GEMM ladder (it registers GEMM problems)."""
    oc = REGISTRY.get(op_class) if op_class else None
    return oc is not None and oc.has("gemm_problems")


def gemm_problems(entry: dict) -> list[Problem]:
    """The GEMMs that form one logical op of a head entry (its op class's rule; [] for a class
    that has none: only GEMM-like classes are re-run at stage C)."""
    oc = REGISTRY.get(entry.get("op_class"))
    return oc.gemm_problems(entry) if oc is not None else []


# import the modules so that their register() runs
from roofline.core.opclasses import (gemm, moe, attn, stream, comm, routing_sort, unmodelled,  # noqa: E402,F401
                                recurrent, chunk_scan, causal_conv, scatter_add, inductor)
# the necessity rules (each registers itself for the classes whose bytes it reads: jobs.rule)
from roofline.core.opclasses import (ssd_reference, eager_attention, expert_gather, last_logits,  # noqa: E402,F401
                                gqa_copy)


def _check_jobs() -> None:
    """Every job registration names a registered class (a typo in @job(...) is an error at import)."""
    for name in jobs.JOBS:
        stray = [c for c in jobs.serving(name) if c not in REGISTRY]
        if stray:
            raise ValueError(f"job {name!r} is registered for {stray}, which are no op classes")


_check_jobs()
