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


def dtype_of(t: str) -> str | None:
    return DTYPES.get(t)


def _tensors(sig):
    """(dims, type) of the tensor arguments, in order."""
    out = []
    for i, d in enumerate(sig.dims):
        t = sig.types[i] if i < len(sig.types) else ""
        if t in NON_TENSOR or not isinstance(d, tuple):
            continue
        if d and isinstance(d[0], tuple):   # a TensorList: skip
            continue
        out.append((d, t))
    return out


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
