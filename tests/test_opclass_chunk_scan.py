"""Op class "chunk_scan" (roofline/core/opclasses/chunk_scan.py) on the real Qwen3-Next corpus case
(flash-linear-attention 0.6.0, prefill of 2 x 1024 tokens, H200): the chain of Triton kernels of a
chunked gated delta rule, all launched inside one autograd Function call, each kernel's bytes by its
role, against ncu's DRAM bytes of the same step."""
from __future__ import annotations

import pytest

import hybrid_corpus as hc
from roofline.core.models import linear_attn
from roofline.core.opclasses.chunk_scan import role_of

CASE = "qwen3next_fla"
OUT, STATE = "chunk_fwd_kernel_o", "chunk_gated_delta_rule_fwd_kernel_h_blockdim64"
SOLVE, WY = "chunk_gated_delta_rule_fwd_kkt_solve_kernel", "recompute_w_u_fwd_kernel"


def test_every_kernel_of_the_chain_has_the_functions_shape_and_its_own_role():
    roles = {}
    for k in (OUT, STATE, SOLVE, WY, "chunk_local_cumsum_scalar_kernel"):
        e = hc.topn_entry(CASE, k)
        assert e["op_class"] == "chunk_scan" and set(e["aten_ops"]) == {"ChunkGatedDeltaRuleFunction"}
        assert e["shapes"][0] | {} == hc.topn_entry(CASE, OUT)["shapes"][0]   # one Function call, one shape
        roles[k] = role_of(k)
    assert roles == {OUT: "output", STATE: "state", SOLVE: "kkt_solve", WY: "wy", "chunk_local_cumsum_scalar_kernel": "cumsum"}
    sh = hc.topn_entry(CASE, OUT)["shapes"][0]
    assert (sh["batch"], sh["T"], sh["heads"], sh["dk"], sh["dv"], sh["state_in"]) == (2, 1024, 32, 128, 128, False)


@pytest.mark.parametrize("kernel", [OUT, STATE])
def test_the_big_kernels_within_15pct_of_ncu(kernel):
    v = hc.verdict(CASE, kernel, "prefill")
    assert v["modeled"] and not v.get("l2_resident")
    assert v["bytes_est"] == pytest.approx(hc.ncu_bytes(CASE, "prefill", kernel), rel=0.15)


def test_the_chain_intermediates_are_served_from_l2_and_said_so():
    """The kkt solve (25.7 MB of operands, ncu 2.8 MB of DRAM) moves less than half the L2 between
    kernels of one chain: no verdict; the WY kernel reads back the A the solve just wrote: said."""
    s = hc.verdict(CASE, SOLVE, "prefill")
    assert s["l2_resident"] and s["headroom_class"] == "unknown" and "L2-resident" in s["notes"]
    assert hc.ncu_bytes(CASE, "prefill", SOLVE) < 0.2 * s["bytes_est"]
    w = hc.verdict(CASE, WY, "prefill")
    a_bytes = 2 * 1024 * 32 * 64 * 2           # A [B, T, HV, 64] bf16
    assert f"reads back {a_bytes / 1e6:.3g} MB" in w["notes"]
    assert hc.ncu_bytes(CASE, "prefill", WY) < w["bytes_est"]


def test_model_factors():
    """The per-chunk states dominate the state and output kernels: one state of 32 x 128 x 128 per
    chunk of 64 tokens, in bf16 (h), plus the fp32 final state."""
    sh = hc.topn_entry(CASE, OUT)["shapes"][0]
    dt = {"act": "bf16", "act_bytes": 2, "out_bytes": 2}
    states = 2 * 16 * 32 * 128 * 128 * 2
    st = linear_attn.chunk(sh | {"role": "state"}, dt).candidates[0].bytes_est
    assert st - linear_attn.chunk(sh | {"role": "state", "chunk": 1024}, dt).candidates[0].bytes_est == pytest.approx(
        states - 2 * 1 * 32 * 128 * 128 * 2)
    assert linear_attn.chunk(sh | {"role": "state", "state_in": True, "state_bytes": 4}, dt).candidates[0].bytes_est \
        - st == 2 * 32 * 128 * 128 * 4
