"""Recorded aten-op signatures (record_shapes) -> Top-N ``shapes`` / ``dtypes`` per op class.

Each function takes an :class:`~roofline.ingest.torch_trace.OpSig` and returns a shape dict with the
keys of ../shared/spec/INPUTS.md, or None when the op is not one it knows. Tables, not ifs, say where
each op keeps its operands.
"""
from __future__ import annotations

from math import prod

# aten type strings -> the Top-N's dtype names
DTYPES = {
    "c10::BFloat16": "bf16", "c10::Half": "fp16", "float": "fp32", "double": "fp64",
    "c10::Float8_e4m3fn": "fp8", "c10::Float8_e5m2": "fp8", "c10::Float8_e4m3fnuz": "fp8",
    "c10::Float8_e5m2fnuz": "fp8", "c10::Float8_e8m0fnu": "fp8", "c10::Float4_e2m1fn_x2": "fp4",
    "signed char": "int8", "unsigned char": "uint8", "int": "int32", "long int": "int64",
    "short int": "int16", "bool": "bool",
}
# Input type strings of arguments that are not tensors
NON_TENSOR = frozenset({"", "Scalar", "ScalarList", "GenericList", "TensorList", "None", "Device",
                        "Layout", "ScalarType", "MemoryFormat", "str", "Generator"})

# GEMM ops: op -> (index of A, index of B, B layout). "kn": B is [K, N]; "nk": B is [N, K] (linear).
GEMM_OPS = {
    "aten::mm": (0, 1, "kn"), "aten::_scaled_mm": (0, 1, "kn"), "aten::_int_mm": (0, 1, "kn"),
    "aten::addmm": (1, 2, "kn"), "aten::_addmm_activation": (1, 2, "kn"),
    "aten::bmm": (0, 1, "kn"), "aten::baddbmm": (1, 2, "kn"), "aten::matmul": (0, 1, "kn"),
    "aten::linear": (0, 1, "nk"), "aten::_scaled_mm_v2": (0, 1, "kn"),
}
# Attention ops: op -> (layout of q/k/v, index of is_causal in Concrete Inputs or None)
# bhsd: [batch, heads, seq, head_dim]; bshd: [batch, seq, heads, head_dim] (3-D: varlen, [tokens, h, d])
ATTN_OPS = {
    "aten::scaled_dot_product_attention": ("bhsd", 5),
    "aten::_scaled_dot_product_flash_attention": ("bhsd", 4),
    "aten::_scaled_dot_product_flash_attention_for_cpu": ("bhsd", 4),
    "aten::_scaled_dot_product_efficient_attention": ("bhsd", 6),
    "aten::_scaled_dot_product_cudnn_attention": ("bhsd", 6),
    "aten::_cudnn_attention_forward": ("bhsd", 10),
    "aten::_scaled_dot_product_attention_math": ("bhsd", 5),
    "aten::_scaled_dot_product_fused_attention_overrideable": ("bhsd", 6),
    "aten::_flash_attention_forward": ("bshd", 8),
    "aten::_efficient_attention_forward": ("bshd", None),
}


# Gathers: op -> (index of the table, index of the indices). Rows are along dim 0 (embedding; and
# index_select as LLMs use it, dim=0).
GATHER_OPS = {"aten::embedding": (0, 1), "aten::index_select": (0, 2)}


# In-place scatters: op -> (index of the source / values, index of the indices).
SCATTER_OPS = {"aten::index_copy_": (3, 2), "aten::index_copy": (3, 2), "aten::index_put_": (2, 1),
               "aten::_index_put_impl_": (2, 1)}


def dtype_of(t: str) -> str | None:
    return DTYPES.get(t)


def _tensors(sig):
    """(dims, type) of the tensor arguments, in order (TensorList arguments excluded)."""
    out = []
    for i, d in enumerate(sig.dims):
        t = sig.types[i] if i < len(sig.types) else ""
        if t in NON_TENSOR or not isinstance(d, tuple):
            continue
        if d and isinstance(d[0], tuple):   # a TensorList: see _tensor_list
            continue
        if d == () and len(sig.dims) > 1:
            # NB: a 0-dim operand beside others (var + eps, x * 0.5 wrapped as a tensor) reaches
            # the kernel as an argument, not as memory traffic
            continue
        out.append((d, t))
    return out


def _tensor_list(sig):
    """The element dims of the first TensorList argument (cat, stack, _foreach_*), or None.

    NB: record_shapes types a TensorList as "TensorList": the elements' dtype is not recorded, so
    the caller leaves dtypes empty and the analysis falls back to the model dtype (and says so)."""
    for i, d in enumerate(sig.dims):
        t = sig.types[i] if i < len(sig.types) else ""
        if isinstance(d, tuple) and (t == "TensorList" or (d and isinstance(d[0], tuple))):
            elems = [x for x in d if isinstance(x, tuple)]
            if elems:
                return elems
    return None


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
    ts = _tensors(sig)
    if di is None or not ts:
        return None
    d, t = ts[0]
    ndim = len(d)
    text = sig.concrete[di] if di < len(sig.concrete) else ""
    dims = _reduced_dims(text, ndim)
    if dims is None:
        return None
    e_in = int(prod(d)) if d else 1
    e_out = int(prod(x for i, x in enumerate(d) if i not in dims)) if d else 1
    dt = dtype_of(t)
    return {"elems_in": e_in, "elems_out": e_out, "reduce": True}, ({"act": dt, "out": dt} if dt else {})


def list_copy_shape(sig):
    """cat / stack: every element of the TensorList is read once and written once."""
    if sig.name not in LIST_COPY_OPS:
        return None
    elems = _tensor_list(sig)
    if not elems:
        return None
    n = sum(int(prod(x)) if x else 1 for x in elems)
    return {"elems_in": n, "elems_out": n}, {}


def gemm_shape(sig):
    spec = GEMM_OPS.get(sig.name)
    if spec is None:
        return None
    ia, ib, lay = spec
    if len(sig.dims) <= max(ia, ib):
        return None
    a, b = sig.dims[ia], sig.dims[ib]
    if not a or not b or len(a) < 2 and lay != "nk":
        return None
    out = {}
    if lay == "nk":                      # linear: x [..., K], W [N, K]
        if len(b) != 2:
            return None
        out = {"M": int(prod(a[:-1])) if len(a) > 1 else 1, "N": int(b[0]), "K": int(b[1])}
    elif len(b) == 2:                    # [..., M, K] x [K, N]: leading dims fold into M
        out = {"M": int(prod(a[:-1])), "N": int(b[1]), "K": int(a[-1])}
    elif len(a) >= 3 and len(b) >= 3:    # batched
        out = {"M": int(a[-2]), "N": int(b[-1]), "K": int(a[-1]), "batch": int(prod(a[:-2]))}
    else:
        return None
    ta = sig.types[ia] if ia < len(sig.types) else ""
    tb = sig.types[ib] if ib < len(sig.types) else ""
    dt = {"act": dtype_of(ta), "weight": dtype_of(tb), "out": dtype_of(ta)}
    if sig.name.startswith("aten::_scaled_mm"):
        dt["out"] = None                 # out_dtype is an argument the trace does not type
    return out, {k: v for k, v in dt.items() if v}


def attn_shape(sig):
    spec = ATTN_OPS.get(sig.name)
    if spec is None or len(sig.dims) < 3:
        return None
    lay, causal_i = spec
    q, k = sig.dims[0], sig.dims[1]
    if not q or not k or len(q) != len(k) or len(q) not in (3, 4):
        return None
    if len(q) == 4 and lay == "bhsd":
        out = {"batch": q[0], "seq_len": k[2], "q_len": q[2], "n_q_heads": q[1], "n_kv_heads": k[1], "head_dim": q[3]}
    elif len(q) == 4:
        out = {"batch": q[0], "seq_len": k[1], "q_len": q[1], "n_q_heads": q[2], "n_kv_heads": k[2], "head_dim": q[3]}
    else:                                # varlen [tokens, heads, head_dim]; batch from cu_seqlens
        out = {"n_q_heads": q[1], "n_kv_heads": k[1], "head_dim": q[2], "tokens_q": q[0], "tokens_kv": k[0]}
        for d in sig.dims[3:5]:
            if isinstance(d, tuple) and len(d) == 1 and d[0] > 1:
                out["batch"] = d[0] - 1
                break
    out = {kk: int(v) for kk, v in out.items()}
    out["paged"] = False
    if causal_i is not None and causal_i < len(sig.concrete):
        c = sig.concrete[causal_i]
        if c in ("True", "False"):
            out["causal"] = c == "True"
    elif sig.name == "aten::_efficient_attention_forward" and len(sig.concrete) > 9:
        c = sig.concrete[9]              # custom_mask_type: 0 none, 1 causal from top-left, 2 bottom-right
        if c.isdigit():
            out["causal"] = c != "0"
    tq = sig.types[0] if sig.types else ""
    tk = sig.types[1] if len(sig.types) > 1 else ""
    dt = {"act": dtype_of(tq), "kv": dtype_of(tk), "out": dtype_of(tq)}
    return out, {kk: v for kk, v in dt.items() if v}


def stream_shape(sig):
    """elementwise / norm / quant: elements read and written.

    NB: the trace records inputs only. elems_out is the largest input's element count (the
    broadcast result) except for copy_ (out = its first argument, in = the second) and norms
    (out = the normalised input).
    """
    r = list_copy_shape(sig) or reduce_shape(sig)
    if r is not None:
        return r
    ts = _tensors(sig)
    if not ts:
        return None
    sizes = [int(prod(d)) if d else 1 for d, _ in ts]
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
    if sig.name == "aten::copy_" and len(ts) >= 2:
        out = {"elems_in": sizes[1], "elems_out": sizes[0]}
        dt = {"act": dtype_of(ts[1][1]), "out": dtype_of(ts[0][1])}
    else:
        out = {"elems_in": sum(sizes), "elems_out": max(sizes) if "norm" not in sig.name else sizes[0]}
        dt = {"act": dtype_of(ts[0][1]), "out": dtype_of(ts[0][1])}
    return out, {k: v for k, v in dt.items() if v}


def shape_for(op_class: str, sig):
    """(shape dict, dtypes dict) for a kernel of ``op_class`` launched by ``sig``, or None."""
    if op_class == "gemm":
        return gemm_shape(sig)
    if op_class == "attn":
        return attn_shape(sig)
    if op_class in ("elementwise", "norm", "quant"):
        return stream_shape(sig)
    return None
