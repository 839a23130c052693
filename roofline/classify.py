"""Kernel name -> op class; the short name a person can read is the name normaliser's
(roofline.counters.match.short_name), handed on here.

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

from roofline.counters.match import _readable, short_name  # noqa: F401  (the one short-name rule, with the name normaliser)

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

__all__ = ["classify", "short_name", "is_library_kernel", "is_splitk_reduce", "RULES", "OP_CLASSES"]
