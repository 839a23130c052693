"""docs/: every minimal example loads with the package's own loaders, the artifact example is what
`roofline analyze` really gives for the Top-N and env report examples, and the README points only at
what a reader of the repository can see."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from roofline import api
from roofline.core import inputs
from roofline.io.schema import validate_artifact

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def _json_blocks(page: str) -> list:
    text = (DOCS / page).read_text(encoding="utf-8")
    blocks = re.findall(r"```json\n(.*?)```", text, flags=re.S)
    assert blocks, f"{page} has no JSON example"
    return [json.loads(b) for b in blocks]


def test_topn_example_loads_and_is_analysable():
    (ex,) = _json_blocks("topn.md")
    t = inputs.parse_topn(ex, "docs/topn.md")
    assert len(t.entries) == 1 and t.entries[0].shapes == [{"M": 64, "N": 8192, "K": 8192}]
    assert not t.entries[0].problems


def test_env_example_loads():
    (ex,) = _json_blocks("env_report.md")
    e = inputs.parse_env(ex, "docs/env_report.md")
    assert e.workload == {"isl": 1024.0, "osl": 256.0, "conc": 64.0} and e.gfx == "sm_90"


def test_config_example_loads_and_fills_an_attention_shape():
    from roofline.core.inputs import Entry, Regime
    from roofline.core.shapes import resolve_shapes

    (ex,) = _json_blocks("config.md")
    cfg = inputs.parse_config(ex, "docs/config.md")
    (env,) = _json_blocks("env_report.md")
    e = Entry(index=0, name="paged_attention", pct_gpu_time=10.0, regimes={"decode": Regime(0.01, 1)})
    shapes, src, _ = resolve_shapes("attn", e, inputs.parse_env(env), cfg, "decode")
    assert src == "estimated"
    assert (shapes[0]["n_q_heads"], shapes[0]["n_kv_heads"], shapes[0]["head_dim"]) == (8, 8, 128)


def test_artifact_example_validates_and_matches_a_real_analysis():
    (art_ex,) = _json_blocks("artifact.md")
    validate_artifact(art_ex)
    (topn,) = _json_blocks("topn.md")
    (env,) = _json_blocks("env_report.md")
    real = api.analyze(topn, env, None)
    (e_real,) = real["entries"]
    (e_doc,) = art_ex["entries"]
    for k, v in e_doc.items():
        if isinstance(v, float):
            assert e_real[k] == pytest.approx(v, rel=1e-5), k
        else:
            assert e_real[k] == v, k
    assert art_ex["peaks"]["hbm_bw_bytes_s"] == real["peaks"]["hbm_bw_bytes_s"]
    assert art_ex["peaks"]["flops"]["bf16"] == real["peaks"]["flops"]["bf16"]
    for k in ("stage", "gfx", "ranking_by_pct", "ranking_by_expected_gain", "degraded"):
        assert art_ex[k] == real[k], k


def test_method_page_names_its_sources_and_every_route():
    from roofline.core.routing import ROUTES, TARGET_EFF

    text = (DOCS / "method.md").read_text(encoding="utf-8")
    assert "## Sources" in text and "Williams" in text and "Amdahl" in text
    for r in ROUTES:
        assert f"`{r}`" in text, r
    for level in ("L0", "L1", "L2", "L3", "L4", "L5"):
        assert f"| {level} |" in text
    for v in TARGET_EFF.values():  # each prior is stated with its value
        assert f"{v:.2f}" in text, v


def test_docs_index_links_exist():
    text = (DOCS / "README.md").read_text(encoding="utf-8")
    for link in re.findall(r"\]\(([^)]+\.md)\)", text):
        assert (DOCS / link).is_file(), link


def test_readme_points_only_at_what_a_reader_can_see():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "shared/" not in text
    assert not re.search(r"seed 00\d", text), re.search(r".{40}seed 00\d.{20}", text)
    # a section number is docs/method.md's own, and that section exists
    method = (DOCS / "method.md").read_text(encoding="utf-8")
    for m in re.finditer(r"(\S+) sections? (\d+)", text):
        assert m.group(1).strip("(`") == "docs/method.md", m.group(0)
        assert re.search(rf"^## {m.group(2)}\. ", method, re.M), m.group(0)
    for link in re.findall(r"`(docs/[^`]+\.md)`", text):
        assert (ROOT / link).is_file(), link


def test_analyze_help_has_no_seed_references():
    from click.testing import CliRunner

    from roofline.cli import main

    r = CliRunner().invoke(main, ["analyze", "--help"])
    assert r.exit_code == 0 and "seed" not in r.output


def _read_it_numbers() -> dict[str, float]:
    """The figures the artifact page's 'Read it' paragraph quotes, by what they are."""
    text = " ".join((DOCS / "artifact.md").read_text(encoding="utf-8").split("Read it:")[1].split())
    pats = {"mb": r"moves ([\d.]+) MB", "us": r"per launch in ([\d.]+) us", "tbs": r"us, ([\d.]+) TB/s",
            "pct": r"TB/s: (\d+)% of the", "roof": r"of the ([\d.]+) TB/s HBM roof", "ai": r"intensity, ([\d.]+) FLOP/B",
            "ridge": r"left of the ([\d.]+) FLOP/B bf16 ridge", "target": r"reaches (\d+)% of its roof",
            "attain": r"would be ([\d.]+)x faster", "share": r"this one is ([\d.]+)% of the GPU",
            "gain": r"= ([\d.]+)% of it"}
    out = {}
    for k, rx in pats.items():
        m = re.search(rx, text)
        assert m, f"docs/artifact.md 'Read it' no longer quotes {k} ({rx})"
        out[k] = float(m.group(1))
    return out


def test_the_artifact_page_quotes_todays_figures():
    """Each figure of the worked reading is what `roofline analyze` gives today, at the precision quoted."""
    (topn,) = _json_blocks("topn.md")
    (env,) = _json_blocks("env_report.md")
    (e,) = api.analyze(topn, env, None)["entries"]
    q = _read_it_numbers()
    assert q["mb"] == round(e["bytes_est"] / 1e6)
    assert q["us"] == round(e["t_ms"] * 1e3)
    assert q["tbs"] == round(e["achieved_bw_bytes_s"] / 1e12, 2)
    assert q["pct"] == round(100 * e["roofline_pct"])
    assert q["roof"] == round(api.analyze(topn, env, None)["peaks"]["hbm_bw_bytes_s"] / 1e12, 1)
    assert q["ai"] == round(e["arithmetic_intensity"])
    assert q["ridge"] == round(e["ridge_point"])
    assert q["target"] == round(100 * e["target_eff"])
    assert q["attain"] == round(e["attainable_speedup"], 2)
    assert q["share"] == e["pct_gpu_time"]
    assert q["gain"] == round(e["expected_e2e_gain_pct"], 1)


def test_the_method_page_quotes_the_code_and_the_tables():
    """Each constant docs/method.md states is the one the code uses, each peak figure the table's."""
    from roofline.core import analysis
    from roofline.report import artifact as report
    from roofline.core import routing
    from roofline.peaks import resolve
    from roofline.feedback import NoiseBands

    text = " ".join((DOCS / "method.md").read_text(encoding="utf-8").split())
    assert f"`pct_gpu_time` < {routing.HIGH_PCT_GPU_TIME:g}% (`HIGH_PCT_GPU_TIME`" in text
    assert f"beyond {analysis.COUNTER_TIME_BAND:.0%} (`COUNTER_TIME_BAND`" in text
    nb = NoiseBands()
    assert f"isolated repeat band ({nb.isolated:.1%}:" in text and f"serving band ({nb.e2e_pct:g}%)" in text
    assert report.HOST_BOUND_IDLE_PCT == 50.0 and "idle for more than half of its wall time" in text
    pk = resolve("NVIDIA H200", "sm_90")
    assert f"(H200: {pk.hbm_bw_bytes_s / 1e12:g} TB/s" in text
    m = re.search(r"H200 bf16: (\d+) runs x (\d+) shapes", text)
    src = pk.to_artifact()["sources"]["flops.bf16"]
    assert m and f"over {m.group(1)} run(s) x {m.group(2)} shape(s)" in src, (m and m.groups(), src)
    from roofline.core.defaults import HEAD_THRESHOLD_PCT

    assert routing.HIGH_PCT_GPU_TIME == HEAD_THRESHOLD_PCT   # "equals the default head threshold"
