"""Op class "causal_conv": the short causal depthwise conv1d of linear-attention and Mamba layers:
the causal-conv1d package's kernels (causal_conv1d_fwd / _update, and the Triton ports in vLLM,
SGLang and flash-linear-attention) and the reference path transformers takes without that package
(nn.Conv1d with groups = channels: aten::_conv_depthwise2d, `conv_depthwise2d_forward_kernel`).

Model: roofline/core/models/conv.py (input, output, filter once; the conv state at decode).
Trace: aten::_conv_depthwise2d (input [B, C, 1, L], weight [C, 1, 1, k], padding), or
aten::convolution / aten::conv1d (input [B, C, L], weight [C, 1, k]).
Stage A (the package kernels have no aten op): channels from config.json (gated delta: 2 x q/k
heads x dk + value heads x dv; Mamba2: heads x head_dim + 2 x groups x d_state), taps from
linear_conv_kernel_dim / mamba_d_conv; prefill: workload.isl tokens per sequence; decode: one token
per sequence with the conv state (k - 1 columns) read and written, workload.conc sequences.
Prior: a stencil over a stream, each input read once: the streaming prior (0.85).
Lever: the reference path (conv_depthwise2d) where config.json names a model whose layer has a
causal conv that the causal-conv1d package replaces (REFERENCE_MODEL_TYPES)."""
from __future__ import annotations

from dataclasses import replace

from roofline.io.errors import EntryError
from roofline.core.models import conv as _model
from roofline.core.opclasses.aten import dtype_of, tensors
from roofline.core.opclasses.jobs import job
from roofline.core.opclasses.base import OpClass, l2_resident, register
from roofline.core.opclasses.stage_a import cfg, fill, workload

CONV_OPS = ("aten::_conv_depthwise2d", "aten::convolution", "aten::_convolution", "aten::conv1d",
            "aten::cudnn_convolution")
# model types whose transformers implementation runs a causal conv1d through nn.Conv1d when the
# causal-conv1d package is absent (is_causal_conv1d_available() False)
REFERENCE_MODEL_TYPES = frozenset({"qwen3_next", "qwen3_5", "qwen3_5_moe", "bamba", "mamba2", "mamba", "falcon_h1",
                                   "falcon_mamba", "nemotron_h", "granitemoehybrid", "jamba", "zamba2"})
REFERENCE_KERNEL = "conv_depthwise2d"


def _ints(text: str) -> list[int] | None:
    try:
        return [int(x) for x in (text or "").strip("[] ").split(",") if x.strip()]
    except ValueError:
        return None


@job("trace_shape", "causal_conv")
def trace_shape(sig):
    if sig.name not in CONV_OPS:
        return None
    ts = tensors(sig)
    if len(ts) < 2:
        return None
    (x, tx), (w, tw) = ts[0], ts[1]
    if len(x) == 4 and len(w) == 4 and int(x[2]) == 1:        # the 2-d form of a 1-d conv: [B, C, 1, L]
        b, c, l_in, k = int(x[0]), int(x[1]), int(x[3]), int(w[3])
    elif len(x) == 3 and len(w) == 3:
        b, c, l_in, k = int(x[0]), int(x[1]), int(x[2]), int(w[2])
    else:
        return None
    if int(w[0]) != c or int(w[1]) != 1:                       # depthwise only: one input channel per filter
        return None
    shape = {"batch": b, "channels": c, "L_in": l_in, "k": k}
    pad_i = 5 if sig.name == "aten::_conv_depthwise2d" else 4
    pad = _ints(sig.concrete[pad_i]) if pad_i < len(sig.concrete) else None
    if pad:
        # NB: out = L + 2 pad - (k - 1) (stride 1, dilation 1): transformers pads k - 1 on both sides
        # and keeps the first L outputs, but the kernel computes and writes all of them
        shape["L_out"] = l_in + 2 * pad[-1] - (k - 1)
    dt = {"act": dtype_of(tx), "out": dtype_of(tx), "weight": dtype_of(tw)}
    return shape, {kk: v for kk, v in dt.items() if v}


def _channels(config) -> int | None:
    if config is None:
        return None
    h, dk = cfg(config, "linear_num_key_heads"), cfg(config, "linear_key_head_dim")
    hv, dv = cfg(config, "linear_num_value_heads"), cfg(config, "linear_value_head_dim")
    if None not in (h, dk, hv, dv):
        return int(2 * h * dk + hv * dv)
    mh, md = cfg(config, "mamba_n_heads", "mamba_num_heads"), cfg(config, "mamba_d_head", "mamba_head_dim")
    g, n = cfg(config, "mamba_n_groups", "n_groups"), cfg(config, "mamba_d_state", "ssm_state_size")
    if None not in (mh, md, g, n):
        return int(mh * md + 2 * g * n)
    return None


@job("fill", "causal_conv")
def fill_stage_a(s, op_class, e, wl, config, regime, assumed) -> tuple[str, ...]:
    fill(s, "channels", _channels(config), "config.json: the conv's channels (q, k, v / x, B, C)", assumed)
    fill(s, "k", cfg(config, "linear_conv_kernel_dim", "mamba_d_conv", "conv_kernel"), "config.json: conv taps", assumed)
    if "L_in" not in s:
        if regime == "decode":
            fill(s, "L_in", 1, "one token per sequence at decode", assumed)
            fill(s, "state_update", True, "the conv state (k - 1 columns) read and written in place at decode", assumed)
            fill(s, "batch", int(workload(wl, "conc", "the sequences of a decode conv")), "workload.conc", assumed)
        else:
            fill(s, "L_in", int(workload(wl, "isl", "the length of a prefill conv")), "workload.isl tokens", assumed)
            fill(s, "batch", 1, "one sequence per prefill launch (no Input Dims say more)", assumed)
    s.setdefault("model_type", (config or {}).get("model_type") or "")
    if "channels" not in s and not config:
        raise EntryError("a causal conv without Input Dims and without config.json: its channels are unknown; give "
                         "config.json (roofline topn --config) or profile with record_shapes=True")
    return ("batch", "channels", "L_in", "k")


@job("residency", "causal_conv")
def residency(w, chosen: dict, l2: float, notes: list[str]) -> bool:
    """A conv whose whole traffic fits in half the L2 reads the activation the kernel before it just wrote
    (Bamba's reference path: the contiguous copy of x, B, C) and writes what the next one reads (the SiLU):
    served from L2, no verdict (True).
    ncu on the corpus: Bamba's prefill conv (4 x 128 tokens, 17.6 MB model) read and wrote 2.2 MB of DRAM;
    Qwen3-Next's (2 x 1024 tokens, 67 MB, above half the L2) 64 MB."""
    if chosen["bytes_est"] <= l2 / 2:
        return l2_resident(notes, "the conv", chosen["bytes_est"], l2,
                           ": it reads what the kernel before it just wrote and writes what the next kernel reads, "
                           "served from L2", "fusion (causal-conv1d fuses the conv with its activation)")
    return False


def reference_lever(out: dict, all_light: list[dict]) -> str | None:
    """The lever naming the missing fast path, with its evidence (kernel, aten op, model type)."""
    mt = (out.get("shape") or {}).get("model_type") or ""
    if REFERENCE_KERNEL not in (out.get("name") or "") or mt not in REFERENCE_MODEL_TYPES:
        return None
    me = next((x for x in all_light if x.get("name") == out.get("name")), {})
    ops = sorted(o for o in (me.get("aten_ops") or ()) if "conv" in o)
    return (f"reference path: {out.get('short_name') or REFERENCE_KERNEL} is PyTorch's generic depthwise conv "
            f"({', '.join(ops) or 'nn.Conv1d'}), which transformers' {mt} layer runs when the causal-conv1d package "
            "is not installed; install causal-conv1d (its causal_conv1d_fn / causal_conv1d_update kernels are the "
            "fast path the model code calls when present)")


@job("finish_levers", "causal_conv")
def finish_levers(out: dict, lv, all_light: list[dict], info: dict, dt: dict):
    ref = reference_lever(out, all_light)
    if ref:
        return replace(lv, other_levers=[ref] + [x for x in lv.other_levers or [] if x != ref])
    return lv


register(OpClass("causal_conv", flags=frozenset({"fusable"}), seed_class="elementwise",
                 name_rules=((28, r"causal_conv1d|conv_depthwise2d|short_conv"),),
                 op_rules=((17, r"^aten::_conv_depthwise2d$|causal_conv1d"),),
                 hint_aliases=("conv1d", "causal_conv"),
                 target_eff={"causal_conv": 0.85},
                 shape_keys=frozenset({"batch", "channels", "L_in", "L_out", "k", "state_update", "model_type"}),
                 dim_keys=frozenset({"batch", "channels", "L_in", "L_out", "k"})))

job("model", "causal_conv")(_model.model)
