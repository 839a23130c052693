"""One registration per op class, the way torch.utils.flop_counter registers one formula per op.

An op class (classify.py: gemm, moe, attn, elementwise, norm, quant, comm, unknown) is what the
tool knows about a kind of kernel. Each one is registered once, in its module here, with
``register(OpClass(...))`` (base.py), and everything else looks it up:

=============  ===================================================  =============================
job            the registered function                             looked up by
=============  ===================================================  =============================
model          (shape, dtypes) -> ModelResult (roofline/models/)    roofline.procedure
stage-A fill   a shape from config.json and the workload            roofline.shapes
trace shape    a recorded aten op -> (shape, dtypes)                roofline.ingest.topn
GEMM problems  an artifact entry -> the GEMMs of one logical op     roofline.rerun (stage C)
shape keys     the keys its model reads                             roofline.lint
=============  ===================================================  =============================

Modules: gemm.py, moe.py, attn.py, stream.py (elementwise, norm, quant), comm.py (collectives, on
the interconnect roof), unmodelled.py (unknown); aten.py and stage_a.py hold what the shape rules
and the fills share. A new op class is one module here (and a row in classify.RULES);
tests/test_opclasses.py checks that every class classify.py returns is registered exactly once and
that nothing else wires these jobs.
"""
from __future__ import annotations

from roofline.opclasses.base import REGISTRY, OpClass, Problem, register  # noqa: F401


def get(op_class: str) -> OpClass | None:
    """The registration of ``op_class``, or None for a name that is no op class."""
    return REGISTRY.get(op_class)


def trace_shape(op_class: str, sig):
    """(shape dict, dtypes dict) for a kernel of ``op_class`` launched by ``sig``, or None."""
    oc = REGISTRY.get(op_class)
    return oc.trace_shape(sig) if oc is not None and oc.trace_shape is not None else None


def dim_keys() -> frozenset:
    """Every shape key that is a dimension in some op class (roofline.inputs validates them as numbers)."""
    return frozenset().union(*(oc.dim_keys for oc in REGISTRY.values()))


def rerunnable(op_class: str | None) -> bool:
    """Whether stage C can re-run a head of this class on the GEMM ladder (it registers GEMM problems)."""
    oc = REGISTRY.get(op_class) if op_class else None
    return oc is not None and oc.gemm_problems is not None


def gemm_problems(entry: dict) -> list[Problem]:
    """The GEMMs that form one logical op of a head entry (its op class's rule; [] for a class
    that has none: only GEMM-like classes are re-run at stage C)."""
    oc = REGISTRY.get(entry.get("op_class"))
    return oc.gemm_problems(entry) if oc is not None and oc.gemm_problems is not None else []


# import the modules so that their register() runs
from roofline.opclasses import gemm, moe, attn, stream, comm, unmodelled  # noqa: E402,F401
