"""Byte/FLOP models, one module per op class (docs/method.md section 2).

Every model is a pure function from shapes and dtype sizes to one or more `Candidate`s (a byte and
FLOP count under one stated assumption). Each op class's registration (roofline/core/opclasses/) names
its model; the analysis looks it up there, without a chain of ifs.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Candidate:
    label: str            # e.g. "experts_hit", "all_experts", "mean_context"
    bytes_est: float      # HBM bytes for ONE logical op
    flops_est: float      # useful FLOPs for ONE logical op
    note: str = ""


@dataclass
class ModelResult:
    candidates: list[Candidate]
    compute_dtype: str                      # which compute roof applies (the MMA's input precision)
    assumptions: list[str] = field(default_factory=list)
    primary: str | None = None              # the label to report when unsure
    info: dict = field(default_factory=dict)  # model-specific extras (experts_hit, seq_len, ...)


def wider(a: str, b: str) -> str:
    """The MMA runs at the wider of two operand precisions (a W8A16 GEMM dequantizes to 16-bit)."""
    from roofline.peaks import DTYPE_BYTES

    return a if DTYPE_BYTES.get(a, 2) >= DTYPE_BYTES.get(b, 2) else b

