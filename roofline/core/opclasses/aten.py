"""What record_shapes recorded for an aten op, read the same way by every op class's shape rule:
the Top-N dtype of an aten type string, the tensor arguments of a signature, a TensorList's
elements. A signature is an :class:`~roofline.ingest.trace_tables.OpSig` (name, dims, types,
concrete inputs)."""
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


def dtype_of(t: str) -> str | None:
    return DTYPES.get(t)


def tensors(sig):
    """(dims, type) of the tensor arguments, in order (TensorList arguments excluded)."""
    out = []
    for i, d in enumerate(sig.dims):
        t = sig.types[i] if i < len(sig.types) else ""
        if t in NON_TENSOR or not isinstance(d, tuple):
            continue
        if d and isinstance(d[0], tuple):   # a TensorList: see tensor_list
            continue
        if d == () and len(sig.dims) > 1:
            # NB: a 0-dim operand beside others (var + eps, x * 0.5 wrapped as a tensor) reaches
            # the kernel as an argument, not as memory traffic
            continue
        out.append((d, t))
    return out


def distinct_elems(dims, strides) -> int:
    """Elements of a tensor argument that are separate memory: a dimension with stride 0 is a
    broadcast (an expanded view, e.g. transformers' repeat_kv of K/V from kv heads to query heads,
    or a mask broadcast over heads) and repeats the same elements. Without strides: every element."""
    n = 1
    for i, d in enumerate(dims):
        st = strides[i] if isinstance(strides, tuple) and i < len(strides) else None
        if st == 0 and d > 1:
            continue
        n *= int(d)
    return n


def tensor_elems(sig):
    """(all elements, distinct elements, type) of each tensor argument, in the order of tensors()."""
    out = []
    strides = getattr(sig, "strides", ()) or ()
    for i, d in enumerate(sig.dims):
        t = sig.types[i] if i < len(sig.types) else ""
        if t in NON_TENSOR or not isinstance(d, tuple):
            continue
        if d and isinstance(d[0], tuple):
            continue
        if d == () and len(sig.dims) > 1:
            continue
        st = strides[i] if i < len(strides) and isinstance(strides[i], tuple) else ()
        full = 1
        for x in d:
            full *= int(x)
        out.append((full, distinct_elems(d, st) if st else full, t))
    return out


def tensor_list(sig):
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


def broadcast_dims(dims_list) -> tuple | None:
    """The broadcast of the tensors' dims (numpy / torch rules: right-aligned, each size equal or 1):
    the dims of an elementwise op's output. None where they do not broadcast."""
    rank = max((len(d) for d in dims_list), default=0)
    out = [1] * rank
    for d in dims_list:
        for i, x in enumerate(d, start=rank - len(d)):
            x = int(x)
            if x != 1 and out[i] not in (1, x):
                return None
            out[i] = max(out[i], x)
    return tuple(out)


def reread(out: tuple, operands, out_bytes: float) -> tuple[float, float]:
    """(window bytes, re-read bytes) of the operand of a broadcast op that is reused over the longest
    window: an input of `distinct` elements repeated along the output dims it lacks (size 1 there,
    or stride 0) is read again at each step along them; between two reads of one of its elements the
    kernel streams `window` bytes (the output over the dims inside that broadcast dim, and the
    operand's own elements there). Where the window exceeds what the L2 holds, each repeat may come
    from DRAM again: at most `re-read` = distinct bytes x (repeats - 1) above the fewest-bytes count.
    operands: [(dims, strides or (), bytes per element)]."""
    best = (0.0, 0.0)
    rank = len(out)
    for dims, strides, eb in operands:
        off = rank - len(dims)
        pad = (1,) * off + tuple(int(x) for x in dims)
        st = (None,) * off + tuple(strides) if strides else (None,) * rank
        bpos = [i for i in range(rank) if out[i] > 1 and (pad[i] == 1 or st[i] == 0)]
        if not bpos:
            continue
        j = bpos[-1]
        inner = prod(out[j + 1:])
        own = prod(pad[i] for i in range(j + 1, rank) if i not in bpos)
        window = inner * out_bytes + own * eb
        distinct = prod(pad[i] for i in range(rank) if i not in bpos) * eb
        reps = prod(out[i] for i in bpos)
        if window > best[0]:
            best = (float(window), float(distinct * (reps - 1)))
    return best
