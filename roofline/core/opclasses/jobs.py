"""Per-job registrations of the op classes, the way torch.utils.flop_counter registers one formula per
op: a class file says which of its functions does which job for which classes,

    @job("judged_time", "comm")
    def transfer_split(e, reg, out, notes): ...

    job("model", "gemm")(models.gemm.model)        # a function defined elsewhere

and a second registration of the same job for the same class raises. A necessity rule (a reason why part of
a class's bytes need not move: Mamba2's chunk scan run as torch ops, an eager attention's score matrix)
is one file that registers its `necessary` function with ``@rule(*classes, rank=N)``: the class's
necessary job asks its rules in rank order, the first that answers wins, and the class's own
`necessary` registration (if any) answers last. A class that registers no
function for a job gets the job's default (OpClass's method of the same name says what it is), so
the record of a class (base.OpClass) carries its data only, and a job that one class needs is no
field that every class carries.

The jobs (the signature each registered function takes; the default where none is registered):

fill            (shape, op_class, entry, workload, config, regime, assumed) -> the keys it needs:
                stage-A fill of one shape from the workload and config.json (shapes.resolve_shapes);
                default: no stage-A fill (the shape must be captured);
trace_shape     (aten-op signature) -> (shape, dtypes) or None (roofline topn);
regime_vote     (shape) -> (regime, evidence) or None: what a recorded op's shape says about prefill /
                decode; meta: rank= (classes vote in rank order), label= (names them in the evidence);
model           (shape, dtypes) -> models.ModelResult: the pure byte/FLOP model (no default: a class
                without one is not modelled, OpClass.not_modelled says why);
choose_model    (alternatives, notes) -> the chosen alternative, or None for the generic rule;
model_notes     (alternatives, notes) -> None: what the class says about its candidates;
necessary       (shape, dtypes, bytes the model moves, NecessaryCtx) -> Necessary or None;
kernel_evidence ({kernel name: launches}) -> {key: record} for the Top-N's trace_evidence;
launches        (entry, work, regime record, config, notes) -> launches per logical op, or None;
judged_time     (entry, regime record, notes) -> (the regime record the roof judges, the split: t_transfer_ms,
                t_waiting_ms, waiting_share of the part judged and the rest; None: the whole time);
kernel_speedup  (split, speedup of the judged part, notes) -> the kernel's speedup;
prior_key       (regime, shape) -> (target_eff key, note or None); default: (the class's name, None);
residency       (work, chosen alternative, L2 bytes, notes) -> whether the L2 serves the op;
stop_reading_levers (entry, model info) -> levers: bytes read that the work does not use;
precision_levers (entry, dtypes, NecessaryCtx, notes) -> [(kind, text, evidence, share saved)];
latency_levers  (entry) -> extra levers of a latency-bound kernel;
finish_levers   (entry, Levers, all entries, model info, dtypes) -> Levers: the class's last word on the levers;
gemm_problems   (artifact entry) -> list[Problem]: the GEMMs of one logical op (stage C re-runs the
                classes that register it).
"""
from __future__ import annotations

from typing import Callable

JOBS = ("fill", "trace_shape", "regime_vote", "model", "choose_model", "model_notes", "necessary",
        "kernel_evidence", "launches", "judged_time", "kernel_speedup", "prior_key", "residency",
        "stop_reading_levers", "precision_levers", "latency_levers", "finish_levers", "gemm_problems")

# job -> {op class -> (the registered function, its meta)}
_TABLE: dict[str, dict[str, tuple[Callable, dict]]] = {j: {} for j in JOBS}


def job(name: str, *classes: str, **meta) -> Callable[[Callable], Callable]:
    """Register the decorated function as op classes' `name` job; a job registered twice for one
    class, or a job that is not in JOBS, is an error."""
    if name not in _TABLE:
        raise ValueError(f"no op-class job {name!r} (one of {', '.join(JOBS)})")
    if not classes:
        raise ValueError(f"job {name!r}: name the op classes it serves")

    def deco(fn: Callable) -> Callable:
        for c in classes:
            if c in _TABLE[name]:
                raise ValueError(f"op class {c!r}: job {name!r} is registered twice")
            _TABLE[name][c] = (fn, dict(meta))
        return fn
    return deco


def lookup(name: str, op_class: str) -> Callable | None:
    """The function registered as ``op_class``'s `name` job, or None."""
    got = _TABLE[name].get(op_class)
    return got[0] if got is not None else None


def meta(name: str, op_class: str) -> dict:
    """What the registration of ``op_class``'s `name` job says besides its function ({} if none)."""
    got = _TABLE[name].get(op_class)
    return got[1] if got is not None else {}


def serving(name: str) -> tuple[str, ...]:
    """The op classes that register a `name` job, in registration order."""
    return tuple(_TABLE[name])


# op class -> [(rank, necessity rule)], in rank order
_RULES: dict[str, list[tuple[int, Callable]]] = {}


def rule(*classes: str, rank: int) -> Callable[[Callable], Callable]:
    """Register the decorated function as a necessity rule of ``classes`` at ``rank`` (lower: asked first);
    two rules of one class at one rank, or one rule twice for one class, is an error."""
    if not classes:
        raise ValueError("a necessity rule names the op classes it serves")

    def deco(fn: Callable) -> Callable:
        for c in classes:
            have = _RULES.setdefault(c, [])
            if any(r == rank or f is fn for r, f in have):
                raise ValueError(f"op class {c!r}: a necessity rule at rank {rank}, or {fn.__name__}, is registered twice")
            have.append((rank, fn))
            have.sort(key=lambda x: x[0])
        return fn
    return deco


def rules(op_class: str) -> tuple[Callable, ...]:
    """The necessity rules of ``op_class``, in the order they are asked."""
    return tuple(f for _, f in _RULES.get(op_class, ()))


def functions() -> set[tuple[str, str]]:
    """(module, name) of every registered function (tests/test_opclasses.py: nothing else wires them)."""
    return {(fn.__module__, fn.__name__) for table in _TABLE.values() for fn, _ in table.values()} | \
        {(fn.__module__, fn.__name__) for have in _RULES.values() for _, fn in have}
