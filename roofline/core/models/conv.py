"""Causal depthwise conv1d (the short convolution of linear-attention and Mamba layers): each of
`channels` channels of each sequence convolved with its own `k`-tap filter (docs/method.md section 2).

Bytes: the input read once (batch x channels x L_in), the output written once (batch x channels x
L_out), the filter (channels x k) and bias once, and at decode the rolling conv state
(batch x channels x (k - 1)) read and written where the kernel updates it in place. NB: the k taps
re-read each input element k times, but from registers / L1, never from HBM; the reference
depthwise kernel (conv_depthwise2d) re-reads through L1/L2 too.
FLOPs: one multiply-add per tap and output element (2 k per output element)."""
from __future__ import annotations

from roofline.core.models import Candidate, ModelResult


def model(shape: dict, dt: dict) -> ModelResult:
    b, c, k = int(shape["batch"]), int(shape["channels"]), int(shape["k"])
    l_in = int(shape["L_in"])
    l_out = int(shape.get("L_out", l_in))
    state = b * c * (k - 1) * 2 * dt["act_bytes"] if shape.get("state_update") else 0
    nbytes = b * c * l_in * dt["act_bytes"] + b * c * l_out * dt["out_bytes"] + c * (k + 1) * dt["weight_bytes"] + state
    flops = 2.0 * k * b * c * l_out
    return ModelResult([Candidate("stream", float(nbytes), flops, f"{b}x{c} channels, {l_in} -> {l_out}, {k} taps")],
                       compute_dtype="fp32", info={"kind": "causal_conv", "state_bytes": state})
