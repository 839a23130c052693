"""Op class "comm": collective kernels (NCCL's ncclDevKernel_*, custom all-reduce kernels) on the
interconnect roof.

Model: roofline/models/collective.py (the bytes one rank sends over its links, nccl-tests' bus
bandwidth convention). Roof: the peak table's interconnect figure (`interconnect_bw_bytes_s`), not
HBM. Shapes: `coll` (all_reduce, all_gather, ...), `nelems` (message elements), `group_size`
(ranks), optionally `algo` (RING, TREE, NVLS: from the kernel name); `roofline topn` writes them
from the collective record Kineto attaches to the kernel (roofline/ingest/collectives.py). Stage A
guesses no message size. Stage C: no GEMM re-run."""
from __future__ import annotations

from roofline.models import collective as _model
from roofline.opclasses.base import OpClass, register


def fill_stage_a(s, op_class, e, wl, config, regime, assumed) -> tuple[str, ...]:
    # NB: no guess: the message size and the group are the trace's (or the Top-N writer's) to give
    return ("coll", "nelems", "group_size")


register(OpClass(
    "comm", model=_model.model, fill=fill_stage_a, roof="interconnect",
    shape_keys=frozenset({"coll", "nelems", "group_size", "algo"}), dim_keys=frozenset({"nelems", "group_size"}),
    missing_hint=(": a collective's message size and group come from the trace's collective record (Kineto writes "
                  "'In msg nelems', 'Out msg nelems', 'Group size' and 'dtype' on the NCCL kernel; `roofline topn` "
                  "copies them) or an est_shape in the Top-N")))
