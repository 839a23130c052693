"""Elementwise / norm / quant (docs/method.md section 2): pure streaming."""
from __future__ import annotations

import math

from roofline.core.models import Candidate, ModelResult


def elems_of(shape: dict, key: str) -> int:
    if key in shape:
        return int(shape[key])
    if "shape" in shape:
        return int(math.prod(int(x) for x in shape["shape"]))
    raise KeyError(key)


def model(shape: dict, dt: dict) -> ModelResult:
    e_in = elems_of(shape, "elems_in")
    e_out = int(shape["elems_out"]) if "elems_out" in shape else e_in
    # NB: an op split over n launches of one kernel (`op_launches`: TensorIterator splits an op whose byte
    # offsets exceed 32 bits, each launch a part of the output) does 1/n of its work per launch
    n = float(shape.get("op_launches") or 1)
    nbytes = (e_in * dt["act_bytes"] + e_out * dt["out_bytes"]) / n
    # NB: one FLOP per output element (an add or a mul of two inputs is one operation per result);
    # streaming kernels sit far left of the ridge whatever this small count is.
    flops = float(e_in if shape.get("reduce") else e_out) / n     # a reduction: one op per input element
    return ModelResult([Candidate("stream", nbytes, flops)], compute_dtype="fp32",
                       info={"elems_in": e_in, "elems_out": e_out, "op_launches": n})

