"""Op classes "elementwise", "norm", "quant": memory-streaming kernels (elementwise, reductions,
copies, gathers, norms, dtype conversions).

Model: roofline/core/models/elementwise.py (one for the three). Stage A: a norm / quant works per token
over the hidden state; a plain elementwise size is never guessed. Trace: the aten rules below
(reductions, TensorList copies, gathers, scatters, copy_, the rest by their tensor arguments).
Stage C: no GEMM re-run."""
from __future__ import annotations

import re
from math import prod

from roofline.io.errors import EntryError
from roofline.core.models import elementwise as _model
from roofline.core.opclasses.aten import NON_TENSOR, broadcast_dims, dtype_of, reread, tensor_elems, tensor_list, tensors
from roofline.core.opclasses import index_gather
from roofline.core.opclasses.base import Necessary, OpClass, l2_resident, register
from roofline.core.opclasses.jobs import job
from roofline.core.opclasses.stage_a import cfg, workload
from roofline.peaks import DTYPE_BYTES

# the rank from which an op's dims are kept in its shape (`dims`): an LLM layer's own tensors have at most
# 4 dims ([batch, heads, seq, head_dim]); 5- and 6-d ops are a chunked scan's broadcasts ([b, chunks, l, s,
# heads, d_state]), which the necessary job reads (ssd_reference)
SCAN_RANK = 5
# a reuse window under this sits in any GPU's L2 many times over: not recorded
REUSE_WINDOW_MIN = 1 << 20

# Gathers: op -> (index of the table, index of the indices). Rows are along dim 0 (embedding; and
# index_select as LLMs use it, dim=0).
GATHER_OPS = {"aten::embedding": (0, 1), "aten::index_select": (0, 2)}


# In-place scatters: op -> (index of the source / values, index of the indices).
SCATTER_OPS = {"aten::index_copy_": (3, 2), "aten::index_copy": (3, 2), "aten::index_put_": (2, 1),
               "aten::_index_put_impl_": (2, 1)}


# Ops whose inputs are a TensorList and whose output holds exactly the inputs' elements.
LIST_COPY_OPS = frozenset({"aten::cat", "aten::stack", "aten::concat", "aten::concatenate", "aten::hstack",
                           "aten::vstack", "aten::_cat"})
# Reductions: op -> index of the `dim` argument in Concrete Inputs (None: reduces everything).
REDUCE_OPS = {"aten::mean": 1, "aten::sum": 1, "aten::amax": 1, "aten::amin": 1, "aten::var": 1,
              "aten::std": 1, "aten::prod": 1, "aten::linalg_vector_norm": 2, "aten::norm": 2,
              "aten::logsumexp": 1, "aten::var_mean": 1, "aten::std_mean": 1, "aten::max": 1, "aten::min": 1,
              "aten::argmax": 1, "aten::argmin": 1, "aten::all": 1, "aten::any": 1}


def _reduced_dims(text: str, ndim: int) -> list[int] | None:
    """'[-1]' / '-1' / '[0, 2]' -> normalised dims; '' or '[]' (all dims) -> every dim; junk -> None."""
    t = (text or "").strip()
    if t in ("", "[]", "None"):
        return list(range(ndim))
    t = t.strip("[]")
    try:
        dims = [int(x) for x in t.split(",") if x.strip()]
    except ValueError:
        return None
    out = sorted({d % ndim for d in dims}) if ndim else []
    return out if all(0 <= d < ndim for d in out) else None


def reduce_shape(sig):
    """A reduction reads its input once and writes the reduced output (NB: for RMSNorm's
    ``mean(-1, keepdim=True)`` the output is one element per row, not the input's size)."""
    di = REDUCE_OPS.get(sig.name)
    ts = tensors(sig)
    if di is None or not ts:
        return None
    d, t = ts[0]
    ndim = len(d)
    text = sig.concrete[di] if di < len(sig.concrete) else ""
    dims = _reduced_dims(text, ndim)
    if dims is None:
        return None
    # NB: the input is read by its distinct elements (an expanded view repeats them)
    e_in = (tensor_elems(sig)[0][1] if getattr(sig, "strides", ()) else int(prod(d))) if d else 1
    e_out = int(prod(x for i, x in enumerate(d) if i not in dims)) if d else 1
    dt = dtype_of(t)
    out = {"elems_in": e_in, "elems_out": e_out, "reduce": True}
    if ndim >= SCAN_RANK:
        out.update(dims=_fmt(d), reduced=",".join(str(i) for i in dims))
    return out, ({"act": dt, "out": dt} if dt else {})


def _fmt(d) -> str:
    return "x".join(str(int(x)) for x in d)


def list_copy_shape(sig):
    """cat / stack: every element of the TensorList is read once and written once."""
    if sig.name not in LIST_COPY_OPS:
        return None
    elems = tensor_list(sig)
    if not elems:
        return None
    n = sum(int(prod(x)) if x else 1 for x in elems)
    out = {"elems_in": n, "elems_out": n}
    out.update(_append_of(elems, sig.concrete[1] if len(sig.concrete) > 1 else ""))
    return out, {}


def _append_of(elems: list, dim_text: str) -> dict:
    """The cache-append pattern of a cat: two inputs equal in every dimension but the cat dim, the
    first longer along it (the kept cache), the second the appended token(s). -> {kept_len,
    append_elems} (shape evidence for the necessary job: how kept_len changes step by step), or {}."""
    if len(elems) != 2 or not elems[0] or len(elems[0]) != len(elems[1]):
        return {}
    try:
        d = int(dim_text or "0") % len(elems[0])
    except ValueError:
        return {}
    a, b = elems
    # NB: a cache appends tokens, each a row along the last dim (head_dim): a cat along the LAST
    # dim lengthens rows (attention logits joined with sinks, rotary halves, token ids), no cache
    if d == len(a) - 1 or any(x != y for i, (x, y) in enumerate(zip(a, b)) if i != d) or not (a[d] > b[d] >= 1):
        return {}
    return {"kept_len": int(a[d]), "append_elems": int(prod(b))}


def _gather_or_scatter(sig):
    """Gathers read the rows they select; in-place scatters write the rows they touch."""
    g = GATHER_OPS.get(sig.name)
    if g is not None and len(sig.dims) > max(g):
        # NB: a gather reads only the selected rows of its table, not the whole table
        table, index = sig.dims[g[0]], sig.dims[g[1]]
        if isinstance(table, tuple) and isinstance(index, tuple) and len(table) >= 1:
            n_idx = int(prod(index)) if index else 1
            row = int(prod(table[1:])) if len(table) > 1 else 1
            out = {"elems_in": n_idx * row + n_idx, "elems_out": n_idx * row}
            t = sig.types[g[0]] if g[0] < len(sig.types) else ""
            return out, {k: v for k, v in {"act": dtype_of(t), "out": dtype_of(t)}.items() if v}
    if sig.name == "aten::gather" and len(sig.dims) >= 3:
        table, index = sig.dims[0], sig.dims[2]
        if isinstance(table, tuple) and isinstance(index, tuple) and table and index:
            n = int(prod(index))
            t = sig.types[0] if sig.types else ""
            dt = {k: v for k, v in {"act": dtype_of(t), "out": dtype_of(t)}.items() if v}
            dim = sig.concrete[1] if len(sig.concrete) > 1 else ""
            if dim == "0" and len(index) == 2 and len(table) == 2 and index[1] == table[1]:
                # NB: index_select(0) of rows lowers to gather with the row index expanded along the
                # row (stride 0): R rows of the table are read, one index per row
                return {"elems_in": n + int(index[0]), "elems_out": n}, dt
            # NB: a general gather reads one index per output element (counted at the value width)
            return {"elems_in": 2 * n, "elems_out": n}, dt
    sc = SCATTER_OPS.get(sig.name)
    if sc is not None and len(sig.dims) > max(sc):
        # NB: an in-place scatter (a static KV cache's index_copy_) reads its source and indices and
        # writes only the selected rows: the destination's size is not traffic
        src, index = sig.dims[sc[0]], sig.dims[sc[1]]
        if isinstance(src, tuple) and isinstance(index, tuple):
            n_src = int(prod(src)) if src else 1
            n_idx = int(prod(index)) if index else 1
            t = sig.types[sc[0]] if sc[0] < len(sig.types) else ""
            return ({"elems_in": n_src + n_idx, "elems_out": n_src},
                    {k: v for k, v in {"act": dtype_of(t), "out": dtype_of(t)}.items() if v})
    return None


# A rotary-embedding autograd Function (Liger-Kernel's LigerRopeFunction: its Triton _triton_rope), whose
# call the profiler records under the Function's class name with q, k, cos, sin as Input Dims
ROTARY_FUNCTION = re.compile(r"^\w*(rope|rotary)\w*function$", re.IGNORECASE)


def rotary_shape(sig):
    """A rotary Function rotates every head tensor it is given (q and k: the tensors of the highest
    rank), not only the largest: it writes each of them (Liger's rotates q and k in place) and reads
    them and the cos / sin tables (lower rank: [b or 1, seq, rotary dim]). NB: the generic rule's
    output (the largest input) would count q's writes and drop k's."""
    if not ROTARY_FUNCTION.match(sig.name or ""):
        return None
    ts = tensors(sig)
    if len(ts) < 3:
        return None
    rank = max(len(d) for d, _ in ts)
    heads = [int(prod(d)) for d, _ in ts if len(d) == rank]
    reads = [dist for _, dist, _ in tensor_elems(sig)] if getattr(sig, "strides", ()) else \
        [int(prod(d)) if d else 1 for d, _ in ts]
    if len(heads) < 2 or len(heads) == len(ts):
        return None        # no q and k beside lower-rank tables: not the Function this rule knows
    dt = dtype_of(ts[0][1])
    return {"elems_in": sum(reads), "elems_out": sum(heads)}, ({"act": dt, "out": dt} if dt else {})


def _strides_of(sig, k: int) -> tuple:
    """The strides of the k-th tensor argument (the order of tensors()), () when not recorded."""
    strides = getattr(sig, "strides", ()) or ()
    j = -1
    for i, d in enumerate(sig.dims):
        t = sig.types[i] if i < len(sig.types) else ""
        if t in NON_TENSOR or not isinstance(d, tuple) or (d and isinstance(d[0], tuple)) or (d == () and len(sig.dims) > 1):
            continue
        j += 1
        if j == k:
            return strides[i] if i < len(strides) and isinstance(strides[i], tuple) else ()
    return ()


@job("trace_shape", "elementwise", "norm", "quant")
def trace_shape(sig):
    """elementwise / norm / quant: elements read and written.

    NB: the trace records inputs only. elems_out is the largest input's element count (the
    broadcast result) except for copy_ (out = its first argument, in = the second) and norms
    (out = the normalised input).
    """
    r = index_gather.trace_shape(sig) or list_copy_shape(sig) or reduce_shape(sig) or rotary_shape(sig)
    if r is not None:
        return r
    ts = tensors(sig)
    if not ts:
        return None
    if sig.name in ("aten::index", "aten::_index") and len(sig.dims) > 1 and sig.dims[1] in ((), None) \
            and (sig.types[1] if len(sig.types) > 1 else "") == "":
        # NB: advanced indexing (x[idx] with a tensor index): the index list is recorded without its
        # tensors, so the output's size (rows selected, repeats included) is unknown; no guess
        return None
    sizes = [int(prod(d)) if d else 1 for d, _ in ts]
    # NB: what an input reads is its distinct elements: an expanded (stride-0) view repeats them
    reads = [dist for _, dist, _ in tensor_elems(sig)] if getattr(sig, "strides", ()) else sizes
    r = _gather_or_scatter(sig)
    if r is not None:
        return r
    if sig.name == "aten::copy_" and len(ts) >= 2:
        out = {"elems_in": reads[1], "elems_out": sizes[0]}
        if 0 < reads[1] < sizes[1] and sizes[0] == sizes[1]:
            # NB: the source is an expanded view (stride 0 on a dimension of size > 1): the copy
            # materialises a broadcast, writing `broadcast` times the elements it reads
            out["broadcast"] = int(round(sizes[1] / reads[1]))
            out["broadcast_dims"] = ",".join(str(i) for i, (n, st) in enumerate(zip(ts[1][0], _strides_of(sig, 1)))
                                             if st == 0 and n > 1)
            out["broadcast_src"] = "x".join(str(int(n)) for n in ts[1][0])
        dt = {"act": dtype_of(ts[1][1]), "out": dtype_of(ts[0][1])}
    else:
        dt = {"act": dtype_of(ts[0][1]), "out": dtype_of(ts[0][1])}
        out = {"elems_in": sum(reads), "elems_out": max(sizes) if "norm" not in sig.name else sizes[0]}
        od = broadcast_dims([d for d, _ in ts]) if "norm" not in sig.name else None
        if od is not None and prod(od) > max(sizes):
            # NB: the output is the broadcast of the inputs (C[:, :, :, None] * B[:, :, None]: [b, c, l, 1, h, n]
            # x [b, c, 1, s, h, n] writes [b, c, l, s, h, n]), larger than any input; each input is read by its
            # distinct elements, and re-read where its reuse window exceeds the L2 (residency says)
            out["elems_out"] = int(prod(od))
            ob = DTYPE_BYTES.get(dt["out"] or "", 4)
            window, again = reread(od, [(d, _strides_of(sig, k), DTYPE_BYTES.get(dtype_of(t) or "", ob))
                                        for k, (d, t) in enumerate(ts)], ob)
            if again > 0 and window >= REUSE_WINDOW_MIN:
                out.update(reuse_window_bytes=int(window), reread_bytes=int(again))
        if od is not None and len(od) >= SCAN_RANK:
            out["dims"] = _fmt(od)
    return out, {k: v for k, v in dt.items() if v}


@job("fill", "norm", "quant")
def fill_per_token(s, op_class, e, wl, config, regime, assumed) -> tuple[str, ...]:
    """norm / quant: without a shape, tokens x hidden_size (a norm / quant kernel works per token
    over the hidden state: its stage-A size, low confidence, display only)."""
    if "elems_in" not in s and "shape" not in s:
        hidden = cfg(config, "hidden_size")
        if hidden:
            tokens = (workload(wl, "conc", f"the size of a decode {op_class} without a shape") if regime == "decode"
                      else workload(wl, "isl", f"the size of a prefill {op_class} without a shape"))
            s["elems_in"] = int(tokens * hidden)
            assumed.append(f"elems_in={tokens * hidden:g} ({'conc' if regime == 'decode' else 'isl'} tokens x "
                           f"hidden_size: a {op_class} works per token over the hidden state)")
    return fill_no_guess(s, op_class, e, wl, config, regime, assumed)


@job("fill", "elementwise")
def fill_no_guess(s, op_class, e, wl, config, regime, assumed) -> tuple[str, ...]:
    """elems_in (or a shape), never guessed for a plain elementwise."""
    if "elems_in" not in s and "shape" not in s:
        # NB: no guess. A streaming kernel's size is whatever its op moved (a KV-cache cat
        # moves the whole cache, a norm one hidden state per token): tokens x hidden_size
        # would be a number the tool cannot know, so the entry degrades (L2) instead.
        why = e.raw.get("shape_unknown") if isinstance(e.raw, dict) else None
        raise EntryError(f"{op_class} kernel without a shape: " + (why if isinstance(why, str) else
                         "the Top-N gives neither shapes nor est_shape (elems_in / shape), and an "
                         "elementwise size cannot be derived from config.json")
                         + "; give shapes (roofline topn with record_shapes) or stage-C counters")
    return ("elems_in",) if "shape" not in s else ()


@job("residency", "elementwise", "norm", "quant")
def residency(w, chosen: dict, l2: float, notes: list[str]) -> bool:
    """A streaming op whose whole traffic fits in half the L2 reads what the kernel before it just
    wrote and writes what the next one reads: its DRAM bytes were a few % of the model's (decode
    elementwise ops, measured with ncu on the real-model corpus). The HBM roof does not bind it: no
    verdict (True)."""
    if chosen["bytes_est"] <= l2 / 2:
        reread_note(w, l2, notes)
        return l2_resident(notes, "the op", chosen["bytes_est"], l2,
                           ": in a serving step it is served from L2 (ncu DRAM bytes of such ops are a few % of the "
                           "model's)", "fusion with its producer or consumer")
    reread_note(w, l2, notes)
    writeback_note(w, l2, notes)
    return False


def writeback_note(w, l2: float, notes: list[str]) -> None:
    """A streaming op whose writes fit in the L2 can end with all of them still dirty there: their
    write-back to DRAM happens while later kernels run, and a per-kernel DRAM count (ncu) charges it
    to those kernels. This kernel's DRAM bytes can then be as low as its reads alone; the step's HBM
    traffic is the same. ncu on the corpus (Liger-Kernel's rotary in place on q and k, 41.9 MB of
    writes: 21.9 MB reached DRAM during the kernel, its 42.2 MB of reads all did)."""
    per = [(wt, float(sh.get("op_launches") or 1), r.info or {}, d) for sh, wt, r, d in
           zip(w.shapes, w.weights, w.results, w.dts)]
    if not per or any("elems_in" not in i or "elems_out" not in i for _, _, i, _ in per):
        return
    reads = sum(wt * i["elems_in"] * d["act_bytes"] / n for wt, n, i, d in per)
    writes = sum(wt * i["elems_out"] * d["out_bytes"] / n for wt, n, i, d in per)
    if 0 < writes <= l2:
        notes.append(f"write-back: its {writes / 1e6:.4g} MB of writes per launch fit in the L2 ({l2 / 1e6:.0f} MB), "
                     "so up to all of them can still be dirty there when it ends, written back to DRAM while later "
                     f"kernels run: a per-kernel DRAM count (ncu) can be as low as its reads alone ({reads / 1e6:.4g} MB "
                     "per launch); the step's HBM traffic is the same")


def reread_note(w, l2: float, notes: list[str]) -> None:
    """A broadcast operand whose reuse window (the bytes streamed between two reads of one of its
    elements: `reuse_window_bytes`) exceeds half the L2 is re-read from DRAM at each repeat, in part:
    DRAM bytes above the model are expected, at most `reread_bytes` per op (per launch: / op_launches).
    ncu on the corpus (Bamba's Mamba2 reference path, C[:, :, :, None] * B[:, :, None]: a 33.5 MB window,
    up to 2.14 GB per launch): +490 MB per launch above the model."""
    for sh, wt in zip(w.shapes, w.weights):
        win, again = sh.get("reuse_window_bytes"), sh.get("reread_bytes")
        if win and again and win > l2 / 2 and wt > 0:
            n = float(sh.get("op_launches") or 1)
            notes.append(f"an input of the broadcast {sh.get('dims') or ''} is re-read: between two reads of one of "
                         f"its elements the kernel streams {win / 1e6:.3g} MB, above half the L2 ({l2 / 2e6:.0f} MB), "
                         f"so its repeats come from DRAM again in part: up to {again / n / 1e6:.4g} MB per launch above "
                         "the model's bytes (each input read once) are expected")


def growth_run(lens: list[int], kept: int) -> list[int] | None:
    """The kept lengths of one cache that grows step by step, among the sorted kept lengths of a
    cat's shapes (same appended size): split where the gap differs from the smallest gap (the
    per-step growth); the run that holds `kept`, if it has two lengths or more. NB: several caches
    may share one kernel (a sliding layer's constant window beside a global layer's growing cache:
    1023 and 1792, 1793, ...): the window is no part of the growth."""
    gaps = [b - a for a, b in zip(lens, lens[1:])]
    if not gaps:
        return None
    g = min(gaps)
    run = [lens[0]]
    for a, b in zip(lens, lens[1:]):
        if b - a != g:
            if kept in run:
                break
            run = []
        run.append(b)
    return run if kept in run and len(run) >= 2 else None


@job("necessary", "elementwise", "norm", "quant")
def necessary(shape: dict, dt: dict, bytes_est: float, ctx) -> Necessary | None:
    """The fewest bytes a streaming op's result needs (docs/method.md section 12), where none of the
    streaming classes' necessity rules answered first (jobs.rule: Mamba2's SSD chunk scan run as torch
    ops, ssd_reference; a link of an eager attention's score chain, eager_attention; a per-pair gather
    of expert weights, expert_gather):
    - a copy that materialises a broadcast (its source has stride 0 on a dimension: `broadcast`)
      needs none: its consumer can read the source in place (an expanded view is free; a GQA-aware
      attention reads the KV heads directly). The whole launch need not run;
    - a cat that appends to a cache (`kept_len` + `append_elems`) needs only the appended token(s)
      (read and written once), where the shapes show the kept part is re-copied every step: it grows
      step by step (one shape per step: growth_run), or a constant window is copied in every step;
    - otherwise the model's bytes (each element read and written once)."""
    f = shape.get("broadcast")
    if isinstance(f, int) and f > 1:
        ev = (f"aten::copy_ from a {shape.get('broadcast_src', '?')} view with stride 0 on dim "
              f"{shape.get('broadcast_dims', '?')} (Input Strides): it writes {f}x the {shape['elems_in']} elements "
              "it reads, materialising a broadcast")
        return Necessary(0.0, 0.0, "materialised_broadcast", [ev], removable=True,
                         lever=("do not materialise the broadcast: let the consumer read the source in place (pass "
                                "the expanded view; for repeat_kv, a GQA-aware attention reads the KV heads directly, "
                                "e.g. SDPA enable_gqa=True); removes this copy"))
    kept, app = shape.get("kept_len"), shape.get("append_elems")
    if isinstance(kept, int) and isinstance(app, int) and app > 0:
        nec = app * (dt["act_bytes"] + dt["out_bytes"])
        run = growth_run(sorted({s.get("kept_len") for s in ctx.shapes if s.get("append_elems") == app
                                 and isinstance(s.get("kept_len"), int)}), kept)
        i = next((j for j, s in enumerate(ctx.shapes) if s is shape), None)
        n_launch = ctx.launches[i] if ctx.launches and i is not None else None
        if run is not None:
            ev = (f"aten::cat appends {app} elements to a cache whose kept length grows by {run[1] - run[0]} per step "
                  f"({run[0]} -> {run[-1]} over {len(run)} shapes): the whole cache is re-copied each step")
            kind = "cache_append"
        elif ctx.steps and ctx.steps >= 2 and n_launch and n_launch >= ctx.steps:
            ev = (f"aten::cat copies a constant window of {kept} (+{app} appended elements) in each of the "
                  f"{ctx.steps:g} {ctx.regime} steps ({n_launch:g} launches): the window is re-copied every step")
            kind = "cache_window"
        else:
            return Necessary(bytes_est, evidence=[f"aten::cat appends {app} elements to {kept}, but the trace shows "
                                                  "no re-copy step after step (one shape, one step)"])
        return Necessary(float(nec), float(app), kind=kind, evidence=[ev],
                         lever=("stop copying the cache: " + ("a preallocated (static) or paged cache writes only "
                                "the new token's K and V in place (index_copy_ / paged writes)" if kind ==
                                "cache_append" else "a ring buffer (or paged) window writes only the new token "
                                "in place instead of re-copying the window")))
    return None


_STREAM_KEYS = frozenset({"elems_in", "elems_out", "shape", "broadcast", "broadcast_dims", "broadcast_src", "kept_len",
                          "append_elems", "op_launches", "dims", "reduced", "reuse_window_bytes", "reread_bytes"}) \
    | index_gather.KEYS
_STREAM_DIMS = frozenset({"elems_in", "elems_out", "op_launches"})
# what the three streaming classes share: one model (its trace shape, L2 rule and necessary bytes are
# registered on their functions above), fusable into a neighbour, and bytes every launch must move at
# least once (the counters' plausibility rule 4)
job("model", "elementwise", "norm", "quant")(_model.model)
_STREAM = dict(seed_class="elementwise", flags=frozenset({"fusable", "compulsory_bytes"}), dim_keys=_STREAM_DIMS)
# reduce: the elementwise shape of a reduction (one op per input element), written by roofline topn.
# norm and quant stream the same way (one model); their stage-A fill differs
register(OpClass(
    "elementwise", shape_keys=_STREAM_KEYS | {"reduce"},
    name_rules=(
        (20, r"reshape_and_cache|concat_and_cache|cache_kernel"),   # KV-cache writes are copies, though their
                                                                   # names say "flash"/"mla"
        # inductor names a kernel after the ops it fuses: a pointwise one (triton_poi_) stays pointwise
        # whatever it is named after (triton_poi_fused__scaled_dot_product_..._attention is a copy)
        (25, r"^triton_poi_"),
        # everything memory-streaming: elementwise, reductions, copies, cat, index, activations, rotary
        # embedding, KV-cache writes, Triton pointwise/reduction kernels (last: the catch-all)
        (90, r"elementwise|vectorized|unrolled|reduce_kernel|reduce|catarraybatchedcopy|\bcat\b|copy|fill|"
             r"memcpy|memset|index|gather|scatter|embedding|rotary|rope|silu|gelu|relu|act_and_mul|"
             r"swiglu|triton_poi|triton_red|triton_per|arange|where|cumsum|sort|topk|argmax|"
             r"reshape_and_cache|concat|transpose|permute|tensoriterator|distribution|random|dropout"),
    ),
    op_rules=((70, r"^aten::"),),
    target_eff={"elementwise": 0.85},   # pure streaming: trivial streams top out near 0.85 of the pin rate
    **_STREAM))
register(OpClass(
    "norm", shape_keys=_STREAM_KEYS,
    # normalisation and softmax (row reductions followed by an elementwise pass; before elementwise:
    # their names say "vectorized"/"reduce")
    name_rules=((50, r"layer_?norm|rms_?norm|rmsnorm|l2_?norm|group_?norm|batch_?norm|instance_?norm|"
                     r"rowwisemoments|layernorm|soft_?max|triton_(?:red|per)_fused\w*rsqrt"),),
    op_rules=((30, r"layer_norm|rms_norm|group_norm|batch_norm|softmax"),),
    hint_aliases=("normalization",),
    target_eff={"norm": 0.85},   # (seed: 0.85-0.90; the low end, since a row reduction adds a dependency)
    **_STREAM))
register(OpClass(
    "quant", shape_keys=_STREAM_KEYS,
    name_rules=((70, r"quant|fp8|fp4|mxfp|nvfp|cvt_|e4m3|e5m2"),),   # quantisation / conversion to low precision
    op_rules=((60, r"quant"),),
    target_eff={"quant": 0.85},
    **_STREAM))
