"""CPU-only: the H200 results stored beside the ladder render, and their derived columns follow
from their own times (numbers from the device run of 2026-11-29)."""
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from roofline.ladder import bench

RESULTS = Path(bench.__file__).resolve().parent / "results"


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
