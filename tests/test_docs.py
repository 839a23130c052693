"""docs/: every minimal example loads with the package's own loaders, the artifact example is what
`roofline analyze` really gives for the Top-N and env report examples, and the README points only at
what a reader of the repository can see."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from roofline import api, inputs
from roofline.schema import validate_artifact

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
    from roofline.inputs import Entry, Regime
    from roofline.shapes import resolve_shapes

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
    from roofline.routing import ROUTES, TARGET_EFF

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
    assert not re.search(r"seed 00\d|section \d", text), re.search(r".{40}(seed 00\d|section \d).{20}", text)
    for link in re.findall(r"`(docs/[^`]+\.md)`", text):
        assert (ROOT / link).is_file(), link


def test_analyze_help_has_no_seed_references():
    from click.testing import CliRunner

    from roofline.cli import main

    r = CliRunner().invoke(main, ["analyze", "--help"])
    assert r.exit_code == 0 and "seed" not in r.output
