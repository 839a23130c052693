"""The shape of an advanced-indexing gather whose index list record_shapes did not record (docs/method.md
section 13): `aten::index(table, [idx])` reads the rows it selects and writes them, [rows, *table[1:]].

The rows come from the op that consumes the output (roofline.ingest.gathers rewrites the call's signature
with that output as a third argument, the consumer's op name and the call's launches in Concrete Inputs):
the streaming classes read it here. Bytes: the rows written once; the table's rows read once each per
launch, at most the table (a row selected again, a routed expert's weights for its next pair, comes from
the L2: ncu on the corpus's batched_mm MoE, 256 pairs over 128 experts per launch, read 660-692 MB of the
805 MB table, not the 1611 MB the pairs span); one index per row (at the value width: a lower bound for
8-byte indices). PyTorch splits an op over 2^31 bytes into launches, each a share of the rows. `gather_table`, `gather_rows` and
`gather_consumer` are what the necessary rules read (opclasses/expert_gather.py)."""
from __future__ import annotations

from math import prod

from roofline.core.opclasses.aten import dtype_of

INDEX_OPS = ("aten::index", "aten::_index")
CONSUMER_TAG = "consumer:"      # the tags roofline.ingest.gathers writes (the ingest floor sits above this one)
LAUNCHES_TAG = "launches:"
KEYS = frozenset({"gather_table", "gather_rows", "gather_consumer"})


def trace_shape(sig):
    """(shape, dtypes) of a resolved aten::index, or None for any other signature."""
    if sig.name not in INDEX_OPS or len(sig.dims) != 3 or len(sig.concrete) < 3:
        return None
    tag = sig.concrete[2]
    table, out = sig.dims[0], sig.dims[2]
    if not (isinstance(tag, str) and tag.startswith(CONSUMER_TAG) and isinstance(table, tuple)
            and isinstance(out, tuple) and out and table):
        return None
    n = int(prod(int(x) for x in out))
    rows = int(out[0])
    row = n // rows if rows else 0
    lt = sig.concrete[3] if len(sig.concrete) > 3 and isinstance(sig.concrete[3], str) else ""
    launches = int(lt[len(LAUNCHES_TAG):]) if lt.startswith(LAUNCHES_TAG) and lt[len(LAUNCHES_TAG):].isdigit() else 1
    # each launch reads its share of the rows, each distinct table row once at most (rows of the indexed
    # leading dims: the table's elements over the output's row size)
    t_rows = int(prod(int(x) for x in table)) // row if row else 0
    distinct = launches * min(rows / max(launches, 1), t_rows)
    dt = dtype_of(sig.types[0] if sig.types else "")
    shape = {"elems_in": int(distinct * row) + rows, "elems_out": n, "gather_table": "x".join(str(int(x)) for x in table),
             "gather_rows": rows, "gather_consumer": tag[len(CONSUMER_TAG):]}
    return shape, ({"act": dt, "out": dt} if dt else {})
