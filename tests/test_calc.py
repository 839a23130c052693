"""`roofline calc` against hand-computed values: the expected numbers are computed here from the
formula of seed 001 and the figures read straight from the YAML tables (not through
roofline.peaks or roofline.core.calc), for two devices x three dtypes; then the seed's own figures,
the H200's measured roofs, and inputs that must be rejected."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from roofline.cli import main

REPO = Path(__file__).resolve().parents[1]
PEAKS = REPO / "peaks"
BYTES = {"bf16": 2, "fp16": 2, "fp8": 1, "fp32": 4, "tf32": 4}


def _yaml(stem):
    return yaml.safe_load((PEAKS / f"{stem}.yaml").read_text())


def _table_roofs(stem, dtype):
    """The project's convention, by hand: HBM = datasheet pin rate; compute = measured if the
    table has it, else datasheet."""
    d = _yaml(stem)
    fig = d["flops"][dtype]
    p = (fig.get("measured") or fig.get("validated") or fig["datasheet"])["value"]
    return float(p), float(d["hbm_bw_bytes_s"]["datasheet"]["value"])


def _run(*args):
    r = CliRunner().invoke(main, ["calc", *args])
    return r


def _json(*args):
    r = _run(*args, "--format", "json")
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


@pytest.mark.parametrize("stem", ["h200", "b200"])
@pytest.mark.parametrize("dtype", ["bf16", "fp8", "fp32"])
@pytest.mark.parametrize("n", [256, 4096])
def test_square_against_hand_computed(stem, dtype, n):
    peak, bw = _table_roofs(stem, dtype)
    b = BYTES[dtype]
    flops = 2 * n ** 3
    nbytes = 3 * n * n * b
    t_c, t_h = flops / peak, nbytes / bw
    got = _json("--device", stem, "--dtype", dtype, "--size", str(n))
    assert got["flops"] == flops and got["bytes_moved"] == nbytes
    assert got["t_compute_s"] == pytest.approx(t_c, rel=1e-12)
    assert got["t_hbm_s"] == pytest.approx(t_h, rel=1e-12)
    assert got["t_wall_s"] == pytest.approx(max(t_c, t_h), rel=1e-12)
    assert got["bound"] == ("compute" if t_c > t_h else "memory")
    assert got["ai_flop_per_byte"] == pytest.approx(2 * n / (3 * b), rel=1e-12)   # N/3 for 2-byte types
    assert got["ridge_flop_per_byte"] == pytest.approx(peak / bw, rel=1e-12)
    # crossover: 2N^3/P = 3 b N^2/BW
    assert got["crossover_n"] == pytest.approx(1.5 * b * peak / bw, rel=1e-12)


def test_mnk_decode_shape_h200():
    peak, bw = _table_roofs("h200", "bf16")
    m, n, k = 64, 8192, 8192
    got = _json("--device", "h200", "--dtype", "bf16", "--mnk", str(m), str(n), str(k))
    nbytes = 2 * (m * k + k * n + m * n)
    assert got["bytes_moved"] == nbytes
    assert got["t_hbm_s"] == pytest.approx(nbytes / bw, rel=1e-12)
    assert got["bound"] == "memory"      # AI 2MNK/bytes ~ 63 << ridge ~ 161
    assert got["ai_flop_per_byte"] == pytest.approx(2 * m * n * k / nbytes, rel=1e-12)


def test_seed_figures_b200(tmp_path, monkeypatch):
    # the seed's round numbers: 2 PFLOP/s fp16, 8 TB/s -> ridge 250 FLOP/byte, AI(4096) ~ 1365
    (tmp_path / "seed.yaml").write_text(yaml.safe_dump({
        "device": "seed B200", "vendor": "nvidia", "gfx": "sm_100", "names": ["seedb200"],
        "hbm_bw_bytes_s": {"datasheet": {"value": 8e12, "source": "seed 001"}},
        "flops": {"fp16": {"datasheet": {"value": 2e15, "source": "seed 001"}}}}))
    monkeypatch.setenv("ROOFLINE_PEAKS_DIR", str(tmp_path))
    got = _json("--device", "seed", "--dtype", "fp16", "--size", "4096")
    assert got["ridge_flop_per_byte"] == pytest.approx(250.0)
    assert got["ai_flop_per_byte"] == pytest.approx(4096 / 3)
    assert got["ai_over_ridge"] > 5          # "more than 5x past the ridge"
    # NB: the square crossover is N* = 3 x 250 = 750 (the seed's prose says "a couple hundred")
    assert got["crossover_n"] == pytest.approx(750.0)


def test_seed_claims_on_the_b200_table():
    fp16 = _json("--device", "b200", "--dtype", "fp16", "--size", "4096")
    fp8 = _json("--device", "b200", "--dtype", "fp8", "--size", "4096")
    fp32 = _json("--device", "b200", "--dtype", "fp32", "--size", "4096")
    p16, bw = _table_roofs("b200", "fp16")
    assert fp8["peak_flops_s"] / fp16["peak_flops_s"] == pytest.approx(2.0)          # fp8 doubles the roof
    assert fp8["ridge_flop_per_byte"] == pytest.approx(2 * fp16["ridge_flop_per_byte"])
    # fp8 in and out: half the bytes, twice the roof -> the same square crossover; with a bf16
    # output (how fp8 GEMMs are run) the crossover moves up, 843.75 -> 1125
    assert fp8["crossover_n"] == pytest.approx(fp16["crossover_n"])
    fp8_bf16 = _json("--device", "b200", "--dtype", "fp8", "--out-dtype", "bf16", "--size", "4096")
    assert fp8_bf16["crossover_n"] == pytest.approx(2 * p16 * (1 + 1 + 2) / (2 * bw))
    assert fp8_bf16["crossover_n"] > fp16["crossover_n"]
    # fp32 on CUDA cores: about 30x lower than the fp16 tensor-core roof
    assert fp16["peak_flops_s"] / fp32["peak_flops_s"] == pytest.approx(30.0, rel=0.05)
    assert fp32["t_compute_s"] / fp16["t_compute_s"] == pytest.approx(30.0, rel=0.05)


def test_h200_measured_roofs():
    d = _yaml("h200")
    p = d["flops"]["bf16"]["measured"]["value"]
    bw = d["hbm_bw_bytes_s"]["measured"]["value"]
    got = _json("--device", "h200", "--dtype", "bf16", "--roof", "measured", "--size", "4096")
    assert (got["peak_flops_kind"], got["hbm_bw_kind"]) == ("measured", "measured")
    assert got["ridge_flop_per_byte"] == pytest.approx(p / bw)
    assert got["crossover_n"] == pytest.approx(3 * p / bw)
    ds = _json("--device", "h200", "--dtype", "bf16", "--roof", "datasheet", "--size", "4096")
    assert ds["ridge_flop_per_byte"] == pytest.approx(d["flops"]["bf16"]["datasheet"]["value"]
                                                      / d["hbm_bw_bytes_s"]["datasheet"]["value"])
    # the recorded cuBLAS 4096^3 (fixtures/ncu: 177.6 us) sits at the measured compute roof: no
    # faster than its bound, and within the envelope's 5% of it
    assert 0.95 * 177.6e-6 <= got["t_wall_s"] <= 177.6e-6


def test_sweep_marks_the_crossover():
    r = _run("--device", "h200", "--dtype", "bf16", "--sweep")
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    mark = next(i for i, ln in enumerate(lines) if "crossover N* =" in ln and ln.startswith("---"))
    peak, bw = _table_roofs("h200", "bf16")
    rows = [ln.split() for ln in lines[2:] if ln.strip() and ln.split()[0].isdigit()]
    above = [int(x[0]) for x in rows if x[-1] == "memory"]
    below = [int(x[0]) for x in rows if x[-1] == "compute"]
    assert max(above) < 3 * peak / bw < min(below)
    assert all(ln.split()[-1] == "memory" for ln in lines[2:mark])
    js = _json("--device", "h200", "--dtype", "bf16", "--sweep")["sweep"]
    assert [x["n"] for x in js] == [2 ** p for p in range(6, 15)]
    lo = int(3 * peak / bw)                  # the crossover 3P/BW lies between lo and lo + 1
    js = _json("--device", "h200", "--dtype", "bf16", "--sweep", "--sizes", f"1000,300,{lo},{lo + 1}")["sweep"]
    assert [x["n"] for x in js] == [300, lo, lo + 1, 1000]
    assert [x["bound"] for x in js] == ["memory", "memory", "compute", "compute"]


@pytest.mark.slow   # 2-4 s on a 2-core machine: `-m "not slow"` leaves it out
def test_text_and_png(tmp_path):
    out = tmp_path / "bars.png"
    r = _run("--device", "b200", "--dtype", "fp16", "--size", "1024", "-o", str(out))
    assert r.exit_code == 0, r.output
    assert "compute-bound" in r.output and "ridge 281.2" in r.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    sw = tmp_path / "sweep.svg"
    r = _run("--device", "h200", "--dtype", "fp8", "--sweep", "-o", str(sw))
    assert r.exit_code == 0, r.output
    assert "<svg" in sw.read_text()[:2000]


@pytest.mark.parametrize("args,where", [
    (["--device", "nosuch", "--size", "4096"], "no peak table for device 'nosuch'"),
    (["--device", "a100_sxm", "--dtype", "fp8", "--size", "4096"], "no fp8 figure"),
    (["--device", "b200", "--roof", "measured", "--size", "4096"], "no measured bf16"),
    (["--device", "h200", "--size", "0"], "must be >= 1"),
    (["--device", "h200", "--dtype", "fp7", "--size", "64"], "fp7"),
    (["--device", "h200", "--size", "64", "--sweep"], "exactly one of"),
    (["--device", "h200"], "exactly one of"),
    (["--device", "h200", "--size", "64", "--out-dtype", "fp9"], "fp9"),
    (["--device", "h200", "--sweep", "--sizes", "128,abc"], "comma-separated integers"),
    (["--device", "h200", "--sweep", "--sizes", "128,0"], "must be >= 1"),
    (["--device", "h200", "--size", "128", "--sizes", "128"], "--sizes goes with --sweep"),
    (["--device", "nosuch", "--html", "x.html"], "no peak table for device 'nosuch'"),
])
def test_rejected(args, where):
    r = _run(*args)
    assert r.exit_code == 2
    assert where in r.output
    assert "Traceback" not in r.output
