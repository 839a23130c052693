"""The pipeline hook's contract (INPUTS.md, seed 002 section 6): L0 writes nothing, L5 keeps the
entries that succeeded, writes are atomic, a failed re-run keeps the previous artifact, the entry
point is discoverable, and the three-round example runs A -> B -> C."""
import json
import os
import shutil
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from roofline import hook
from roofline.io import pairwrite
from roofline.report import artifact as report
from roofline.core import opclasses

from conftest import EXAMPLE, ROOT

ART = report.ARTIFACT_JSON
MD = report.ARTIFACT_MD


@pytest.fixture
def run_root(tmp_path):
    """A pipeline run root holding the worked example: env/config at the root, round_1 below."""
    shutil.copytree(EXAMPLE, tmp_path / "run")
    return tmp_path / "run"


def round_dir(root):
    return root / "profile" / "round_1"


def _tmp_files(d):
    return sorted(p.name for p in Path(d).iterdir() if p.name.endswith(".tmp"))


def test_l0_none_returns_none_and_writes_nothing(run_root):
    rd = round_dir(run_root)
    before = sorted(p.name for p in rd.iterdir())
    assert hook.run(rd, analysis_skill="none") is None
    assert hook.run(rd, analysis_skill=None) is None
    assert sorted(p.name for p in rd.iterdir()) == before
    assert not (rd / ART).exists() and not (rd / MD).exists()


def test_l0_package_missing_pieces_returns_none(run_root, monkeypatch):
    # a broken install (roofline.api unimportable) is L0 too: behave as if the feature did not exist
    import roofline

    monkeypatch.setitem(sys.modules, "roofline.api", None)
    monkeypatch.delattr(roofline, "api", raising=False)
    rd = round_dir(run_root)
    assert hook.run(rd) is None
    assert not (rd / ART).exists()


def test_hook_writes_the_worked_example(run_root):
    rd = round_dir(run_root)
    s = hook.run(rd, env="env_report.json", config="config.json")
    assert s["stage"] == "B" and s["skill_errors"] == [] and s["degraded"] == 0
    assert s["json"] == str(rd / ART) and s["md"] == str(rd / MD)
    # seed 002 section 9: the two rankings disagree (MoE first by pct, attention first by gain)
    assert s["ranking_by_pct"] == ["fused_moe_kernel", "kernel_paged_attention_2d"]
    assert s["ranking_by_expected_gain"] == ["kernel_paged_attention_2d", "fused_moe_kernel"]
    art = json.loads((rd / ART).read_text())
    assert [e["name"] for e in art["entries"]] == s["ranking_by_pct"]
    assert _tmp_files(rd) == []


def test_l5_a_model_that_raises_keeps_the_other_entries(run_root, monkeypatch):
    def boom(shape, dt):
        raise RuntimeError("model exploded")

    monkeypatch.setitem(opclasses.jobs._TABLE["model"], "attn", (boom, {}))
    rd = round_dir(run_root)
    s = hook.run(rd)  # never raises
    assert s is not None and s["json"]
    assert any("model exploded" in e["error"] for e in s["skill_errors"])
    art = json.loads((rd / ART).read_text())
    by = {e["name"]: e for e in art["entries"]}
    assert by["fused_moe_kernel"]["modeled"] and by["fused_moe_kernel"]["headroom_class"] == "saturated"
    att = by["kernel_paged_attention_2d"]
    assert att["modeled"] is False and att["headroom_class"] == "unknown"
    assert [d["name"] for d in art["degraded"]] == ["kernel_paged_attention_2d"]
    assert any("model exploded" in e["error"] for e in art["skill_errors"])
    assert "model exploded" in (rd / MD).read_text()


def _first_artifact(rd):
    s = hook.run(rd)
    assert s["skill_errors"] == []
    return (rd / ART).read_bytes(), (rd / MD).read_bytes()


@pytest.mark.parametrize("where", ["replace", "write", "fsync"])
def test_a_write_killed_midway_leaves_the_old_artifact(run_root, monkeypatch, where):
    rd = round_dir(run_root)
    old_json, old_md = _first_artifact(rd)
    # the re-run would produce something different (stage C forced), so a torn write would show
    real_replace, calls = os.replace, []

    def crash(*a, **k):
        calls.append(a)
        raise OSError(f"simulated crash in {where}")

    if where == "replace":
        monkeypatch.setattr(pairwrite.os, "replace", crash)
    elif where == "fsync":
        monkeypatch.setattr(pairwrite.os, "fsync", crash)
    else:
        real_write = os.write

        def half(fd, data):
            """Write half the bytes, then die."""
            real_write(fd, bytes(data[: len(data) // 2]))
            crash()

        monkeypatch.setattr(pairwrite.os, "write", half)
    s = hook.run(rd, stage="C", head_threshold_pct=1.0)
    monkeypatch.undo()
    assert calls, "the crash was not triggered"
    assert s["json"] is None and any(f"simulated crash in {where}" in e["error"] for e in s["skill_errors"])
    assert (rd / ART).read_bytes() == old_json
    assert (rd / MD).read_bytes() == old_md
    assert _tmp_files(rd) == []
    assert real_replace is os.replace


def test_stage_rerun_overwrites_atomically(run_root):
    rd = round_dir(run_root)
    _first_artifact(rd)
    s = hook.run(rd, stage="C")
    assert s["stage"] == "C" and s["json"]
    assert json.loads((rd / ART).read_text())["stage"] == "C"
    assert "stage C" in (rd / MD).read_text()
    assert _tmp_files(rd) == []


def test_a_failed_rerun_leaves_the_previous_artifact(run_root):
    rd = round_dir(run_root)
    old_json, old_md = _first_artifact(rd)
    (rd / "profile_topN.json").write_text('{"schema_version": 1, "entries": ')  # truncated by a crash
    s = hook.run(rd)  # never raises
    assert s["json"] == str(rd / ART)
    wheres = [e["where"] for e in s["skill_errors"]]
    assert wheres[0] == "analyze" and "write" in wheres
    assert "profile_topN.json" in s["skill_errors"][0]["error"]
    assert (rd / ART).read_bytes() == old_json and (rd / MD).read_bytes() == old_md


def test_a_failed_first_run_writes_an_empty_artifact_with_the_error(tmp_path):
    # nothing to keep: the pipeline still gets an artifact that says what went wrong
    rd = tmp_path / "profile" / "round_1"
    rd.mkdir(parents=True)
    (rd / "profile_topN.json").write_text("not json")
    (tmp_path / "env_report.json").write_text((EXAMPLE / "env_report.json").read_text())
    s = hook.run(rd)
    assert s["json"] and s["skill_errors"][0]["where"] == "analyze"
    art = json.loads((rd / ART).read_text())
    assert art["entries"] == [] and art["skill_errors"]


def test_entry_point_is_discoverable():
    eps = [ep for ep in entry_points(group="serving_pipeline.analysis") if ep.name == "roofline"]
    if not eps:
        pytest.skip("package not installed (pip install -e .): entry points come from its metadata")
    assert eps[0].value == "roofline.hook:run"
    assert eps[0].load() is hook.run


@pytest.mark.slow   # 2-4 s on a 2-core machine: `-m "not slow"` leaves it out
def test_three_round_example_runs_a_b_c(tmp_path):
    work = tmp_path / "pipe"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, str(ROOT / "examples" / "pipeline_three_rounds.py"), "--workdir",
                        str(work), "--plot"], capture_output=True, text=True, env=env, timeout=180)
    assert p.returncode == 0, p.stderr
    stages = {}
    for r in (1, 2, 3):
        art = json.loads((work / "profile" / f"round_{r}" / ART).read_text())
        stages[r] = art
    assert [stages[r]["stage"] for r in (1, 2, 3)] == ["A", "B", "C"]
    assert all(a["skill_errors"] == [] for a in stages.values())
    # A: estimated shapes, low confidence, the decode GEMM's guess lacks N and K -> degraded
    a = stages[1]
    assert all(e["confidence"] == "low" for e in a["entries"])
    assert [d["name"] for d in a["degraded"]] == ["nvjet_sm90_tst_64x64_64x13_2x1_v_bz_NNT"]
    # B: captured shapes -> every head entry modeled, medium confidence
    b = stages[2]
    assert b["degraded"] == [] and all(e["modeled"] and e["confidence"] == "medium" for e in b["entries"])
    # C: measured DRAM bytes from the real ncu run beside the model's
    c = stages[3]
    by = {e["short_name"]: e for e in c["entries"]}
    g = by["decode_gemm_64x8192x8192"]
    assert g["confidence"] == "high" and g["bytes_measured"] == pytest.approx(137727872.0)
    assert g["bytes_model"] == 64 * 8192 * 2 + 8192 * 8192 * 2 + 64 * 8192 * 2
    assert by["ragged_gemm"]["bytes_measured"] == pytest.approx(16112640.0)
    # the head is the same in every round (scope is pct_gpu_time, never the estimate)
    assert [e["name"] for e in a["entries"]] == [e["name"] for e in c["entries"]]
    assert "stage A" in p.stdout and "stage B" in p.stdout and "stage C" in p.stdout
    assert (work / "profile" / "round_3" / "roofline.png").stat().st_size > 10_000
    assert "![roofline](roofline.png)" in (work / "profile" / "round_3" / MD).read_text()
    # step 4: a measurement fed back beats the round-3 prediction of the decode GEMM (1.25x it)
    g4 = next(e for e in json.loads((work / "profile" / "round_3" / ART).read_text())["entries"]
              if e["short_name"] == "decode_gemm_64x8192x8192")
    assert g4["model_contradicted"] is True
    assert g4["measured_attainable_speedup"] == round(1.25 * g["attainable_speedup"], 3)
    assert "model_contradicted=true" in p.stdout and "step 4 (feedback)" in p.stdout
    pb = (work / "knowledge" / "backend_playbook.md").read_text().strip().splitlines()[-1]
    assert f"| {g['attainable_speedup']:.3f} | " in pb and "the model was wrong" in pb and pb in p.stdout
    assert "no proposal for target_eff[gemm] yet" in p.stdout and "1 record(s)" in p.stdout   # one record: too few for a proposal (roofline playbook needs 3)


def test_a_process_killed_mid_write_leaves_the_old_artifact(run_root):
    # a real crash: the process dies (SIGKILL) after the new text is staged, before it replaces the old
    rd = round_dir(run_root)
    old_json, old_md = _first_artifact(rd)
    code = (
        "import os, signal, sys\n"
        "from roofline import hook\nfrom roofline.io import pairwrite\n"
        "pairwrite.os.replace = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)\n"
        f"hook.run({str(rd)!r}, stage='C')\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=120)
    assert p.returncode == -9
    assert (rd / ART).read_bytes() == old_json and (rd / MD).read_bytes() == old_md
    # killed after the commit point (the new pair complete in .profile_roofline.commit), before it
    # replaced the old one: the next start rolls it forward, leaving the new pair and nothing else
    assert (rd / report.COMMIT_DIR).is_dir()
    report.recover(rd)
    assert json.loads((rd / ART).read_text())["stage"] == "C" and "stage C" in (rd / MD).read_text()
    assert not [p for p in rd.iterdir() if p.name.startswith(".")]
    s = hook.run(rd, stage="C")  # the next run still writes normally
    assert s["json"] and json.loads((rd / ART).read_text())["stage"] == "C"
