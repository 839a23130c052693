"""What would give a degraded entry a verdict, said with its reason: a reason
that does not already name the fix gets one. Pure: a reason (and the entry) in, a reason out."""
from __future__ import annotations

from roofline.core import opclasses

# what gives CUDA-graph replayed kernels shapes (said by lint, by topn and by ingest/graphs.py)
GRAPH_HOWTO = ("replayed kernels carry no shapes (their ops ran at capture time, outside the window); "
               "to give them shapes, profile one eager step inside the window (vLLM: enforce_eager=True "
               "or a batch size outside the captured sizes; SGLang: --disable-cuda-graph) so that "
               "`roofline topn` maps its shapes onto the same kernel names, or measure them at stage C "
               "(`roofline analyze TOPN --counters REPORT`)")


def _classes() -> str:
    """The classes a `classification` may name (those with a model)."""
    return ", ".join(c for c, x in opclasses.REGISTRY.items() if x.has("model"))


def with_fix(reason: str, has_shapes: bool = False) -> str:
    """`reason`, followed by what would give the entry a verdict when the reason does not say it."""
    if reason.startswith("entries["):   # the input policy's `entries[i].PATH: expected WHAT, got FOUND`, as is
        return reason
    low = reason.lower()
    if "no shape rule for" in low:
        # record_shapes was on: the op's shape is recorded but no rule reads it
        return reason.replace("give shapes (roofline topn with record_shapes)",
                              "for a verdict give the entry `shapes` by hand (elems_in, elems_out: docs/topn.md)")
    if any(w in low for w in ("give ", "gives them", "pass ", "collect ", "--counters", "record_shapes", "fold",
                              "moves no data", "moves nothing")):
        return reason
    if "op class 'unknown'" in low or "has no byte/flop model" in low:
        return (reason + f"; for a verdict: a `classification` in its Top-N entry ({_classes()}, or the aten op "
                "name) gives it a model, or stage-C counters (--counters report.ncu-rep) measure its bytes")
    if not has_shapes and ("shape" in low or "cannot be derived" in low):
        return reason + ("; for a verdict: captured shapes (profile with record_shapes=True) or stage-C counters "
                         "(--counters report.ncu-rep)")
    return reason
