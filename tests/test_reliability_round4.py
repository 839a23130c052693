"""Reliability, round four (issue 43; issue 42 finding 7): the commands added since the last campaign
(`analyze TRACE`, the workload flags, `compare`, `rerun` without a GPU, ncu inputs) under hostile
input. One test per case of the issue and per case of the same classes; each expects the outcome of
docs/input_policy.md: one line naming the file and what is wrong, exit 2, nothing written or left
behind, no other entry touched; an entry's own problem degrades that entry alone, in the form
`entries[i].PATH: expected WHAT, got FOUND`. The memory case (a gzip that expands to 1 GiB) runs in
a subprocess that reports its peak RSS (slow: the campaign runs it too)."""
from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import reliability as R
from roofline.report import artifact as report

ROOT = R.ROOT
TRACE = R.FIX / "traces" / "prefill.json.gz"
CORPUS = R.FIX / "corpus"
MAX = 2 ** 48


one_line_2 = R.one_line_2   # the documented outcome: exit 2, one line, no internal error


def files_under(d: Path) -> set[str]:
    return {str(p.relative_to(d)) for p in d.rglob("*")}


@pytest.fixture
def rnd(tmp_path):
    """A run root with the baseline inputs (Top-N, env report, config) and its analysed round."""
    rd, paths = R._round(tmp_path / "run", None)
    code, _, err = R.cli(["analyze", str(rd), "-q"])
    assert code == 0, err
    return rd


# ------------------------------------------------------------------ an entry's problem is its own
@pytest.mark.parametrize("bad", [7, True, "x", {"M": 1}])
def test_shapes_of_the_wrong_type_degrade_that_entry_alone_in_the_documented_form(tmp_path, bad):
    base_rd, _ = R._round(tmp_path / "base", None)
    assert R.cli(["analyze", str(base_rd), "-q"])[0] == 0
    base = json.loads((base_rd / report.ARTIFACT_JSON).read_text())
    rd, paths = R._round(tmp_path / "bad", None)
    doc = copy.deepcopy(R.BASE_TOPN)
    doc["entries"][0]["shapes"] = bad
    paths["topn"].write_text(json.dumps(doc))
    code, _, err = R.cli(["analyze", str(rd), "-q"])
    assert code == 0, err
    art = json.loads((rd / report.ARTIFACT_JSON).read_text())
    reasons = {d["name"]: d["reason"] for d in art["degraded"]}
    name0 = doc["entries"][0]["name"]
    # the documented form, nothing appended to it (hints.with_fix left it as is)
    assert reasons[name0].startswith("entries[0].shapes: expected ") and "; for a verdict" not in reasons[name0]
    assert all("internal error" not in r for r in reasons.values()), reasons
    # every other entry exactly as without the bad value
    key = lambda a: {e["name"]: (e["headroom_class"], e["bound_type"], e["attainable_speedup"])  # noqa: E731
                     for e in a["entries"] if e["name"] != name0}
    assert key(art) == key(base)


def test_the_policy_form_is_never_extended_by_a_hint():
    from roofline.core.hints import with_fix

    r = "entries[3].shapes[0].M: expected a positive number, got -1"
    assert with_fix(r) == r and with_fix(r, has_shapes=False) == r
    # a reason of another form still gets its hint (the rule is not switched off)
    assert with_fix("the M dimension cannot be derived") != "the M dimension cannot be derived"


# ------------------------------------------------------------------------------------------ paths
@pytest.mark.parametrize("cmd", [["analyze"], ["plot"], ["rerun"], ["feedback", "--kernel", "k",
                                                                     "--isolated-speedup", "1.1"]])
def test_a_file_name_over_the_system_limit_is_one_line(tmp_path, cmd):
    long = tmp_path / ("a" * 300)
    said = ("longer than the system allows",) if cmd[0] != "rerun" else ("no such file",)   # the one missing-file wording, from click's check
    one_line_2([cmd[0], long, *cmd[1:]], *said)
    one_line_2([cmd[0], tmp_path / ("b" * 300) / "x.json", *cmd[1:]])


def test_a_long_name_given_to_topn_and_compare(tmp_path, rnd):
    one_line_2(["topn", tmp_path / ("a" * 300)], "longer than the system allows")
    one_line_2(["compare", rnd, tmp_path / ("a" * 300)], "longer than the system allows")


def _without_dac(args, cwd):
    """The CLI as a process that honours file permissions (root without CAP_DAC_OVERRIDE and
    CAP_DAC_READ_SEARCH: root reads a folder without read permission anyway)."""
    code = f"from roofline.cli import main\nmain.main({[str(a) for a in args]!r}, prog_name='roofline')"
    pre = []
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("root without setpriv: permissions cannot be honoured")
        caps = "-dac_override,-dac_read_search"
        pre = ["setpriv", f"--inh-caps={caps}", f"--bounding-set={caps}"]
    return subprocess.run([*pre, sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))


@pytest.mark.parametrize("mode", [0o000, 0o600])   # no permission at all; read but no search (x) permission
def test_a_round_folder_without_permission_is_one_line(tmp_path, mode):
    rd, _ = R._round(tmp_path / "run", None)
    os.chmod(rd, mode)
    try:
        for cmd in (["analyze", rd], ["plot", rd], ["rerun", rd]):
            p = _without_dac(cmd, tmp_path)
            lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
            assert p.returncode == 2 and len(lines) == 1 and "internal error" not in p.stderr, p.stderr
            # click's own check ("is not readable") or ours ("Permission denied"): the folder named
            assert str(rd) in p.stderr and ("ermission" in p.stderr or "not readable" in p.stderr), p.stderr
    finally:
        os.chmod(rd, 0o755)


# --------------------------------------------------------------------------------- analyze TRACE
@pytest.fixture
def trace(tmp_path):
    t = tmp_path / "t.json.gz"
    shutil.copy(TRACE, t)
    return t


@pytest.mark.parametrize("env_text", ["{", "[1]", '{"gfx": 5}', '{"gfx": "sm_90", "workload": {"isl": -1}}'])
def test_analyze_trace_with_a_bad_env_is_one_line_and_leaves_nothing(tmp_path, trace, env_text):
    (tmp_path / "bad.json").write_text(env_text)
    before = files_under(tmp_path)
    one_line_2(["analyze", trace, "--env", tmp_path / "bad.json"], "bad.json")
    assert files_under(tmp_path) == before


def test_analyze_trace_with_a_bad_config_leaves_nothing(tmp_path, trace):
    (tmp_path / "config.json").write_text('{"hidden_size": -4}')
    before = files_under(tmp_path)
    one_line_2(["analyze", trace, "--config", tmp_path / "config.json"], "config.json", "hidden_size")
    assert files_under(tmp_path) == before


def test_analyze_trace_failing_after_the_conversion_undoes_it(tmp_path, trace):
    (tmp_path / "c.csv").write_text("not,a,counter\nfile,at,all\n")
    before = files_under(tmp_path)
    one_line_2(["analyze", trace, "--counters", tmp_path / "c.csv"], "c.csv")
    assert files_under(tmp_path) == before
    # a second run over an earlier good one: the earlier Top-N and env report are put back byte for byte
    assert R.cli(["analyze", str(trace), "-q"])[0] == 0
    out = tmp_path / "t_roofline"
    kept = {p.name: p.read_bytes() for p in out.iterdir()}
    one_line_2(["analyze", trace, "--counters", tmp_path / "c.csv"], "c.csv")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == kept


@pytest.mark.parametrize("v", [str(MAX + 1), str(10 ** 20), "9" * 400, "0", "-3", "1e3", "nan"])
def test_analyze_trace_workload_flags_out_of_bounds_leave_nothing(tmp_path, trace, v):
    before = files_under(tmp_path)
    one_line_2(["analyze", trace, "--isl", v, "--osl", "8", "--conc", "1"], "--isl")
    assert files_under(tmp_path) == before


# ------------------------------------------------------------------------ workload flags' bounds
@pytest.mark.parametrize("flag", ["--isl", "--osl", "--conc"])
@pytest.mark.parametrize("v", [str(MAX + 1), str(10 ** 20), "9" * 400, "9" * 5000])
def test_workload_flags_obey_the_env_reports_bounds(rnd, flag, v):
    flags = {"--isl": "8", "--osl": "8", "--conc": "1", flag: v}
    before = (rnd / report.ARTIFACT_JSON).read_bytes()
    one_line_2(["analyze", rnd, *[x for kv in flags.items() for x in kv]], flag)
    assert (rnd / report.ARTIFACT_JSON).read_bytes() == before


def test_topn_never_writes_a_starter_env_report_analyze_refuses(tmp_path, trace):
    for v in (str(MAX + 1), str(10 ** 20), "9" * 400):
        one_line_2(["topn", trace, "-o", tmp_path / "o" / "profile_topN.json", "--isl", v], "--isl")
        assert not (tmp_path / "o").exists()
    # the largest count a file may hold is accepted by both
    assert R.cli(["topn", str(trace), "-o", str(tmp_path / "o" / "profile_topN.json"), "-q", "--isl", str(MAX),
                  "--osl", "8", "--conc", "1"])[0] == 0
    code, _, err = R.cli(["analyze", str(tmp_path / "o"), "-q"])
    assert code == 0, err


@pytest.mark.parametrize("args", [["--decode-steps", str(MAX + 1)], ["--top", "9" * 400], ["--min-pct", "nan"],
                                  ["--round", "-1"], ["--prefill-steps", "1e400"]])
def test_topn_numbers_obey_the_same_bounds(tmp_path, trace, args):
    one_line_2(["topn", trace, "-o", tmp_path / "o.json", *args], args[0])
    assert not (tmp_path / "o.json").exists()


@pytest.mark.parametrize("args", [["--isolated-speedup", "nan"], ["--isolated-speedup", "inf"],
                                  ["--isolated-speedup", "1e400"], ["--isolated-speedup", "1.2", "--e2e-delta-pct",
                                                                    "nan"], ["--isolated-speedup", "-1"]])
def test_feedback_numbers_are_finite(rnd, args):
    before = (rnd / report.ARTIFACT_JSON).read_bytes()
    one_line_2(["feedback", rnd, "--kernel", "x", *args])
    assert (rnd / report.ARTIFACT_JSON).read_bytes() == before


@pytest.mark.parametrize("v", ["nan", "inf", "-inf", "1e400"])
def test_analyze_head_threshold_is_a_finite_share(rnd, v):
    one_line_2(["analyze", rnd, "--head-threshold", v], "--head-threshold")


# ------------------------------------------------------------------------ found by this campaign
@pytest.mark.parametrize("where", ["top", "text_config"])
@pytest.mark.parametrize("bad", [{"value": "qwen3"}, ["qwen3"], 7, True])
def test_a_config_model_type_of_another_type_is_no_name_and_breaks_no_entry(tmp_path, where, bad):
    """The config's model_type is read as a name (the model family); one of another type is left out,
    as if absent: every entry exactly as with no model_type at all (it was an internal error per entry)."""
    outs = []
    for i, value in enumerate((None, bad)):
        rd, paths = R._round(tmp_path / f"r{i}", None)
        cfg = copy.deepcopy(R.BASE_CONFIG)
        for d in (cfg, cfg.get("text_config") or {}):
            d.pop("model_type", None)
        if value is not None:
            (cfg.setdefault("text_config", {}) if where == "text_config" else cfg)["model_type"] = value
        paths["config"].write_text(json.dumps(cfg))
        code, out, err = R.cli(["analyze", str(rd), "--format", "json", "--no-write"])
        assert code == 0 and "internal error" not in out + err, err
        art = json.loads(out)
        outs.append(({e["name"]: e["headroom_class"] for e in art["entries"]}, [d["reason"] for d in art["degraded"]]))
    assert outs[1] == outs[0]
