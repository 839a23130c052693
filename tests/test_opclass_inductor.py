"""Op class "inductor" (torch.compile's Triton kernels) and the group-expanded-copy rule, on the real
compiled decode of the corpus (fixtures/corpus/llama_compile_decode: Llama-3-8B-shaped, 2 layers, H200,
torch.compile default mode): the fused repeat_kv kernel gets a byte model from its launching cpu_op's
arguments and bytes_necessary 0. Every expected figure is counted here from the trace's own cpu_op
(json), config.json and ncu_rows.json.gz, never from the tool's output."""
from __future__ import annotations

from math import prod

import pytest

from compiled_corpus import cli_artifact, config, entry, kernel_share, launching_op, ncu_bytes
from roofline.core import classify
from roofline.core.opclasses import gqa_copy, inductor
from roofline.ingest.trace_tables import OpSig, freeze

CASE = "llama_compile_decode"
ESZ = {"c10::BFloat16": 2, "float": 4, "long int": 8}


def _is_copy(name: str) -> bool:
    return name.startswith("triton_poi_fused__scaled_dot_product") and name.endswith("_5")


def _footprint(op: dict) -> float:
    """Bytes of the cpu_op's tensor arguments, each at its storage extent (dims, strides), at most numel."""
    a = op["args"]
    sc = [int(c) for c, t in zip(a["Concrete Inputs"], a["Input type"]) if t == "Scalar"]
    # a pointwise kernel's last scalar is xnumel; a reduction's last two are xnumel, r0_numel
    numel = sc[-1] * (sc[-2] if op["name"].startswith(("triton_red", "triton_per")) else 1)
    tot = 0
    for d, s, t in zip(a["Input Dims"], a["Input Strides"], a["Input type"]):
        if t == "Scalar":
            continue
        ext = 1 + sum((x - 1) * y for x, y in zip(d, s))
        tot += min(ext, numel) * ESZ[t]
    return tot


def test_the_classes_rules_on_real_names():
    assert classify.classify("triton_poi_fused__scaled_dot_product_cudnn_attention__to_copy__unsafe_view_add_"
                             "arange_bmm_cat_clone_cos_expand_le_mul_neg_5") == "inductor"
    assert classify.classify("triton_red_fused__to_copy_add_embedding_mean_mul_pow_rsqrt_0") == "inductor"
    assert classify.classify("triton_tem_fused_mm_3") == "inductor"


def test_the_compiled_repeat_kv_is_modelled_from_its_arguments_and_need_not_run():
    art = cli_artifact(CASE)
    k, op = launching_op(CASE, _is_copy)
    cfg = config(CASE)
    e = entry(art, _is_copy)
    assert e["op_kind"] == "inductor" and e["modeled"]
    # bytes: each argument once at its footprint (input [64, 8, 576, 128] + output [64, 32, 576, 128], bf16)
    want = _footprint(op)
    assert e["bytes_est"] == pytest.approx(want, rel=1e-9)
    dims = op["args"]["Input Dims"]
    assert want == 2 * (prod(dims[0]) + prod(dims[1]))
    # the peer's double count (output counted as an input too) is not what the tool says
    assert e["bytes_est"] < 0.6 * (2 * prod(dims[0]) + 2 * 2 * prod(dims[1]))
    # within +-15% of ncu's DRAM bytes for the same kernel (the launch of the same grid)
    meas = [b for b in ncu_bytes(CASE, "decode", lambda n: n.startswith("triton_poi_fused__scaled_dot_product"))
            if b > 1e8]
    assert meas and all(abs(e["bytes_est"] / b - 1) <= 0.15 for b in meas)
    # the group ratio from config.json: the output is the input with the KV heads repeated hq / hk times
    g = cfg["num_attention_heads"] // cfg["num_key_value_heads"]
    assert dims[1][1] == g * dims[0][1] == g * cfg["num_key_value_heads"]
    assert e["bytes_necessary"] == 0
    share = kernel_share(CASE, _is_copy)
    assert e["avoidable_gain_pct"] == pytest.approx(share, abs=0.01)
    lv = [x for x in e["levers_detail"] if x["kind"] == gqa_copy.KIND]
    assert lv and "enable_gqa" in lv[0]["text"]
    # the #1 by the larger gain is this copy (its whole share can go; tuning the others saves less)
    assert art["ranking_by_larger_gain"][0] == e["name"]


def test_a_gather_argument_counts_the_rows_the_numel_reaches():
    # the compiled embedding + RMSNorm of a decode step: the [128256, 4096] table is read for 64 tokens only
    k, op = launching_op(CASE, lambda n: n == "triton_red_fused__to_copy_add_embedding_mean_mul_pow_rsqrt_0")
    a = op["args"]
    sig = OpSig(op["name"], freeze(a["Input Dims"]), freeze(a["Input type"]), freeze(a["Concrete Inputs"]),
                freeze(a["Input Strides"]))
    shape, dt = inductor.trace_shape(sig)
    assert shape["numel"] == 64 * 4096 and shape["arg_bytes"] == _footprint(op)
    assert shape["arg_bytes"] < 2e6 < 2 * 128256 * 4096


def test_without_config_the_copy_has_no_verdict_and_a_wrong_ratio_none():
    from roofline.core.opclasses.base import NecessaryCtx
    shape = {"expand_src": "64x8x576x128", "expand_dst": "64x32x576x128", "expand_dim": 1, "expand_factor": 4}
    ctx = NecessaryCtx(config=None, workload={}, regime="decode", shapes=[shape], launches=None, steps=6,
                       trace_evidence={}, kernel="triton_poi_fused_clone_expand_5")
    n = gqa_copy.necessary(shape, {}, 3.8e8, ctx)
    assert n.bytes is None and "config.json" in n.missing
    ctx.config = {"num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128}   # ratio 2, not 4
    assert gqa_copy.necessary(shape, {}, 3.8e8, ctx) is None
    ctx.config = {"num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128}
    assert gqa_copy.necessary(shape, {}, 3.8e8, ctx).bytes == 0
