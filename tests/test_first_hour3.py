"""The first hour, round three (issue 35): one command from a trace to a verdict, gains for the
workload the user describes, and a table a person can act on. Each item through the CLI, on the
real H200 traces of fixtures/corpus/ and fixtures/traces*/; every number a test compares is
computed here from the trace's Top-N (or the corpus's own record of what was run), not typed in."""
from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from test_first_hour import _files, _one_line_exit2, _run  # noqa: F401  (the CLI helpers, one copy)

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures"
CORPUS = FIX / "corpus"
TRACES = FIX / "traces"
REAL = FIX / "traces_real"
META = json.loads((CORPUS / "corpus_meta.json").read_text())["cases"]


def _ok(r):
    assert r.exit_code == 0, r.output
    assert "Traceback" not in r.output and r.exception is None
    return r


def _copy(trace: Path, d: Path) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(trace, d / trace.name))


# ------------------------------------------------------------------ 1. the workload changes the answer

def _projected_gains(topn: dict, art: dict, isl: int, osl: int, conc: int, prefill_tokens: int) -> dict:
    """The workload gain of every entry with a verdict, computed here from the Top-N's per-regime
    times: per batch of conc requests, conc x isl / prefill_tokens profiled prefill steps and osl
    decode steps; a step's GPU time is the sum of launches_per_step x base_latency_ms over all
    listed kernels, scaled to the whole window; the saving of a verdict is its regime's steps x
    t x launches x (1 - 1/attainable)."""
    step = Counter()
    cover = 0.0
    for e in topn["entries"]:
        cover += e["pct_gpu_time"]
        for r, reg in e["regimes"].items():
            step[r] += reg["launches_per_step"] * reg["base_latency_ms"]
    step = {r: v * 100.0 / cover for r, v in step.items()}
    n = {"prefill": conc * isl / prefill_tokens, "decode": osl}
    total = n["prefill"] * step["prefill"] + n["decode"] * step["decode"]
    out = {}
    for e in art["entries"]:
        vs = [v for v in (e.get("regime_verdicts") or [e]) if v["headroom_class"] != "unknown"
              and v["confidence"] in ("medium", "high") and v["expected_e2e_gain_pct"] is not None]
        if vs:
            out[(e["name"], e["regime"])] = sum(n[v["regime"]] * v["t_ms"] * v["launches_per_step"]
                                                 * (1 - 1 / v["attainable_speedup"]) for v in vs) / total * 100
    return out


def test_two_workloads_on_one_trace_give_different_independently_computed_gains(tmp_path):
    case = META["llama_prefill_decode"]          # 4 x 1024 prefill tokens, then 8 decode steps at batch 64
    tokens = case["prefill"]["batch"] * case["prefill"]["tokens_per_seq"]
    trace = _copy(CORPUS / "llama_prefill_decode.json.gz", tmp_path)
    results = {}
    for isl, osl, conc in ((100, 5000, 1), (1024, 8, 64)):
        out = tmp_path / f"w{isl}"
        r = _ok(_run(["analyze", trace, "--out", out, "--wide", "--isl", isl, "--osl", osl, "--conc", conc]))
        topn = json.loads((out / "profile_topN.json").read_text())
        art = json.loads((out / "profile_roofline.json").read_text())
        w = art["workload_projection"]
        assert w["basis"] == "workload" and w["workload"] == {"isl": isl, "osl": osl, "conc": conc}
        assert w["prefill_tokens_per_step"] == tokens and w["decode_batch"] == case["decode"]["batch"]
        want = _projected_gains(topn, art, isl, osl, conc, tokens)
        assert want
        got = {(e["name"], e["regime"]): e["expected_workload_gain_pct"] for e in art["entries"]
               if e["expected_workload_gain_pct"] is not None}
        assert got.keys() == want.keys()
        for k in want:
            assert got[k] == pytest.approx(want[k], rel=1e-9)
        # the table shows it, names its denominator and says how it was projected
        head = r.stdout.splitlines()[0]
        assert "workload gain (%GPU)" in head and "e2e gain (%GPU)" in head
        line = next(ln for ln in r.stdout.splitlines() if ln.startswith("workload gain:"))
        assert f"isl {isl}, osl {osl}, conc {conc} (given)" in line and f"of {tokens} tokens" in line
        assert "linear in tokens" in line
        if conc != case["decode"]["batch"]:
            assert f"at batch {case['decode']['batch']} (assumed constant in the batch" in line
        results[(isl, osl, conc)] = got
    a, b = results.values()
    # a decode-heavy workload and a prefill-heavy one rank the same kernels' gains differently
    assert any(abs(a[k] - b[k]) > 0.1 for k in a)
    # (kernels that ran in one regime only: a two-regime kernel's gain has both parts)
    art = json.loads((tmp_path / "w1024" / "profile_roofline.json").read_text())
    one = {(e["name"], e["regime"]) for e in art["entries"] if not e.get("regime_verdicts")}
    dec = [k for k in a if k[1] == "decode" and k in one]
    pre = [k for k in a if k[1] == "prefill" and k in one]
    assert dec and pre
    assert all(a[k] > b[k] for k in dec) and all(a[k] <= b[k] for k in pre)


def test_the_profiled_mix_as_a_workload_gives_back_the_e2e_gain(tmp_path):
    # 1 prefill of 4 x 128 tokens + 4 decode steps: the workload isl 128, conc 4, osl 4 IS the
    # profiled mix, so a one-regime head's workload gain is its e2e gain (the same window's GPU time)
    out = tmp_path / "r"
    _ok(_run(["analyze", _copy(TRACES / "mixed.json.gz", tmp_path), "--out", out, "-q",
              "--isl", 128, "--osl", 4, "--conc", 4]))
    art = json.loads((out / "profile_roofline.json").read_text())
    one = [e for e in art["entries"] if e["expected_workload_gain_pct"] is not None and not e.get("regime_verdicts")]
    assert one
    for e in one:
        assert e["expected_workload_gain_pct"] == pytest.approx(e["expected_e2e_gain_pct"], rel=1e-6)


def test_without_a_workload_the_table_says_the_profiled_mix_is_used_and_nothing_warns(tmp_path):
    out = tmp_path / "r"
    r = _ok(_run(["analyze", _copy(TRACES / "mixed.json.gz", tmp_path), "--out", out, "--wide"]))
    art = json.loads((out / "profile_roofline.json").read_text())
    assert art["workload_projection"]["basis"] == "profiled mix"
    assert all(e["expected_workload_gain_pct"] is None for e in art["entries"])
    assert "workload gain" not in r.stdout.splitlines()[0]
    assert ("gains: shares of the profiled mix (1 prefill + 4 decode steps); a workload (--isl/--osl/--conc) "
            "projects them onto its own") in r.stdout
    assert "warning" not in r.stderr and "not known from the trace" in r.stderr   # topn says what it lacks
    assert "gains: shares of the profiled mix" in (out / "profile_roofline.md").read_text()


def test_a_workload_needing_a_regime_the_trace_lacks_is_not_projected_and_says_why(tmp_path):
    out = tmp_path / "r"
    r = _ok(_run(["analyze", _copy(TRACES / "prefill.json.gz", tmp_path), "--out", out,
                  "--isl", 128, "--osl", 16, "--conc", 4]))
    assert ("not projected: the trace has no decode step with GPU time, so the workload's decode (16 step(s) "
            "per request) has no measured time") in r.stdout
    art = json.loads((out / "profile_roofline.json").read_text())
    assert all(e["expected_workload_gain_pct"] is None for e in art["entries"])


def test_a_partial_workload_on_the_command_line_is_one_line_exit_2(tmp_path):
    topn = tmp_path / "profile_topN.json"
    _ok(_run(["topn", TRACES / "mixed.json.gz", "-o", topn, "-q"]))
    before = _files(tmp_path)
    _one_line_exit2(_run(["analyze", topn, "--isl", 128]), "--osl, --conc not given")
    assert _files(tmp_path) == before


# ------------------------------------------------------------------ 2. two gains, two denominators

def test_the_gains_name_their_denominators_in_the_table_the_md_and_the_docs(tmp_path):
    out = tmp_path / "r"
    r = _ok(_run(["analyze", _copy(TRACES / "mixed.json.gz", tmp_path), "--out", out, "--wide"]))
    head = r.stdout.splitlines()[0]
    assert "e2e gain (%GPU)" in head and "wall gain (%step)" in head
    md = (out / "profile_roofline.md").read_text()
    assert "| e2e gain (%GPU) |" in md and "| wall gain (%step) |" in md
    method = (ROOT / "docs" / "method.md").read_text()
    art_doc = (ROOT / "docs" / "artifact.md").read_text()
    for doc in (method, art_doc):
        assert "`e2e gain (%GPU)`" in doc and "`wall gain (%step)`" in doc and "`workload gain (%GPU)`" in doc


# ------------------------------------------------------------------ 3. #gain: verdicts first

def test_gain_rank_one_is_an_entry_with_a_verdict_on_the_tutorial_trace(tmp_path):
    out = tmp_path / "r"
    _ok(_run(["analyze", _copy(TRACES / "prefill.json.gz", tmp_path), "--out", out, "-q"]))
    art = json.loads((out / "profile_roofline.json").read_text())
    by = {e["name"]: e for e in art["entries"]}
    ranked = [by[n] for n in art["ranking_by_expected_gain"]]
    has = [e["headroom_class"] != "unknown" and e["confidence"] in ("medium", "high") for e in ranked]
    assert has[0] and True in has and False in has
    assert has == sorted(has, reverse=True)                 # every verdict before every other entry
    gains = [e["expected_e2e_gain_pct"] for e, h in zip(ranked, has) if h]
    assert gains == sorted(gains, reverse=True)
    rest = [e["pct_gpu_time"] for e, h in zip(ranked, has) if not h]
    assert rest == sorted(rest, reverse=True)


# ------------------------------------------------------------------ 4. which kernel is this?

def test_rows_of_one_kernel_name_are_told_apart_by_regime_and_aten_op(tmp_path):
    out = tmp_path / "r"
    r = _ok(_run(["analyze", _copy(CORPUS / "qwen3moe_grouped_mm.json.gz", tmp_path), "--out", out, "--wide"]))
    topn = json.loads((out / "profile_topN.json").read_text())
    art = json.loads((out / "profile_roofline.json").read_text())
    same = [e for e in art["entries"] if e["short_name"] == "device_kernel"]
    assert len(same) == 2 and {e["regime"] for e in same} == {"decode", "prefill"}
    src = {t["name"]: t for t in topn["entries"]}
    for e in same:
        assert e["aten_ops"] == src[e["name"]]["aten_ops"]          # what topn linked, verbatim
    rows = [ln for ln in r.stdout.splitlines() if "device_kernel" in ln]
    cells = {ln.split("device_kernel")[1].split()[0] + " " + ln.split("device_kernel")[1].split()[1] for ln in rows}
    assert cells == {"decode _grouped_mm", "prefill _grouped_mm"}
    assert "regime / aten op" in r.stdout.splitlines()[0]
    md = (out / "profile_roofline.md").read_text()
    assert md.count("- launched by: `aten::_grouped_mm`") >= 2
    from roofline.report.plot import plot_points

    pts = plot_points(art)
    key = {p["op"] for p in pts["points"] + pts["skipped"] if p["label"] == "device_kernel"}
    assert key == {"decode _grouped_mm", "prefill _grouped_mm"}


# ------------------------------------------------------------------ 5. one command

def test_analyze_a_trace_in_one_command_matches_topn_then_analyze(tmp_path):
    trace = _copy(TRACES / "mixed.json.gz", tmp_path / "t")
    r = _ok(_run(["analyze", trace, "--isl", 128, "--osl", 4, "--conc", 4]))
    where = tmp_path / "t" / "mixed_roofline"
    assert _files(where) == {"profile_topN.json", "env_report.json", "profile_roofline.json", "profile_roofline.md"}
    assert f"its Top-N and starter env report are in {where}/ (beside the trace)" in r.stderr
    one = json.loads((where / "profile_roofline.json").read_text())
    two = tmp_path / "two" / "profile_topN.json"
    _ok(_run(["topn", TRACES / "mixed.json.gz", "-o", two, "-q", "--isl", 128, "--osl", 4, "--conc", 4]))
    _ok(_run(["analyze", two, "-q"]))
    other = json.loads((two.parent / "profile_roofline.json").read_text())
    strip = lambda a: [{k: v for k, v in e.items() if k != "notes"} for e in a["entries"]]  # noqa: E731
    assert strip(one) == strip(other)
    assert one["ranking_by_expected_gain"] == other["ranking_by_expected_gain"]


def test_analyze_a_damaged_trace_is_one_line_exit_2_and_writes_no_artifact(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 0, "dur": "x", "pid": 0, '
                   '"tid": 7, "args": {"device": 0}}]}')
    r = _run(["analyze", bad])
    assert r.exit_code == 2 and "Traceback" not in r.output and len(r.stderr.strip().splitlines()) == 1
    assert not list(tmp_path.rglob("profile_roofline.json"))


# ------------------------------------------------------------------ 6. messages that say what to do

def test_an_unknown_kernel_says_what_would_give_it_a_verdict(tmp_path):
    d = tmp_path / "profile" / "round_1"
    d.mkdir(parents=True)
    env = {"gfx": "sm_90", "gpu_name": "NVIDIA H200", "model_dtype": "bf16", "model_arch_class": "dense",
           "workload": {"isl": 128, "osl": 8, "conc": 8}}
    (d / "env_report.json").write_text(json.dumps(env))
    (d / "profile_topN.json").write_text(json.dumps({"entries": [
        {"name": "mystery_kernel_xyz", "pct_gpu_time": 30.0,
         "regimes": {"decode": {"base_latency_ms": 0.05, "launches_per_step": 4}}}]}))
    r = _ok(_run(["analyze", d]))
    art = json.loads((d / "profile_roofline.json").read_text())
    (reason,) = [x["reason"] for x in art["degraded"]]
    assert "a `classification` in its Top-N entry" in reason and "--counters" in reason
    # issue 42: stderr says it in one short line (the reason's first clause), the md in full
    assert f"degraded: mystery_kernel_xyz: {reason.split(' (')[0].split(': ')[0]}" in r.stderr
    assert "a `classification` in its Top-N entry" in (d / "profile_roofline.md").read_text()


def test_regime_rows_without_a_verdict_say_why_in_the_table_and_the_md(tmp_path):
    out = tmp_path / "r"
    r = _ok(_run(["analyze", _copy(TRACES / "mixed.json.gz", tmp_path), "--out", out, "--wide"]))
    art = json.loads((out / "profile_roofline.json").read_text())
    unknown = [(e, v) for e in art["entries"] for v in (e.get("regime_verdicts") or [])[1:]
               if v["headroom_class"] == "unknown"]
    assert unknown
    md = (out / "profile_roofline.md").read_text()
    for e, v in unknown:
        line = next(ln for ln in r.stdout.splitlines()
                    if ln.startswith(f"[{v['regime']} regime] of {e['short_name']}: no verdict: "))
        why = line.split(": no verdict: ")[1]
        # the model's own no-verdict clauses, from its notes ("L2-resident: ...", "dispatch-bound: ...")
        said = [seg.split(": no verdict")[0] for seg in v["notes"].split("; ") if ": no verdict" in seg]
        assert said and all(any(seg.startswith(part) for seg in said) for part in why.split(" and "))
        assert line in md


# ------------------------------------------------------------------ 8. small things

def test_analyze_quiet_prints_nothing_and_still_writes(tmp_path):
    out = tmp_path / "r"
    r = _ok(_run(["analyze", _copy(TRACES / "mixed.json.gz", tmp_path), "--out", out, "-q"]))
    assert r.stdout == "" and r.stderr == ""
    assert (out / "profile_roofline.json").is_file()


def test_the_tutorial_folder_is_ignored_by_git():
    ignored = [ln.strip() for ln in (ROOT / ".gitignore").read_text().splitlines()]
    assert "/run/" in ignored


def test_topn_does_not_ask_for_model_arch_class(tmp_path):
    r = _ok(_run(["topn", TRACES / "mixed.json.gz", "-o", tmp_path / "profile_topN.json"]))
    assert "model_arch_class" not in r.stderr and "--model-arch-class" not in r.stderr


def test_a_config_of_another_model_is_one_warning_naming_the_mismatch(tmp_path):
    out = tmp_path / "r"
    _ok(_run(["analyze", _copy(CORPUS / "llama_prefill_decode.json.gz", tmp_path), "--out", out, "-q"]))
    topn = json.loads((out / "profile_topN.json").read_text())
    dims = {sh[k] for e in topn["entries"] for sh in e.get("shapes") or [] if "M" in sh and "E" not in sh
            for k in ("N", "K")}
    cfgs = CORPUS / "configs"
    other = json.loads((cfgs / "qwen3moe_grouped_mm.json").read_text())
    assert other["hidden_size"] not in dims          # so the trace does contradict it
    r = _ok(_run(["analyze", out, "--config", cfgs / "qwen3moe_grouped_mm.json"]))
    warn = [ln for ln in r.stderr.splitlines() if "warning" in ln]
    assert len(warn) == 1 and f"hidden_size {other['hidden_size']} is the K or N of none" in warn[0]
    assert "config.json (qwen3_moe) does not look like the traced model" in warn[0]
    # the right config of every corpus model: no warning
    for trace in sorted(CORPUS.glob("*.json.gz")):
        cfg = cfgs / (trace.name[:-len(".json.gz")] + ".json")
        if not cfg.is_file():
            continue
        o = tmp_path / "out" / trace.name
        r = _ok(_run(["analyze", _copy(trace, tmp_path / "c"), "--out", o, "--config", cfg]))
        assert "does not look like" not in r.stderr, (trace.name, r.stderr)


def test_compare_says_how_many_times_slower_not_a_percentage_over_100(tmp_path):
    # two rounds of the same work (compare refuses different work: roofline/stagec/samework.py), and a
    # measured e2e delta of a step that took 4.39x as long: B's time = A's x (1 - delta / 100)
    a = tmp_path / "a" / "profile_topN.json"
    b = tmp_path / "b" / "profile_topN.json"
    for p in (a, b):
        _ok(_run(["topn", TRACES / "decode.json.gz", "-o", p, "-q", "--isl", 128, "--osl", 8, "--conc", 8]))
    delta = -339.08
    r = _ok(_run(["compare", a.parent, b.parent, "--e2e-delta-pct", delta]))
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("e2e:"))
    assert f"{1 - delta / 100:.2f}x slower" in line and "% slower" not in line
    from roofline.core.judge import change_words
    assert change_words(-339.08) == "4.39x slower" and change_words(60.0) == "2.50x faster"
    assert change_words(-20.0) == "20.00% slower"


def test_the_plain_python_split_k_pairing_equals_the_numpy_one_on_every_real_trace():
    # item 5's start-up cost: a small trace pairs split-K reduces without importing numpy; the
    # result must be the vectorised pairing's, launch for launch
    import numpy as np

    from roofline.ingest.topn import _pair_splitk, _pair_splitk_py
    from roofline.ingest.torch_trace import parse_trace

    paired = 0
    for trace in sorted(TRACES.glob("*.json.gz")) + sorted(REAL.glob("*.json.gz")) + sorted(CORPUS.glob("*.json.gz")):
        if trace.name == "ncu_rows.json.gz":
            continue
        pt = parse_trace(str(trace), range_regex=["decode", "prefill"])
        fold_py, extra_py = _pair_splitk_py(pt)
        fold_np, extra_np = _pair_splitk(pt)
        if fold_np is None:
            assert fold_py == {} and extra_py == {}
            continue
        nz = np.nonzero(fold_np >= 0)[0]
        assert fold_py == dict(zip(nz.tolist(), fold_np[nz].tolist())), trace.name
        assert extra_py == dict(zip(fold_np[nz].tolist(), extra_np[fold_np[nz]].tolist())), trace.name
        paired += len(fold_py)
    assert paired > 0          # some real trace has split-K reduces (fixtures/traces/mixed.json.gz: 8)


def test_the_lean_jsonschema_import_leaves_no_blocked_module_behind():
    # a command line process keeps jsonschema's format plug-ins out while it loads (start-up), and
    # lets them back in: no module is left marked unimportable
    import subprocess
    import sys

    code = ("import sys, roofline.io.schema as s; s.LEAN_JSONSCHEMA = True; s._jsonschema(); "
            "print([m for m in s._FORMAT_MODULES if m in sys.modules and sys.modules[m] is None])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"


def test_the_split_k_pairings_agree_on_a_shuffled_and_altered_real_trace():
    # the real traces keep launches in start order with each reduce right after its GEMM; here the
    # storage order is shuffled and some launches are renamed (a reduce after a reduce, a reduce
    # after a non-GEMM), and the Python pairing must still equal the vectorised one
    import random
    from array import array
    from types import SimpleNamespace

    import numpy as np

    from roofline.core.classify import is_splitk_reduce
    from roofline.ingest.topn import _pair_splitk, _pair_splitk_py
    from roofline.ingest.torch_trace import parse_trace

    pt = parse_trace(str(TRACES / "mixed.json.gz"), range_regex=["decode", "prefill"])
    red = next(k for k, nm in enumerate(pt.kernel_names) if is_splitk_reduce(nm))
    rng = random.Random(7)
    perm = list(range(pt.n_kernels))
    rng.shuffle(perm)
    names = [pt.k_name[i] for i in perm]
    for j in rng.sample(range(pt.n_kernels), 12):     # extra reduces anywhere
        names[j] = red
    ts = [pt.k_ts[i] for i in perm]
    order = sorted(range(pt.n_kernels), key=ts.__getitem__)
    from roofline.core.classify import classify

    gemm = {k for k, nm in enumerate(pt.kernel_names) if classify(nm) == "gemm" and k != red}
    at = next(p for p in range(1, len(order) - 1) if names[order[p]] == red and names[order[p - 1]] in gemm)
    names[order[at + 1]] = red                        # a second reduce right after the first one
    fake = SimpleNamespace(kernel_names=pt.kernel_names, n_kernels=pt.n_kernels, k_name=array("q", names),
                           k_ts=array("d", [pt.k_ts[i] for i in perm]), k_dur=array("d", [pt.k_dur[i] for i in perm]))
    fold_py, extra_py = _pair_splitk_py(fake)
    fold_np, extra_np = _pair_splitk(fake)
    nz = np.nonzero(fold_np >= 0)[0]
    assert fold_py == dict(zip(nz.tolist(), fold_np[nz].tolist()))
    assert extra_py == dict(zip(fold_np[nz].tolist(), extra_np[fold_np[nz]].tolist()))
    assert 0 < len(fold_py) < sum(1 for n in names if n == red)      # some reduces found no GEMM of their own
