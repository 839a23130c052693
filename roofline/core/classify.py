"""Kernel name -> op class; the short name a person can read is the name normaliser's
(roofline.counters.match.short_name), handed on here.

The classification is a rule table (``RULES``): ordered ``(regex, op_class)`` rows, first match
wins, searched case-insensitively in the full kernel name (templates included: a CUTLASS kernel is
often only recognisable by its template arguments). Order matters where names overlap: MoE and
attention kernels often contain "gemm"/"cutlass"/"wgmma", so they come before GEMM; norm kernels
contain "vectorized"/"reduce", so they come before elementwise. A name no row matches is
``"unknown"``: it is listed, never guessed.

Public API (imported by the analysis engine; keep the signatures):

    classify(name: str, hint: str | None = None) -> str   # gemm|moe|attn|elementwise|norm|quant|comm|unknown
    short_name(name: str) -> str
"""
from __future__ import annotations

import functools
import re

from roofline.core import opclasses
from roofline.io.kernelnames import _readable, short_name  # noqa: F401  (re-exported)

# every registered class (roofline/core/opclasses/): what classify() can return
OP_CLASSES = tuple(opclasses.REGISTRY)
UNKNOWN = opclasses.FALLBACK


def _ranked(attr: str) -> list[tuple[str, str]]:
    """Every class's (rank, regex) rows of ``attr``, by rank: (regex, class)."""
    rows = [(rank, rx, oc.name) for oc in opclasses.REGISTRY.values() for rank, rx in getattr(oc, attr)]
    ranks = [r for r, _, _ in rows]
    if len(ranks) != len(set(ranks)):
        raise ValueError(f"two op classes hold {attr} rows of the same rank: the order would be undefined")
    return [(rx, c) for _, rx, c in sorted(rows)]


# (pattern, op_class), first match wins: the name_rules of the class files, by rank
RULES: list[tuple[str, str]] = _ranked("name_rules")

# Library kernels that cannot be rewritten in place (precompiled / assembly): Top-N 'editable'.
LIBRARY_PATTERNS: list[str] = [
    r"nvjet", r"cublas", r"xmma", r"^sm\d+_", r"^ampere_", r"^turing_", r"^volta_", r"cudnn",
    r"^cijk_", r"hipblaslt", r"gemv2[nt]_kernel", r"gemvx", r"splitkreduce",
    r"^nccl(?:dev)?kernel", r"^rccl",      # NCCL / RCCL collectives: precompiled; levers are host-side (algo, protocol)
]

# Hints that are op names rather than classes (e.g. the aten op that launched a kernel).
OP_HINT_RULES: list[tuple[str, str]] = _ranked("op_rules")

# profiler classification words -> a class (None: no hint)
_HINT_ALIASES = {"other": None, UNKNOWN: None, "": None,
                 **{a: oc.name for oc in opclasses.REGISTRY.values() for a in oc.hint_aliases}}


@functools.lru_cache(maxsize=None)
def _compiled(table: tuple[tuple[str, str], ...]) -> list[tuple[re.Pattern, str]]:
    return [(re.compile(p, re.IGNORECASE), c) for p, c in table]


_RULES_T = tuple(RULES)
_OP_RULES_T = tuple(OP_HINT_RULES)
_LIB_RE = re.compile("|".join(LIBRARY_PATTERNS), re.IGNORECASE)


@functools.lru_cache(maxsize=65536)
def _classify_name(name: str) -> str:
    for rx, cls in _compiled(_RULES_T):
        if rx.search(name):
            return cls
    return UNKNOWN


def classify(name: str, hint: str | None = None) -> str:
    """Op class of a kernel: one of gemm|moe|attn|elementwise|norm|quant|comm|unknown.

    ``hint``: an explicit class from the profiler (gemm|moe|attn|elementwise|norm|quant|comm;
    "other"/"unknown"/None mean no hint) wins over the name, since the profiler saw the context (a
    grouped GEMM inside an MoE layer looks like a plain GEMM by name). A hint that is an op name
    (e.g. "aten::mm", the op that launched the kernel) is used only when the name matches no rule.
    """
    h = (hint or "").strip()
    hl = h.lower()
    if hl in _HINT_ALIASES:
        hl = _HINT_ALIASES[hl] or ""
    if hl in OP_CLASSES and hl != UNKNOWN:
        return hl
    cls = _classify_name(_readable(name or ""))
    if cls != UNKNOWN or not h:
        return cls
    for rx, c in _compiled(_OP_RULES_T):
        if rx.search(h):
            return c
    return UNKNOWN


_SPLITK_REDUCE_RX = re.compile(r"splitkreduce|reducesplitk|split_k_reduce|splitk_reduce", re.IGNORECASE)


def is_splitk_reduce(name: str) -> bool:
    """The reduce kernel of a split-K GEMM (it sums the K-slices' partial results): half of one
    logical op, never a GEMM of its own."""
    return bool(_SPLITK_REDUCE_RX.search(name or ""))


def is_library_kernel(name: str) -> bool:
    """True for precompiled library kernels (cuBLAS/nvjet/cuDNN/Tensile): no in-kernel rewrite."""
    return bool(_LIB_RE.search(name or ""))


__all__ = ["classify", "short_name", "is_library_kernel", "is_splitk_reduce", "RULES", "OP_CLASSES"]
