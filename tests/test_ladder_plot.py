"""`roofline ladder plot` renders on a CPU from a committed H200 bench and shows what the JSON says."""
import json

import pytest
from click.testing import CliRunner

from roofline.cli import main
from roofline.ladder.plot import ladder_plot_data

from conftest import ROOT

RES = ROOT / "fixtures" / "ladder" / "h200_bench_square_llama.json"


def test_plot_data_matches_the_bench_rows():
    res = json.loads(RES.read_text())
    d = ladder_plot_data(res)
    c = res["ceilings"]
    for r in res["rows"]:
        s = (r["m"], r["n"], r["k"])
        if "t_ms_median" not in r or s not in d["shapes"]:
            continue
        key = "cuBLAS" if r["level"] == 0 else f"L{r['level']} {r['name']}"
        assert d["series"][key]["median"][s] == pytest.approx(r["tflops"], rel=1e-9)
        ai = 2 * s[0] * s[1] * s[2] / (2 * (s[0] * s[2] + s[1] * s[2] + s[0] * s[1]))
        assert d["roof_tflops"][s] == pytest.approx(min(c["cublas_bf16_8192"]["flops_s"], c["hbm_copy"]["bytes_s"] * ai) / 1e12)
    # the issue-6 gate, read from the picture's own data: level 6 >= 70% of cuBLAS at 8192^3
    s = (8192, 8192, 8192)
    assert d["series"]["L6 persistent"]["median"][s] >= 0.7 * d["series"]["cuBLAS"]["median"][s]


def test_cli_writes_the_picture(tmp_path):
    out = tmp_path / "ladder.png"
    res = CliRunner().invoke(main, ["ladder", "plot", str(RES), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert out.stat().st_size > 10_000 and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    res = CliRunner().invoke(main, ["ladder", "plot", str(bad), "-o", str(out)])
    assert res.exit_code == 2 and "not a ladder bench result" in res.stderr
