"""Op class "inductor": the Triton kernels torch.compile generates (docs/method.md section 13).

Inductor names a kernel after the ATen ops it fuses (`triton_poi_fused_..._expand_..._clone_5`); the name
says what the kernel may contain, never how many bytes it moves. In a torch.compile trace the kernel's
External id points at a cpu_op named like the kernel (the graph's launcher), which record_shapes fills
with the kernel's arguments: `Input Dims`, `Input Strides`, `Input type` of each pointer argument, and
`Concrete Inputs` holding the scalar arguments, whose last ones are the kernel's numels (xnumel for a
pointwise kernel, xnumel and r0_numel for a reduction). That is the model's evidence:

- every distinct tensor argument is touched once at its real footprint: the storage extent its dims and
  strides span (1 + sum((size - 1) x |stride|): an expanded, stride-0 view occupies what it is built on),
  at most the kernel's numel elements (a gather reads only the rows it selects: the embedding table
  [vocab, hidden] behind a decode step's 64 tokens is 64 x hidden elements, not the table). The outputs
  are among the arguments (inductor passes them as out_ptr / in_out_ptr): counted once, as arguments.
- a template GEMM (`triton_tem_fused_mm/addmm/bmm`) is a GEMM: M, N, K (and the batch) from its two
  operands whose inner dims agree; 2 x M x N x K FLOPs; its bytes are its arguments' footprints (each
  operand read once: a lower bound where the tiles re-read an operand that exceeds the L2).
- FLOPs of a pointwise / reduction kernel: one per element of its numel (far left of any ridge).
What is assumed without inductor's provenance (kernel_information.json) or output code: that each
argument is read or written once (a kernel that reads an argument twice moves more), and which argument
is the output (the one whose elements are the kernel's numel). Both are said in the notes.

Necessary bytes: the group-expanded copy rule (opclasses/gqa_copy.py): a kernel whose output is a copy
of one input repeated along one dim by the attention's group ratio (repeat_kv fused by inductor) need
not run."""
from __future__ import annotations

import re
from math import prod

from roofline.io.errors import EntryError
from roofline.core.models import Candidate, ModelResult
from roofline.core.opclasses import gqa_copy
from roofline.core.opclasses.aten import NON_TENSOR, dtype_of
from roofline.core.opclasses.base import OpClass, register
from roofline.core.opclasses.jobs import job
from roofline.core.opclasses.stream import residency as _stream_residency
from roofline.peaks import DTYPE_BYTES

KERNEL = re.compile(r"^triton_(poi|per|red|tem)_")
TEMPLATE_GEMM = re.compile(r"^triton_tem_fused_(?:\w*?_)?(mm|addmm|bmm|baddbmm)(?:_|$)")


def _extent(dims: tuple, strides: tuple) -> int:
    """Elements of storage a view spans: 1 + sum((size - 1) x |stride|) (0 for an empty tensor); without
    strides, every element."""
    if any(int(d) == 0 for d in dims):
        return 0
    if not strides or len(strides) != len(dims):
        return int(prod(int(d) for d in dims)) if dims else 1
    return 1 + sum((int(d) - 1) * abs(int(s)) for d, s in zip(dims, strides))


def args_of(sig) -> list[dict]:
    """The kernel's tensor arguments in call order: dims, dtype, bytes per element, elements and extent."""
    strides = getattr(sig, "strides", ()) or ()
    out = []
    for i, d in enumerate(sig.dims):
        t = sig.types[i] if i < len(sig.types) else ""
        if t in NON_TENSOR or not isinstance(d, tuple) or (d and isinstance(d[0], tuple)):
            continue
        dt = dtype_of(t)
        if dt is None:
            continue
        st = strides[i] if i < len(strides) and isinstance(strides[i], tuple) else ()
        out.append({"dims": tuple(int(x) for x in d), "dtype": dt, "eb": DTYPE_BYTES.get(dt, 2),
                    "elems": int(prod(int(x) for x in d)) if d else 1, "extent": _extent(d, st)})
    return out


def numels(sig) -> list[int]:
    """The scalar arguments recorded in Concrete Inputs (ints), in call order: the last one or two are
    the kernel's numels (xnumel; xnumel, r0_numel)."""
    out = []
    for i, c in enumerate(sig.concrete or ()):
        t = sig.types[i] if i < len(sig.types) else ""
        if t == "Scalar" and isinstance(c, str) and re.fullmatch(r"\d+", c.strip()):
            out.append(int(c))
    return out


def _fmt(d) -> str:
    return "x".join(str(x) for x in d) if d else "scalar"


@job("trace_shape", "inductor")
def trace_shape(sig):
    """(shape, dtypes) of an inductor kernel from its launching cpu_op, or None where the cpu_op is not
    the kernel's (no tensor arguments or no numel)."""
    m = KERNEL.match(sig.name or "")
    if m is None:
        return None
    args = args_of(sig)
    if not args:
        return None
    kind = m.group(1)
    if kind == "tem":
        return _template_shape(sig, args)
    ns = numels(sig)
    if not ns:
        return None
    bound = ns[-1] * (ns[-2] if kind in ("red", "per") and len(ns) >= 2 else 1)
    per = [min(a["extent"], bound) * a["eb"] for a in args]
    big = max(range(len(args)), key=lambda i: per[i])
    shape = {"arg_bytes": int(sum(per)), "numel": int(bound), "tensor_args": len(args),
             "kernel_kind": kind, "args": " ".join(f"{a['dtype']}[{_fmt(a['dims'])}]" for a in args)}
    shape.update(gqa_copy.expansion(args, bound))
    return shape, {"act": args[big]["dtype"], "out": args[big]["dtype"]}


def _template_shape(sig, args):
    """A template GEMM: M, N, K (batch) from the two operands whose inner dims agree."""
    m = TEMPLATE_GEMM.match(sig.name or "")
    if m is None:
        return None
    for a in args:
        for b in args:
            if a is b or len(a["dims"]) != len(b["dims"]) or len(a["dims"]) not in (2, 3):
                continue
            da, db = a["dims"], b["dims"]
            if da[-1] == db[-2] and (len(da) == 2 or da[0] == db[0]):
                batch = da[0] if len(da) == 3 else 1
                shape = {"arg_bytes": int(sum(x["extent"] * x["eb"] for x in args)), "numel": batch * da[-2] * db[-1],
                         "tensor_args": len(args), "kernel_kind": "tem", "M": da[-2], "N": db[-1], "K": da[-1],
                         "batch": batch, "args": " ".join(f"{x['dtype']}[{_fmt(x['dims'])}]" for x in args)}
                return shape, {"act": a["dtype"], "weight": b["dtype"], "out": a["dtype"]}
    return None


@job("model", "inductor")
def model(shape: dict, dt: dict) -> ModelResult:
    """Bytes: the arguments' footprints (each once); FLOPs: 2 M N K (x batch) of a template GEMM, else one
    per element of the kernel's numel."""
    b = float(shape["arg_bytes"])
    if shape.get("kernel_kind") == "tem" and all(k in shape for k in ("M", "N", "K")):
        flops = 2.0 * shape.get("batch", 1) * shape["M"] * shape["N"] * shape["K"]
        return ModelResult([Candidate("arguments_once", b, flops)], compute_dtype=dt["act"],
                           assumptions=["template GEMM: each operand read once (a lower bound where the tiles re-read "
                                        "an operand larger than the L2)"],
                           info={"M": shape["M"], "N": shape["N"], "K": shape["K"]})
    return ModelResult([Candidate("arguments_once", b, float(shape.get("numel") or 0))], compute_dtype="fp32",
                       assumptions=["inductor kernel: each tensor argument touched once at its storage footprint, at "
                                    "most its numel elements (Concrete Inputs); no provenance (kernel_information.json) "
                                    "or output code read: an argument read twice would move more"],
                       info={"numel": shape.get("numel"), "arg_bytes": b})


@job("fill", "inductor")
def fill(s, op_class, e, wl, config, regime, assumed) -> tuple[str, ...]:
    """No stage-A size: a generated kernel's bytes are its arguments', which only its launching cpu_op records."""
    if "arg_bytes" not in s:
        why = e.raw.get("shape_unknown") if isinstance(e.raw, dict) else None
        raise EntryError("inductor kernel without its arguments: " + (why if isinstance(why, str) else
                         "the Top-N gives no shapes (arg_bytes)") + "; profile with record_shapes=True so that the "
                         "kernel's launching cpu_op records its Input Dims / Strides / Concrete Inputs (its numels), "
                         "or give stage-C counters (--counters)")
    return ("arg_bytes",)


@job("residency", "inductor")
def residency(w, chosen: dict, l2: float, notes: list[str]) -> bool:
    """A pointwise / reduction kernel is served from L2 like any streaming op (stream.residency); a template
    GEMM is judged on HBM."""
    if any(s.get("kernel_kind") == "tem" for s in w.shapes):
        return False
    return _stream_residency(w, chosen, l2, notes)


_KEYS = frozenset({"arg_bytes", "numel", "tensor_args", "kernel_kind", "args", "M", "N", "K", "batch"}) | gqa_copy.KEYS
register(OpClass(
    "inductor", seed_class="elementwise",
    # before every other class: a generated kernel is named after the ops it fuses (triton_poi_fused_
    # _scaled_dot_product_cudnn_attention_..._clone is a copy, triton_red_fused_..._rsqrt a norm)
    name_rules=((23, r"^triton_(?:poi|per|red|tem)_"),),
    # its necessary bytes: the group-expanded-copy rule (gqa_copy.py registers itself for this class)
    shape_keys=_KEYS, dim_keys=frozenset({"arg_bytes", "numel", "tensor_args", "M", "N", "K", "batch"}),
    flags=frozenset({"fusable", "compulsory_bytes"}),
    target_eff={"inductor": 0.85},     # a generated streaming kernel: the streaming prior
))
