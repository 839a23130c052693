"""Scatter-add (aten::index_add_, scatter_add_, index_reduce): rows of a source added into the
rows of a destination that an index selects (docs/method.md section 2). MoE layers scatter the
expert outputs back to their tokens this way (out.index_add_(0, token_of_row, expert_rows)).

Bytes: the source read once (rows x row elements), the index once, and the destination rows the
index touches read and written once: an atomic add is a read-modify-write of its destination line,
done at the L2; each distinct destination row reaches HBM once whatever the number of adds into it
(repeated adds into one row hit the L2). NB: the destination's distinct rows are at most its
rows and at most the source rows; the MoE scatter touches every token's row (top_k adds into each).
FLOPs: one add per source element."""
from __future__ import annotations

from roofline.core.models import Candidate, ModelResult


def model(shape: dict, dt: dict) -> ModelResult:
    src_rows, row = int(shape["src_rows"]), int(shape["row_elems"])
    dst_rows = int(shape["dst_rows"])
    touched = min(dst_rows, src_rows)
    idx_bytes = float(shape.get("index_bytes", 8))
    nbytes = src_rows * row * dt["act_bytes"] + src_rows * idx_bytes + 2 * touched * row * dt["out_bytes"]
    return ModelResult([Candidate("scatter_add", float(nbytes), float(src_rows * row),
                                  f"{src_rows} source rows into {touched} of {dst_rows} destination rows")],
                       compute_dtype="fp32", info={"kind": "scatter_add", "touched_rows": touched})
