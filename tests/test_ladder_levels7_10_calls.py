"""CPU-only: levels 7-10 (registry, split-K plan, sources) and their stored H200 results
(numbers from the two device calls of 2026-12-01, `ladder/device.sh`)."""
import json
import math
from pathlib import Path

import pytest

from roofline import rerun
from roofline.ladder import bench, check, gpu
from roofline.ladder.build import level_source
from roofline.ladder.registry import LEVELS, VARIANTS, get_level

RESULTS = Path(__file__).resolve().parent.parent / "fixtures" / "ladder"
RUN1, RUN2 = RESULTS / "levels7_10_h200_call1", RESULTS / "levels7_10_h200_call2"


def _load(p):
    return json.loads(p.read_text())


def _gm(v):
    return math.exp(sum(math.log(x) for x in v) / len(v))


# ------------------------------------------------------------------ registry and plan (no data)
def test_ws_levels_registry():
    ws = [lv for lv in LEVELS if lv.kind == "ws"]
    assert [lv.id for lv in ws if lv.contract == "gemm-bf16"] == [7, 8, 9, 10]
    assert [lv.id for lv in ws if lv.contract != "gemm-bf16"] == [12, 13, 14, 15]   # the same engine, other contracts
    assert get_level(8).cluster == 2 and get_level(9).cluster == 2 and get_level(7).cluster == 1
    assert get_level(9).grid_balance and not get_level(8).grid_balance and VARIANTS["l09_nocluster"].cluster == 1
    assert get_level(9).threads == 384 and get_level(7).threads == 256
    assert get_level(10).splitk == -1 and get_level(10).by_m == ((64, "l10_m128"),)
    for key in get_level(10).by_m:
        assert VARIANTS[key[1]].file == get_level(10).file and VARIANTS[key[1]].splitk == -1
    for lv in ws + [v for v in VARIANTS.values() if v.kind == "ws"]:
        assert lv.total_smem_bytes <= 227 * 1024
        src = level_source(lv)
        assert "setmaxnreg" in src and '#include "ws.cuh"' not in src   # ws.cuh inlined for NVRTC
        assert lv.grid(1000, 1000)[0] >= 1
    # older levels keep their defaults: the data model only grew
    assert all(lv.cluster == 1 and lv.splitk == 0 and lv.by_m == () for lv in LEVELS[:6])


@pytest.mark.parametrize("m,n,k", [(16, 4096, 4096), (64, 14336, 4096), (256, 4096, 14336),
                                   (1, 1, 1), (64, 512, 2048), (3000, 5000, 1000), (16, 28672, 8192)])
def test_splitk_plan_covers_k_with_no_empty_split(m, n, k):
    lv = get_level(10)
    s, ks = gpu.splitk_plan(lv, m, n, k, 132)
    nkt = -(-k // 64)
    assert 1 <= s <= 16 and ks >= 1
    assert s * ks >= nkt and (s - 1) * ks < nkt           # every K tile once, no empty split
    assert s == 1 or nkt >= 4 * s                          # a split has >= 4 K tiles
    # levels without split-K never split
    assert gpu.splitk_plan(get_level(9), m, n, k, 132) == (1, nkt)


def test_splitk_plan_fills_the_sms_on_a_small_decode_shape():
    s, ks = gpu.splitk_plan(get_level(10), 64, 4096, 4096, 132)
    tiles = (4096 // 128)                                  # one 64-row tile row
    assert s > 1 and tiles * s <= 132 < tiles * (s + 1)   # as many splits as fit one wave


def test_ws_check_shapes_include_decode_and_tails():
    lv = get_level(10)
    shapes = check.edge_shapes(lv)
    assert (16, 4096, 4096) in shapes and (1, 300, 5000) in shapes
    assert len(shapes) + 200 >= 230


# ------------------------------------------------------------------ stored device results
@pytest.mark.parametrize("run", [RUN1, RUN2], ids=["call1", "call2"])
def test_every_new_build_passes_the_full_check(run):
    chk = _load(run / "check.json")
    assert chk["n_random"] == 200
    targets = {t["target"]: t for t in chk["targets"]}
    assert {"7", "8", "9", "10"} <= set(targets)
    for t in targets.values():
        assert t["failed"] == 0 and t["shapes"] >= 230 and t["specials"] >= 20
        assert t["max_rel_err_ref"] < 1e-2 and t["max_rel_err_cublas"] < 1e-2


def test_sanitizers_clean_in_call2():
    for tool, clean in (("memcheck", "ERROR SUMMARY: 0 errors"), ("racecheck", "0 hazards displayed"),
                        ("synccheck", "ERROR SUMMARY: 0 errors")):
        log = (RUN2 / f"{tool}.log").read_text()
        assert clean in log and "SUITE OK" in log and "FAIL" not in log
        for lid in (7, 8, 9, 10):
            assert f"sanitize-mode L{lid} " in log


def test_issue14_bench_is_complete_and_consistent():
    res = _load(RUN2 / "bench_all.json")
    rows = [r for r in res["rows"] if "t_ms_median" in r]
    assert {r["level"] for r in rows} == set(range(0, 11))
    cub = {(r["m"], r["n"], r["k"]): r["t_ms_median"] for r in rows if r["level"] == 0}
    assert set(bench.SHAPE_SETS[bench.FORMER_NAMES[res["meta"]["shape_set"]]]) == set(cub)
    for r in rows:
        assert r["t_ms_p20"] <= r["t_ms_median"] <= r["t_ms_p80"] and r["reps"] >= 50
        if r["level"]:
            assert r["check_ok"]
            assert r["pct_cublas"] == pytest.approx(100 * cub[(r["m"], r["n"], r["k"])] / r["t_ms_median"])
    assert res["meta"]["cluster_residency"]["cluster2"]["max_active_clusters"] == 66


def test_issue14_gates_from_the_data():
    res = _load(RUN2 / "bench_all.json")
    by = {(r["level"], r["m"], r["n"], r["k"]): r for r in res["rows"] if "t_ms_median" in r}
    prefill9 = _gm([by[(9, *s)]["pct_cublas"] for s in bench.SERVING_PREFILL])
    prefill6 = _gm([by[(6, *s)]["pct_cublas"] for s in bench.SERVING_PREFILL])
    assert prefill9 >= 90.0 and prefill9 > prefill6 * (1 + rerun.NOISE_BAND_ISOLATED)
    best = [max(by[(lv, *s)]["pct_cublas"] for lv in range(3, 11) if (lv, *s) in by) for s in bench.SERVING_DECODE]
    assert _gm(best) >= 90.0
    # level 8 (cluster) lost to level 7 on every prefill shape: the stopping rule's case
    assert all(by[(8, *s)]["t_ms_median"] > by[(7, *s)]["t_ms_median"] for s in bench.SERVING_PREFILL)


def test_8192_ratio_runs_are_what_the_notes_say():
    ratios = []
    for p in (RUN2 / "bench_all.json", RUN2 / "bench_rep2.json", RUN2 / "bench_rep3.json"):
        rows = _load(p)["rows"]
        r9 = next(r for r in rows if r["level"] == 9 and r["m"] == r["n"] == r["k"] == 8192)
        ratios.append(r9["pct_cublas"] / 100)
    var = _load(RUN2 / "variants.json")[0]["rows"]
    c = next(r for r in var if r["level"] == 0 and r["m"] == 8192)
    r9 = next(r for r in var if r["name"] == "multi_consumer" and r["m"] == 8192)
    ratios.append(c["t_ms_median"] / r9["t_ms_median"])
    notes = (Path(bench.__file__).resolve().parent / "notes" / "l09.md").read_text()
    for x in ratios:
        assert f"{x:.3f}" in notes
    assert min(ratios) < 1.0 < max(ratios)                 # parity, not a demonstrated win


def test_call2_bench_picked_level_10_for_decode_and_9_for_prefill():
    # the table of the second call (superseded: test_ladder_levels7_10_h200 pins the shipped one)
    table = rerun.build_dispatch_table(_load(RUN2 / "bench_all.json"))
    assert rerun.choose_level(table, 64, 4096, 4096, "bf16")[0] == 10
    assert rerun.choose_level(table, 8192, 8192, 8192, "bf16")[0] == 9


def test_rerun_recordings_ran_the_new_levels():
    for name, lvl in (("rerun_rerun_mixed", 10), ("rerun_rerun", 9)):
        art = _load(RUN2 / name / "profile_roofline.json")
        meas = [e["measured"] for e in art["entries"] if e.get("measured")]
        assert meas and all(m["ladder_level"] == lvl for m in meas)
        for m in meas:
            assert all(p["check_ok"] for p in m["problems"])
            assert 0 < m["cublas_t_ms"] / m["ladder_t_ms"] < 1.0   # the library is faster on these heads
