"""Issue 13: a new user's first hour. The starter env report of `roofline topn`, one-line messages for
wrong-kind files and for ignored inputs, and the markdown's legend / small percentages / folded names.

Every CLI case checks: the message, the exit code, no traceback, and that nothing is written where
nothing should be.
"""
from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from roofline import api
from roofline.report import artifact as report
from roofline.cli import main

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures"
TRACES = FIX / "traces"
BENCH = ROOT / "fixtures" / "ladder" / "h200_bench_square_llama.json"


def _run(args):
    r = CliRunner().invoke(main, [str(a) for a in args])
    return r


def _one_line_exit2(r, *needles):
    assert r.exit_code == 2, (r.exit_code, r.output)
    assert "Traceback" not in r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def _files(d: Path) -> set[str]:
    return {str(p.relative_to(d)) for p in d.rglob("*")} if d.exists() else set()


# ------------------------------------------------------------------ item 2: the starter env report

def _meta(trace: str) -> dict:
    return json.loads((TRACES / "fixtures_meta.json").read_text())


def test_topn_writes_a_starter_env_report_and_analyze_runs_next(tmp_path):
    out = tmp_path / "run" / "profile" / "round_1" / "profile_topN.json"
    r = _run(["topn", TRACES / "decode.json.gz", "-o", out, "--isl", 128, "--osl", 8, "--conc", 8])
    assert r.exit_code == 0, r.output
    env_p = out.parent / "env_report.json"
    env = json.loads(env_p.read_text())
    # what the trace knows, checked against the trace's own header, read here independently
    with gzip.open(TRACES / "decode.json.gz", "rt") as f:
        head = json.load(f)["deviceProperties"][0]
    assert env["gpu_name"] == head["name"] == "NVIDIA H200"
    assert env["gfx"] == f"sm_{head['computeMajor']}{head['computeMinor']}"
    assert env["model_dtype"] == _meta("decode")["dtype"] == "bf16"
    assert env["workload"] == {"isl": 128, "osl": 8, "conc": 8}
    assert env["generated_by"]["missing"] == []
    assert "wrote the starter env report" in r.stderr
    r2 = _run(["analyze", out])
    assert r2.exit_code == 0, r2.output
    art = json.loads((out.parent / "profile_roofline.json").read_text())
    assert art["gpu_name"] == "NVIDIA H200" and art["stage"] == "B"
    assert art["inputs"]["env"] == str(env_p)


def test_analyze_names_the_missing_workload_fields_and_how_to_give_them(tmp_path):
    out = tmp_path / "profile_topN.json"
    r = _run(["topn", TRACES / "decode.json.gz", "-o", out, "--isl", 128])
    assert r.exit_code == 0
    assert ("env report: not known from the trace: workload.osl, workload.conc: give them with `roofline topn TRACE "
            "--osl N --conc N`") in r.stderr
    # every head of this trace has captured shapes: nothing needs the workload, the run goes on
    r = _run(["analyze", out])
    assert r.exit_code == 0 and "Traceback" not in r.output
    # issue 35: ask only for what changes an answer: no warning when no entry needs them; the table
    # says the gains are shares of the profiled mix and how a workload would change them
    assert not [ln for ln in r.stderr.splitlines() if "not given" in ln or "warning" in ln], r.stderr
    assert "gains: shares of the profiled mix (8 decode steps); a workload (--isl/--osl/--conc)" in r.stdout
    art = json.loads((tmp_path / "profile_roofline.json").read_text())
    assert art["inputs"]["env_missing"] == ["workload.osl", "workload.conc"] and art["degraded"] == []


def test_topn_never_overwrites_an_env_report_silently(tmp_path):
    out = tmp_path / "r" / "profile_topN.json"
    out.parent.mkdir()
    mine = {"gfx": "sm_90", "model_dtype": "bf16", "model_arch_class": "dense",
            "workload": {"isl": 1, "osl": 2, "conc": 3}, "mine": True}
    (tmp_path / "env_report.json").write_text(json.dumps(mine))   # in a parent directory
    r = _run(["topn", TRACES / "decode.json.gz", "-o", out, "--isl", 128, "--osl", 8, "--conc", 8])
    assert r.exit_code == 0
    assert "kept the existing env report" in r.stderr and "--isl, --osl, --conc not written to it" in r.stderr
    assert "--force" in r.stderr
    assert not (out.parent / "env_report.json").exists()
    assert json.loads((tmp_path / "env_report.json").read_text()) == mine
    r = _run(["topn", TRACES / "decode.json.gz", "-o", out, "--isl", 128, "--osl", 8, "--conc", 8, "--force"])
    assert r.exit_code == 0
    assert "takes precedence over" in r.stderr
    assert json.loads((out.parent / "env_report.json").read_text())["workload"]["conc"] == 8
    assert json.loads((tmp_path / "env_report.json").read_text()) == mine   # the parent one is untouched


def test_topn_config_flag_is_recorded_and_used_by_analyze(tmp_path):
    cfg = tmp_path / "model" / "config.json"
    cfg.parent.mkdir()
    shutil.copy(ROOT / "roofline" / "data" / "example" / "config.json", cfg)
    out = tmp_path / "run" / "profile_topN.json"
    r = _run(["topn", TRACES / "decode.json.gz", "-o", out, "--isl", 128, "--osl", 8, "--conc", 8,
              "--config", cfg, "--framework", "torch"])
    assert r.exit_code == 0, r.output
    env = json.loads((out.parent / "env_report.json").read_text())
    assert env["model_arch_class"] == "moe"   # the example config has 256 experts
    assert env["framework"] == "torch"
    art = api.analyze(out)
    assert Path(art["inputs"]["config"]).resolve() == cfg.resolve()


def test_topn_rejects_a_bad_config_with_one_line(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("{nope")
    out = tmp_path / "profile_topN.json"
    _one_line_exit2(_run(["topn", TRACES / "decode.json.gz", "-o", out, "--config", bad]), "not valid JSON")
    assert not out.exists()


def test_no_env_report_flag(tmp_path):
    out = tmp_path / "profile_topN.json"
    assert _run(["topn", TRACES / "decode.json.gz", "-o", out, "--no-env-report"]).exit_code == 0
    assert _files(tmp_path) == {"profile_topN.json"}


def test_starter_from_an_ncu_report_takes_its_device(tmp_path):
    # the device comes from the report (read here from its CSV twin's device__attribute_* columns);
    # this --set basic report has no tensor-pipe counter, so model_dtype is the one thing missing
    import csv

    row = list(csv.DictReader(open(FIX / "ncu_topn" / "small_raw.csv", newline="")))[1]
    out = tmp_path / "profile_topN.json"
    r = _run(["topn", FIX / "ncu_topn" / "small.ncu-rep.gz", "-o", out, "--isl", 1, "--osl", 1, "--conc", 1])
    assert r.exit_code == 0, r.output
    env = json.loads((tmp_path / "env_report.json").read_text())
    assert env["gpu_name"] == row["device__attribute_display_name"] == "NVIDIA H200"
    assert env["gfx"] == (f"sm_{row['device__attribute_compute_capability_major']}"
                          f"{row['device__attribute_compute_capability_minor']}")
    assert "not known from the trace: model_dtype:" in r.stderr and "gfx" not in r.stderr.split("not known")[1][:30]
    # the left-out model_dtype no longer stops the run: only the entries that need it degrade
    a = _run(["analyze", out])
    assert a.exit_code == 0 and "Traceback" not in a.output


# ------------------------------------------------------------------ item 3: wrong-kind files

@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A real Top-N and artifact from the bundled decode trace."""
    d = tmp_path_factory.mktemp("made")
    out = d / "profile_topN.json"
    assert _run(["topn", TRACES / "decode.json.gz", "-o", out, "--isl", 128, "--osl", 8, "--conc", 8,
                 "-q"]).exit_code == 0
    assert _run(["analyze", out]).exit_code == 0
    raw = d / "raw_trace.json"
    with gzip.open(TRACES / "decode.json.gz", "rb") as f:
        raw.write_bytes(f.read())
    return {"topn": out, "art": d / "profile_roofline.json", "env": d / "env_report.json", "raw": raw}


@pytest.mark.parametrize("what", ["gz", "raw"])
def test_analyze_given_a_pytorch_trace_analyses_it_beside_it(made, tmp_path, what):
    # issue 35 item 5: a trace is analysed in one command (it used to say "run roofline topn first")
    src = TRACES / "decode.json.gz" if what == "gz" else made["raw"]
    p = tmp_path / src.name
    shutil.copy(src, p)
    r = _run(["analyze", p])
    assert r.exit_code == 0 and "Traceback" not in r.output, r.output
    stem = "decode" if what == "gz" else src.name[:-len(".json")]
    assert _files(tmp_path) == {src.name, f"{stem}_roofline"} | {
        f"{stem}_roofline/{f}" for f in ("profile_topN.json", "env_report.json", "profile_roofline.json",
                                          "profile_roofline.md")}


@pytest.mark.parametrize("kind,needle", [("art", "this is an analysis artifact"), ("env", "this is an env report"),
                                         ("bench", "this is a GEMM ladder bench result")])
def test_analyze_given_another_kind(made, tmp_path, kind, needle):
    src = BENCH if kind == "bench" else made[kind]
    p = tmp_path / src.name
    shutil.copy(src, p)
    _one_line_exit2(_run(["analyze", p]), needle, "not a Top-N")
    assert _files(tmp_path) == {src.name}


@pytest.mark.parametrize("kind,needle", [("topn", "`roofline analyze"), ("gz", "run `roofline topn"),
                                         ("bench", "roofline ladder render")])
def test_plot_given_a_non_artifact(made, tmp_path, kind, needle):
    src = {"topn": made["topn"], "gz": TRACES / "decode.json.gz", "bench": BENCH}[kind]
    png = tmp_path / "x.png"
    _one_line_exit2(_run(["plot", src, "-o", png]), "not an analysis artifact", needle)
    assert not png.exists()


@pytest.mark.parametrize("sub", ["render", "plot"])
@pytest.mark.parametrize("kind", ["topn", "art", "gz", "text", "json_other"])
def test_ladder_render_and_plot_given_a_non_bench_file(made, tmp_path, sub, kind):
    if kind == "text":
        src = ROOT / "README.md"
    elif kind == "json_other":
        src = tmp_path / "other.json"
        src.write_text('{"meta": {"device": "x"}}')
    else:
        src = {"topn": made["topn"], "art": made["art"], "gz": TRACES / "decode.json.gz"}[kind]
    png = tmp_path / "ladder.png"
    args = ["ladder", sub, src] + (["-o", png] if sub == "plot" else [])
    line = _one_line_exit2(_run(args), f"roofline ladder {sub}:", "ladder bench result",
                           "`roofline ladder bench --out FILE` writes one")
    assert not png.exists()
    assert "Traceback" not in line


def test_ladder_render_of_a_broken_bench_result_is_one_line(tmp_path):
    res = json.loads(BENCH.read_text())
    for r in res["rows"]:
        del r["tflops"]
    p = tmp_path / "b.json"
    p.write_text(json.dumps(res))
    _one_line_exit2(_run(["ladder", "render", p]), "not a ladder bench result (a field is missing")


def test_ladder_render_still_renders_a_real_bench_result():
    r = _run(["ladder", "render", BENCH])
    assert r.exit_code == 0 and "|" in r.output


# ------------------------------------------------------------------ item 4: ignored inputs are said

def test_each_ignored_input_in_a_topn_gets_one_line(made, tmp_path):
    d = json.loads(made["topn"].read_text())
    gemm = next(i for i, e in enumerate(d["entries"]) if e.get("classification") == "gemm")
    d["entries"][gemm]["classification"] = "matmulz"
    d["entries"][gemm]["shapes"][0]["Mx"] = 7
    neg = next(i for i, e in enumerate(d["entries"]) if i != gemm)
    d["entries"][neg]["pct_gpu_time"] = -2.5
    p = tmp_path / "profile_topN.json"
    p.write_text(json.dumps(d))
    shutil.copy(made["env"], tmp_path / "env_report.json")
    r = _run(["analyze", p, "--no-write"])
    assert r.exit_code == 0
    warn = [ln for ln in r.stderr.splitlines() if "warning:" in ln]
    assert len(warn) == 2, warn
    assert any(f"entries[{gemm}]" in w and "classification 'matmulz' is not an op class" in w
               and "classified by its name as 'gemm'" in w for w in warn)
    assert any(f"entries[{gemm}]" in w and "shapes key(s) Mx are not read by the gemm model" in w for w in warn)
    # a negative share is a bad value, not an ignored one: the entry is in degraded[] with its reason
    # (docs/input_policy.md), said on stderr with the other degraded entries
    # (issue 42: one short line, the reason's first clause; the whole reason in the md and the JSON)
    deg = [ln for ln in r.stderr.splitlines() if "degraded:" in ln]
    assert len(deg) == 1 and f"entries[{neg}].pct_gpu_time: expected a share" in deg[0], r.stderr
    # the real Top-N itself draws no warning
    r = _run(["analyze", made["topn"], "--no-write"])
    assert "warning:" not in r.stderr


def test_out_without_a_topn_is_said_and_nothing_is_written(tmp_path):
    dest = tmp_path / "out"
    r = _run(["analyze", "--out", dest])
    assert r.exit_code == 0
    assert f"--out {dest} ignored: no TOPN given" in r.stderr
    assert not dest.exists()


def test_counters_matching_nothing_are_said(made, tmp_path):
    r = _run(["analyze", made["topn"], "--no-write", "--counters", FIX / "ncu" / "known_raw.csv"])
    assert r.exit_code == 0
    w = [ln for ln in r.stderr.splitlines() if "--counters" in ln]
    assert len(w) == 2 and "no head entry got counters, so stage C was not applied" in w[1]
    # the unused kernels are named: the report's kernel names (read from the CSV itself) but the bf16
    # add, which is also in this decode trace (a 3.8% entry, below the head: matched, not applied)
    import csv

    from roofline.core.classify import short_name

    rows = list(csv.DictReader(open(FIX / "ncu" / "known_raw.csv", newline="")))[1:]
    names = [n for n in dict.fromkeys(r["Kernel Name"] for r in rows)]
    add = [n for n in names if short_name(n) == "vectorized_elementwise_kernel[CUDAFunctor_add]"]
    assert len(add) == 1 and any(e["short_name"] == short_name(add[0])
                                 for e in json.loads(made["topn"].read_text())["entries"])
    unused = [n for n in names if n not in add]
    assert f"{len(unused)} kernel(s) matched no Top-N entry" in w[0]
    assert all(repr(short_name(n)[:60]) in w[0] for n in unused[:6]) and f"and {len(unused) - 6} more" in w[0]
    assert repr(short_name(add[0])) not in w[0]
    # counters that do match draw no such line (the hook fixture's kernels come from fixtures/ncu)
    r = _run(["analyze", FIX / "hook" / "round_b_topN.json", "--env", FIX / "hook" / "env_report.json",
              "--no-write", "--counters", FIX / "ncu" / "known_raw.csv"])
    assert r.exit_code == 0 and "stage C was not applied" not in r.stderr


@pytest.mark.parametrize("sub", [["list"], ["show", "h200"], ["validate"]])
def test_peaks_dir_that_does_not_exist(tmp_path, sub):
    missing = tmp_path / "nope"
    _one_line_exit2(_run(["peaks", *sub[:1], "--dir", missing, *sub[1:]]), f"--dir {missing}: no such directory")
    assert not missing.exists()


def test_peaks_list_on_an_empty_dir_says_so(tmp_path):
    r = _run(["peaks", "list", "--dir", tmp_path])
    assert r.exit_code == 0 and "no *.yaml peak table in it" in r.stderr


# ------------------------------------------------------------------ item 6: the markdown

def test_markdown_legend_small_percentages_folded_names_and_regime_wording(tmp_path):
    out = tmp_path / "profile_topN.json"
    assert _run(["topn", TRACES / "mixed.json.gz", "-o", out, "--isl", 128, "--osl", 4, "--conc", 8,
                 "-q"]).exit_code == 0
    art = api.analyze(out)
    md = report.to_markdown(art)
    assert "**Legend.**" in md and "`attainable`" in md and "`e2e gain (%GPU)`" in md and "`conf`" in md
    from roofline.core.routing import ROUTES
    for r in {e["route"] for e in art["entries"]}:
        assert f"`{r}`: {ROUTES[r]}" in md
    # a roofline fraction under 1% is not shown as 0%
    small = [e for e in art["entries"] if e.get("roofline_pct") and e["roofline_pct"] < 0.01]
    if not small:  # the analysis changed and no real head is under 1%: make one, to test the formatting
        e0 = next(e for e in art["entries"] if e.get("roofline_pct"))
        e0["roofline_pct"] = 0.003
        small = [e0]
    rows = {r[2]: r for r in report.table_rows(art)}
    for e in small:
        cell = rows[e["short_name"] if len(e["short_name"]) <= 48 else e["short_name"][:47] + "~"][5]
        assert cell != "0%" and cell == f"{100 * e['roofline_pct']:.1g}%"
    # long demangled names are folded under their short name
    longn = [e for e in art["entries"] if e["short_name"] != e["name"]]
    assert longn
    for e in longn:
        assert f"<details><summary>full name ({len(e['name'])} characters)</summary>" in md
    # the trace has both regimes: a decode-only kernel is not "the only regime profiled"
    assert "regime is profiled" not in md
    assert "this kernel ran only in the decode regime (the trace also has prefill steps)" in md


def test_pct_format():
    assert report._pct(0.003) == "0.3%" and report._pct(0.37) == "37%" and report._pct(0.0) == "0%"
    assert report._pct(0.00000012) == "<0.01%" and report._pct(None) == "-"


def test_degraded_entries_say_how_to_give_the_missing_dimension():
    env = {"gfx": "sm_90", "gpu_name": "NVIDIA H200", "model_dtype": "bf16", "model_arch_class": "moe",
           "workload": {"isl": 128, "osl": 8, "conc": 8}}
    reg = {"decode": {"base_latency_ms": 0.05, "launches_per_step": 1}}
    topn = {"entries": [{"name": "fused_moe_kernel", "pct_gpu_time": 40.0, "regimes": reg},
                        {"name": "nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT", "pct_gpu_time": 30.0, "regimes": reg}]}
    art = api.analyze(topn, env, None)
    why = {d["name"]: d["reason"] for d in art["degraded"]}
    assert "moe shape is missing E, top_k, hidden, inter" in why["fused_moe_kernel"]
    assert "`roofline analyze --config FILE`" in why["fused_moe_kernel"]
    g = why["nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT"]
    assert "missing N, K" in g and "record_shapes=True" in g and "--config" not in g
    # with the config, the MoE entry is modelled
    cfg = json.loads((ROOT / "roofline" / "data" / "example" / "config.json").read_text())
    art = api.analyze(topn, env, cfg)
    assert "fused_moe_kernel" not in {d["name"] for d in art["degraded"]}


def test_missing_field_hint_also_for_an_env_report_given_by_another_name(tmp_path):
    env = tmp_path / "my_env.json"
    env.write_text(json.dumps({"gfx": "sm_90", "model_dtype": "bf16", "model_arch_class": "dense",
                               "workload": {"isl": 1, "osl": 1, "conc": None}}))
    out = tmp_path / "profile_topN.json"
    assert _run(["topn", TRACES / "decode.json.gz", "-o", out, "--no-env-report", "-q"]).exit_code == 0
    # a file of the user's: what the field is, never `roofline topn` (which would write another file)
    line = _one_line_exit2(_run(["analyze", out, "--env", env]), "workload.conc: expected a number, got null",
                           "(conc: concurrent requests; docs/env_report.md)")
    assert "roofline topn" not in line
    assert not (tmp_path / "profile_roofline.json").exists()
