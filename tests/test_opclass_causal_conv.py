"""Op class "causal_conv" (roofline/core/opclasses/causal_conv.py) on the real Qwen3-Next corpus case
(transformers without the causal-conv1d package, H200): the reference path, nn.Conv1d depthwise
(aten::_conv_depthwise2d, `conv_depthwise2d_forward_kernel_generic`), its bytes against ncu's DRAM
bytes, and the lever naming the missing fast path with its evidence."""
from __future__ import annotations

import pytest

import hybrid_corpus as hc
from roofline.core import classify
from roofline.core.models import conv

CASE, KERNEL = "qwen3next_fla", "conv_depthwise2d_forward_kernel_generic"


def test_shape_from_the_depthwise_op():
    e = hc.topn_entry(CASE, KERNEL)
    cfg = hc.meta(CASE)["config"]
    assert e["op_class"] == "causal_conv" and "aten::_conv_depthwise2d" in e["aten_ops"]
    pre = next(s for s, r in zip(e["shapes"], e["shape_regimes"]) if r == "prefill")
    channels = 2 * cfg["linear_num_key_heads"] * cfg["linear_key_head_dim"] + \
        cfg["linear_num_value_heads"] * cfg["linear_value_head_dim"]
    # padding k - 1 on both sides: the kernel writes L + k - 1 outputs (transformers keeps the first L)
    assert pre == {"batch": 2, "channels": channels, "L_in": 1024, "k": cfg["linear_conv_kernel_dim"], "L_out": 1027}


def test_prefill_bytes_within_15pct_of_ncu():
    v = hc.verdict(CASE, KERNEL, "prefill")
    assert v["bytes_est"] == pytest.approx(hc.ncu_bytes(CASE, "prefill", KERNEL), rel=0.15)


def test_the_reference_path_lever_names_the_package_with_its_evidence():
    v = hc.verdict(CASE, KERNEL, "prefill")
    lv = v["other_levers"][0]
    assert lv.startswith("reference path:") and "causal-conv1d" in lv
    assert "aten::_conv_depthwise2d" in lv and "qwen3_next" in lv and KERNEL in lv
    # the package kernel itself gets no such lever
    from roofline.core.opclasses.causal_conv import reference_lever

    assert reference_lever({"name": "causal_conv1d_fwd_kernel", "shape": {"model_type": "qwen3_next"}}, []) is None
    assert reference_lever({"name": KERNEL, "shape": {"model_type": "llama"}}, []) is None


def test_names_classify():
    assert classify.classify("void causal_conv1d_fwd_kernel<Ktraits>(ConvParamsBase)") == "causal_conv"
    assert classify.classify("_causal_conv1d_update_kernel") == "causal_conv"


def test_model_factors():
    sh = {"batch": 2, "channels": 8192, "L_in": 1024, "k": 4, "L_out": 1027}
    dt = {"act_bytes": 2, "out_bytes": 2, "weight_bytes": 2}
    b = conv.model(sh, dt).candidates[0].bytes_est
    assert b == 2 * 8192 * (1024 + 1027) * 2 + 8192 * 5 * 2
    assert conv.model(sh | {"state_update": True}, dt).candidates[0].bytes_est - b == 2 * 8192 * 3 * 2 * 2
