"""Kernel name -> op class, and name -> a short name a person can read.

The classification is a rule table (``RULES``): ordered ``(regex, op_class)`` rows, first match
wins, searched case-insensitively in the full kernel name (templates included: a CUTLASS kernel is
often only recognisable by its template arguments). Order matters where names overlap: MoE and
attention kernels often contain "gemm"/"cutlass"/"wgmma", so they come before GEMM; norm kernels
contain "vectorized"/"reduce", so they come before elementwise. A name no row matches is
``"unknown"``: it is listed, never guessed.

Public API (imported by the analysis engine; keep the signatures):

    classify(name: str, hint: str | None = None) -> str   # gemm|moe|attn|elementwise|norm|quant|comm|unknown
    short_name(name: str) -> str
"""
from __future__ import annotations

import functools
import re

OP_CLASSES = ("gemm", "moe", "attn", "elementwise", "norm", "quant", "comm", "unknown")

# (pattern, op_class). Data, not a chain of ifs: add a row, add a test in tests/test_classify.py.
RULES: list[tuple[str, str]] = [
    # --- communication (NCCL, vLLM/SGLang custom all-reduce, NVSHMEM, DeepEP)
    (r"nccl|all_?reduce|allreduce|all_?gather|reduce_?scatter|all_?to_?all|alltoall|"
     r"cross_device_reduce|custom_?ar|one_?shot_|two_?shot_|multimem|nvshmem|deep_?ep", "comm"),
    # --- KV-cache writes are copies, though their names say "flash"/"mla"
    (r"reshape_and_cache|concat_and_cache|cache_kernel", "elementwise"),
    # inductor names a kernel after the ops it fuses: a pointwise one (triton_poi_) stays pointwise
    # whatever it is named after (triton_poi_fused__scaled_dot_product_..._attention is a copy)
    (r"^triton_poi_", "elementwise"),
    # --- mixture of experts (fused MoE, grouped GEMM, routing/gating, token permutation)
    (r"fused_moe|moe_|_moe|moe::|\bmoe\b|^moe|grouped_?gemm|group_?gemm|groupgemm|gemm_?grouped|"
     r"ptr_?array|array_?tma|group_?problem|grouped|topk_?gating|gating_?softmax|expert", "moe"),
    # --- attention (FlashAttention, cuDNN SDPA, xformers/cutlass fmha, FlashInfer, paged, MLA)
    (r"flash|fmha|sdpa|attention|attn|xformers|flashinfer|paged_?att|"
     r"batch_?decode|batch_?prefill|single_?decode|single_?prefill|splitkv|mla_?decode|"
     r"\bmha_|_mha_|cudnn.*fprop|cudnn.*bprop", "attn"),
    # --- normalisation and softmax (row reductions followed by an elementwise pass)
    (r"layer_?norm|rms_?norm|rmsnorm|group_?norm|batch_?norm|instance_?norm|"
     r"rowwisemoments|layernorm|soft_?max|triton_(?:red|per)_fused\w*rsqrt", "norm"),
    # --- GEMM (cuBLAS/cuBLASLt incl. nvjet, CUTLASS, ThunderKittens, DeepGEMM, hipBLASLt/Tensile,
    #     Marlin/AWQ/GPTQ quantised GEMM, Triton mm templates, GEMV)
    (r"gemm|gemv|nvjet|cublas|cutlass|xmma|\bs\d{3,5}gemm|_s\d{4,5}|h\d{4,5}gemm|matmul|"
     r"scaled_mm|_mm_|triton_tem_fused|wgmma|deep_?gemm|thunderkittens|\btk_|marlin|"
     r"hipblaslt|^cijk_|dot_kernel|splitkreduce|tensorop", "gemm"),
    # --- quantisation / dtype conversion to low precision
    (r"quant|fp8|fp4|mxfp|nvfp|cvt_|e4m3|e5m2", "quant"),
    # --- everything memory-streaming: elementwise, reductions, copies, cat, index, activations,
    #     rotary embedding, KV-cache writes, Triton pointwise/reduction kernels
    (r"elementwise|vectorized|unrolled|reduce_kernel|reduce|catarraybatchedcopy|\bcat\b|copy|fill|"
     r"memcpy|memset|index|gather|scatter|embedding|rotary|rope|silu|gelu|relu|act_and_mul|"
     r"swiglu|triton_poi|triton_red|triton_per|arange|where|cumsum|sort|topk|argmax|"
     r"reshape_and_cache|concat|transpose|permute|tensoriterator|distribution|random|dropout", "elementwise"),
]

# Library kernels that cannot be rewritten in place (precompiled / assembly): Top-N 'editable'.
LIBRARY_PATTERNS: list[str] = [
    r"nvjet", r"cublas", r"xmma", r"^sm\d+_", r"^ampere_", r"^turing_", r"^volta_", r"cudnn",
    r"^cijk_", r"hipblaslt", r"gemv2[nt]_kernel", r"gemvx", r"splitkreduce",
    r"^nccl(?:dev)?kernel", r"^rccl",      # NCCL / RCCL collectives: precompiled; levers are host-side (algo, protocol)
]

# Hints that are op names rather than classes (e.g. the aten op that launched a kernel).
OP_HINT_RULES: list[tuple[str, str]] = [
    (r"^aten::(mm|addmm|bmm|baddbmm|matmul|linear|_scaled_mm|_int_mm|addmv|mv|dot)$", "gemm"),
    (r"scaled_dot_product|flash_attention|efficient_attention|cudnn_attention|attention", "attn"),
    (r"layer_norm|rms_norm|group_norm|batch_norm|softmax", "norm"),
    (r"moe|^aten::_grouped_mm$|^aten::_scaled_grouped_mm$", "moe"),
    (r"nccl|all_reduce|all_gather|reduce_scatter|c10d", "comm"),
    (r"quant", "quant"),
    (r"^aten::", "elementwise"),
]

_HINT_ALIASES = {"other": None, "unknown": None, "": None, "attention": "attn", "matmul": "gemm",
                 "collective": "comm", "communication": "comm", "normalization": "norm"}


@functools.lru_cache(maxsize=None)
def _compiled(table: tuple[tuple[str, str], ...]) -> list[tuple[re.Pattern, str]]:
    return [(re.compile(p, re.IGNORECASE), c) for p, c in table]


_RULES_T = tuple(RULES)
_OP_RULES_T = tuple(OP_HINT_RULES)
_LIB_RE = re.compile("|".join(LIBRARY_PATTERNS), re.IGNORECASE)


@functools.lru_cache(maxsize=65536)
def _classify_name(name: str) -> str:
    for rx, cls in _compiled(_RULES_T):
        if rx.search(name):
            return cls
    return "unknown"


def classify(name: str, hint: str | None = None) -> str:
    """Op class of a kernel: one of gemm|moe|attn|elementwise|norm|quant|comm|unknown.

    ``hint``: an explicit class from the profiler (gemm|moe|attn|elementwise|norm|quant|comm;
    "other"/"unknown"/None mean no hint) wins over the name, since the profiler saw the context (a
    grouped GEMM inside an MoE layer looks like a plain GEMM by name). A hint that is an op name
    (e.g. "aten::mm", the op that launched the kernel) is used only when the name matches no rule.
    """
    h = (hint or "").strip()
    hl = h.lower()
    if hl in _HINT_ALIASES:
        hl = _HINT_ALIASES[hl] or ""
    if hl in OP_CLASSES and hl != "unknown":
        return hl
    cls = _classify_name(_readable(name or ""))
    if cls != "unknown" or not h:
        return cls
    for rx, c in _compiled(_OP_RULES_T):
        if rx.search(h):
            return c
    return "unknown"


_SPLITK_REDUCE_RX = re.compile(r"splitkreduce|reducesplitk|split_k_reduce|splitk_reduce", re.IGNORECASE)


def is_splitk_reduce(name: str) -> bool:
    """The reduce kernel of a split-K GEMM (it sums the K-slices' partial results): half of one
    logical op, never a GEMM of its own."""
    return bool(_SPLITK_REDUCE_RX.search(name or ""))


def is_library_kernel(name: str) -> bool:
    """True for precompiled library kernels (cuBLAS/nvjet/cuDNN/Tensile): no in-kernel rewrite."""
    return bool(_LIB_RE.search(name or ""))


# ---------------------------------------------------------------------------- short names

_GENERIC = {"elementwise_kernel", "vectorized_elementwise_kernel", "unrolled_elementwise_kernel",
            "reduce_kernel", "kernel", "Kernel", "Kernel2", "device_kernel", "triton_", "index_elementwise_kernel",
            "elementwise_kernel_with_index", "vectorized_templated_elementwise_kernel"}
_SKIP_INNER = {"ReduceOp", "gpu_kernel_impl", "gpu_kernel_impl_nocast", "launch_kernel", "BinaryFunctor",
               "AUnaryFunctor", "BUnaryFunctor", "UnaryFunctor", "launch_vectorized_kernel",
               "launch_legacy_kernel", "gpu_kernel", "gpu_kernel_nocast"}
_INNER_RE = re.compile(r"([A-Za-z_]\w*(?:Functor\w*|_kernel_cuda|_kernel|_functor|Ops))\b")
_MANGLED_ID_RE = re.compile(r"(\d+)")


def _strip_bracketed(s: str, open_ch: str, close_ch: str) -> tuple[str, list[str]]:
    """Remove every top-level open..close group; return the rest and the removed inner texts."""
    out, inner, depth, cur = [], [], 0, []
    for ch in s:
        if ch == open_ch:
            if depth == 0:
                cur = []
            else:
                cur.append(ch)
            depth += 1
        elif ch == close_ch and depth > 0:
            depth -= 1
            if depth == 0:
                inner.append("".join(cur))
            else:
                cur.append(ch)
        elif depth == 0:
            out.append(ch)
        else:
            cur.append(ch)
    return "".join(out), inner


def _readable(name: str) -> str:
    """A mangled name (`_Z...`, as a trace may carry it) demangled by the one demangler of the
    kernel-name normaliser (roofline.counters.match.demangle); any other name unchanged."""
    if not name.lstrip().startswith("_Z"):
        return name
    from roofline.counters.match import demangle

    return demangle(name)


def _demangle_base(name: str) -> str:
    """Last identifier of an Itanium-mangled name (_Z...), without a full demangler."""
    s = name[2:]
    if s.startswith("N"):
        s = s[1:]
    ids, i = [], 0
    while i < len(s):
        m = _MANGLED_ID_RE.match(s, i)
        if not m:
            break
        n = int(m.group(1))
        i = m.end()
        ids.append(s[i:i + n])
        i += n
        if i < len(s) and s[i] in "IE":
            break
    return ids[-1] if ids else name


def short_name(name: str) -> str:
    """A readable name: templates, argument lists, return type and namespaces dropped.

    Generic PyTorch launchers keep the functor that tells them apart, e.g.
    ``vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, ...>(...)`` ->
    ``vectorized_elementwise_kernel[FillFunctor]``.
    """
    if not name:
        return ""
    s = _readable(name.strip())
    if s.startswith("_Z"):   # no demangler here: the last identifier of the mangled name
        return _demangle_base(s)[:80]
    # Argument list: the last top-level (...) group; templates first so '<' inside args is safe.
    no_tmpl, tmpl_inner = _strip_bracketed(s, "<", ">")
    base, _ = _strip_bracketed(no_tmpl, "(", ")")
    base = base.strip()
    if base.startswith("void "):
        base = base[5:]
    base = base.split()[-1] if base.split() else base   # drop a return type
    base = base.split("::")[-1] or base
    if base in ("Kernel", "Kernel2", "device_kernel") and tmpl_inner:
        # CUTLASS: the kernel is named by its first template argument
        first, _ = _strip_bracketed(tmpl_inner[0], "<", ">")
        first = first.split(",")[0].strip().split("::")[-1]
        base = first or base
    elif base in _GENERIC and tmpl_inner:
        for cand in _INNER_RE.findall(" ".join(tmpl_inner)):
            if cand != base and cand not in _GENERIC and cand not in _SKIP_INNER:
                base = f"{base}[{cand}]"
                break
    return base[:120]


__all__ = ["classify", "short_name", "is_library_kernel", "is_splitk_reduce", "RULES", "OP_CLASSES"]
