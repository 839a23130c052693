"""Op class "recurrent" (roofline/core/opclasses/recurrent.py) on the real Qwen3-Next corpus case
(flash-linear-attention 0.6.0, decode batch 40, H200): flash-linear-attention's fused recurrent
gated-delta-rule kernel, a Triton kernel with no aten op, shaped from the autograd Function the
profiler recorded around it, and its bytes against ncu's DRAM bytes of the same step."""
from __future__ import annotations

import pytest

import hybrid_corpus as hc
from roofline.core import classify
from roofline.core.opclasses import recurrent
from roofline.core.models import linear_attn

CASE, KERNEL = "qwen3next_fla", "fused_recurrent_gated_delta_rule_fwd_kernel"


def test_the_kernel_is_shaped_from_its_autograd_function():
    e = hc.topn_entry(CASE, KERNEL)
    cfg = hc.meta(CASE)["config"]
    assert e["op_class"] == "recurrent" and e["aten_ops"] == {"FusedRecurrentFunction": e["launches"]}
    sh = e["shapes"][0]
    # the state heads and head dims the trace recorded are config.json's; q/k heads are repeated to the
    # value heads by transformers before the call (32, not linear_num_key_heads = 16)
    assert (sh["batch"], sh["heads"], sh["dk"], sh["dv"]) == (
        hc.meta(CASE)["decode"]["batch"], cfg["linear_num_value_heads"], cfg["linear_key_head_dim"],
        cfg["linear_value_head_dim"])
    assert sh["qk_heads"] == cfg["linear_num_value_heads"] and sh["state_in"] is True and sh["state_bytes"] == 4


def test_bytes_within_15pct_of_ncu_and_the_state_dominates():
    v = hc.verdict(CASE, KERNEL, "decode")
    measured = hc.ncu_bytes(CASE, "decode", KERNEL)
    assert v["modeled"] and v["op_kind"] == "recurrent"
    assert v["bytes_est"] == pytest.approx(measured, rel=0.15)
    # the fp32 state read and written: 40 x 32 x 128 x 128 x 4 B x 2 = 167.8 MB of the 169.1 MB
    state = 40 * 32 * 128 * 128 * 4 * 2
    assert state / v["bytes_est"] > 0.99
    assert v["target_eff"] == 0.85 and v["headroom_class"] in ("moderate", "underperforming", "saturated")


def test_stage_a_takes_the_sequences_from_the_grid():
    """Without Input Dims: config.json's heads and dims, the sequences from fla's grid rule (the trace's
    grid 20480 = ceil(128 / 8) x 40 sequences x 32 heads), the fp32 state assumed: the same bytes."""
    e = hc.topn_entry(CASE, KERNEL)
    assert recurrent.batch_from_grid(e["grid"], 32, 128) == 40
    assert recurrent.batch_from_grid([20480, 2, 1], 32, 128) is None and recurrent.batch_from_grid([20481], 32, 128) is None
    assert recurrent.batch_from_grid([1, 16, 40 * 32], 32, 128) == 40        # the older 3-d grid (NK, NV, N x HV)
    v = hc.verdict_without_shapes(CASE, KERNEL, "decode")
    assert v["shape_source"] == "estimated" and v["shape"]["batch"] == 40
    assert "batch=40 (sequences from the kernel's grid" in v["notes"] and "state_bytes=4 (the state in fp32" in v["notes"]
    # NB: config.json gives 16 q/k heads; the recorded call had them repeated to 32 (0.2% of the bytes)
    assert v["bytes_est"] == pytest.approx(hc.verdict(CASE, KERNEL, "decode")["bytes_est"], rel=0.005)


def test_the_name_and_the_function_classify_it():
    assert classify.classify(KERNEL) == "recurrent"
    assert classify.classify("_selective_scan_update_kernel") == "recurrent"
    assert classify.classify("some_triton_kernel", hint="FusedRecurrentFunction") == "recurrent"


def test_model_factors():
    """Each factor of the model on the corpus shape: the state read, the state write, the state's dtype."""
    sh = hc.topn_entry(CASE, KERNEL)["shapes"][0]
    dt = {"act_bytes": 2, "out_bytes": 2}
    full = linear_attn.recurrent(sh, dt).candidates[0].bytes_est
    no_read = linear_attn.recurrent(sh | {"state_in": False}, dt).candidates[0].bytes_est
    assert full - no_read == 40 * 32 * 128 * 128 * 4
    bf16 = linear_attn.recurrent(sh | {"state_bytes": 2, "state_out_bytes": 2}, dt).candidates[0].bytes_est
    assert bf16 < full * 0.51


def test_mamba2_state_update_at_stage_a():
    """Mamba2's selective_state_update (no aten op, no Input Dims): heads x head_dim x d_state from
    config.json (Bamba-9B's dims, as tools/device/make_corpus.py builds it), the state in the cache's
    dtype (the model's bf16) updated in place, x / z / y per head, B / C per group."""
    from types import SimpleNamespace

    cfg = {"model_type": "bamba", "dtype": "bfloat16", "mamba_n_heads": 128, "mamba_d_head": 64,
           "mamba_d_state": 128, "mamba_n_groups": 1}
    s, assumed = {}, []
    e = SimpleNamespace(name="_selective_scan_update_kernel", raw={})
    need = recurrent.fill_stage_a(s, "recurrent", e, {"conc": 32}, cfg, "decode", assumed)
    assert all(k in s for k in need)
    assert (s["batch"], s["heads"], s["dv"], s["dk"], s["qk_heads"], s["variant"]) == (32, 128, 64, 128, 1, "ssm")
    assert s["state_bytes"] == s["state_out_bytes"] == 2 and s["z"] is True
    b = linear_attn.recurrent(s, {"act_bytes": 2, "out_bytes": 2}).candidates[0].bytes_est
    state = 32 * 128 * 64 * 128 * 2 * 2
    io = 32 * ((2 * 1 * 128 + 128 * 64 * 2) * 2 + 128 * 64 * 2 + 128 * 4)
    assert b == state + io
