"""Issue 34 item 3: ONE rule for an env-report field left out, written once (docs/env_report.md,
"A field left out: the rule"), the others link to it; tested through the CLI on a real corpus round
(the fp8 Llama prefill + decode trace's Top-N and env report)."""
import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from roofline.cli import main
from roofline.core.inputs import ENV_REQUIRED

from conftest import FIXTURES

ROOT = Path(__file__).resolve().parent.parent
FP8 = FIXTURES / "rerun_corpus" / "llama_fp8_prefill_decode"
FIGS = ("modeled", "bytes_est", "flops_est", "roofline_pct", "headroom_class", "expected_e2e_gain_pct")


def _round(tmp_path, env_edit=None, topn_edit=None) -> Path:
    d = tmp_path / "rerun_corpus" / FP8.name          # its env report names ../../../../corpus/configs/
    shutil.copytree(FP8, d)
    shutil.copytree(FIXTURES / "corpus" / "configs", tmp_path / "corpus" / "configs")
    rd = d / "profile" / "round_1"
    for name, edit in (("env_report.json", env_edit), ("profile_topN.json", topn_edit)):
        if edit:
            doc = json.loads((rd / name).read_text())
            edit(doc)
            (rd / name).write_text(json.dumps(doc))
    return rd


def _analyze(rd):
    r = CliRunner().invoke(main, ["analyze", str(rd / "profile_topN.json"), "--format", "json"])
    return r.exit_code, (json.loads(r.stdout) if r.exit_code == 0 else None), r.stderr


@pytest.fixture(scope="module")
def intact(tmp_path_factory):
    code, art, _ = _analyze(_round(tmp_path_factory.mktemp("intact")))
    assert code == 0 and art["degraded"] == []
    return {e["name"]: e for e in art["entries"]}


def _same_figures(art, intact, skip):
    for e in art["entries"]:
        if e["name"] not in skip:
            assert {k: e[k] for k in FIGS} == {k: intact[e["name"]][k] for k in FIGS}, e["name"]


def test_gfx_left_out_stops_the_run_with_one_line(tmp_path):
    code, _, err = _analyze(_round(tmp_path, env_edit=lambda d: d.pop("gfx")))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "gfx" in err and "missing" in err


def test_model_dtype_left_out_degrades_only_the_entries_without_dtypes(tmp_path, intact):
    topn = json.loads((FP8 / "profile" / "round_1" / "profile_topN.json").read_text())
    untyped = {t["name"] for t in topn["entries"] if "dtypes" not in t} & set(intact)
    assert untyped, "the fp8 round has an analysed entry without captured dtypes"
    code, art, err = _analyze(_round(tmp_path, env_edit=lambda d: d.pop("model_dtype")))
    assert code == 0
    deg = {d["name"]: d["reason"] for d in art["degraded"]}
    assert set(deg) == untyped and all("model_dtype" in r for r in deg.values())
    _same_figures(art, intact, untyped)
    assert art["inputs"]["env_missing"] == ["model_dtype"]
    assert f"({len(untyped)} entr" in err and "not given: model_dtype" in err


def test_model_arch_class_left_out_changes_no_entry(tmp_path, intact):
    code, art, _ = _analyze(_round(tmp_path, env_edit=lambda d: d.pop("model_arch_class")))
    assert code == 0 and art["degraded"] == [] and art["inputs"]["env_missing"] == ["model_arch_class"]
    _same_figures(art, intact, set())


def test_a_wholly_missing_workload_degrades_only_the_uncaptured_attention_naming_all_three(tmp_path, intact):
    def strip(doc):   # the decode attention loses its captured shapes: its batch and context need the workload
        t = next(t for t in doc["entries"] if t.get("op_class") == "attn" and list(t["regimes"]) == ["decode"])
        t.pop("shapes")
        t.pop("shape_launches", None)
        t.pop("shape_regimes", None)
        strip.name = t["name"]
    rd = _round(tmp_path, env_edit=lambda d: d.pop("workload"), topn_edit=strip)
    code, art, err = _analyze(rd)
    assert code == 0
    deg = {d["name"]: d["reason"] for d in art["degraded"]}
    assert list(deg) == [strip.name]
    assert deg[strip.name].startswith("workload.conc, workload.isl, workload.osl are not in the env report")
    _same_figures(art, intact, {strip.name})
    assert "(1 entry that needs workload.isl, workload.osl, workload.conc degraded" in err


@pytest.mark.parametrize("field,bad", [("model_dtype", 5), ("workload", {"isl": 2048, "osl": 8, "conc": "64"})])
def test_a_field_that_is_there_but_wrong_stops_the_run(tmp_path, field, bad):
    code, _, err = _analyze(_round(tmp_path, env_edit=lambda d: d.update({field: bad})))
    assert code == 2 and len(err.strip().splitlines()) == 1 and field in err


def test_the_rule_is_written_once_and_the_others_link_to_it():
    env = (ROOT / "docs" / "env_report.md").read_text()
    sec = env.split("## A field left out: the rule", 1)[1].split("\n## ", 1)[0]
    stops, degrade = sec.split("- **", 3)[1:3]
    assert re.findall(r"`([\w.]+)`", stops.split("**")[0]) == ["gfx"]
    assert sorted(re.findall(r"`([\w.]+)`", degrade.split("**")[0])) == sorted(f for f in ENV_REQUIRED if f != "gfx")
    for page in ("input_policy.md", "method.md"):
        text = (ROOT / "docs" / page).read_text()
        assert "env_report.md#a-field-left-out-the-rule" in text, page
    assert "## A field left out" not in (ROOT / "docs" / "input_policy.md").read_text()
    # no page says a left-out env field (other than gfx) stops the run
    for page in (ROOT / "docs").glob("*.md"):
        assert "field it reads that is missing" not in page.read_text(), page.name
