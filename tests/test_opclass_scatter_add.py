"""Op class "scatter_add" (roofline/core/opclasses/scatter_add.py) on the real fp8 MoE corpus case
(torch._scaled_grouped_mm experts, the rows scattered back with index_add_, H200): PyTorch's
indexFuncLargeIndex, its bytes against ncu's DRAM bytes (issue 32: the streaming model counted an
output the size of the source, +57%)."""
from __future__ import annotations

import pytest

import hybrid_corpus as hc
from roofline.core import classify
from roofline.core.models import scatter

CASE, KERNEL = "qwen3moe_fp8_grouped", "indexFuncLargeIndex"


def test_shape_from_index_add():
    e = hc.topn_entry(CASE, KERNEL)
    cfg = hc.meta(CASE)["config"]
    m = hc.meta(CASE)["prefill"]
    assert e["op_class"] == "scatter_add" and "aten::index_add_" in e["aten_ops"]
    pre = next(s for s, r in zip(e["shapes"], e["shape_regimes"]) if r == "prefill")
    tokens = m["batch"] * m["tokens_per_seq"]
    assert pre == {"src_rows": tokens * cfg["num_experts_per_tok"], "dst_rows": tokens,
                   "row_elems": cfg["hidden_size"], "index_bytes": 8}


def test_bytes_within_15pct_of_ncu():
    v = hc.verdict(CASE, KERNEL, "prefill")
    measured = hc.ncu_bytes(CASE, "prefill", KERNEL)
    assert v["bytes_est"] == pytest.approx(measured, rel=0.15)
    # the streaming model (output the size of the source) was far off: more than +50%
    e = hc.topn_entry(CASE, KERNEL)
    pre = next(s for s, r in zip(e["shapes"], e["shape_regimes"]) if r == "prefill")
    stream = (pre["src_rows"] * pre["row_elems"] + pre["src_rows"]) * 2 + pre["src_rows"] * pre["row_elems"] * 2
    assert stream / measured > 1.5


def test_the_target_is_below_the_streams_and_decode_is_l2_resident():
    v = hc.verdict(CASE, KERNEL, "prefill")
    assert v["target_eff"] == 0.60 < 0.85
    d = hc.verdict(CASE, KERNEL, "decode")
    assert d["l2_resident"] and d["headroom_class"] == "unknown"
    assert hc.ncu_bytes(CASE, "decode", KERNEL) < 0.05 * d["bytes_est"]


def test_underperforming_with_the_per_row_sum_lever():
    v = hc.verdict(CASE, KERNEL, "prefill")
    assert v["headroom_class"] == "underperforming"          # ncu: 6.4% of the HBM roof
    assert any(lv.startswith("sum per destination row") and "receives 8 source rows" in lv for lv in v["other_levers"])


def test_names_classify():
    assert classify.classify("void at::native::indexFuncSmallIndex<float, long, unsigned int, 2, 2, -2>(...)") \
        == "scatter_add"
    assert classify.classify("k", hint="aten::index_add_") == "scatter_add"


def test_model_factors():
    sh = {"src_rows": 20480, "dst_rows": 2560, "row_elems": 2048, "index_bytes": 8}
    dt = {"act_bytes": 2, "out_bytes": 2}
    b = scatter.model(sh, dt).candidates[0].bytes_est
    assert b == 20480 * 2048 * 2 + 20480 * 8 + 2 * 2560 * 2048 * 2
