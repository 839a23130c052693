"""The first hour, round two: what a new user still tripped on (the env-report loop, the playbook's run
root, CLI manners, tables that say what they mean, CUDA-graph-only traces, wall time, the test
command's cost). Outside words (item 3) are tests/test_own_words.py; the docs (item 8) are
tests/test_docs.py, tests/test_docs_fields.py and tests/test_tutorial.py.

Every CLI case checks what it prints (one line for an error, naming what and where), the exit
code, no traceback, and that nothing is written where nothing should be. Numbers are checked
against an independent count from the real H200 traces (fixtures/traces*/).
"""
from __future__ import annotations

import csv
import gzip
import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from roofline.cli import LAZY_COMMANDS, main
from test_first_hour import _files, _one_line_exit2, _run  # noqa: F401  (the CLI helpers, one copy)

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures"
TRACES = FIX / "traces"
REAL = FIX / "traces_real"
META = json.loads((REAL / "fixtures_meta.json").read_text())["traces"]


def _ok(r):
    assert r.exit_code == 0, r.output
    assert "Traceback" not in r.output and r.exception is None
    return r


def _topn(trace, out, *flags):
    return _ok(_run(["topn", trace, "-o", out, "-q", *flags]))


# ------------------------------------------------------------------ 1. the env-report loop

def test_every_missing_env_field_is_named_at_once(tmp_path):
    out = tmp_path / "profile_topN.json"
    _topn(TRACES / "decode.json.gz", out, "--no-env-report")
    env = tmp_path / "env.json"
    env.write_text(json.dumps({"model_dtype": "bf16"}))
    before = _files(tmp_path)
    line = _one_line_exit2(_run(["analyze", out, "--env", env]),
                           "required fields are missing: gfx, model_arch_class, workload.isl, workload.osl, "
                           "workload.conc", str(env))
    assert "deviceProperties" not in line and "roofline topn" not in line   # a user's file: edit it
    assert _files(tmp_path) == before


def test_topn_fills_the_starter_it_wrote_and_keeps_hand_edits(tmp_path):
    out = tmp_path / "run" / "profile" / "round_1" / "profile_topN.json"
    env_p = out.parent / "env_report.json"
    r = _topn(TRACES / "decode.json.gz", out)
    assert json.loads(env_p.read_text())["generated_by"]["missing"] == ["workload.isl", "workload.osl",
                                                                         "workload.conc"]
    env = json.loads(env_p.read_text())
    env["tp"] = 2                                     # a hand edit to the starter
    env_p.write_text(json.dumps(env))
    r = _ok(_run(["topn", TRACES / "decode.json.gz", "-o", out, "--isl", 128, "--osl", 8, "--conc", 8]))
    assert (f"filled the starter env report {env_p} (written by roofline topn): workload.isl=128, workload.osl=8, "
            "workload.conc=8") in r.stderr
    assert "kept the existing env report" not in r.stderr and "not known from the trace" not in r.stderr
    env = json.loads(env_p.read_text())
    assert env["workload"] == {"isl": 128, "osl": 8, "conc": 8} and env["tp"] == 2
    assert env["generated_by"]["missing"] == [] and env["generated_by"]["tool"] == "roofline topn"
    # a flag given again replaces its own field only
    _ok(_run(["topn", TRACES / "decode.json.gz", "-o", out, "--conc", 16, "-q"]))
    assert json.loads(env_p.read_text())["workload"] == {"isl": 128, "osl": 8, "conc": 16}
    r = _ok(_run(["analyze", out]))
    assert "not given" not in r.stderr


def test_topn_never_fills_an_env_report_of_the_user(tmp_path):
    out = tmp_path / "profile_topN.json"
    mine = {"gfx": "sm_90", "model_dtype": "bf16", "model_arch_class": "dense", "workload": {"isl": 1}}
    (tmp_path / "env_report.json").write_text(json.dumps(mine))
    r = _ok(_run(["topn", TRACES / "decode.json.gz", "-o", out, "--osl", 8, "--conc", 8]))
    assert "kept the existing env report" in r.stderr and "--osl, --conc not written to it" in r.stderr
    assert json.loads((tmp_path / "env_report.json").read_text()) == mine


def _strip_shapes(topn_path: Path, pred) -> set[str]:
    """Drop the captured shapes of the entries `pred` picks (as a Top-N without record_shapes for
    those ops would have them); -> their names."""
    doc = json.loads(topn_path.read_text())
    names = set()
    for e in doc["entries"]:
        if pred(e):
            for k in ("shapes", "shape_launches", "shape_base_latency_ms", "shape_regimes", "shape_dtypes"):
                e.pop(k, None)
            names.add(e["name"])
    topn_path.write_text(json.dumps(doc))
    return names


def test_without_the_workload_only_what_needs_it_degrades(tmp_path):
    """Every head has captured shapes but the attention one: with no workload in the env report,
    the attention head (its context and batch come from the workload) degrades and says why; every
    other head is analysed."""
    out = tmp_path / "profile_topN.json"
    _topn(TRACES / "decode.json.gz", out)            # starter: no workload given
    shutil.copy(ROOT / "roofline" / "data" / "example" / "config.json", tmp_path / "config.json")
    attn = _strip_shapes(out, lambda e: e.get("op_class") == "attn")
    assert len(attn) == 1
    r = _ok(_run(["analyze", out]))
    art = json.loads((tmp_path / "profile_roofline.json").read_text())
    degraded = {d["name"]: d["reason"] for d in art["degraded"]}
    assert set(degraded) == attn
    (reason,) = degraded.values()
    # a wholly missing workload: the reason names every field the entry needs, not the first one
    assert ("workload.conc, workload.isl, workload.osl are not in the env report" in reason
            and "`roofline topn TRACE --conc N --isl N --osl N`" in reason)
    heads = [e for e in art["entries"] if e["name"] not in attn]
    assert heads and all(e["modeled"] for e in heads)
    warn = [ln for ln in r.stderr.splitlines() if "not given: workload.isl, workload.osl, workload.conc" in ln]
    assert len(warn) == 1 and "(1 entry that needs workload.isl, workload.osl, workload.conc degraded, the others are analysed)" in warn[0]
    assert art["inputs"]["env_missing"] == ["workload.isl", "workload.osl", "workload.conc"]


# ------------------------------------------------------------------ 2. one playbook per run

def _round(tmp_path, r: int, trace) -> Path:
    out = tmp_path / "run" / "profile" / f"round_{r}" / "profile_topN.json"
    _topn(trace, out, "--isl", 128, "--osl", 8, "--conc", 8)
    _ok(_run(["analyze", out]))
    return out.parent


def test_feedback_compare_and_playbook_share_the_run_root(tmp_path):
    r1, r2 = _round(tmp_path, 1, TRACES / "decode.json.gz"), _round(tmp_path, 2, TRACES / "decode.json.gz")
    assert (r1 / "env_report.json").is_file() and (r2 / "env_report.json").is_file()   # one per round
    a1 = json.loads((r1 / "profile_roofline.json").read_text())
    k = a1["entries"][0]["name"]
    _ok(_run(["feedback", r1, "--kernel", k, "--isolated-speedup", 1.2]))
    _ok(_run(["feedback", r2 / "profile_roofline.json", "--kernel", k, "--isolated-speedup", 1.1]))
    r = _ok(_run(["compare", r1, r2, "--kernel", k]))
    kn = tmp_path / "run" / "knowledge"
    assert f"playbook: 1 record(s) appended" in r.output and str(kn / "backend_playbook.md") in r.output
    assert not list((tmp_path / "run" / "profile").rglob("knowledge"))   # nothing beside the rounds
    recs = [json.loads(x) for x in (kn / "backend_playbook.jsonl").read_text().splitlines()]
    assert sorted(x["round"] for x in recs) == [1, 1, 2] and {x["kernel"] for x in recs} == {k}
    # playbook reads the run's records from any folder of the run
    for where in (tmp_path / "run", r2, kn):
        out = _ok(_run(["playbook", where])).output
        assert "gemm" in out and "proposals only" in out


def test_one_run_root_finder(tmp_path):
    """feedback, compare and rerun take the run root from roofline/stagec/runroot.py alone: no other
    module defines a finder, and the finder places each layout of a run."""
    import ast

    from roofline.stagec import runroot

    finders = [p.relative_to(ROOT).as_posix() for p in (ROOT / "roofline").rglob("*.py")
               if any(isinstance(n, ast.FunctionDef) and n.name in ("run_root", "knowledge_dir")
                      for n in ast.walk(ast.parse(p.read_text(encoding="utf-8"))))]
    assert finders == ["roofline/stagec/runroot.py"]
    assert runroot.run_root(Path("/x/run/profile/round_3/profile_roofline.json")) == Path("/x/run")
    assert runroot.run_root(Path("/x/run/round_3")) == Path("/x/run")
    (tmp_path / "r" / "deep").mkdir(parents=True)
    (tmp_path / "r" / "env_report.json").write_text("{}")
    assert runroot.knowledge_dir(tmp_path / "r" / "deep") == (tmp_path / "r" / "knowledge").resolve()


def test_playbook_of_a_run_without_records_says_so(tmp_path):
    d = tmp_path / "run" / "profile" / "round_1"
    d.mkdir(parents=True)
    _one_line_exit2(_run(["playbook", d]), "no backend_playbook.jsonl", str(tmp_path / "run" / "knowledge"))
    assert _files(tmp_path) == {"run", "run/profile", "run/profile/round_1"}


# ------------------------------------------------------------------ 4. CLI manners

def test_bare_roofline_prints_readable_help():
    r = _ok(_run([]))
    lines = r.output.splitlines()
    assert len(lines) > 15 and lines[0].startswith("Usage:")
    for name in LAZY_COMMANDS:
        assert any(ln.strip().startswith(name + " ") for ln in lines), name


def test_the_ladder_help_lists_every_ladder_command():
    import click

    grp = main.get_command(None, "ladder")
    subs = grp.list_commands(None)
    assert {"advise", "render", "list", "run", "bench", "plot"} <= set(subs)
    out = _ok(_run(["ladder", "--help"])).output
    assert all(re.search(rf"^\s+{s}\s", out, re.M) for s in subs)
    root = " ".join(_ok(_run(["--help"])).output.split())
    line = re.search(r"ladder The hand-written sm_90a GEMM ladder: ([a-z, ]+)\.", root).group(1)
    assert sorted(x.strip() for x in line.split(",")) == sorted(subs)
    assert isinstance(grp, click.Group)


def test_analyze_and_plot_take_a_round_folder(tmp_path):
    rd = tmp_path / "profile" / "round_1"
    _topn(TRACES / "prefill.json.gz", rd / "profile_topN.json", "--isl", 128, "--osl", 1, "--conc", 4)
    _ok(_run(["analyze", rd]))
    assert (rd / "profile_roofline.json").is_file()
    r = _ok(_run(["plot", rd]))
    assert (rd / "roofline.png").read_bytes()[:4] == b"\x89PNG" and "8 point(s)" in r.output
    empty = tmp_path / "empty"
    empty.mkdir()
    for cmd, name in (("analyze", "profile_topN.json"), ("plot", "profile_roofline.json"),
                      ("rerun", "profile_roofline.json")):
        _one_line_exit2(_run([cmd, empty]), f"{empty}: a folder without {name}")
    assert _files(empty) == set()


def test_rerun_without_cupy_says_it_is_not_installed(tmp_path, monkeypatch):
    rd = tmp_path / "profile" / "round_1"
    _topn(TRACES / "prefill.json.gz", rd / "profile_topN.json", "--isl", 128, "--osl", 1, "--conc", 4)
    _ok(_run(["analyze", rd]))
    before = (rd / "profile_roofline.json").read_bytes()
    monkeypatch.setitem(sys.modules, "cupy", None)       # `import cupy` raises ImportError
    line = _one_line_exit2(_run(["rerun", rd]), "CuPy is not installed", 'pip install -e ".[gpu]"')
    assert "cannot see a CUDA device" not in line
    assert (rd / "profile_roofline.json").read_bytes() == before and not (tmp_path / "knowledge").exists()
    _one_line_exit2(_run(["rerun", rd / "profile_topN.json"]), "this is a Top-N (profile_topN.json), not an "
                    "analysis artifact")


def test_topn_of_a_picture_says_what_it_is_in_one_printable_line(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pic = tmp_path / "pic.png"
    plt.plot([1, 2])
    plt.savefig(pic)
    plt.close("all")
    line = _one_line_exit2(_run(["topn", pic, "-o", tmp_path / "t.json"]), str(pic), "this is a PNG image",
                           "a PyTorch profiler Chrome trace (.json, .json.gz), an Nsight Compute report (.ncu-rep)")
    assert line.isprintable()
    assert _files(tmp_path) == {"pic.png"}
    # a trace whose JSON breaks on binary bytes: the parser's message, printable, no bytes repr
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"traceEvents": [\x89PNG\x1a\n')
    line = _one_line_exit2(_run(["topn", bad, "-o", tmp_path / "t.json"]), "malformed JSON")
    assert line.isprintable() and "\\x" not in line and "b'" not in line


def test_env_of_another_kind_is_blamed_for_what_it_is(tmp_path):
    out = tmp_path / "r" / "profile_topN.json"
    _topn(TRACES / "decode.json.gz", out, "--isl", 128, "--osl", 8, "--conc", 8)
    no = tmp_path / "notopn.json"
    no.write_text('{"a": 1}')
    before = _files(tmp_path)
    line = _one_line_exit2(_run(["analyze", out, "--env", no]), f"{no}: not an env report: required fields are "
                           "missing: gfx, model_dtype, model_arch_class, workload.isl, workload.osl, workload.conc")
    assert "deviceProperties" not in line and "trace" not in line
    _one_line_exit2(_run(["analyze", out, "--env", out]), f"--env {out}: this is a Top-N (profile_topN.json), not an "
                    "env report")
    _one_line_exit2(_run(["analyze", out, "--config", out.parent / "env_report.json"]), "--config",
                    "this is an env report (env_report.json), not a model config.json")
    assert _files(tmp_path) == before


@pytest.mark.parametrize("suffix,magic", [(".png", b"\x89PNG"), (".svg", b"<?xml"), (".pdf", b"%PDF"),
                                          (".jpg", b"\xff\xd8\xff")])
def test_plot_writes_every_format_its_help_names(tmp_path, suffix, magic):
    from roofline import api
    from roofline.report import artifact as report

    report.write_artifact(api.analyze(ROOT / "roofline" / "data" / "example" / "profile" / "round_1" /
                                      "profile_topN.json"), tmp_path)
    helptext = " ".join(_ok(_run(["plot", "--help"])).output.split())
    assert ".png, .svg, .pdf or .jpg" in helptext
    _ok(_run(["plot", tmp_path, "-o", tmp_path / f"x{suffix}"]))
    assert (tmp_path / f"x{suffix}").read_bytes()[:len(magic)] == magic


def test_plot_refuses_another_format_in_one_line(tmp_path):
    from roofline import api
    from roofline.report import artifact as report

    report.write_artifact(api.analyze(ROOT / "roofline" / "data" / "example" / "profile" / "round_1" /
                                      "profile_topN.json"), tmp_path)
    before = _files(tmp_path)
    _one_line_exit2(_run(["plot", tmp_path, "-o", tmp_path / "x.gif"]), "x.gif", ".png, .svg, .pdf or .jpg",
                    "'.gif'")
    assert _files(tmp_path) == before


# ------------------------------------------------------------------ 5. tables that say what they mean

@pytest.mark.parametrize("trace,env", [(TRACES / "decode.json.gz", None), (REAL / "prefill_llama.json.gz", "env_prefill.json")])
def test_shape_rows_use_the_head_rows_bound_rule_and_say_per_launch(tmp_path, trace, env):
    from roofline.core.procedure import DISPATCH_FLOOR_MS, LATENCY_UTIL

    out = tmp_path / "profile_topN.json"
    _topn(trace, out, "--isl", 128, "--osl", 8, "--conc", 8)
    r = _ok(_run(["analyze", out, "--wide", *(["--env", REAL / env] if env else [])]))
    art = json.loads((tmp_path / "profile_roofline.json").read_text())
    multi = [e for e in art["entries"] if e.get("per_shape")]
    assert multi
    bounds = set()
    for e in multi:
        for row in e["per_shape"]:
            lat = row["t_ms"] <= DISPATCH_FLOOR_MS or max(row["hbm_util"], row["compute_util"]) < LATENCY_UTIL
            assert row["bound_type"] == ("latency" if lat else row["roof_axis"])
            bounds.add(row["bound_type"])
    assert bounds == ({"latency"} if env is None else {"compute"})   # the rule is exercised on both sides
    rows = [ln for ln in r.output.splitlines() if ln.lstrip().startswith("- ")]
    assert rows and all(re.search(r"\(\d+\.\d us/launch\)", ln) for ln in rows if "more shapes" not in ln)
    first = multi[0]
    sub = [ln for ln in rows if f"{first['per_shape'][0]['shape']['M']}x" in ln]
    assert sub and first["per_shape"][0]["bound_type"] in sub[0]


def _gpu_ms_per_step(topn: dict) -> float:
    sv = topn["serving"]
    return topn["total_gpu_time_ms"] / (sv["n_decode_steps"] + sv["n_prefill_steps"])


def test_compare_uses_short_names_says_faster_or_slower_and_warns_on_workloads(tmp_path):
    a = tmp_path / "a" / "profile_topN.json"
    b = tmp_path / "b" / "profile_topN.json"
    _topn(REAL / "graph_decode_mixed.json.gz", a, "--isl", 1024, "--osl", 8, "--conc", 32)
    _topn(REAL / "decode_b64_cat.json.gz", b, "--isl", 1024, "--osl", 8, "--conc", 64)
    _ok(_run(["analyze", a]))
    # another trace at batch 64: every kernel in both rounds has other captured shapes: other work, refused
    r = _run(["compare", a.parent, b.parent])
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "are not the same work (every one of the" in r.stderr and "has other captured shapes" in r.stderr
    # the same trace (same shapes) with conc 64 in its env report and 10% less GPU time: compared, warned
    _topn(REAL / "graph_decode_mixed.json.gz", b, "--isl", 1024, "--osl", 8, "--conc", 64, "--force")
    tb = json.loads(b.read_text())
    tb["total_gpu_time_ms"] *= 0.9
    b.write_text(json.dumps(tb))
    r = _ok(_run(["compare", a.parent, b.parent]))
    warn = [ln for ln in r.stderr.splitlines() if "warning" in ln]
    assert len(warn) == 1 and "different workloads (conc 32 -> 64)" in warn[0]
    # a time change of another workload is no evidence for a prior: nothing goes to the playbook
    assert "playbook: the two rounds ran different workloads: nothing recorded" in r.stdout
    assert not list(tmp_path.rglob("knowledge"))
    ta, tb = json.loads(a.read_text()), json.loads(b.read_text())
    delta = (_gpu_ms_per_step(ta) - _gpu_ms_per_step(tb)) / _gpu_ms_per_step(ta) * 100
    # issue 35 item 8: a step that takes k times as long reads "k.xx slower", not "339.08% slower"
    words = (f"{(_gpu_ms_per_step(tb) / _gpu_ms_per_step(ta)):.2f}x slower" if delta <= -100
             else f"{abs(delta):.2f}% {'faster' if delta > 0 else 'slower'}")
    assert f"e2e: real e2e change: {words} ({delta:+.2f}%, positive = faster" in r.stdout
    assert "% slower" not in r.stdout or delta > -100
    table = r.stdout.split("\ne2e:")[0].splitlines()[1:]
    assert table and not any(ln.startswith("void ") for ln in table)
    from roofline.core.classify import short_name

    names = {short_name(e["name"])[:47] for e in ta["entries"] + tb["entries"]}
    assert all(any(ln.startswith(n) for n in names) for ln in table)


def _ncu_ms(csv_path: Path, startswith: str) -> float:
    rows = list(csv.reader(csv_path.open()))
    h = rows[0]
    i, t = h.index("Kernel Name"), h.index("gpu__time_duration.sum")
    assert rows[1][t] == "ns"
    vals = [float(r[t].replace(",", "")) for r in rows[2:] if r[i].startswith(startswith)]
    return sum(vals) / len(vals) / 1e6


def test_counters_of_other_work_are_flagged(tmp_path):
    out = tmp_path / "profile_topN.json"
    _topn(REAL / "graph_decode_mixed.json.gz", out, "--isl", 1024, "--osl", 8, "--conc", 32)
    counters = FIX / "ncu" / "known_raw.csv"
    r = _ok(_run(["analyze", out, "--counters", counters, "--no-write"]))
    art = json.loads(_ok(_run(["analyze", out, "--counters", counters, "--no-write", "--format", "json"])).stdout)
    topn = json.loads(out.read_text())
    att = next(e for e in topn["entries"] if e["name"].startswith("cudnn_generated_fort_native_sdpa"))
    ratio = _ncu_ms(counters, "cudnn_generated_fort_native_sdpa") / att["regimes"]["decode"]["base_latency_ms"]
    assert not 0.8 <= ratio <= 1.25       # the report measured another workload's attention
    warn = [ln for ln in r.stderr.splitlines() if "counters' time per launch" in ln]
    assert len(warn) == 1 and att["short_name"] in warn[0] and f"{ratio:.2f}x the trace's" in warn[0]
    e = next(x for x in art["entries"] if x["name"] == att["name"])
    assert e["counters"]["t_ms_over_trace"] == pytest.approx(ratio, rel=1e-6) and "matched by name only" in e["notes"]


def test_counters_of_the_same_work_are_not_flagged(tmp_path):
    d = tmp_path / "r"
    d.mkdir()
    shutil.copy(FIX / "hook" / "round_b_topN.json", d / "profile_topN.json")
    r = _ok(_run(["analyze", d / "profile_topN.json", "--env", FIX / "hook" / "env_report.json",
                  "--counters", FIX / "ncu" / "known_raw.csv", "--no-write", "--format", "json"]))
    art = json.loads(r.stdout)
    matched = [e for e in art["entries"] if e.get("counters")]
    assert len(matched) == 4 and "counters' time per launch" not in r.stderr
    assert all(0.8 <= e["counters"]["t_ms_over_trace"] <= 1.25 for e in matched)


# ------------------------------------------------------------------ 6. CUDA-graph-only traces

def _renamed_ranges(src: Path, dst: Path) -> None:
    """The real mixed trace with its eager step's ranges named decode_eager and the graph steps'
    decode_graph (the way a serving loop may name them)."""
    doc = json.loads(gzip.open(src).read())
    ev = doc["traceEvents"]
    steps = sorted({e["args"]["External id"] for e in ev if e.get("cat") in ("user_annotation", "gpu_user_annotation")
                    and e.get("name") == "decode_step"})
    for e in ev:
        if e.get("cat") in ("user_annotation", "gpu_user_annotation") and e.get("name") == "decode_step":
            e["name"] = "decode_eager" if e["args"]["External id"] == steps[0] else "decode_graph"
    dst.write_bytes(gzip.compress(json.dumps(doc).encode()))


def test_the_step_label_counts_eager_and_graph_steps(tmp_path):
    m = META["graph_decode_mixed"]
    n_e, n_g = m["eager_steps"], m["graph_replays"]
    r = _ok(_run(["topn", REAL / "graph_decode_mixed.json.gz", "-o", tmp_path / "a.json", "--no-env-report"]))
    assert f"(decode: {n_e + n_g} x 'decode_step' ({n_e} eager, {n_g} replaying a CUDA graph))" in r.stderr
    trace = tmp_path / "renamed.json.gz"
    _renamed_ranges(REAL / "graph_decode_mixed.json.gz", trace)
    r = _ok(_run(["topn", trace, "-o", tmp_path / "b.json", "--no-env-report"]))
    assert (f"(decode: {n_e + n_g} steps ({n_e} x 'decode_eager', {n_g} x 'decode_graph') ({n_e} eager, {n_g} "
            "replaying a CUDA graph))") in r.stderr
    doc = json.loads((tmp_path / "b.json").read_text())
    assert doc["serving"]["n_decode_steps"] == n_e + n_g and doc["wall_time"]["decode"]["graph_steps"] == n_g


def test_a_graph_only_trace_without_model_dtype_degrades_and_plots_on_sensible_axes(tmp_path):
    rd = tmp_path / "profile" / "round_1"
    _topn(REAL / "graph_decode_replay_only.json.gz", rd / "profile_topN.json", "--isl", 1024, "--osl", 8,
          "--conc", 32)
    assert "model_dtype" not in json.loads((rd / "env_report.json").read_text())
    r = _ok(_run(["analyze", rd]))
    art = json.loads((rd / "profile_roofline.json").read_text())
    assert art["entries"] and len(art["degraded"]) == len(art["entries"])
    # every entry degrades for want of shapes (CUDA-graph replays), none for model_dtype: so nothing
    # asks for it (issue 35: ask only for what changes an answer); the reasons say what would help
    assert not any("model_dtype" in d["reason"] for d in art["degraded"])
    assert not any("not given: model_dtype" in ln for ln in r.stderr.splitlines())
    assert all("eager step" in d["reason"] or "shapes" in d["reason"] for d in art["degraded"])
    from roofline.report.plot import plot_artifact

    info = plot_artifact(art, tmp_path / "g.png")
    x_lo, x_hi, y_lo, y_hi = info["limits"]
    ridge = info["ridges"]["bf16"]
    assert info["points"] == [] and len(info["skipped"]) == len(art["entries"])
    assert x_lo <= 1.0 and x_hi >= 1e3 and x_lo < ridge < x_hi        # the usual span, the ridge inside
    assert y_hi > max(info["compute_roofs"].values()) and y_lo < info["hbm_bw_bytes_s"] * x_lo
    r = _ok(_run(["plot", rd, "-o", tmp_path / "g2.png"]))
    assert "0 point(s)" in r.output and "not placed:" in r.output


# ------------------------------------------------------------------ 7. wall time

def test_covered_time_matches_a_brute_force_count():
    """The union-in-a-window arithmetic of roofline/ingest/walltime.py against a 0.5-unit grid count."""
    import random

    from roofline.ingest.walltime import _covered, _union

    rng = random.Random(7)
    for _ in range(200):
        n = rng.randint(0, 12)
        starts = [rng.randint(0, 80) for _ in range(n)]
        durs = [rng.randint(0, 15) for _ in range(n)]
        u = _union(starts, durs)
        a = rng.randint(-5, 90)
        b = a + rng.randint(0, 40)
        grid = sum(1 for i in range(2 * a, 2 * b) if any(s <= i / 2 < s + d for s, d in zip(starts, durs)))
        assert _covered(u, a, b) == pytest.approx(grid / 2, abs=1e-9), (starts, durs, a, b)


def _independent_wall(trace: Path) -> dict:
    """GPU-busy share of the steps, counted here from the raw events: steps from their GPU ranges
    (one per External id), each from its start to the next one's; kernel time as the merged union."""
    ev = json.loads(gzip.open(trace).read())["traceEvents"]
    by_ext: dict = {}
    for e in ev:
        if e.get("cat") == "gpu_user_annotation" and re.search("decode|prefill", e["name"]):
            x = e["args"]["External id"]
            a, b = e["ts"], e["ts"] + e["dur"]
            lo, hi = by_ext.get(x, (a, b))
            by_ext[x] = (min(lo, a), max(hi, b))
    steps = sorted(by_ext.values())
    wins = [(a, steps[i + 1][0] if i + 1 < len(steps) else b) for i, (a, b) in enumerate(steps)]
    ks = sorted((e["ts"], e["ts"] + e["dur"]) for e in ev if e.get("cat") == "kernel")
    merged: list = []
    for a, b in ks:
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    wall = sum(b - a for a, b in wins)
    busy = sum(max(0.0, min(b, kb) - max(a, ka)) for a, b in wins for ka, kb in merged)
    return {"steps": len(wins), "step_wall_ms": wall / len(wins) / 1e3, "gpu_busy_pct": 100 * busy / wall}


@pytest.mark.parametrize("name", ["graph_decode_mixed", "decode_b64_cat", "prefill_llama"])
def test_wall_time_matches_an_independent_count(tmp_path, name):
    out = tmp_path / "profile_topN.json"
    _topn(REAL / f"{name}.json.gz", out, "--no-env-report", "--top", 1000)
    doc = json.loads(out.read_text())
    (reg,) = [k for k in doc["wall_time"] if k != "source"]
    w, ref = doc["wall_time"][reg], _independent_wall(REAL / f"{name}.json.gz")
    assert w["steps"] == ref["steps"] == doc["serving"][f"n_{reg}_steps"]
    assert w["step_wall_ms"] == pytest.approx(ref["step_wall_ms"], rel=1e-9)
    assert w["gpu_busy_pct"] == pytest.approx(ref["gpu_busy_pct"], rel=1e-9)
    assert w["gpu_busy_pct"] + w["memcpy_pct"] + w["idle_pct"] == pytest.approx(100.0)
    # every kernel of the steps, each as a share of the step: together the busy share (one stream)
    env = REAL / ("env_prefill.json" if reg == "prefill" else "env_decode.json")
    art = json.loads(_ok(_run(["analyze", out, "--env", env, "--config", REAL / "config.json", "--head-threshold", 0,
                               "--head-cap", 1000, "--no-write", "--format", "json"])).stdout)
    total = sum(e["pct_of_step_wall"] for e in art["entries"] if e["pct_of_step_wall"] is not None)
    assert total == pytest.approx(w["gpu_busy_pct"], rel=0.01)
    for e in art["entries"]:
        if e["expected_gain_pct_of_step_wall"] is not None:
            share = 100 * e["t_ms"] * e["launches_per_step"] / w["step_wall_ms"]
            assert e["expected_gain_pct_of_step_wall"] == pytest.approx(share * (1 - 1 / e["attainable_speedup"]))


def test_the_table_says_when_the_host_bounds_the_step(tmp_path):
    out = tmp_path / "profile_topN.json"
    _topn(REAL / "decode_b64_cat.json.gz", out, "--no-env-report")
    r = _ok(_run(["analyze", out, "--env", REAL / "env_decode.json", "--config", REAL / "config.json", "--no-write",
                  "--wide"]))
    w = json.loads(out.read_text())["wall_time"]["decode"]
    assert w["idle_pct"] > 50
    line = [ln for ln in r.output.splitlines() if ln.startswith("decode step:")]
    c = w["host"]["causes"][0]     # and why (tests/test_hostcause.py counts it from the raw events)
    assert [x["cause"] for x in w["host"]["causes"] if x["pct_of_idle"] >= 10] == ["per_shape_host_work"]
    assert line == [f"decode step: {w['step_wall_ms']:.3f} ms wall (mean of {w['steps']}): GPU busy "
                    f"{w['gpu_busy_pct']:.1f}%, memcpy/memset {w['memcpy_pct']:.1f}%, idle {w['idle_pct']:.1f}% - the "
                    "host, not a kernel, bounds this step: cuDNN re-planning for each new shape in "
                    f"aten::_cudnn_attention_forward {c['ms_per_step']:.1f} ms/step ({c['pct_of_idle']:.0f}% of the idle)"]
    assert "wall gain" in r.output.splitlines()[0]


# ------------------------------------------------------------------ 9. the test command's cost

def test_slow_tests_are_marked_ci_runs_them_and_the_readme_says_the_cost():
    import tomllib

    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert any(m.startswith("slow:") for m in cfg["markers"])
    assert "-m" not in cfg.get("addopts", "")
    ci = (ROOT / ".ci" / "run").read_text()
    assert "python3 -m pytest -q\n" in ci or ci.rstrip().endswith("python3 -m pytest -q")
    readme = (ROOT / "README.md").read_text()
    assert 'python -m pytest -q -m "not slow"' in readme
    assert re.search(r"full suite[^\n]*\d+ min", readme)


def test_points_right_of_the_ridge_keep_the_ridge_in_view(tmp_path):
    """A compute-bound prefill (every head right of the ridge): the picture still shows the ridge and
    the memory roof below it, not a flat line alone."""
    from roofline.report.plot import plot_artifact

    rd = tmp_path / "profile" / "round_1"
    _topn(REAL / "prefill_llama.json.gz", rd / "profile_topN.json", "--isl", 4096, "--osl", 1, "--conc", 4)
    _ok(_run(["analyze", rd]))
    art = json.loads((rd / "profile_roofline.json").read_text())
    info = plot_artifact(art, tmp_path / "p.png")
    x_lo, x_hi, _, _ = info["limits"]
    ridge = info["ridges"]["bf16"]
    assert min(p["x"] for p in info["points"]) > ridge             # every point right of it
    assert x_lo < ridge < x_hi and all(x_lo < p["x"] < x_hi for p in info["points"])
