"""The section-3 procedure: head scoping, units, bound type, no-verdict cases, degradation ladder,
routing rows and levers. H200 peaks: 4.8e12 B/s pin rate, bf16 roof = the measured figure of
peaks/h200.yaml (read from the table: one source of truth)."""
import pytest

from roofline import api
from roofline.core import analysis, routing
from roofline.peaks import resolve
from roofline.io.schema import validate_artifact

from conftest import entry, h200_env, topn

PBW = 4.8e12
PBF16 = resolve("NVIDIA H200", "sm_90").flops["bf16"]


def run(*entries, env=None, config=None, **kw):
    art = api.analyze(topn(*entries), env or h200_env(), config, **kw)
    if not kw.get("as_dataframe"):
        validate_artifact(art)  # every artifact a test makes must satisfy the schema
    return art


def gemm_entry(name, pct, M, N, K, bw_frac=None, t_ms=None, **kw):
    """A captured-shape GEMM whose latency puts it at bw_frac of the memory roof."""
    nbytes = 2 * (M * K + K * N + M * N)
    if t_ms is None:
        t_ms = nbytes / (bw_frac * PBW) * 1e3
    return entry(name, pct, t_ms, shapes=[{"M": M, "N": N, "K": K}], classification="gemm", **kw)


def E(art, name):
    return next(e for e in art["entries"] if e["name"] == name)


def test_head_scoping_threshold_and_cap_skipped_are_absent_not_degraded():
    # 12 entries above the 5% threshold, shares summing to under 100% (8.0% down to 5.25%)
    ents = [gemm_entry(f"g{i}", 8.0 - 0.25 * i, 64, 4096, 4096, 0.5) for i in range(12)] + [gemm_entry("tiny", 1.0, 64, 64, 64, 0.5)]
    a = run(*ents)
    names = [e["name"] for e in a["entries"]]
    assert names == [f"g{i}" for i in range(8)]          # biggest first, capped at 8
    assert a["degraded"] == []
    assert a["skipped"]["below_threshold"] == 1 and a["skipped"]["over_cap"] == [f"g{i}" for i in range(8, 12)]
    a2 = run(*ents, head_threshold_pct=7.0, head_cap=3)
    assert [e["name"] for e in a2["entries"]] == ["g0", "g1", "g2"]


def test_gemm_decode_memory_bound_underperforming_numbers():
    a = run(gemm_entry("g", 30.0, 64, 4096, 4096, bw_frac=0.3))
    g = E(a, "g")
    assert g["hbm_util"] == pytest.approx(0.3)
    assert g["roof_axis"] == "memory" and g["bound_type"] == "latency"  # both utils < 0.6
    assert g["arithmetic_intensity"] == pytest.approx(2 * 64 * 4096 * 4096 / (2 * (64 * 4096 * 2 + 4096 * 4096)))
    assert g["ridge_point"] == pytest.approx(PBF16 / PBW)
    assert g["headroom_class"] == "underperforming"          # 0.3 < 0.6 x 0.9
    assert g["attainable_speedup"] == pytest.approx(3.0)
    assert g["expected_e2e_gain_pct"] == pytest.approx(20.0)
    assert g["route"] == "kernel_track_latency"
    assert g["confidence"] == "medium" and a["stage"] == "B"


def test_bound_type_memory_when_hbm_util_high_and_bands():
    # config.json's hidden_size 4096: B [4096, 4096] is a weight (the lower-precision lever's evidence)
    a = run(gemm_entry("sat", 30, 64, 4096, 4096, 0.85), gemm_entry("mod", 20, 64, 4096, 4096, 0.65),
            gemm_entry("und", 10, 64, 4096, 4096, 0.62 * 0.6 * 0.9 / 0.62 - 0.01), config={"hidden_size": 4096})
    assert E(a, "sat")["bound_type"] == "memory" and E(a, "sat")["headroom_class"] == "saturated"
    assert E(a, "sat")["route"] == "byte_reduction" and E(a, "sat")["byte_reduction_levers"]
    assert E(a, "mod")["headroom_class"] == "moderate" and E(a, "mod")["route"] == "kernel_track_moderate"
    assert E(a, "und")["headroom_class"] == "underperforming"


def test_compute_bound_prefill_gemm_uses_the_measured_bf16_roof():
    M = N = K = 8192
    flops = 2 * M * N * K
    t_ms = flops / (0.8 * PBF16) * 1e3
    a = run(entry("big", 40.0, t_ms, shapes=[{"M": M, "N": N, "K": K}], classification="gemm"))
    g = E(a, "big")
    assert g["roof_axis"] == "compute" and g["bound_type"] == "compute"
    assert g["roofline_pct"] == pytest.approx(0.8)
    assert g["headroom_class"] == "moderate"      # 0.8 < 0.9 x 0.9
    assert g["confidence"] == "medium"


def test_dispatch_bound_gets_no_verdict():
    a = run(entry("tiny_add", 12.0, 0.003, shapes=[{"elems_in": 4096}], classification="elementwise"))
    t = E(a, "tiny_add")
    assert t["dispatch_bound"] and t["bound_type"] == "latency" and t["headroom_class"] == "unknown"
    assert t["route"] == "fusion_or_graph" and t["attainable_speedup"] is None


def test_infeasible_ratio_is_l3_suspect_never_saturated():
    a = run(gemm_entry("fast", 30, 64, 4096, 4096, bw_frac=1.3))
    g = E(a, "fast")
    assert g["suspect"] and g["headroom_class"] == "unknown" and g["stage_c_candidate"]
    assert g["roofline_pct"] == 1.0 and g["roofline_pct_raw"] == pytest.approx(1.3)
    assert g["bytes_upper_bound"] == pytest.approx(PBW * g["t_ms"] / 1e3)
    assert g["route"] == "pct_fallback"
    low = run(gemm_entry("slow", 30, 64, 64, 64, bw_frac=0.0005))
    assert E(low, "slow")["suspect"] and E(low, "slow")["headroom_class"] == "unknown"


def test_l2_unmodelable_and_comm_degrade_only_that_entry():
    a = run(gemm_entry("g", 30, 64, 4096, 4096, 0.5), entry("mystery_kernel_xyz", 20, 1.0),
            entry("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 10, 1.0))
    assert {d["name"] for d in a["degraded"]} == {"mystery_kernel_xyz", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"}
    m = E(a, "mystery_kernel_xyz")
    assert m["modeled"] is False and m["headroom_class"] == "unknown" and m["op_class"] == "unknown"
    assert E(a, "g")["modeled"] is True
    assert a["skill_errors"] == []


def test_missing_shape_degrades_with_reason():
    a = run(entry("gemm_no_nk", 30, 1.0, classification="gemm", est_shape={"M": 64}))
    d = a["degraded"][0]
    assert d["name"] == "gemm_no_nk" and "gemm shape is missing N, K" in d["reason"]


def test_impossible_values_degrade():
    a = run(entry("neg", 30, -0.5, classification="gemm"), gemm_entry("ok", 20, 64, 4096, 4096, 0.5))
    lat = "expected a launch time of 1 ns to 11.6 days (1e-06..1e+09 ms), got"
    assert a["degraded"] == [{"name": "neg", "reason": f"entries[0].regimes.decode.base_latency_ms: {lat} -0.5"}]
    assert E(a, "ok")["modeled"]
    b = run(entry("big", 150, 1.0), entry("nan_pct", float("nan"), 1.0), entry("inf_t", 7, float("inf")),
            entry("neg_pct", -3, 1.0))
    share = "expected a share of GPU time in 0..100 (%), got"
    assert b["degraded"] == [{"name": "nan_pct", "reason": f"entries[1].pct_gpu_time: {share} NaN"},
                             {"name": "neg_pct", "reason": f"entries[3].pct_gpu_time: {share} -3"},
                             {"name": "big", "reason": f"entries[0].pct_gpu_time: {share} 150"},
                             {"name": "inf_t", "reason": f"entries[2].regimes.decode.base_latency_ms: {lat} Infinity"}]
    assert E(b, "big")["pct_gpu_time"] == 150 and E(b, "big")["headroom_class"] == "unknown"   # copied verbatim


def test_l5_a_model_that_raises_degrades_its_entry_and_lands_in_skill_errors(monkeypatch):
    from roofline.core.opclasses import jobs

    def boom(shape, dt):
        raise ZeroDivisionError("bad model")

    monkeypatch.setitem(jobs._TABLE["model"], "norm", (boom, {}))
    a = run(entry("rms_norm_kernel", 30, 0.05, shapes=[{"elems_in": 1 << 20}]), gemm_entry("g", 20, 64, 4096, 4096, 0.5))
    assert a["skill_errors"][0]["error"] == "ZeroDivisionError: bad model"
    assert a["degraded"][0]["reason"] == "internal error: ZeroDivisionError: bad model"
    assert E(a, "g")["modeled"]


def test_l1_unknown_device_with_props_is_low_confidence_display_only():
    env = h200_env(gfx="sm_120", gpu_name="Some Future GPU")
    a = run(gemm_entry("g", 30, 64, 4096, 4096, 0.3), env=env, device_props={"hbm_bw_bytes_s": 4.8e12,
                                                                            "flops": {"bf16": 5e14}})
    assert a["peaks"]["source"] == "derived" and a["peaks"]["confidence"] == "low"
    g = E(a, "g")
    assert g["confidence"] == "low" and g["headroom_class"] == "unknown" and g["provisional_headroom_class"]


def test_regime_follows_the_time_and_each_regime_gains_on_its_own_share():
    e = gemm_entry("g", 30, 64, 4096, 4096, 0.5)
    t_dec = e["regimes"]["decode"]["base_latency_ms"]
    e["regimes"]["prefill"] = {"base_latency_ms": 2.0, "launches_per_step": 10}
    # 1000 decode steps x 1 launch x t_dec (~14 us) vs 10 prefill steps x 10 x 2 ms: decode launches
    # more often (1000 vs 100), prefill holds the time (200 ms vs ~14 ms)
    a = run(e)
    g = E(a, "g")
    dec_ms, pre_ms = 1000 * 1 * t_dec, 10 * 10 * 2.0
    assert g["regime"] == "prefill"
    assert g["regime_pct_gpu_time"] == pytest.approx(30 * pre_ms / (pre_ms + dec_ms))
    v = {x["regime"]: x for x in g["regime_verdicts"]}
    assert list(v) == ["prefill", "decode"]
    assert v["decode"]["regime_pct_gpu_time"] == pytest.approx(30 * dec_ms / (pre_ms + dec_ms))
    # the decode verdict is on the decode launch (64x4096x4096 at half the memory roof), its gain on
    # the decode share only: never the kernel's 30%
    assert v["decode"]["t_ms"] == t_dec and v["decode"]["hbm_util"] == pytest.approx(0.5, rel=1e-6)
    assert v["decode"]["expected_e2e_gain_pct"] == pytest.approx(
        v["decode"]["regime_pct_gpu_time"] * (1 - 1 / v["decode"]["attainable_speedup"]))
    assert v["decode"]["expected_e2e_gain_pct"] < v["decode"]["regime_pct_gpu_time"] < 0.1 * 30
    t = topn(e)
    t["serving"] = {"n_decode_steps": 100000, "n_prefill_steps": 10}
    g2 = E(api.analyze(t, h200_env()), "g")
    assert g2["regime"] == "decode" and g2["regime_verdicts"][1]["regime"] == "prefill"


def test_per_logical_op_unit_sums_the_launches():
    e1 = gemm_entry("g", 30, 64, 4096, 4096, t_ms=0.02)
    e2 = gemm_entry("g", 30, 64, 4096, 4096, t_ms=0.01, launches_per_logical_op=2)
    u1, u2 = E(run(e1), "g"), E(run(e2), "g")
    assert u1["hbm_util"] == pytest.approx(u2["hbm_util"])
    assert "one logical op = 2 launch(es)" in u2["notes"]


def test_shippability_gate_routes_non_editable_to_host_side():
    a = run(gemm_entry("nvjet_tst_128x64", 30, 64, 4096, 4096, 0.3, editable=False))
    assert E(a, "nvjet_tst_128x64")["route"] == "host_side"


@pytest.mark.parametrize("hc,bt,pct,conf,editable,expected", [
    ("underperforming", "memory", 20, "medium", True, "kernel_track_top"),
    ("underperforming", "compute", 20, "high", True, "kernel_track_top"),
    ("underperforming", "latency", 20, "medium", True, "kernel_track_latency"),
    ("saturated", "memory", 20, "medium", True, "byte_reduction"),
    ("saturated", "latency", 20, "medium", True, "fewer_bytes_or_fusion"),
    ("saturated", "compute", 20, "medium", True, "fewer_flops"),
    ("moderate", "memory", 20, "medium", True, "kernel_track_moderate"),
    ("underperforming", "memory", 2, "medium", True, "low_priority"),
    ("unknown", "memory", 20, "medium", True, "pct_fallback"),
    ("saturated", "memory", 20, "low", True, "pct_fallback"),
    ("underperforming", "memory", 20, "medium", False, "host_side"),
])
def test_routing_table_rows(hc, bt, pct, conf, editable, expected):
    assert routing.route({"headroom_class": hc, "bound_type": bt, "pct_gpu_time": pct, "confidence": conf,
                          "editable": editable}) == expected


def test_saturated_levers_fuse_only_producers_and_consumers_and_lower_precision():
    # rms_norm writes the tensor the GEMM reads (its producer), silu reads the GEMM's output (its
    # consumer), both launched next to it (Top-N dataflow); rope runs elsewhere: a fusion lever names
    # the first two only, each with its evidence
    sat = gemm_entry("sat", 30, 64, 4096, 4096, 0.85)
    sat["dataflow"] = {"producers": {"rms_norm_kernel": 10}, "consumers": {"silu_and_mul_kernel": 10},
                       "examples": {"rms_norm_kernel": "aten::mul writes [64,4096], read next by aten::mm"}}
    cfg = {"hidden_size": 4096}       # B [4096, 4096] = a weight of config.json's dims
    a = run(sat,
            entry("rms_norm_kernel", 3.0, 0.01, shapes=[{"elems_in": 4096}]),
            entry("silu_and_mul_kernel", 2.0, 0.01, shapes=[{"elems_in": 4096}]),
            entry("rotary_embedding_kernel", 4.0, 0.01, shapes=[{"elems_in": 4096}]), config=cfg)
    lv = E(a, "sat")["byte_reduction_levers"]
    assert any(x.startswith("fuse rms_norm_kernel (norm, 3.00% GPU)") for x in lv)
    assert any(x.startswith("fuse silu_and_mul_kernel (elementwise, 2.00% GPU)") for x in lv)
    assert not any("rotary" in x for x in lv)
    assert any("lower-precision weights (bf16 -> fp8)" in x and "accuracy gate" in x for x in lv)
    # its saving from the model's bytes: half of B (4096 x 4096 x 2 bytes) of A + B + C per launch
    pw = next(d for d in E(a, "sat")["levers_detail"] if d["kind"] == "lower_precision_weights")
    moved = 2 * (64 * 4096 + 4096 * 4096 + 64 * 4096)
    assert f"saves {4096 * 4096 / 1e6:.1f} MB of the {moved / 1e6:.1f} MB" in pw["text"]
    assert pw["saves_pct"] == pytest.approx(30 * 4096 * 4096 / moved)
    assert "K = hidden_size, N = hidden_size (config.json)" in pw["evidence"]
    # no config.json: nothing says B is a weight; no precision lever, and the notes say what is missing
    bare = E(run(gemm_entry("sat", 30, 64, 4096, 4096, 0.85)), "sat")
    assert not any(d["kind"].startswith("lower_precision") for d in bare["levers_detail"])
    assert "no lower-precision lever: the origin of its operands is unknown" in bare["notes"]
    assert "no config.json to match it against the model's weight dims" in bare["notes"]
    det = {d["text"].split(" (")[0]: d for d in E(a, "sat")["levers_detail"] if d["kind"] == "fusion"}
    assert det["fuse rms_norm_kernel"]["evidence"].startswith("producer of the same tensor: aten::mul writes")
    assert det["fuse silu_and_mul_kernel"]["evidence"].startswith("consumer of the same tensor")
    assert len(a["entries"]) == 1   # the fusion candidates are below the head, so absent
    # launch adjacency alone (launch_neighbours, no dataflow) is no evidence: no kernel is named
    sat.pop("dataflow")
    sat["launch_neighbours"] = {"before": {"rms_norm_kernel": 10}, "after": {"silu_and_mul_kernel": 10}}
    lv2 = E(run(sat, entry("rms_norm_kernel", 3.0, 0.01, shapes=[{"elems_in": 4096}])), "sat")["byte_reduction_levers"]
    assert not any(x.startswith("fuse ") for x in lv2)


def test_rankings_side_by_side():
    a = run(gemm_entry("big_sat", 40, 64, 4096, 4096, 0.85), gemm_entry("small_under", 10, 64, 4096, 4096, 0.2))
    assert a["ranking_by_pct"] == ["big_sat", "small_under"]
    assert a["ranking_by_expected_gain"] == ["small_under", "big_sat"]


def test_unvalidated_bf16_peak_makes_compute_axis_low_confidence(tmp_path):
    import yaml

    data = yaml.safe_load(open(resolve("NVIDIA H200").table_file))
    data["flops"]["fp16"]["measured"]["value"] = 0.5 * data["flops"]["bf16"]["measured"]["value"]
    pf = tmp_path / "bad.yaml"
    pf.write_text(yaml.safe_dump(data))
    M = N = K = 8192
    t_ms = 2 * M * N * K / (0.8 * PBF16) * 1e3
    a = run(entry("big", 40.0, t_ms, shapes=[{"M": M, "N": N, "K": K}], classification="gemm"), peaks_file=pf)
    g = E(a, "big")
    assert a["peaks"]["compute_unusable_dtypes"] == ["bf16", "fp16"]
    assert g["confidence"] == "low" and g["headroom_class"] == "unknown"
    assert "not validated" in g["notes"]


def test_dataframe_api():
    df = run(gemm_entry("g", 30, 64, 4096, 4096, 0.5), as_dataframe=True)
    assert list(df["name"]) == ["g"] and df.loc[0, "hbm_util"] == pytest.approx(0.5)


def test_bound_type_is_closed_set_in_all_outputs():
    a = run(gemm_entry("a", 30, 64, 4096, 4096, 0.5), entry("b", 20, 1.0), entry("c", 10, 0.001, shapes=[{"elems_in": 8}]))
    assert {e["bound_type"] for e in a["entries"]} <= set(analysis.BOUND_TYPES)


def test_prefill_flash_attention_is_compute_side():
    e = entry("flash_fwd_kernel", 30, 0.5, classification="attn",
              shapes=[{"batch": 4, "seq_len": 2048, "n_q_heads": 32, "n_kv_heads": 8, "head_dim": 128, "causal": True}])
    e["regimes"] = {"prefill": {"base_latency_ms": 0.5, "launches_per_step": 32}}
    a = run(e)
    f = E(a, "flash_fwd_kernel")
    flops = 4 * 4 * 32 * 2048 * 2048 * 128 * 0.5
    assert f["regime"] == "prefill" and f["flops_est"] == flops and f["target_eff"] == 0.7
    assert f["roof_axis"] == "compute" and f["compute_util"] == pytest.approx(flops / 0.5e-3 / PBF16)


def test_stage_a_fills_from_config_and_says_so(example_config):
    e = entry("norm", 30, 0.01, classification="norm")
    a = run(e, config=example_config["text_config"])
    n = E(a, "norm")
    assert n["bytes_est"] == 64 * 2048 * 2 * 2
    assert "elems_in=131072 (conc tokens x hidden_size" in n["notes"] and n["confidence"] == "low"


def test_captured_shapes_of_the_other_regime_are_not_mixed_in():
    e = entry("norm_k", 30, 0.01, classification="norm",
              shapes=[{"elems_in": 1000, "elems_out": 1000}, {"elems_in": 9000, "elems_out": 9000},
                      {"elems_in": 3000, "elems_out": 3000}],
              shape_regimes=["decode", "prefill", "decode"], shape_launches=[30, 5, 10])
    e["regimes"]["prefill"] = {"base_latency_ms": 0.02, "launches_per_step": 1}
    n = E(run(e), "norm_k")
    assert n["regime"] == "decode"
    # decode shapes only, weighted 30:10 -> 1500 elems in and out, bf16
    assert n["bytes_est"] == pytest.approx((30 * 1000 + 10 * 3000) / 40 * 4)


def test_a_single_regime_kernel_keeps_its_whole_share_and_says_when_the_window_disagrees():
    """pct_gpu_time is the measured primary key (issue 34 item 2): its 1000 steps x 1 launch x t over
    100 ms are less than its 30%, yet the gain is on the whole 30%, and the notes say the two disagree."""
    e = gemm_entry("g", 30, 64, 4096, 4096, 0.3)
    t_ms = e["regimes"]["decode"]["base_latency_ms"]
    t = topn(e, total_gpu_time_ms=100.0)
    g = E(api.analyze(t, h200_env()), "g")
    derived = 100.0 * 1000 * t_ms / 100.0
    assert abs(derived - 30) > 0.05 * 30
    assert g["regime_pct_gpu_time"] == 30
    assert g["expected_e2e_gain_pct"] == pytest.approx(30 * (1 - 1 / g["attainable_speedup"]))
    assert f"account for {derived:.3g}% of the window's 100 ms" in g["notes"]