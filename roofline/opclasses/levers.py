"""Lever texts more than one op class names (a class file picks the ones that are its own)."""
from __future__ import annotations

NARROWER = {"fp32": "bf16", "bf16": "fp8", "fp16": "fp8", "fp8": "fp4"}


def split_k_levers(entry: dict) -> list[str]:
    """A latency-bound skinny GEMM at decode: more CTAs by splitting K."""
    return ["split-K: more CTAs for a skinny decode GEMM"] if entry.get("regime") == "decode" else []


def narrower(what: str, dtype: str | None) -> list[str]:
    """The lower-precision lever of the bytes `what` names ("weights", "KV cache") in `dtype`, if narrower exists."""
    if dtype not in NARROWER:
        return []
    unit = "weight" if what == "weights" else "KV"
    return [f"lower-precision {what} ({dtype} -> {NARROWER[dtype]}): halves {unit} bytes; LOSSY, must "
            "pass the accuracy gate"]


def weight_precision_levers(entry: dict, dtypes: dict) -> list[str]:
    return narrower("weights", dtypes.get("weight"))
