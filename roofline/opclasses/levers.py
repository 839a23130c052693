"""Lever texts more than one op class names (a class file picks the ones that are its own)."""
from __future__ import annotations

NARROWER = {"fp32": "bf16", "bf16": "fp8", "fp16": "fp8", "fp8": "fp4"}


def split_k_levers(entry: dict) -> list[str]:
    """A latency-bound skinny GEMM at decode: more CTAs by splitting K."""
    return ["split-K: more CTAs for a skinny decode GEMM"] if entry.get("regime") == "decode" else []


def weight_precision_levers(entry: dict, dtypes: dict) -> list[str]:
    w = dtypes.get("weight")
    if w in NARROWER:
        return [f"lower-precision weights ({w} -> {NARROWER[w]}): halves weight bytes; LOSSY, must "
                "pass the accuracy gate"]
    return []
