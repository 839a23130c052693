"""What the two linear-attention / state-space classes (recurrent.py: the recurrent update;
chunk_scan.py: the chunked prefill) share: the state's dimensions from config.json, the shape of
the autograd Function that launched the kernels (flash-linear-attention launches its Triton kernels
inside ``torch.autograd.Function.apply``; the profiler records that call under the Function's class
name, with its Input Dims), and the variant a kernel name says."""
from __future__ import annotations

import re

from roofline.core.opclasses.aten import dtype_of, tensors
from roofline.core.opclasses.stage_a import cfg, fill
from roofline.peaks import DTYPE_BYTES

# model types whose sequence mixer is a Mamba2 (SSD) layer: state = n_heads x head_dim x d_state
SSM_MODEL_TYPES = frozenset({"mamba2", "bamba", "falcon_h1", "nemotron_h", "granitemoehybrid", "zamba2"})
_SSM_NAME = re.compile(r"selective|mamba|ssd|_chunk_scan|_chunk_state|state_passing|bmm_chunk|ssm", re.IGNORECASE)


def variant(name: str, config: dict | None) -> str:
    """'ssm' (Mamba2) or 'delta' (gated delta rule, GLA, retention: q/k heads of dk, v heads of dv)."""
    if _SSM_NAME.search(name or ""):
        return "ssm"
    if config and config.get("model_type") in SSM_MODEL_TYPES:
        return "ssm"
    return "delta"


def fill_dims(s: dict, var: str, config: dict | None, assumed: list[str]) -> None:
    """heads, dk, dv, qk_heads (and the chunk size) from config.json, where the trace did not give them."""
    if var == "ssm":
        fill(s, "heads", cfg(config, "mamba_n_heads", "mamba_num_heads", "num_heads"), "config.json: Mamba2 heads",
             assumed)
        fill(s, "dv", cfg(config, "mamba_d_head", "mamba_head_dim", "head_dim"), "config.json: Mamba2 head_dim",
             assumed)
        fill(s, "dk", cfg(config, "mamba_d_state", "ssm_state_size", "state_size"), "config.json: d_state", assumed)
        fill(s, "qk_heads", cfg(config, "mamba_n_groups", "n_groups"), "config.json: Mamba2 groups (B, C)", assumed)
        fill(s, "chunk", cfg(config, "mamba_chunk_size", "chunk_size"), "config.json", assumed)
    else:
        fill(s, "heads", cfg(config, "linear_num_value_heads", "num_v_heads"), "config.json: state (value) heads",
             assumed)
        fill(s, "qk_heads", cfg(config, "linear_num_key_heads", "num_k_heads"), "config.json: q/k heads", assumed)
        fill(s, "dk", cfg(config, "linear_key_head_dim", "head_k_dim"), "config.json: key head dim", assumed)
        fill(s, "dv", cfg(config, "linear_value_head_dim", "head_v_dim"), "config.json: value head dim", assumed)
    s.setdefault("variant", var)


def function_shape(sig, want_T: bool = True):
    """q/k/v (and the initial state) of a flash-linear-attention autograd Function call
    (FusedRecurrentFunction, ChunkGatedDeltaRuleFunction, ...): q, k [B, T, H, K] and v [B, T, HV, V]
    are its first three 4-d tensors (fla's layout, `head_first=False`); the initial state is a later
    4-d tensor [N, HV, K, V] (or [N, HV, V, K]), whose dtype is the state's. None: not that layout."""
    ts = [(d, t) for d, t in tensors(sig) if isinstance(d, tuple) and len(d) == 4]
    if len(ts) < 3:
        return None
    (q, tq), (k, _), (v, _) = ts[:3]
    if q[:2] != k[:2] or q[:2] != v[:2] or q[2:] != k[2:]:
        return None
    b, t, h, dk = (int(x) for x in q)
    hv, dv = int(v[2]), int(v[3])
    # NB: a varlen call (cu_seqlens) packs N sequences into B = 1: the tokens are B x T, the sequences
    # the initial state's N
    shape = {"batch": b, "T": t, "tokens": b * t, "qk_heads": h, "heads": hv, "dk": dk, "dv": dv,
             "variant": "delta", "state_in": False}
    for d, ty in ts[3:]:
        if int(d[1]) == hv and sorted((int(d[2]), int(d[3]))) == sorted((dk, dv)):
            shape.update(batch=int(d[0]), T=b * t // max(int(d[0]), 1), state_in=True)
            if DTYPE_BYTES.get(dtype_of(ty) or ""):
                shape["state_bytes"] = DTYPE_BYTES[dtype_of(ty)]
            break
    act = dtype_of(tq)
    return shape, ({"act": act, "out": act} if act else {})
