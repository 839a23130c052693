"""Reliability, round four (issue 43; issue 42 finding 7), the files of the new commands: `compare`
(crashes, other work wherever the files are, no saving from a kernel of one round, no record from a
bad time), `rerun` without a GPU (--dispatch and the artifact: every file problem is one line naming
the file), ncu inputs (special files said as such), a gzipped counter file that expands to 1 GiB
(streamed: peak RSS in a subprocess, slow) and a Top-N parsed once per analyze run."""
from __future__ import annotations

import copy
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import reliability as R
from roofline.report import artifact as report

CORPUS = R.FIX / "corpus"


one_line_2 = R.one_line_2   # the documented outcome: exit 2, one line, no internal error


def records(d: Path) -> list[dict]:
    jl = d / "backend_playbook.jsonl"
    return [json.loads(x) for x in jl.read_text().splitlines()] if jl.exists() else []


@pytest.fixture
def two(tmp_path):
    """Two analysed rounds of one run (the baseline inputs); round 2's kernels 1.5x faster."""
    rd, _ = R._round(tmp_path / "run", None)
    rd2 = rd.parent / "round_2"
    rd2.mkdir()
    doc = copy.deepcopy(R.BASE_TOPN)
    for e in doc["entries"]:
        for r in e["regimes"].values():
            r["base_latency_ms"] /= 1.5
    (rd2 / "profile_topN.json").write_text(json.dumps(doc))
    for d in (rd, rd2):
        code, _, err = R.cli(["analyze", str(d), "-q"])
        assert code == 0, err
    return rd, rd2, tmp_path / "kb"


def _edit(path: Path, fn) -> None:
    doc = json.loads(path.read_text())
    fn(doc)
    path.write_text(json.dumps(doc))


def test_compare_baseline_records_the_changed_kernels(two):
    a, b, kb = two
    code, _, err = R.cli(["compare", str(a), str(b), "--playbook-dir", str(kb)])
    assert code == 0, err
    recs = records(kb)
    assert recs and all(r["measured_inrun_speedup"] == pytest.approx(1.5) for r in recs)


@pytest.mark.broken_artifact("compare is given damaged rounds on purpose")
@pytest.mark.parametrize("what,fn,needle", [
    ("deep", None, "nested deeper"),
    ("entries_1_art", lambda d: d.__setitem__("entries", [1]), "profile_roofline.json"),
    ("t_ms_fast", lambda d: d["entries"][0].__setitem__("t_ms", "fast"), "t_ms"),
    ("serving_str", "topn", "serving"),
])
def test_compare_file_problems_are_one_line_and_record_nothing(two, what, fn, needle):
    a, b, kb = two
    if what == "deep":
        (b / "profile_topN.json").write_text("[" * 100_000 + "]" * 100_000)
    elif fn == "topn":
        _edit(b / "profile_topN.json", lambda d: d.__setitem__("serving", "x"))
    else:
        _edit(b / report.ARTIFACT_JSON, fn)
    one_line_2(["compare", a, b, "--playbook-dir", kb], needle)
    assert not kb.exists()


@pytest.mark.broken_artifact("compare is given damaged rounds on purpose")
@pytest.mark.parametrize("bad", [{"regimes": "x"}, {"regimes": {"decode": 3}}, {"pct_gpu_time": "7"},
                                 {"regimes": {"decode": {"base_latency_ms": "fast", "launches_per_step": 1}}}])
def test_compare_an_entrys_problem_leaves_that_kernel_out(two, bad):
    a, b, kb = two
    _edit(b / "profile_topN.json", lambda d: d["entries"][0].update(bad))
    code, out, err = R.cli(["compare", str(a), str(b), "--playbook-dir", str(kb), "--format", "json"])
    assert code == 0, err
    res = json.loads(out)
    name0 = R.BASE_TOPN["entries"][0]["name"]
    row = next(r for r in res["kernels"] if r["kernel"] == name0)
    assert row["measured_inrun_speedup"] is None
    assert name0 not in {r["kernel"] for r in records(kb)}
    assert any(r["measured_inrun_speedup"] == pytest.approx(1.5) for r in res["kernels"])   # the others compared


@pytest.mark.broken_artifact("compare is given damaged rounds on purpose")
@pytest.mark.parametrize("t", [-0.5, float("nan"), float("inf"), 0.0, 1e-300, 1e300])
def test_compare_never_records_a_non_finite_or_negative_time(two, t):
    a, b, kb = two

    def bad(d):
        for e in d["entries"]:
            for r in e["regimes"].values():
                r["base_latency_ms"] = t
    _edit(b / "profile_topN.json", bad)
    code, out, err = R.cli(["compare", str(a), str(b), "--playbook-dir", str(kb), "--format", "json"])
    assert code == 0, err
    assert all(r["measured_inrun_speedup"] is None for r in json.loads(out)["kernels"])
    for r in records(kb):
        s = r["measured_inrun_speedup"]
        assert s is not None and math.isfinite(s) and s > 0, r


def test_compare_an_e2e_delta_that_is_not_finite_is_refused(two):
    a, b, kb = two
    one_line_2(["compare", a, b, "--e2e-delta-pct", "nan", "--playbook-dir", kb], "--e2e-delta-pct")
    assert not kb.exists()


@pytest.mark.broken_artifact("compare is given damaged rounds on purpose")
def test_compare_a_kernel_of_one_round_is_never_a_saving(two):
    a, b, kb = two
    gone = R.BASE_TOPN["entries"][0]["name"]
    _edit(b / "profile_topN.json", lambda d: d.__setitem__("entries", d["entries"][1:]))
    code, out, err = R.cli(["compare", str(a), str(b), "--playbook-dir", str(kb), "--format", "json",
                            "--kernel", gone])
    assert code == 0, err
    row = next(r for r in json.loads(out)["kernels"] if r["kernel"] == gone)
    assert row["measured_kernel_e2e_gain_pct"] is None and not row["time_change_real"]
    assert gone not in {r["kernel"] for r in records(kb)}


def test_compare_artifacts_of_other_devices_copied_away_are_refused(two, tmp_path):
    a, b, kb = two
    away = tmp_path / "elsewhere"
    away.mkdir()
    shutil.copy(a / report.ARTIFACT_JSON, away / "a.json")
    shutil.copy(b / report.ARTIFACT_JSON, away / "b.json")
    _edit(away / "b.json", lambda d: d.update(gpu_name="AMD Instinct MI355X", gfx="gfx950"))
    (a.parent.parent / "env_report.json").unlink()   # nothing but the artifacts themselves to tell
    one_line_2(["compare", away / "a.json", away / "b.json", "--playbook-dir", kb], "not the same work",
               "MI355X")
    assert not kb.exists()


def _corpus_round(tmp_path: Path, model: str, config_via: str) -> Path:
    """A round of a real corpus trace, analysed with its model's config: given to analyze (recorded
    as the artifact's inputs.config) or through the starter env report's config_path."""
    d = tmp_path / model
    d.mkdir()
    cfg = CORPUS / "configs" / f"{model}.json"
    args = ["topn", str(CORPUS / f"{model}.json.gz"), "-o", str(d / "profile_topN.json"), "-q"]
    assert R.cli(args + (["--config", str(cfg)] if config_via == "env" else []))[0] == 0
    code, _, err = R.cli(["analyze", str(d), "-q"] + (["--config", str(cfg)] if config_via == "artifact" else []))
    assert code == 0, err
    return d


@pytest.mark.parametrize("config_via", ["artifact", "env"])
def test_compare_other_models_are_refused_by_their_configs(tmp_path, config_via):
    a = _corpus_round(tmp_path, "llama_liger", config_via)
    b = _corpus_round(tmp_path, "qwen3_static_eager", config_via)
    one_line_2(["compare", a, b, "--playbook-dir", tmp_path / "kb"], "not the same work", "model config")
    assert not (tmp_path / "kb").exists()


def test_compare_other_models_are_refused_by_their_weight_shapes_alone(tmp_path):
    a = _corpus_round(tmp_path, "llama_liger", "none")
    b = _corpus_round(tmp_path, "qwen3_static_eager", "none")
    one_line_2(["compare", a, b, "--playbook-dir", tmp_path / "kb"], "weight shapes")
    assert not (tmp_path / "kb").exists()


def test_weight_shapes_are_those_of_the_model():
    """The fingerprint compare reads: the K of the captured GEMMs are the config's sizes (counted from
    the config, not from the tool)."""
    from roofline.stagec import samework

    c = json.loads((CORPUS / "configs" / "llama_liger.json").read_text())
    got = samework.weight_shapes({"topn": json.loads(_topn_doc("llama_liger")), "artifact": None})
    assert got and {k for _, k in got} <= {c["hidden_size"], c["intermediate_size"]}


def _topn_doc(model: str) -> str:
    import tempfile

    with tempfile.TemporaryDirectory() as t:
        out = Path(t) / "t.json"
        assert R.cli(["topn", str(CORPUS / f"{model}.json.gz"), "-o", str(out), "-q", "--no-env-report"])[0] == 0
        return out.read_text()


# ------------------------------------------------------------------------------- rerun, no GPU
def _specials(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for name, content in (("notjson", b"{"), ("list", b"[1, 2]"), ("string", b'"x"'), ("notutf8", b'\xff\xfe{}'),
                          ("deep", b"[" * 100_000 + b"]" * 100_000), ("classes", b'{"classes": 5}')):
        out[name] = tmp_path / f"{name}.json"
        out[name].write_bytes(content)
    out["fifo"] = tmp_path / "fifo.json"
    os.mkfifo(out["fifo"])
    out["zero"] = tmp_path / "zero.json"
    out["zero"].symlink_to("/dev/zero")
    return out


@pytest.mark.parametrize("kind", ["notjson", "list", "string", "notutf8", "deep", "classes", "fifo", "zero"])
def test_rerun_dispatch_file_problems_are_one_line_naming_the_file(two, tmp_path, kind):
    a, _, _ = two
    f = _specials(tmp_path)[kind]
    before = (a / report.ARTIFACT_JSON).read_bytes()
    one_line_2(["rerun", a, "--dispatch", f], f.name)
    assert (a / report.ARTIFACT_JSON).read_bytes() == before


@pytest.mark.parametrize("kind", ["notjson", "list", "notutf8", "deep", "fifo", "zero"])
def test_rerun_artifact_problems_are_one_line_naming_the_file(tmp_path, kind):
    f = _specials(tmp_path)[kind]
    one_line_2(["rerun", f], f.name)


# ---------------------------------------------------------------------------------- ncu inputs
@pytest.mark.parametrize("kind,said", [("fifo", "FIFO"), ("zero", "device")])
@pytest.mark.parametrize("suffix", [".ncu-rep", ".ncu-rep.gz", ".csv"])
def test_topn_and_counters_say_what_a_special_ncu_input_is(tmp_path, rnd_dir, kind, said, suffix):
    f = tmp_path / f"r{suffix}"
    if kind == "fifo":
        os.mkfifo(f)
    else:
        f.symlink_to("/dev/zero")
    one_line_2(["topn", f, "-o", tmp_path / "o.json"], said)
    one_line_2(["analyze", rnd_dir, "--counters", f], said)
    assert not (tmp_path / "o.json").exists()


@pytest.fixture
def rnd_dir(tmp_path):
    rd, _ = R._round(tmp_path / "run", None)
    return rd


def _peak_rss_mb(code: str) -> tuple[int, str]:
    """Run `code` in a fresh interpreter; (its peak RSS in MB, its stdout+stderr)."""
    wrapped = ("import sys\nsys.path.insert(0, 'tests')\nimport reliability as R\n" + code
               + "\nprint('PEAK_RSS_KB', R.peak_rss_kb())")   # VmHWM: not the parent's size kept across exec
    p = subprocess.run([sys.executable, "-c", wrapped], capture_output=True, text=True, timeout=600, cwd=R.ROOT,
                       env=dict(os.environ, PYTHONPATH=str(R.ROOT)))
    kb = int(p.stdout.split("PEAK_RSS_KB")[1].split()[0])
    return kb // 1024, p.stdout + p.stderr


@pytest.mark.slow   # writes and inflates 1 GiB: ~10 s
def test_a_gzipped_counter_file_expanding_to_1_gib_is_streamed(tmp_path):
    gz = tmp_path / "big.ncu-rep.gz"
    R.write_expanding_gzip(gz, 1 << 30, ratio=150)
    assert gz.stat().st_size < 12 << 20   # within the 200x ratio guard: a bomb the guard lets through
    rd, _ = R._round(tmp_path / "run", None)
    mb, out = _peak_rss_mb(f"import sys\nfrom roofline.cli import main\ntry:\n    main.main(['analyze', {str(rd)!r}, "
                           f"'--counters', {str(gz)!r}, '-q'], prog_name='roofline')\nexcept SystemExit as e:\n"
                           "    print('EXIT', e.code)")
    assert "EXIT 2" in out and "big.ncu-rep.gz" in out and "internal error" not in out, out
    assert mb < 400, f"peak RSS {mb} MB: the 1 GiB was not streamed"
    assert not list(Path(os.environ.get("TMPDIR", "/tmp")).glob("roofline-gunzip-*"))


def test_a_top_n_is_parsed_once_per_analyze_run(rnd_dir, monkeypatch):
    from roofline.core import inputs

    calls = []
    real = inputs.parse_topn
    monkeypatch.setattr(inputs, "parse_topn", lambda *a, **k: calls.append(1) or real(*a, **k))
    code, _, err = R.cli(["analyze", str(rnd_dir)])
    assert code == 0, err
    assert len(calls) == 1


@pytest.mark.parametrize("kind", ["fifo", "zero", "deep", "notutf8"])
@pytest.mark.parametrize("cmd", ["render", "plot"])
def test_ladder_bench_results_go_through_the_bounded_reader(tmp_path, kind, cmd):
    f = _specials(tmp_path)[kind]
    one_line_2(["ladder", cmd, f], f.name)
