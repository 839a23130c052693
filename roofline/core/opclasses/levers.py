"""Lever texts more than one op class names (a class file picks the ones that are its own), and the
lower-precision lever of an operand whose origin the class's rule established (docs/method.md
section 12, "Lower precision: whose bytes")."""
from __future__ import annotations

from roofline.peaks import DTYPE_BYTES

NARROWER = {"fp32": "bf16", "bf16": "fp8", "fp16": "fp8", "fp8": "fp4"}
# a lower-precision lever that saves less than this share of the bytes the kernel moves per launch is
# not worth its accuracy risk: the operand is a small part of the kernel's bytes (the notes say so)
PRECISION_MIN_SAVED_FRAC = 0.10
KINDS = {"parameter": ("weights", "lower_precision_weights"), "kv_cache": ("KV cache", "lower_precision_kv")}


def split_k_levers(entry: dict) -> list[str]:
    """A latency-bound skinny GEMM at decode: more CTAs by splitting K."""
    return ["split-K: more CTAs for a skinny decode GEMM"] if entry.get("regime") == "decode" else []


def narrower(what: str, dtype: str | None, saved_bytes: float | None = None,
             total_bytes: float | None = None) -> list[str]:
    """The lower-precision lever of the bytes `what` names ("weights", "KV cache") in `dtype`, if narrower
    exists; with the saving per launch where the caller computed it from the model's bytes."""
    if dtype not in NARROWER:
        return []
    unit = "weight" if what == "weights" else "KV"
    gain = "halves" if DTYPE_BYTES[NARROWER[dtype]] * 2 == DTYPE_BYTES[dtype] else "shrinks"
    save = (f" (saves {saved_bytes / 1e6:.1f} MB of the {total_bytes / 1e6:.1f} MB it moves per launch)"
            if saved_bytes is not None and total_bytes else "")
    return [f"lower-precision {what} ({dtype} -> {NARROWER[dtype]}): {gain} {unit} bytes{save}; LOSSY, must "
            "pass the accuracy gate"]


def operand_levers(origins: list, op_bytes: list[float], dtypes: list[str | None], ctx, total_bytes: float,
                   notes: list[str]) -> list[tuple]:
    """The lower-precision lever of the operand every shape's origin names (parameter: weights; kv_cache:
    the KV cache), with the bytes it saves per launch (launch-weighted over the entry's shapes); none,
    with a note, where an origin is unknown or an activation, the shapes disagree, or the saving is under
    PRECISION_MIN_SAVED_FRAC of the bytes. -> [(kind, text, evidence, share of the bytes saved)]."""
    kinds = {o.kind for o in origins}
    ev = "; ".join(dict.fromkeys(o.evidence for o in origins))
    if len(kinds) != 1 or next(iter(kinds)) not in KINDS:
        why = ("the shapes' operands differ in origin" if len(kinds) > 1 else
               "its operands are activations" if kinds == {"activation"} else "the origin of its operands is unknown")
        notes.append(f"no lower-precision lever: {why} ({ev})")
        return []
    what, kind = KINDS[next(iter(kinds))]
    wts = ctx.weights or [1.0 / len(origins)] * len(origins)
    dts = [d for d in dtypes if d in NARROWER]
    if len(set(dts)) != 1 or len(dts) != len(dtypes):
        notes.append(f"no lower-precision lever: the {what}' dtypes ({', '.join(map(str, dict.fromkeys(dtypes)))}) "
                     "have no one narrower dtype")
        return []
    dt = dts[0]
    saved = sum(w * b * (1 - DTYPE_BYTES[NARROWER[dt]] / DTYPE_BYTES[dt]) for w, b in zip(wts, op_bytes))
    if not total_bytes or saved < PRECISION_MIN_SAVED_FRAC * total_bytes:
        notes.append(f"no lower-precision lever: {dt} -> {NARROWER[dt]} {what} would save {saved / 1e6:.2f} MB of the "
                     f"{(total_bytes or 0) / 1e6:.2f} MB per launch (under {PRECISION_MIN_SAVED_FRAC:.0%}): the "
                     f"{what} are a small part of its bytes")
        return []
    return [(kind, t, ev, saved / total_bytes) for t in narrower(what, dt, saved, total_bytes)]
