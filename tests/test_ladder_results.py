"""CPU-only: the H200 results stored beside the ladder render, and their derived columns follow
from their own times (numbers from the device run of 2026-11-29)."""
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from roofline.ladder import bench

RESULTS = Path(__file__).resolve().parent.parent / "fixtures" / "ladder"


def _load(name):
    return json.loads((RESULTS / name).read_text())


def test_bench_rows_are_checked_and_consistent():
    res = _load("h200_bench.json")
    assert res["meta"]["device"] == "NVIDIA H200"
    rows = res["rows"]
    shapes = {(r["m"], r["n"], r["k"]) for r in rows}
    assert {(4096, 4096, 4096), (8192, 8192, 8192), (64, 4096, 4096), (64, 28672, 4096)} <= shapes
    cub = {(r["m"], r["n"], r["k"]): r["t_ms_median"] for r in rows if r["level"] == 0}
    for r in rows:
        assert r["t_ms_p20"] <= r["t_ms_median"] <= r["t_ms_p80"]
        assert r["tflops"] == pytest.approx(2 * r["m"] * r["n"] * r["k"] / (r["t_ms_median"] * 1e-3) / 1e12)
        if r["level"]:
            assert r["check_ok"] and r["check_rel_err"] < 1e-2
            assert r["pct_cublas"] == pytest.approx(100 * cub[(r["m"], r["n"], r["k"])] / r["t_ms_median"])


def test_roofline_column_recomputes():
    res = _load("h200_bench.json")
    r = next(r for r in res["rows"] if r["level"] == 3 and r["m"] == 8192)
    fl = res["ceilings"]["cublas_bf16_8192"]["flops_s"]
    bw = res["ceilings"]["hbm_copy"]["bytes_s"]
    want = 100 * bench.roofline_bound_ms(8192, 8192, 8192, fl, bw) / r["t_ms_median"]
    fresh = bench.add_roofline_columns(json.loads(json.dumps(res)))
    r2 = next(x for x in fresh["rows"] if x["level"] == 3 and x["m"] == 8192)
    assert r2["pct_roofline_measured"] == pytest.approx(want)
    assert r2["bound"] == "compute"
    d = next(x for x in fresh["rows"] if x["level"] == 3 and x["m"] == 64 and x["n"] == 28672)
    assert d["bound"] == "memory"


def test_v2_copy_beats_v1_beyond_spread():
    res = _load("h200_variants_v1_vs_v2.json")
    by = {(r["name"], r["m"], r["n"], r["k"]): r for r in res["rows"]}
    for shape in [(4096, 4096, 4096), (64, 28672, 4096), (128, 128, 8192)]:
        v1 = by[("grid_v1_serial_copy", *shape)]
        v2 = by[("grid", *shape)]
        assert v2["t_ms_p80"] < v1["t_ms_p20"]


def test_check_summary_has_200_shapes_per_level():
    chk = _load("h200_check.json")
    assert chk["wrong_kernel_caught"] is True
    assert not chk["failures"]
    for lvl in ("1", "2", "3"):
        s = chk["summary"][lvl]
        assert s["shapes"] >= 200 and s["failed"] == 0 and s["specials"] >= 20
        assert s["max_rel_err_ref"] < 1e-2


def test_cli_render():
    from roofline.ladder.cli import ladder
    r = CliRunner().invoke(ladder, ["render", str(RESULTS / "h200_bench.json"), "--no-peaks"])
    assert r.exit_code == 0, r.output
    assert "| 8192x8192x8192 | 3 grid |" in r.output and "% cuBLAS" in r.output


# ---------------------------------------------------------------- issue 6 (levels 4-6)
ISSUE6 = ["h200_bench_square_llama.json", "h200_bench_square_llama_run2.json"]


@pytest.mark.parametrize("name", ISSUE6)
def test_issue6_bench_has_every_level_and_shape(name):
    from roofline.ladder.bench import FORMER_NAMES, SHAPE_SETS
    res = _load(name)
    assert res["meta"]["device"] == "NVIDIA H200"
    rows = res["rows"]
    for shape in SHAPE_SETS[FORMER_NAMES[res["meta"]["shape_set"]]]:   # the set it was recorded under
        levels = {r["level"] for r in rows if (r["m"], r["n"], r["k"]) == shape and "t_ms_median" in r}
        assert {0, 3, 4, 5, 6} <= levels, (shape, levels)
    assert {1, 2} <= {r["level"] for r in rows}
    cub = {(r["m"], r["n"], r["k"]): r["t_ms_median"] for r in rows if r["level"] == 0}
    for r in rows:
        assert r["t_ms_p20"] <= r["t_ms_median"] <= r["t_ms_p80"]
        if r["level"]:
            assert r["check_ok"] and r["check_rel_err"] < 1e-2
            assert r["pct_cublas"] == pytest.approx(100 * cub[(r["m"], r["n"], r["k"])] / r["t_ms_median"])


@pytest.mark.parametrize("name", ISSUE6 + ["h200_overlap_l5_l6.json", "h200_l06_epilogue_variants.json"])
def test_level6_gate_70pct_cublas_at_8192(name):
    rows = _load(name)["rows"]
    r = next(r for r in rows if r["name"] == "persistent" and (r["m"], r["n"], r["k"]) == (8192, 8192, 8192))
    assert r["pct_cublas"] >= 70.0


def test_overlap_depth4_beats_depth1_beyond_spread():
    by = {(r["name"], r["m"], r["n"], r["k"]): r for r in _load("h200_overlap_l5_l6.json")["rows"]}
    for shape in [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 28672, 4096)]:
        d1, d2, d4 = (by[(n, *shape)] for n in ("pipeline_depth1", "pipeline_depth2", "pipeline"))
        assert d4["t_ms_p80"] < d2["t_ms_p20"] and d2["t_ms_p80"] < d1["t_ms_p20"]
        assert d1["t_ms_median"] / d4["t_ms_median"] > 1.4


def test_grouped_order_beats_row_major_on_wide_n():
    by = {(r["name"], r["m"], r["n"], r["k"]): r for r in _load("h200_overlap_l5_l6.json")["rows"]}
    g1, g16 = by[("persistent_group1", 8192, 28672, 4096)], by[("persistent", 8192, 28672, 4096)]
    assert g16["t_ms_p80"] < g1["t_ms_p20"]


def test_check_summary_levels_1_to_6():
    chk = _load("h200_check_l1_l6.json")
    assert chk["wrong_kernel_caught"] is True and not chk["failures"]
    for lvl in ("1", "2", "3", "4", "5", "6"):
        s = chk["summary"][lvl]
        assert s["shapes"] >= 200 and s["failed"] == 0 and s["specials"] >= 20
        assert s["max_rel_err_ref"] < 1e-2
    l6 = [s for s in chk["shapes"] if s[0] == 6]
    assert sum(((m + 127) // 128) * ((n + 255) // 256) > 132 for _, m, n, _, _, _ in l6) >= 30
    assert any(k == 1 for _, _, _, k, _, _ in l6) or any(k % 8 for _, _, _, k, _, _ in l6)


def test_sanitizer_summaries_clean():
    txt = (RESULTS / "h200_sanitize_l4_l6_run2.txt").read_text()
    assert txt.count("ERROR SUMMARY: 0 errors") == 2 and "RACECHECK SUMMARY: 0 hazards" in txt
    assert "FAIL" not in txt and txt.count("persistent_tma_store") >= 12


def test_readme_has_issue6_table():
    readme = (RESULTS.parent.parent / "ladder" / "README.md").read_text()
    res = _load("h200_bench_square_llama.json")
    assert bench.render_table(res).splitlines()[2] in readme
    assert res["meta"]["shape_set"] == "issue6" and bench.FORMER_NAMES["issue6"] == "square-and-llama"
    assert "--shapes square-and-llama" in readme
