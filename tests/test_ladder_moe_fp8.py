"""CPU: levels 11-14's routing, dispatch and re-run logic, and the stored H200 evidence read back
against independent counts (fixtures/ladder/grouped_fp8_h200/)."""
import json
import math
import statistics
from pathlib import Path

import numpy as np
import pytest

from roofline.ladder import dispatch, routing
from roofline.ladder.contracts import CONTRACTS
from roofline.ladder.registry import DENSE_LEVELS, LEVELS, VARIANTS, build_of_row, get_level

EV = Path(__file__).resolve().parent.parent / "fixtures" / "ladder" / "grouped_fp8_h200"
MOE = json.loads((EV / "start4_round2" / "bench_moe.json").read_text())
FP8 = json.loads((EV / "start4_round2" / "bench_fp8_all.json").read_text())


def test_routings_keep_the_pairs_and_are_seeded():
    c = routing.uniform_counts(512, 128, seed=3)
    assert sum(c) == 512 and len(c) == 128 and c == routing.uniform_counts(512, 128, seed=3)
    t = routing.topk_counts(64, 128, 8, seed=0)
    assert sum(t) == 64 * 8 and max(t) <= 64          # top_k DISTINCT experts per token
    assert routing.experts_hit([0, 3, 0, 1]) == 2
    names = dict(routing.edge_routings())
    assert 0 in names["zero and one-row experts"] and 1 in names["zero and one-row experts"]
    assert routing.experts_hit(names["all rows on one expert of 8"]) == 1
    with pytest.raises(ValueError):
        routing.topk_counts(4, 2, 3)


def test_registry_contracts_and_dense_list():
    assert {lv.contract for lv in LEVELS} <= set(CONTRACTS)
    assert [lv.id for lv in DENSE_LEVELS] == list(range(1, 11))
    assert get_level(12).contract == "grouped-bf16" and get_level(13).contract == "gemm-fp8"
    assert VARIANTS["l11_fp8"].contract == "grouped-fp8"


def test_grouped_class():
    assert dispatch.grouped_class(512, 125) == "grouped-decode"          # 4 rows per hit expert
    assert dispatch.grouped_class(64 * 128, 128) == "grouped-decode"     # exactly the limit
    assert dispatch.grouped_class(64 * 128 + 1, 128) == "grouped-prefill"
    assert dispatch.grouped_class(32768, 128) == "grouped-prefill"


def test_the_stored_moe_bench_reads_back_against_an_independent_count():
    rows = [r for r in MOE["rows"] if "t_ms_median" in r]
    peak = MOE["ceilings"]["hbm_peak_bytes_s"]
    assert peak == 4.8e12
    for r in rows:
        counts = routing.topk_counts(r["tokens"], r["E"], r["top_k"], seed=0)   # the stated routing, redrawn
        eb = 1 if r["dtype"] == "fp8" else 2
        hit = sum(1 for x in counts if x)
        assert (r["rows"], r["experts_hit"]) == (r["tokens"] * r["top_k"], hit)
        want = hit * r["N"] * r["K"] * eb + r["rows"] * r["K"] * eb + r["rows"] * r["N"] * 2
        assert r["bytes_min"] == want
        assert r["pct_hbm_peak"] == pytest.approx(100 * want / (r["t_ms_median"] * 1e-3) / peak)
    lib = None   # each group of level rows follows the library row it was timed beside
    for r in rows:
        if r["level"] == 0:
            lib = r
        else:
            assert (lib["case"], lib["dtype"], lib["layout"]) == (r["case"], r["dtype"], r["layout"])
            assert r["ratio_vs_lib"] == pytest.approx(lib["t_ms_median"] / r["t_ms_median"])


# the grouped table is built from three stored runs (`python -m roofline.rerun --build-grouped-dispatch
# A B C OUT`): round 2's every-build bench, round 3's decode re-time and its prefill bench at 4096 and
# 8192 tokens; a (case, build) timed in several keeps the latest
# ... and round 5's coverage bench (bench_moe_fp8.COVER_CASES: E 128-512, tokens 16-4096)
COVER5 = json.loads((EV / "start8_round5" / "bench_moe_cover.json").read_text())
MOE_RUNS = [MOE, json.loads((EV / "start5_round3" / "bench_moe.json").read_text()),
            json.loads((EV / "start5_round3" / "prefill" / "bench_moe.json").read_text()), COVER5]


def _decode_medians(runs, dtype):
    """By hand: per build name, the median % of the library over the grouped-decode cases (at most 64
    rows per hit expert), each (case, build) read from the latest run that timed it."""
    latest = {}
    for b in sorted(runs, key=lambda b: b["meta"]["time_utc"]):
        for r in b["rows"]:
            if r.get("dtype") == dtype and r["level"] and r.get("check_ok") and r["rows"] <= 64 * r["experts_hit"]:
                latest[(r["case"], r["name"])] = 100 * r["ratio_vs_lib"]
    per = {}
    for (_, n), v in latest.items():
        per.setdefault(n, []).append(v)
    return {n: (statistics.median(v), len(v)) for n, v in per.items()}


# round 8: the H100 benches of the held-out-like cases join the grouped tables' sources (dispatch_tables.SOURCES)
R8 = EV / "start13_round8_h100"
HELDOUT = [json.loads((R8 / "call2" / "bench_heldout_decode.json").read_text()),
           json.loads((R8 / "call1" / "bench_heldout_prefill.json").read_text())]


def test_shipped_grouped_and_fp8_tables_are_the_stored_benches():
    from roofline.ladder import dispatch_tables

    for c in ("grouped-bf16", "gemm-fp8", "grouped-fp8"):
        assert dispatch.default_dispatch_table(c) == dispatch_tables.build(c)
    # the grouped table is built from its sources as `python -m roofline.rerun --build-grouped-dispatch` builds it
    t = dispatch.build_grouped_table(dispatch.merge_benches(MOE_RUNS + HELDOUT))
    assert {k: v for k, v in dispatch.default_dispatch_table("grouped-bf16").items() if k not in ("sources", "devices")} == t
    # independent: the grouped-decode median of the ping-pong build of level 12 from the rows by hand
    med, n = _decode_medians(MOE_RUNS + HELDOUT, "bf16")[VARIANTS["l12_pingpong"].name]
    tbl = dispatch.default_dispatch_table("grouped-bf16")
    assert n == 9 + 16   # round 2-5's nine decode cases + round 8's sixteen (DeepSeek-V3 decode128 did not fit the H100)
    row = next(r for r in tbl["classes"]["grouped-decode"] if r.get("build") == "l12_pingpong")
    assert row == {"level": 12, "build": "l12_pingpong", "median_pct_cublas": med, "shapes_benched": n,
                   "within_noise_of_best": True}


def test_fp8_dispatch_and_its_geomean():
    t = dispatch.default_dispatch_table("gemm-fp8")
    assert dispatch.choose_level(t, 16, 4096, 4096, "fp8")[0] == 14
    assert dispatch.choose_level(t, 8192, 8192, 8192, "fp8")[0] == 13
    assert dispatch.choose_level(t, 8192, 8192, 8192, "bf16")[0] is None     # the fp8 table is fp8 only
    # what the dispatch runs per serving shape (the shipped lookup: a per-case pick, else its class's first row)
    seen, ran = set(), []
    for r in FP8["rows"]:
        key = (r["m"], r["n"], r["k"])
        if r["level"] and key not in seen and dispatch.choose_level(t, *key, "fp8")[0] == (
                build_of_row(r["level"], r["name"]) or r["level"]):
            seen.add(key)
            ran.append(r["ratio_vs_lib"])
    gm = math.exp(sum(map(math.log, ran)) / len(ran))
    assert len(ran) == 30 and gm >= 0.90                                # the serving target


def test_choose_grouped_level():
    t = dispatch.default_dispatch_table("grouped-bf16")
    lvl, why = dispatch.choose_grouped_level(t, 512, 125, 1536, 2048, "bf16")
    # round 8: level 11 and l12_pingpong within the band over 22-25 decode cases (H200 and H100): the simpler level
    assert lvl == 11 and "grouped-decode" in why and get_level(lvl).contract == "grouped-bf16"
    assert dispatch.choose_grouped_level(t, 512, 125, 1536, 2048, "fp8")[0] is None
    assert dispatch.choose_grouped_level(None, 512, 125, 1536, 2048, "bf16")[0] is None


def test_rerun_plan_dispatches_moe_and_fp8_heads():
    from roofline.stagec import rerun as rerun_run

    tables = rerun_run._tables(None)
    art = {"entries": [
        {"name": "gmm", "modeled": True, "op_class": "moe", "shape": {"pairs": 512, "E": 128, "N": 1536, "K": 2048},
         "dtypes": {"act": "bf16"}},
        {"name": "moe", "modeled": True, "op_class": "moe",
         "shape": {"M": 64, "E": 128, "top_k": 8, "hidden": 2048, "inter": 768}, "dtypes": {"act": "bf16"}},
        {"name": "f8", "modeled": True, "op_class": "gemm", "shape": {"M": 64, "N": 4096, "K": 4096},
         "dtypes": {"act": "fp8"}},
        {"name": "h", "modeled": True, "op_class": "gemm", "shape": {"M": 64, "N": 4096, "K": 4096},
         "dtypes": {"act": "fp16"}}]}
    work, skipped = rerun_run._plan(art, (), tables, "sm_90a", None)
    got = {e["name"]: (lvl, why) for e, _, lvl, why in work}
    assert got["gmm"][0] == "l12_pingpong" and "uniform_counts(rows=512, E=128, seed=0)" in got["gmm"][1]
    hit = routing.experts_hit(routing.uniform_counts(512, 128, 0))
    assert f"{hit} experts hit (model 125.7)" in got["gmm"][1]
    assert got["moe"][0] == "l12_pingpong" and "topk_counts(tokens=64, E=128, top_k=8, seed=0)" in got["moe"][1]
    assert got["f8"][0] == 14
    assert "h" in skipped and "fp16" in skipped["h"]


def test_l2_mode_counts_all_expert_weights():
    from roofline.core.opclasses import Problem
    from roofline.stagec.timing import l2_mode_for

    small = Problem("grouped", 64, 1536, 2048, "bf16", 1.0, E=1)
    big = Problem("grouped", 64, 1536, 2048, "bf16", 1.0, E=128)      # 805 MB of weights
    assert l2_mode_for([small], device="NVIDIA H200")[0] == "warm" and l2_mode_for([big], device="NVIDIA H200")[0] == "cold"
    assert l2_mode_for([small])[0] == "cold"      # no device, no L2 size: cold, said
    # the threshold is half the L2 of the device's peak table: operands of exactly that size stay warm
    import yaml

    from roofline.peaks import peaks_dir

    half = yaml.safe_load((peaks_dir() / "h200.yaml").read_text())["l2_bytes"] / 2
    K = 64
    N = (int(half) // 2 - 64 * K) // (K + 64)     # 2 x (64K + NK + 64N) <= half, the largest N
    at = Problem("dense", 64, N, K, "bf16", 1.0)
    over = Problem("dense", 64, N + 1, K, "bf16", 1.0)
    assert 2 * (64 * K + N * K + 64 * N) <= half < 2 * (64 * K + (N + 1) * K + 64 * (N + 1))
    assert l2_mode_for([at], device="NVIDIA H200")[0] == "warm"
    assert l2_mode_for([over], device="NVIDIA H200")[0] == "cold"


def test_e4m3_table():
    from roofline.ladder.gpu_moe_fp8 import E4M3
    assert (E4M3[0x38], E4M3[0x7E], E4M3[0x01], E4M3[0xB8]) == (1.0, 448.0, 2.0 ** -9, -1.0)
    assert np.isnan(E4M3[0x7F]) and np.isnan(E4M3[0xFF]) and np.isfinite(np.delete(E4M3, [0x7F, 0xFF])).all()


def test_prebuilt_cubin_names_follow_the_source():
    from roofline.ladder.build import source_key
    assert source_key(get_level(11)) != source_key(VARIANTS["l11_fp8"])
    assert source_key(get_level(11)).startswith("gemm_l11_")


def test_each_grouped_build_is_checked_and_launched_with_its_own_weight_layout():
    """Level 11's bf16 builds once 'failed' every check with an illegal instruction: the check handed
    the W [E, K, N] cases (a 3-D tensor map) to the 2-D builds and W [E, N, K] to l11_wkn. Each build
    now reads one layout; its cases use only that one, and the launcher refuses the other before
    touching the GPU."""
    from roofline.ladder import check, gpu_moe_fp8

    grouped = [lv for lv in (*LEVELS, *VARIANTS.values()) if lv.contract.startswith("grouped")]
    assert {gpu_moe_fp8.grouped_layout(lv) for lv in grouped} == {"enk", "ekn"}
    for lv in grouped:
        want = "ekn" if "L11_WKN=1" in lv.defines else "enk"
        assert {c[3] for c in check.grouped_cases(lv, 6, 0)} == {want}, lv.name
        other = "enk" if want == "ekn" else "ekn"

        class _A:   # never reached: the layout is refused before the operands are looked at
            shape = (1, 1)
        with pytest.raises(ValueError, match="reads W"):
            gpu_moe_fp8.launch_grouped(lv, _A(), None, None, None, 1, 1, 1, other)


def test_a_level_kernel_is_looked_up_once_per_process(monkeypatch):
    """Every launch used to re-read and hash the kernel sources (build.source_key) before finding
    its kernel: host time the event timer counted once it exceeded the 0.3 ms GPU spin."""
    from roofline.ladder import build

    calls = []
    monkeypatch.setattr(build, "_KERNELS", {})
    monkeypatch.setattr(build, "_find_kernel", lambda lv: calls.append(lv.name) or object())
    lv = get_level(12)
    k1, k2 = build.get_kernel(lv), build.get_kernel(lv)
    assert k1 is k2 and calls == [lv.name]
    build.get_kernel(VARIANTS["l11_fp8"])
    assert calls == [lv.name, "grouped_decode_fp8"]


def test_a_named_build_that_measured_best_is_what_the_dispatch_launches():
    """The dispatch keeps the best measured kernel, also when that is a named build of a level
    (a VARIANTS key in the row's "build"); within the noise band the level's own build stays first."""
    from roofline.stagec.rerun import _contract  # noqa: F401  (the re-run resolves rows through get_level)

    def rows(pp_ratio):
        base = {"rows": 32768, "experts_hit": 128, "dtype": "bf16", "layout": "enk", "check_ok": True}
        return {"rows": [{**base, "level": 12, "name": get_level(12).name, "ratio_vs_lib": 1.00},
                         {**base, "level": 12, "name": VARIANTS["l12_pingpong"].name, "ratio_vs_lib": pp_ratio}]}
    t = dispatch.build_grouped_table(rows(1.10))
    first = t["classes"]["grouped-prefill"][0]
    assert first["build"] == "l12_pingpong" and first["level"] == 12
    lvl, why = dispatch.choose_grouped_level(t, 32768, 128, 1536, 2048, "bf16")
    assert lvl == "l12_pingpong" and "build l12_pingpong" in why
    assert get_level(lvl) is VARIANTS["l12_pingpong"] and get_level("12") is get_level(12)
    t = dispatch.build_grouped_table(rows(1.02))   # inside the 3.4 % band: the level's own build
    assert "build" not in t["classes"]["grouped-prefill"][0]
    assert dispatch.choose_grouped_level(t, 32768, 128, 1536, 2048, "bf16")[0] == 12


def test_merged_benches_keep_each_build_of_a_level_apart():
    """merge_benches once keyed rows by (level, shape): the ping-pong build of level 13 overwrote
    level 13's own rows and the fp8 table lost its prefill default."""
    merged = dispatch.merge_benches([FP8])
    names = {(r["level"], r["name"]) for r in merged["rows"] if r["level"] == 13}
    assert names == {(13, get_level(13).name), (13, VARIANTS["l13_pingpong"].name)}
    per = {}
    for r in merged["rows"]:
        per[(r["level"], r["name"], r["m"], r["n"], r["k"])] = per.get((r["level"], r["name"], r["m"], r["n"], r["k"]), 0) + 1
    assert set(per.values()) == {1} and len(per) == 4 * 30   # lib + 3 builds x 30 distinct shapes


PREFILL5 = json.loads((EV / "start7_round5" / "bench_moe_prefill.json").read_text())
E512_6 = json.loads((EV / "start9_round6" / "call1" / "bench_moe_e512.json").read_text())


def test_grouped_fp8_heads_are_dispatched_from_their_own_table():
    """aten::_scaled_grouped_mm heads: the grouped-fp8 table (built from the stored decode benches and
    round 5's prefill bench, beside torch._scaled_grouped_mm) names level 11's fp8 build of one
    32-token chunk at decode and level 15's ping-pong 128x128 build at prefill; a prefill head of
    more experts than a build's plan holds (512 since round 6; the tile engine held 384 before) is not
    dispatched; the Qwen3-Next-sized prefill (E 512) goes to level 15's build, measured there in round 6."""
    from roofline.stagec import rerun as rerun_run

    runs = [MOE, MOE_RUNS[1], PREFILL5, COVER5] + HELDOUT
    assert dispatch.build_grouped_table(dispatch.merge_benches(runs), dtype="fp8") == \
        {k: v for k, v in dispatch.default_dispatch_table("grouped-fp8").items() if k not in ("sources", "devices")}
    t = dispatch.default_dispatch_table("grouped-fp8")
    dec = _decode_medians(runs, "fp8")
    best = max(dec, key=lambda n: dec[n][0])
    assert t["classes"]["grouped-decode"][0]["build"] == "l11_fp8_tn32" == build_of_row(11, best)
    art = {"entries": [
        {"name": "sgmm", "modeled": True, "op_class": "moe", "shape": {"pairs": 512, "E": 128, "N": 1536, "K": 2048},
         "dtypes": {"act": "fp8"}},
        {"name": "sgmm_prefill", "modeled": True, "op_class": "moe",
         "shape": {"pairs": 65536, "E": 128, "N": 1536, "K": 2048}, "dtypes": {"act": "fp8"}}]}
    work, skipped = rerun_run._plan(art, (), rerun_run._tables(None), "sm_90a", None)
    got = {e["name"]: (lvl, why, probs) for e, probs, lvl, why in work}
    assert got["sgmm"][0] == "l11_fp8_tn32" and rerun_run._contract(got["sgmm"][2][0]) == "grouped-fp8"
    assert get_level(got["sgmm"][0]).contract == "grouped-fp8"
    # prefill, by hand: the median over the six prefill cases of each fp8 build's ratio to torch
    pre = {}
    for r in PREFILL5["rows"] + HELDOUT[1]["rows"]:   # round 5's six prefill cases and round 8's six (H100)
        if r.get("dtype") == "fp8" and r["level"] and r["check_ok"]:
            pre.setdefault(r["name"], []).append(100 * r["ratio_vs_lib"])
    assert len(pre["grouped_fp8_prefill_pingpong_128x128"]) == 12
    best = max(pre, key=lambda n: statistics.median(pre[n]))
    row = t["classes"]["grouped-prefill"][0]
    assert row["build"] == "l15_pp_m128" == build_of_row(15, best)
    assert row["median_pct_cublas"] == pytest.approx(statistics.median(pre[best]))
    assert got["sgmm_prefill"][0] == "l15_pp_m128" and get_level("l15_pp_m128").contract == "grouped-fp8"
    assert rerun_run._contract(got["sgmm_prefill"][2][0]) == "grouped-fp8"
    art["entries"][1]["shape"]["E"] = 512   # Qwen3-Next-sized: both plans hold 512 since round 6
    work, skipped = rerun_run._plan(art, (), rerun_run._tables(None), "sm_90a", None)
    got = {e["name"]: (lvl, why) for e, probs, lvl, why in work}
    assert got["sgmm_prefill"][0] == "l15_pp_m128" and "among the builds" not in got["sgmm_prefill"][1]
    # ... and that pick was measured on E 512 (start9_round6): level 15's build beside torch and level 11's
    e512 = {(r["case"], r["name"]): r for r in E512_6["rows"]}
    for case in ("qwen3next-prefill4096-down", "qwen3next-prefill4096-gate_up"):
        pp, l11 = e512[(case, VARIANTS["l15_pp_m128"].name)], e512[(case, VARIANTS["l11_fp8_tn32"].name)]
        assert pp["check_ok"] and pp["E"] == 512 and pp["ratio_vs_lib"] > 1.1 > 0.5 > l11["ratio_vs_lib"]
    lvl, why = dispatch.choose_grouped_level(t, 65536, 512, 1536, 2048, "fp8", E=513)
    assert lvl is None and "holds 513 experts" in why
    assert dispatch.choose_grouped_level(t, 65536, 128, 1536, 2048, "fp8", E=384)[0] == "l15_pp_m128"


def test_level15_launch_operands(monkeypatch):
    """Level 15's builds go through the tile engine's grouped launcher: uint8 maps with 128-byte
    inner boxes of the build's unit tile (A: unit rows; W: unit columns over the E*N weight rows), the
    C map, K tiles of 128, the grid bound in units, the scales and offsets in the kernel's WsX slots."""
    from roofline.ladder import build, gpu, gpu_moe_fp8

    maps, launches = [], []

    class _Arr:
        def __init__(self, shape, ptr):
            self.shape, self.data = shape, type("D", (), {"ptr": ptr})()

    class _K:
        def __call__(self, grid, block, args, shared_mem):
            launches.append((grid, block, args, shared_mem))
    monkeypatch.setattr(gpu, "cupy", lambda: type("CP", (), {"int32": int, "zeros": None}))
    monkeypatch.setattr(gpu_moe_fp8, "_null", lambda: "null")
    monkeypatch.setattr(gpu_moe_fp8, "tensor_map_nd", lambda ptr, eb, dims, strides, box: maps.append((ptr, eb, dims, strides, box)) or f"map{ptr}")
    monkeypatch.setattr(gpu, "tensor_map", lambda ptr, m, n, ld, box: f"cmap{ptr}")
    monkeypatch.setattr(gpu, "sm_count", lambda: 132)
    monkeypatch.setattr(gpu, "_ws_buffers", lambda a, b: ("ws", "cnt"))
    monkeypatch.setattr(gpu_moe_fp8, "get_kernel", lambda lv: _K())
    R, E, N, K = 1000, 8, 1536, 2048
    sa, sw = _Arr((R,), 40), _Arr((E, N), 50)
    for key, unit in (("15", (128, 256)), ("l15_pp_m128", (128, 128))):
        maps.clear(); launches.clear()
        lv = get_level(key)
        gpu_moe_fp8.launch_grouped(lv, _Arr((R, K), 16), _Arr((E, N, K), 32), "offs", _Arr((R, N), 48), E, N, K, "enk", sa, sw)
        assert maps == [(16, 1, (K, R), (K,), (128, unit[0])), (32, 1, (K, E * N), (K,), (128, unit[1]))]
        (grid, block, args, smem), = launches
        assert grid == (min(132, (-(-R // unit[0]) + E) * (N // unit[1])), 1, 1) and block == (384, 1, 1)
        assert args[:8] == ("map16", "map32", "cmap48", args[3], R, N, K, 1) and args[10:12] == (1, K // 128)
        assert args[12] is sa and args[13] is sw and args[14:] == ("offs", E) and smem == lv.dyn_smem_bytes
    with pytest.raises(ValueError, match="sa \\[1000\\] and sw \\[8, 1536\\]"):
        gpu_moe_fp8.launch_grouped(lv, _Arr((R, K), 16), _Arr((E, N, K), 32), "offs", _Arr((R, N), 48), E, N, K, "enk", sa, None)
    with pytest.raises(ValueError, match="at most 512"):
        gpu_moe_fp8.launch_grouped(lv, _Arr((R, K), 16), _Arr((513, N, K), 32), "offs", _Arr((R, N), 48), 513, N, K, "enk", sa, sw)


def test_grouped_fp8_launchers_pair_the_fp8_build_with_torch_scaled_grouped_mm(monkeypatch):
    """The re-run's side-by-side launches of a grouped fp8 problem (timing.launchers, also what the
    counter run launches): e4m3 operands on the drawn routing, unit scales of [rows] and [E, N],
    the ladder build and torch._scaled_grouped_mm on the same memory."""
    from roofline.ladder import check, gpu, gpu_moe_fp8
    from roofline.core.opclasses import Problem
    from roofline.stagec import timing

    class _CP:
        float32, uint16 = "f32", "u16"

        @staticmethod
        def ones(shape, dtype):
            return ("ones", shape if isinstance(shape, tuple) else (shape,), dtype)

        @staticmethod
        def empty(shape, dtype):
            return ("empty", shape, dtype)
    calls = []
    monkeypatch.setattr(gpu, "cupy", lambda: _CP)
    monkeypatch.setattr(check, "grouped_operands", lambda counts, N, K, lay, seed, fp8=False:
                        calls.append(("operands", tuple(counts), N, K, lay, seed, fp8)) or ("A", "W", "offs"))
    monkeypatch.setattr(gpu_moe_fp8, "launch_grouped", lambda *a: calls.append(("ladder",) + a))
    monkeypatch.setattr(gpu_moe_fp8, "torch_scaled_grouped", lambda *a: calls.append(("library",) + a))
    p = Problem("grouped", 6, 256, 128, "fp8", 1.0, E=3)
    lv = VARIANTS["l11_fp8_tn32"]
    fns = timing.launchers("grouped-fp8", lv, p, seed=4, counts=[1, 0, 5])
    fns["ladder"](); fns["cublas"]()
    assert calls[0] == ("operands", (1, 0, 5), 256, 128, "enk", 5, True)
    lad, lib = calls[1], calls[2]
    assert lad[1] is lv and lad[2:5] == ("A", "W", "offs") and lad[6:10] == (3, 256, 128, "enk")
    assert lad[10] == ("ones", (6,), "f32") and lad[11] == ("ones", (3, 256), "f32")
    assert lib == ("library", "A", "W", "offs", ("ones", (6,), "f32"), ("ones", (3, 256), "f32"))
    assert timing.LIBRARY["grouped-fp8"] == "torch._scaled_grouped_mm"


def test_the_moe_bench_gives_the_pools_back_between_cases(monkeypatch):
    """The full-size DeepSeek-V3 case ran out of memory with 122 GB held by CuPy's pool across
    cases: release_device_memory frees CuPy's device and pinned pools and torch's cache."""
    from roofline.ladder import bench_moe_fp8, gpu

    calls = []

    class _Pool:
        def __init__(self, name, held):
            self.name, self.held = name, held

        def total_bytes(self):
            return self.held

        def free_all_blocks(self):
            calls.append(self.name)
            self.held = 0
    dev, pinned = _Pool("device", 122 << 30), _Pool("pinned", 1 << 20)
    monkeypatch.setattr(gpu, "cupy", lambda: type("CP", (), {"get_default_memory_pool": staticmethod(lambda: dev),
                                                             "get_default_pinned_memory_pool": staticmethod(lambda: pinned)}))
    cuda = type("C", (), {"is_available": staticmethod(lambda: True), "empty_cache": staticmethod(lambda: calls.append("torch"))})
    monkeypatch.setattr(gpu, "torch_or_none", lambda: type("T", (), {"cuda": cuda}))
    assert bench_moe_fp8.release_device_memory() == {"pool_bytes_before": 122 << 30, "pool_bytes_after": 0}
    assert calls == ["device", "pinned", "torch"]


def test_the_moe_bench_plan_covers_the_dispatched_classes():
    """Prefill cases time the tile-engine builds (levels 12, 15) and one level-11 build per dtype, in
    fp8 as well (round 5); the coverage cases span experts 8..512, inter 512..14336, tokens 16..8192."""
    from roofline.ladder import bench_moe_fp8

    plan = bench_moe_fp8.moe_plan([get_level(t) for t in ("15", "l15_pp_m128", "l12_fp8_pingpong", "l11_fp8_tn32", "12",
                                                          "l11_fp8", "l11_wkn")], "prefill")
    assert {c for c, _, _ in plan} == set(bench_moe_fp8.PREFILL_CASES) and len(plan) == 2 * len(bench_moe_fp8.PREFILL_CASES)
    fp8 = [b for _, b, f in plan if f][0]
    assert [x.name for x in fp8] == [get_level("15").name, VARIANTS["l15_pp_m128"].name, "grouped_fp8_pingpong",
                                     "grouped_decode_fp8_tn32"]
    # bf16: the ws build, then the first level-11 build that reads W [E, N, K] (l11_wkn reads [E, K, N]: apart)
    assert [x.name for x in [b for _, b, f in plan if not f][0]] == [get_level("12").name]
    cases = {**{k: bench_moe_fp8.MOE_CASES[k] for k in bench_moe_fp8.DECODE_CASES + bench_moe_fp8.PREFILL_CASES}, **bench_moe_fp8.COVER_CASES}
    Es = {c[0] for c in cases.values()}
    inters = {min(c[3], c[4]) for c in cases.values()}   # gate_up N = 2 inter; down K = inter
    tokens = {c[1] for c in cases.values()}
    assert min(Es) == 8 and max(Es) == 512 and min(tokens) == 16 and max(tokens) == 8192
    assert min(inters) == 512 and max(c[4] for c in cases.values()) == 14336


def test_the_moe_bench_times_the_ekn_build_on_its_own_layout(monkeypatch):
    """A build that reads W [E, K, N] (l11_wkn) is timed on that layout, on the bf16 decode cases only."""
    from roofline.ladder import bench, bench_moe_fp8

    calls = []
    monkeypatch.setattr(bench, "Timer", lambda: None)
    monkeypatch.setattr(bench_moe_fp8, "ceilings", lambda timer: {})
    monkeypatch.setattr(bench_moe_fp8, "meta", lambda what: {})
    monkeypatch.setattr(bench_moe_fp8, "grouped_case", lambda timer, case, lvs, ceil, layout="enk", fp8=False, min_reps=50:
                        calls.append((case, tuple(x.name for x in lvs), layout, fp8)) or [])
    bench_moe_fp8.bench_moe([get_level("11"), get_level("l11_wkn")], "all")
    ekn = [c for c in calls if c[2] == "ekn"]
    assert [c[0] for c in ekn] == list(bench_moe_fp8.DECODE_CASES) and {c[1] for c in ekn} == {("grouped_decode_wkn",)}
    assert all("grouped_decode_wkn" not in c[1] for c in calls if c[2] == "enk") and not any(c[3] for c in calls)


def test_one_verdict_for_every_contract():
    """check.verdict is the one comparison of the dense, fp8 and grouped checks: each factor of the
    rule fails a case on its own (an unwritten element, the norm, one element out of its band, a
    non-finite pattern, the library), on float64 arrays as the GPU check hands them over."""
    import numpy as np

    from roofline.ladder import check

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((64, 48)), rng.standard_normal((32, 48))
    ref, absref = a @ b.T, np.abs(a) @ np.abs(b).T
    out = ref * (1 + 2.0 ** -9)                        # a bf16-sized rounding everywhere: passes
    lv = get_level("13")
    ok = check.verdict(lv, "64x32x48", np, out, ref, absref, 0, 1e-3, False, shape=(64, 32, 48))
    assert ok.ok and ok.reason == "" and (ok.level, ok.name, ok.m) == (13, lv.name, 64) and ok.rel_err_ref < 1e-2
    one = out.copy()
    one[5, 7] = ref[5, 7] + 0.05 * abs(ref[5, 7]) + 1.0   # one element out of band, the norm still within
    r = check.verdict(lv, "c", np, one, ref, absref, 0, None, False)
    assert not r.ok and r.bad_elements == 1 and r.reason == "1 elements outside tolerance" and r.rel_err_ref < 1e-2
    assert check.verdict(lv, "c", np, out, ref, absref, 3, None, False).reason == "3 elements unwritten"
    assert "rel err" in check.verdict(lv, "c", np, out * 1.05, ref, absref, 0, None, False).reason
    nan_ref = ref.copy()
    nan_ref[0, 0] = np.nan                             # the reference has a NaN the output lacks
    assert check.verdict(lv, "c", np, out, nan_ref, absref, 0, None, True).reason == "1 non-finite mismatches"
    lib = check.verdict(lv, "c", np, out, ref, absref, 0, 0.02, False)
    assert not lib.ok and lib.reason == "rel err vs library 0.02 > 0.01"
    # the fp8 band is wider per element: the same out-of-band element passes it
    assert check.verdict(lv, "c", np, one, ref, absref, 0, None, False, check.FP8_REL_TOL, 1.0).ok


def test_a_bench_times_only_the_builds_that_pass_their_check(monkeypatch):
    """fp8_shape (and grouped_case, through the same helper): the library row, then per build its
    check on the case; a failing build and one whose launcher refuses the case are recorded, not
    timed; a passing one is timed with its ratio to the library (medians, and p20/p80 crossed)."""
    from types import SimpleNamespace

    from roofline.ladder import bench, bench_moe_fp8, check, gpu, gpu_moe_fp8

    cp = SimpleNamespace(ones=lambda n, dtype=None: "ones", empty=lambda s, dtype=None: "c", float32="f32", uint16="u16")
    monkeypatch.setattr(gpu, "cupy", lambda: cp)
    monkeypatch.setattr(gpu_moe_fp8, "random_fp8", lambda shape, seed: "op")
    monkeypatch.setattr(bench_moe_fp8, "release_device_memory", lambda: {"pool_bytes_after": 0})
    times = {"lib": (2.0, 1.8, 2.4), "fp8": (1.0, 0.9, 1.2)}
    launched = []
    monkeypatch.setattr(gpu_moe_fp8, "torch_scaled", lambda *a: launched.append("lib"))
    monkeypatch.setattr(gpu_moe_fp8, "launch_fp8", lambda lv, *a: launched.append(lv.name))

    def timed(timer, fn, min_reps):
        fn()
        med, p20, p80 = times[launched[-1]]
        return {"t_ms_median": med, "t_ms_p20": p20, "t_ms_p80": p80}
    monkeypatch.setattr(bench, "timed", timed)

    def chk(lv, m, n, k, seed):
        if lv.id == 14:
            raise ValueError("no plan")
        return SimpleNamespace(ok=lv.name == "fp8", rel_err_ref=1e-3, reason="" if lv.name == "fp8" else "rel err 0.5 > 0.01")
    monkeypatch.setattr(check, "check_fp8", chk)
    rows = bench_moe_fp8.fp8_shape(None, (256, 512, 1024), [get_level(13), VARIANTS["l13_pingpong"], get_level(14)])
    assert launched == ["lib", "fp8"]
    lib, ok, bad, refused = rows
    assert lib["name"] == "torch._scaled_mm" and ok["ratio_vs_lib"] == 2.0 and ok["ratio_range"] == [1.8 / 1.2, 2.4 / 0.9]
    assert not bad["check_ok"] and "t_ms_median" not in bad and bad["check_reason"] == "rel err 0.5 > 0.01"
    assert not refused["check_ok"] and refused["check_reason"] == "refused: no plan" and "t_ms_median" not in refused
