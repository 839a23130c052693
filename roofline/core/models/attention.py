"""Attention: paged decode (docs/method.md section 2) and prefill (flash, no score round-trip)."""
from __future__ import annotations

from roofline.core.models import Candidate, ModelResult


def decode_counts(batch: int, seq_len: float, n_q: int, n_kv: int, head_dim: int, kv_bytes: float):
    """(flops, bytes) of one decode step of attention. NB: KV traffic dominates; Q and the output
    (batch·n_q·head_dim each) are negligible at decode and left out."""
    nbytes = batch * seq_len * n_kv * head_dim * 2 * kv_bytes          # K and V
    flops = 2.0 * batch * n_q * seq_len * head_dim * 2                 # QK^T and PV
    return flops, nbytes


def prefill_counts(batch: int, seq_len: int, n_q: int, n_kv: int, head_dim: int, a_bytes: float,
                   out_bytes: float, causal: bool):
    """(flops, bytes) of a flash-style prefill. NB: the score matrix stays on chip, so bytes are
    Q, K, V read once and O written once; causal masking halves the useful FLOPs."""
    flops = 4.0 * batch * n_q * seq_len * seq_len * head_dim * (0.5 if causal else 1.0)
    nbytes = batch * seq_len * head_dim * ((n_q + 2 * n_kv) * a_bytes + n_q * out_bytes)
    return flops, nbytes


def model(shape: dict, dt: dict) -> ModelResult:
    b, hq, hkv, d = int(shape["batch"]), int(shape["n_q_heads"]), int(shape["n_kv_heads"]), int(shape["head_dim"])
    regime = shape.get("regime", "decode")
    mask = int(shape.get("mask_bytes") or 0)
    if regime == "prefill":
        s = int(shape["seq_len"])
        flops, nbytes = prefill_counts(b, s, hq, hkv, d, dt["act_bytes"], dt["out_bytes"], bool(shape.get("causal", True)))
        # NB: an explicit mask (sliding window, padding) is read once; a mask larger than the L2
        # is re-read per head (the analysis notes it)
        nbytes += mask
        return ModelResult([Candidate("flash_prefill", nbytes, flops)], compute_dtype=dt["act"],
                           info={"seq_len": s, "kind": "prefill", "mask_bytes": mask})
    cands = []
    for label, s in shape.get("seq_len_candidates") or [("captured", shape["seq_len"])]:
        flops, nbytes = decode_counts(b, float(s), hq, hkv, d, dt["kv_bytes"])
        cands.append(Candidate(label, nbytes + mask, flops, f"seq_len={s:g}"))
    return ModelResult(cands, compute_dtype=dt["kv"] if dt["kv_bytes"] >= 2 else dt["act"],
                       primary=cands[0].label, info={"kind": "decode", "paged": bool(shape.get("paged", True)),
                                                     "mask_bytes": mask})
