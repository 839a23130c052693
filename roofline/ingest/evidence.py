"""What a trace says about whether a kernel's bytes are necessary (docs/method.md section 12), read
once by `roofline topn` and written into the Top-N:

* ``kv_caches(pt)``: the KV caches the trace writes in place (a preallocated, "static" cache:
  ``index_copy_`` / ``index_put_`` of a few tokens into a 4-D tensor of S slots), with how many
  tokens each write carries (a prompt write says how many slots a prefill filled). The attention's
  necessary job reads it (Top-N ``trace_evidence.kv_caches``).
* ``dataflow(pt, ...)``: per kernel name, the kernels launched just before / after it, in the same
  step, that PRODUCE a tensor it reads or CONSUME the tensor it writes (shapes that match). A
  fusion lever names only these: adjacency alone is no evidence (the next step's embedding gather
  runs right after the LM head and reads none of its output).

Pure functions of a ParsedTrace (roofline.ingest.trace_tables)."""
from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from math import prod

from roofline.core.opclasses.aten import NON_TENSOR, broadcast_dims, tensor_list
from roofline.ingest.compiled_caches import triton_cache_write

# in-place writes of new K/V into a cache tensor: op -> (index of the destination, of the source,
# of the `dim` argument in Concrete Inputs or None (index_put_: the index tuple says the dim))
CACHE_WRITES = {"aten::index_copy_": (0, 3, 1), "aten::index_copy": (0, 3, 1)}
PARTNERS_KEPT = 4          # producers / consumers kept per kernel name, each with one example


def _launch_sigs(pt) -> list:
    """The op signature index of each launch (None: no linked op)."""
    ob = pt.op_by_ext
    corr_ext = None
    out = []
    for i in range(pt.n_kernels):
        x = pt.k_ext[i]
        s = ob.get(x) if x >= 0 else None
        if s is None:
            if corr_ext is None:
                corr_ext = pt.corr_ext
            c = corr_ext.get(pt.k_corr[i])
            s = ob.get(c) if c is not None else None
        out.append(s)
    return out


def kv_caches(pt) -> list[dict]:
    """In-place cache writes, one record per destination shape: {op, dims, slots, seq_dim,
    tokens_written: {tokens per write: launches}}. A destination of S slots written a token at a
    time is a preallocated cache: the attention over it reads S slots whatever is filled."""
    counts = Counter(s for s in _launch_sigs(pt) if s is not None)
    recs: dict[tuple, dict] = {}
    for s, n in counts.items():
        sig = pt.sigs[s]
        if sig.name in ("aten::cat", "aten::_cat"):
            _cat_cache(sig, n, recs)
            continue
        if sig.name.startswith("triton_"):
            triton_cache_write(sig, n, recs)     # index_copy_ fused by inductor (roofline.ingest.compiled_caches)
            continue
        spec = CACHE_WRITES.get(sig.name)
        if spec is None or len(sig.dims) <= max(spec[:2]):
            continue
        dst, src = sig.dims[spec[0]], sig.dims[spec[1]]
        if not (isinstance(dst, tuple) and isinstance(src, tuple) and len(dst) == 4 == len(src)):
            continue
        try:
            d = int(sig.concrete[spec[2]]) % 4
        except (ValueError, IndexError):
            continue
        if any(a != b for i, (a, b) in enumerate(zip(dst, src)) if i != d) or src[d] >= dst[d]:
            continue
        key = (sig.name, tuple(dst), d)
        r = recs.setdefault(key, {"op": sig.name, "dims": list(dst), "slots": int(dst[d]), "seq_dim": d,
                                  "tokens_written": Counter()})
        r["tokens_written"][int(src[d])] += n
    out = []
    for r in recs.values():
        r["tokens_written"] = {str(k): v for k, v in sorted(r["tokens_written"].items())}
        out.append(r)
    return out


def _cat_cache(sig, n: int, recs: dict) -> None:
    """A cat of a 4-D cache [b, h, L, d] and new token(s) [b, h, t, d] along the sequence: its output
    is the whole K (or V), every position a real token (a cache grown, or a window re-copied, by cat)."""
    lst = tensor_list(sig) or []
    if len(lst) != 2 or len(lst[0]) != 4 or len(lst[1]) != 4:
        return
    try:
        d = int(sig.concrete[1] or "0") % 4
    except (ValueError, IndexError):
        return
    a, b = lst
    # NB: not along the last dim (head_dim): that lengthens rows, it appends no token (stream._append_of)
    if d == 3 or any(x != y for i, (x, y) in enumerate(zip(a, b)) if i != d) or not (a[d] > b[d] >= 1):
        return
    dims = [a[i] + b[i] if i == d else a[i] for i in range(4)]
    key = (sig.name, tuple(dims), d)
    r = recs.setdefault(key, {"op": sig.name, "dims": dims, "slots": int(dims[d]), "seq_dim": d,
                              "tokens_written": Counter(), "whole_output": True})
    r["tokens_written"][int(b[d])] += n


def _tensor_dims(sig) -> list[tuple]:
    out = []
    for i, d in enumerate(sig.dims):
        t = sig.types[i] if i < len(sig.types) else ""
        if isinstance(d, tuple) and d and not isinstance(d[0], tuple) and t not in NON_TENSOR:
            out.append(tuple(d))
    for x in tensor_list(sig) or []:
        out.append(tuple(x))
    return out


def out_dims(sig) -> tuple | None:
    """The dims of the tensor an op writes, where its inputs say it (record_shapes records inputs
    only): in-place ops their first argument, matrix products their (M, N), cat the joined list,
    elementwise ops their broadcast result; None where the op does not say (reductions, ...)."""
    n = sig.name
    ts = _tensor_dims(sig)
    if not ts:
        return None
    if n.endswith("_"):
        return ts[0]
    if n in ("aten::mm", "aten::_scaled_mm") and len(ts) >= 2 and len(ts[0]) == 2 == len(ts[1]):
        return (ts[0][0], ts[1][1])
    if n == "aten::addmm" and len(ts) >= 3:
        return (ts[1][0], ts[2][1])
    if n in ("aten::bmm", "aten::baddbmm") and len(ts) >= 2 and len(ts[-2]) == 3 == len(ts[-1]):
        return (ts[-2][0], ts[-2][1], ts[-1][2])
    if n in ("aten::cat", "aten::_cat"):
        lst = tensor_list(sig) or []
        try:
            d = int(sig.concrete[1] or "0") % len(lst[0])
        except (ValueError, IndexError, ZeroDivisionError):
            return None
        return tuple(sum(x[d] for x in lst) if i == d else v for i, v in enumerate(lst[0]))
    if n == "aten::embedding" and len(ts) >= 2:
        return ts[1] + (ts[0][-1],)
    if any(k in n for k in ("mean", "sum", "amax", "max", "min", "norm", "argmax", "topk", "sort", "softmax",
                            "attention", "index", "gather", "scatter", "grouped_mm")):
        if "softmax" in n:
            return ts[0]
        return None
    # NB: an elementwise op writes the broadcast of its inputs (C[:, :, :, None] * B[:, :, None] writes
    # [b, c, l, s, h, n], larger than either input)
    return broadcast_dims(ts) or max(ts, key=lambda d: prod(d))


def _step_ids(pt, cpu_r: dict, gpu_r: dict) -> list[int]:
    """The step range each launch ran in (-1: none): GPU-side ranges where the trace has them,
    else CPU-side ones by the launch's CPU time (roofline.ingest.topn places regimes the same way)."""
    rs = [r for v in (gpu_r or cpu_r).values() for r in v]
    ivs = sorted((r.ts_us, r.ts_us + r.dur_us) for r in rs)
    starts = [a for a, _ in ivs]
    corr_ts = pt.corr_ts if not gpu_r else {}
    out = []
    for i in range(pt.n_kernels):
        t = pt.k_ts[i] if gpu_r else corr_ts.get(pt.k_corr[i])
        j = bisect.bisect_right(starts, t) - 1 if t is not None else -1
        out.append(j if j >= 0 and t <= ivs[j][1] else -1)
    return out


def _same_tensor(o: tuple, d: tuple) -> bool:
    """The dims one op writes and the next reads describe one tensor: equal, or the same elements
    with the same last dim (a view that merges or splits the leading dims: [B*S, N] read as [B, S, N])."""
    return o == d or (bool(d) and prod(o) == prod(d) and o[-1] == d[-1])


def _fmt(d: tuple) -> str:
    return "[" + ",".join(str(x) for x in d) + "]"


def dataflow(pt, cpu_r: dict, gpu_r: dict, fold_into: dict) -> dict[str, dict]:
    """Per kernel name: {"producers": {kernel: times}, "consumers": {kernel: times}, "examples":
    {kernel: evidence}} over consecutive launches (GPU start order, folded split-K reduces skipped)
    in the same step range, where the first writes a tensor of exactly the dims the second reads.
    A trace without step ranges has one window: launch order and matching shapes only."""
    import numpy as np

    if pt.n_kernels < 2 or not pt.sigs:
        return {}
    sig_of = _launch_sigs(pt)
    step = _step_ids(pt, cpu_r, gpu_r)
    order = [i for i in np.argsort(np.frombuffer(pt.k_ts, dtype=np.float64), kind="stable").tolist()
             if i not in fold_into]
    names = pt.kernel_names
    prod_c: dict[str, Counter] = defaultdict(Counter)
    cons_c: dict[str, Counter] = defaultdict(Counter)
    ex: dict[str, dict] = defaultdict(dict)
    outs: dict[int, tuple | None] = {}
    for a, b in zip(order, order[1:]):
        sa, sb = sig_of[a], sig_of[b]
        if sa is None or sb is None or step[a] != step[b]:
            continue
        na, nb = names[pt.k_name[a]], names[pt.k_name[b]]
        if na == nb:
            continue
        if sa not in outs:
            outs[sa] = out_dims(pt.sigs[sa])
        o = outs[sa]
        if o is None or prod(o) < 2 or not any(_same_tensor(o, d) for d in _tensor_dims(pt.sigs[sb])):
            continue
        cons_c[na][nb] += 1
        prod_c[nb][na] += 1
        text = (f"{pt.sigs[sa].name} writes {_fmt(o)}, read next by {pt.sigs[sb].name}"
                + (" in the same step" if step[a] >= 0 else ""))
        ex[na].setdefault(nb, text)
        ex[nb].setdefault(na, text)
    out = {}
    for n in set(prod_c) | set(cons_c):
        p, c = dict(prod_c[n].most_common(PARTNERS_KEPT)), dict(cons_c[n].most_common(PARTNERS_KEPT))
        out[n] = {"producers": p, "consumers": c, "examples": {k: ex[n][k] for k in {**p, **c}}}
    return out
