"""Op class "scatter_add": rows of a source added into the rows of a destination by an index
(aten::index_add_ and index_reduce: PyTorch's `indexFuncLargeIndex` / `indexFuncSmallIndex`
kernels). MoE layers scatter the expert outputs back to their tokens this way.

Model: roofline/core/models/scatter.py: the source and the index read once, each touched destination
row read and written once (an atomic add is a read-modify-write at the L2). NB: not an elementwise
stream whose output is the source's size: the destination rows touched are at most the
destination's rows (an MoE scatter: tokens, each receiving top_k adds).
Trace: aten::index_add_ / index_add / index_reduce_ (self [D, ...], dim, index [R], source [R, ...]).
Prior: 0.60, below the stream's 0.85: every source element is an atomic add (a read-modify-write
done at the L2 slice that owns the line, returned to the SM), so the adds are bounded by the L2's
atomic throughput and the contention of top_k adds per destination row, not by streaming HBM; a
well-implemented scatter-add moves its bytes at roughly two thirds of a copy's rate. NB: a prior,
corrected by `roofline playbook`. On the fp8 MoE corpus case (prefill: 20480 rows of 2048 added
into 2560) ncu measured PyTorch's indexFuncLargeIndex at 101 MB in 0.33 ms, 6.4% of the H200's HBM
roof: far under either prior, so the kernel is the gap, not the atomics' ceiling.
Lever (finish_levers): where several source rows land on each destination row (an MoE's top_k),
a gather-and-sum per destination row writes each once, without atomics."""
from __future__ import annotations

from dataclasses import replace
from math import prod

from roofline.core.models import scatter as _model
from roofline.core.opclasses.aten import dtype_of
from roofline.core.opclasses.jobs import job
from roofline.core.opclasses.base import OpClass, l2_resident, register

# op -> (index of self, index of the index, index of the source)
SCATTER_ADD_OPS = {"aten::index_add_": (0, 2, 3), "aten::index_add": (0, 2, 3), "aten::index_reduce_": (0, 2, 3),
                   "aten::index_reduce": (0, 2, 3)}
_INDEX_BYTES = {"int64": 8, "int32": 4}


@job("trace_shape", "scatter_add")
def trace_shape(sig):
    spec = SCATTER_ADD_OPS.get(sig.name)
    if spec is None or len(sig.dims) <= max(spec):
        return None
    dst, idx, src = (sig.dims[i] for i in spec)
    if not all(isinstance(x, tuple) and x for x in (dst, idx, src)) or len(idx) != 1:
        return None
    dim = sig.concrete[1] if len(sig.concrete) > 1 else "0"
    if dim not in ("0", ""):
        return None                      # rows along dim 0 only (as MoE scatters use it)
    if int(src[0]) != int(idx[0]) or tuple(src[1:]) != tuple(dst[1:]):
        return None
    row = int(prod(src[1:])) if len(src) > 1 else 1
    it = dtype_of(sig.types[spec[1]]) if spec[1] < len(sig.types) else None
    shape = {"src_rows": int(src[0]), "dst_rows": int(dst[0]), "row_elems": row,
             "index_bytes": _INDEX_BYTES.get(it or "", 8)}
    ts, td = (sig.types[spec[2]] if spec[2] < len(sig.types) else ""), (sig.types[0] if sig.types else "")
    dt = {"act": dtype_of(ts), "out": dtype_of(td)}
    return shape, {k: v for k, v in dt.items() if v}


@job("fill", "scatter_add")
def fill_no_guess(s, op_class, e, wl, config, regime, assumed) -> tuple[str, ...]:
    """No stage-A fill: a scatter-add's rows come only from its recorded Input Dims."""
    return ("src_rows", "dst_rows", "row_elems")


@job("residency", "scatter_add")
def residency(w, chosen: dict, l2: float, notes: list[str]) -> bool:
    """A scatter-add whose whole traffic fits in half the L2 (a decode step's MoE scatter: a few MB)
    adds into a destination the kernel before it just zeroed and is read by the next one: served
    from L2 (ncu: 0.01 MB of DRAM for a 2 MB decode index_add_ on the fp8 MoE corpus case); the HBM
    roof does not bind it: no verdict (True)."""
    if chosen["bytes_est"] <= l2 / 2:
        return l2_resident(notes, "the scatter-add", chosen["bytes_est"], l2, ": served from L2 in a serving step",
                           "fusion with its producer (the down projection's epilogue)")
    return False


@job("finish_levers", "scatter_add")
def finish_levers(out: dict, lv, all_entries: list[dict], info: dict, dt: dict):
    sh = out.get("shape") or {}
    if out.get("headroom_class") == "saturated" or not sh.get("dst_rows") or not sh.get("src_rows"):
        return lv
    per = sh["src_rows"] / sh["dst_rows"]
    if per < 2:
        return lv
    return replace(lv, other_levers=lv.other_levers + [
        f"sum per destination row instead of one atomic add per element: each of the {sh['dst_rows']} destination "
        f"rows receives {per:g} source rows (an MoE's top_k); gathering a row's sources and summing them (an MoE "
        "un-permute + sum, e.g. vLLM's moe_sum) writes each row once, with no atomics"])


register(OpClass("scatter_add", flags=frozenset({"fusable", "compulsory_bytes"}), seed_class="elementwise",
                 name_rules=((29, r"indexFunc(?:Large|Small)Index"),),
                 op_rules=((18, r"^aten::index_add_?$|^aten::index_reduce_?$"),),
                 hint_aliases=("scatter", "index_add"),
                 missing_hint=": a scatter-add's rows come only from its Input Dims: profile with record_shapes=True",
                 target_eff={"scatter_add": 0.60},
                 shape_keys=frozenset({"src_rows", "dst_rows", "row_elems", "index_bytes"}),
                 dim_keys=frozenset({"src_rows", "dst_rows", "row_elems"})))
job("model", "scatter_add")(_model.model)
