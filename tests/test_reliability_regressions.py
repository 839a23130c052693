"""One regression test per bug the reliability campaign (issue 17) found: each failed before its
fix. Inputs are the real fixtures with one thing changed; expectations are what the contract says
(refused with one line, degraded, or bounded), not numbers typed in."""
import copy
import gzip
import json
import os
import time
from pathlib import Path

import pytest

from roofline import hook, peaks
from roofline.core import inputs
from roofline.io import pairwrite
from roofline.report import artifact as report
from roofline.io import safeio
from roofline.counters import CounterReadError, load as load_counters
from roofline.io.errors import InputError, PeaksError
from roofline.ingest.torch_trace import TraceError, parse_trace

import reliability as R

ART, MD = report.ARTIFACT_JSON, report.ARTIFACT_MD


def _one_line_exit_2(args, *needles):
    code, out, err = R.cli(args)
    assert code == 2, (code, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err and "internal error" not in err, err
    for n in needles:
        assert n in err, err
    return err


@pytest.fixture
def rd(tmp_path):
    work = tmp_path / "run"
    work.mkdir()
    d, _ = R._round(work, None)
    return d


# ---------------------------------------------------------------- hook.run never raises, never mkdirs
@pytest.mark.parametrize("arg", [None, True, 3, 2.5, ["x"], {"a": 1}, b"\x00"])
def test_hook_round_dir_of_a_wrong_type_is_reported_not_raised(arg):
    s = hook.run(arg)
    assert s["json"] is None and s["skill_errors"] and s["skill_errors"][0]["where"] == "hook"


def test_hook_accepts_bytes_paths(rd):
    s = hook.run(os.fsencode(str(rd)))
    assert s["json"] and s["skill_errors"] == []


@pytest.mark.parametrize("kw", [{"head_threshold_pct": "5"}, {"head_threshold_pct": True},
                                {"head_threshold_pct": float("nan")}, {"head_cap": 2.0}, {"head_cap": 0},
                                {"stage": "D"}, {"env": 5}, {"config": True}, {"counters": 7},
                                {"analysis_skill": "rooflin"}, {"analysis_skill": True}])
def test_hook_other_arguments_of_a_wrong_type(rd, kw):
    s = hook.run(rd, **kw)
    assert s["json"] is None and s["skill_errors"]
    assert not (rd / ART).exists()


def test_hook_never_creates_a_mistyped_round_directory(tmp_path):
    missing = tmp_path / "profile" / "round_1_typo"
    s = hook.run(missing)
    assert s["json"] is None and "not an existing directory" in s["skill_errors"][0]["error"]
    assert not missing.exists()


def test_hook_given_a_file_instead_of_a_directory(rd):
    f = rd / "notes.txt"
    f.write_text("hello")
    s = hook.run(f)  # treated as the Top-N: refused, and the error says so; never raises
    assert isinstance(s, dict) and s["skill_errors"]


def test_hook_writes_only_schema_valid_artifacts(rd, monkeypatch):
    from roofline import api
    from roofline.io.schema import validate_artifact

    real = api.analyze

    def broken(*a, **k):
        art = real(*a, **k)
        art["entries"][0]["roofline_pct"] = "75%"  # a schema violation
        return art

    monkeypatch.setattr(api, "analyze", broken)
    s = hook.run(rd)
    art = json.loads((rd / ART).read_text())
    validate_artifact(art)  # what was written is valid: the empty artifact with the error
    assert art["entries"] == [] and s["skill_errors"][0]["where"] == "analyze"


# ---------------------------------------------------------------- special files never block
SPECIAL_READERS = {
    "topn": lambda p: inputs.load_topn(p),
    "trace": lambda p: parse_trace(str(p)),
    "counters": lambda p: load_counters(p),
    "peaks": lambda p: peaks.resolve(peaks_file=p),
}
ERRORS = {"topn": InputError, "trace": TraceError, "counters": CounterReadError, "peaks": PeaksError}


@pytest.mark.parametrize("reader", sorted(SPECIAL_READERS))
@pytest.mark.parametrize("special", ["fifo", "dev_zero", "directory"])
def test_special_files_are_refused_at_once(tmp_path, reader, special):
    p = tmp_path / "input"
    R._place(p, R.Case("x", special, None, special=special))
    t0 = time.monotonic()
    with R.time_limit(10), pytest.raises(ERRORS[reader]) as ei:
        SPECIAL_READERS[reader](p)
    assert time.monotonic() - t0 < 5
    msg = str(ei.value)
    assert {"fifo": "FIFO", "dev_zero": "device", "directory": "directory"}[special] in msg


def test_env_flag_pointing_at_a_special_file(rd, tmp_path):
    # ROOFLINE_PEAKS_DIR is read as a directory of tables: a FIFO named *.yaml in it never blocks
    d = tmp_path / "peaksdir"
    d.mkdir()
    os.mkfifo(d / "h200.yaml")
    peaks._load_tables.cache_clear()
    with R.time_limit(10):
        os.environ["ROOFLINE_PEAKS_DIR"] = str(d)
        try:
            _one_line_exit_2(["analyze", str(rd / "profile_topN.json"), "--no-write"], "FIFO")
        finally:
            del os.environ["ROOFLINE_PEAKS_DIR"]
            peaks._load_tables.cache_clear()


# ---------------------------------------------------------------- bombs, size, nesting
@pytest.mark.slow   # over ~5 s on a 2-core machine: `-m "not slow"` leaves it out
@pytest.mark.parametrize("shape", ["zeros", "spaces", "events", "one_string"])
def test_gzip_bomb_traces_stop_early(tmp_path, shape):
    p = tmp_path / "t.json.gz"
    p.write_bytes(R.gzip_bomb(shape, 256))
    t0 = time.monotonic()
    with R.time_limit(30), pytest.raises(TraceError):
        parse_trace(str(p))
    assert time.monotonic() - t0 < 15  # was minutes: a quadratic head scan, a full expansion


@pytest.mark.slow   # 2-4 s on a 2-core machine: `-m "not slow"` leaves it out
def test_gzip_bomb_counters_are_refused(tmp_path):
    p = tmp_path / "c.csv.gz"
    p.write_bytes(R.gzip_bomb("zeros", 256))
    with pytest.raises(CounterReadError, match="decompression bomb"):
        load_counters(p)


def test_gzip_ratio_limit_spares_real_traces():
    for f in ("decode", "mixed", "prefill"):
        pt = parse_trace(str(R.FIX / "traces" / f"{f}.json.gz"))
        assert pt.n_kernels > 0


def test_deeply_nested_json_is_refused(tmp_path):
    p = tmp_path / "profile_topN.json"
    p.write_text('{"entries": []' + ', "x": ' + "[" * 100000 + "]" * 100000 + "}")
    with pytest.raises(InputError, match="nested deeper"):
        inputs.load_topn(p)


def test_compact_deeply_nested_trace_is_refused_in_bounded_memory(tmp_path):
    import resource

    p = tmp_path / "t.json"
    p.write_bytes(b'{"traceEvents":[' + b"[" * 5_000_000 + b"]" * 5_000_000 + b"]}")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(TraceError, match="nested deeper"):
        parse_trace(str(p))
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024 < 300  # MB


@pytest.mark.slow   # 2-4 s on a 2-core machine: `-m "not slow"` leaves it out
def test_one_oversized_event_is_refused_by_the_general_parser(tmp_path):
    doc = json.loads(R.BASE_TRACE_TEXT)
    doc["traceEvents"][5]["args"]["zzz"] = "x" * (20 << 20)
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc))  # compact: the ijson path
    with pytest.raises(TraceError, match="larger than 16 MiB"):
        parse_trace(str(p))


@pytest.mark.slow   # over ~5 s on a 2-core machine: `-m "not slow"` leaves it out
def test_a_100000_entry_topn_lists_few_fuse_levers(rd):
    # every small kernel runs next to the saturated head in the launch stream (its neighbours): the
    # fusion levers name the largest few and sum the rest in one line, never 100,000 lines
    top = copy.deepcopy(R.BASE_TOPN)
    small = {"name": "", "pct_gpu_time": 1e-4, "classification": "elementwise",
             "regimes": {"decode": {"base_latency_ms": 0.002, "launches_per_step": 1}}}
    names = [f"triton_poi_fused_add_{i}" for i in range(100000)]
    top["entries"] += [dict(small, name=n) for n in names]
    for b in top["entries"][:len(R.BASE_TOPN["entries"])]:
        b["dataflow"] = {"producers": {n: 1 for n in names}, "consumers": {}}
    (rd / "profile_topN.json").write_text(json.dumps(top))
    code, out, err = R.cli(["analyze", str(rd / "profile_topN.json"), "--format", "json", "--no-write"])
    assert code == 0, err
    art = json.loads(out)
    levers = [lv for e in art["entries"] for lv in e.get("byte_reduction_levers", [])]
    assert levers, "the saturated head entry lists levers"
    assert max(len(e.get("byte_reduction_levers", [])) for e in art["entries"]) <= 10
    sat = [e for e in art["entries"] if e.get("byte_reduction_levers")]
    for e in sat:
        lv = e["byte_reduction_levers"]
        named = [x for x in lv if x.startswith("fuse ")]
        assert not [x for x in named if x.startswith(f"fuse {e['short_name']} ")], "fuses itself"
        more = [int(x.split()[1]) for x in lv if x.startswith("fuse: ")]
        assert len(named) + sum(more) == 100000     # exactly the adjacent fusable entries


# ---------------------------------------------------------------- wrong types are never coerced
# (inside one entry they degrade that entry: docs/input_policy.md; tests/test_input_policy.py has the rest)
def _degraded_by_cli(rd, top) -> tuple[dict, dict]:
    (rd / "profile_topN.json").write_text(json.dumps(top, allow_nan=True))
    code, out, err = R.cli(["analyze", str(rd / "profile_topN.json"), "--format", "json", "--no-write"])
    assert code == 0 and "internal error" not in err, err
    art = json.loads(out)
    return art, {d["name"]: d["reason"] for d in art["degraded"]}


@pytest.mark.parametrize("where,value", [("shapes", "64"), ("shapes", True), ("est_shape", "64"),
                                         ("est_shape", True)])
def test_strings_and_booleans_in_dimensions_degrade_the_entry(rd, where, value):
    top = copy.deepcopy(R.BASE_TOPN)
    e = top["entries"][0]
    if where == "shapes":
        e["shapes"][0]["K"] = value
    else:
        e["est_shape"] = {"N": value}
    art, reasons = _degraded_by_cli(rd, top)
    key = "shapes[0].K" if where == "shapes" else "est_shape.N"
    assert reasons == {e["name"]: f"entries[0].{key}: expected a positive dimension (at most 2^48), got "
                                  f"{'string' if isinstance(value, str) else 'boolean'}"}
    assert len(art["entries"]) == len([x for x in top["entries"] if x["pct_gpu_time"] >= 5])


@pytest.mark.parametrize("value", ["2048", True, 2048.5, -1])
def test_config_numbers_of_a_wrong_type_are_refused(rd, value):
    cfg = copy.deepcopy(R.BASE_CONFIG)
    cfg["text_config"]["hidden_size"] = value
    (rd.parent.parent / "config.json").write_text(json.dumps(cfg))
    _one_line_exit_2(["analyze", str(rd / "profile_topN.json"), "--no-write"], "text_config.hidden_size")


def test_nan_in_one_entry_degrades_that_entry_only(rd):
    (rd / "profile_topN.json").write_text(json.dumps(R.BASE_TOPN).replace('"pct_gpu_time": 31.2', '"pct_gpu_time": NaN'))
    code, out, err = R.cli(["analyze", str(rd / "profile_topN.json"), "--format", "json", "--no-write"])
    assert code == 0, err
    art = json.loads(out)
    name = R.BASE_TOPN["entries"][0]["name"]
    assert art["degraded"] == [{"name": name, "reason": "entries[0].pct_gpu_time: expected a share of GPU time in "
                                                        "0..100 (%), got NaN"}]
    assert name not in art["ranking_by_pct"] and art["entries"]


def test_pct_gpu_time_summing_over_100_is_refused(rd):
    top = copy.deepcopy(R.BASE_TOPN)
    top["entries"][1]["pct_gpu_time"] = 90.0
    total = sum(e["pct_gpu_time"] for e in top["entries"])
    assert total > 101
    (rd / "profile_topN.json").write_text(json.dumps(top))
    _one_line_exit_2(["analyze", str(rd / "profile_topN.json"), "--no-write"], f"sum to {total:.4g}%")


def test_a_null_dimension_degrades_the_entry_never_filled(rd):
    # null was read as "absent" and filled from config.json: a GEMM verdict on a dimension nobody gave
    top = copy.deepcopy(R.BASE_TOPN)
    top["entries"][0]["shapes"][0]["K"] = None
    art, reasons = _degraded_by_cli(rd, top)
    name = top["entries"][0]["name"]
    assert reasons == {name: "entries[0].shapes[0].K: expected a positive dimension (at most 2^48), got null"}
    e = next(x for x in art["entries"] if x["name"] == name)
    assert e["modeled"] is False and e["headroom_class"] == "unknown"


def test_an_absurd_dimension_degrades_the_entry(rd):
    top = copy.deepcopy(R.BASE_TOPN)
    name = top["entries"][1]["name"]
    top["entries"][1]["shapes"][0]["K"] = 1e308
    (rd / "profile_topN.json").write_text(json.dumps(top))
    code, out, err = R.cli(["analyze", str(rd / "profile_topN.json"), "--format", "json", "--no-write"])
    assert code == 0, err
    art = json.loads(out)
    reasons = {d["name"]: d["reason"] for d in art["degraded"]}
    assert reasons[name] == "entries[1].shapes[0].K: expected a positive dimension (at most 2^48), got 1e+308"


# ---------------------------------------------------------------- peak tables
def _peaks_file(tmp_path, mutate) -> Path:
    import yaml

    d = yaml.safe_load(R.BASE_PEAKS_TEXT)
    mutate(d)
    p = tmp_path / "peaks.yaml"
    p.write_text(yaml.safe_dump(d))
    return p


@pytest.mark.parametrize("mutate,needle", [
    (lambda d: d["hbm_bw_bytes_s"]["datasheet"].update(value="4.8e12"), "hbm_bw_bytes_s.datasheet.value"),
    (lambda d: d["hbm_bw_bytes_s"].update(datasheet=True), "hbm_bw_bytes_s.datasheet"),
    (lambda d: d["hbm_bw_bytes_s"]["measured"].update(value=True), "hbm_bw_bytes_s.measured.value"),
    (lambda d: d["flops"]["bf16"]["measured"].update(value="7.7e14"), "flops.bf16.measured.value"),
    (lambda d: d.update(device=5), "device"),
])
def test_a_peak_figure_of_the_wrong_kind_is_refused(rd, tmp_path, mutate, needle):
    p = _peaks_file(tmp_path, mutate)
    with pytest.raises(PeaksError, match=needle.replace(".", r"\.")):
        peaks.resolve(peaks_file=p)
    _one_line_exit_2(["analyze", str(rd / "profile_topN.json"), "--peaks", str(p), "--no-write"], needle)


def test_a_peak_run_record_of_the_wrong_kind_is_one_line(rd, tmp_path):
    # the long campaign (issue 26's round): runs[0].shapes as a string was an AttributeError in
    # both the analysis (the roof's run-to-run spread) and `peaks validate`
    p = _peaks_file(tmp_path, lambda d: d["flops"]["bf16"]["measured"]["runs"][0].update(shapes="x"))
    code, out, err = R.cli(["peaks", "validate", str(p)])
    assert code == 1 and "internal error" not in err
    assert f"{p}: flops.bf16.measured.runs[0].shapes: expected a mapping of shape -> median, got str" in out
    code, out, err = R.cli(["analyze", str(rd / "profile_topN.json"), "--peaks", str(p), "--format", "json",
                            "--no-write"])
    assert code == 0 and "internal error" not in err and json.loads(out)["entries"]


def test_yaml_with_an_unknown_tag_is_one_line(rd, tmp_path):
    p = tmp_path / "peaks.yaml"
    p.write_text(R.BASE_PEAKS_TEXT + "\nzzz: !!python/object/apply:os.system ['true']\n")
    _one_line_exit_2(["analyze", str(rd / "profile_topN.json"), "--peaks", str(p), "--no-write"], "not valid YAML")


def test_peaks_validate_on_a_boolean_figure(tmp_path):
    p = _peaks_file(tmp_path, lambda d: d["flops"].update(bf16=True))
    code, out, err = R.cli(["peaks", "validate", str(p)])
    assert code == 1 and "Traceback" not in err and "internal error" not in err
    assert "flops.bf16" in out


# ---------------------------------------------------------------- traces: malformed events
def _kernel_item_with(field: str, new: bytes) -> bytes:
    a, b = R._KERNEL_ITEMS[0]
    item = R.BASE_TRACE_TEXT[a:b]
    m = R._FIELD_RX[field].search(item)
    return R.BASE_TRACE_TEXT[:a] + item[:m.start(2)] + new + item[m.end(2):] + R.BASE_TRACE_TEXT[b:]


@pytest.mark.parametrize("layout", ["fast", "compact"])
@pytest.mark.parametrize("field,new", [("dur", b'"5"'), ("dur", b"true"), ("dur", b"-5"), ("dur", b"NaN"),
                                       ("dur", b"1e308"), ("ts", b'"1"'), ("ts", b"null")])
def test_malformed_kernel_events_are_refused(tmp_path, layout, field, new):
    p = tmp_path / "t.json"
    p.write_bytes(R._layout(_kernel_item_with(field, new), layout))
    with pytest.raises(TraceError):
        parse_trace(str(p))
    _one_line_exit_2(["topn", str(p), "-o", str(tmp_path / "o.json")])
    assert not (tmp_path / "o.json").exists()


def test_a_kernel_name_that_is_not_a_string(tmp_path):
    p = tmp_path / "t.json"
    p.write_bytes(b'{"traceEvents": [{"cat": "kernel", "name": ["k"], "ts": 1, "dur": 1, "args": {}}]}')
    with pytest.raises(TraceError, match="name is list"):
        parse_trace(str(p))


# ---------------------------------------------------------------- ncu inputs
@pytest.mark.parametrize("new", ["-5", "inf", "nan", "abc", "", "1e999"])
def test_ncu_csv_rows_with_a_bad_duration_are_skipped_not_counted(tmp_path, new):
    import csv
    import io

    rows = [list(r) for r in R._NCU_TOPN_ROWS]
    j = rows[0].index(R._DUR)
    orig = rows[5][j]
    rows[5][j] = new
    p = tmp_path / "ncu.csv"
    p.write_bytes(R._csv_bytes(rows))
    code, _, err = R.cli(["topn", str(p), "-o", str(tmp_path / "o.json"), "-q"])
    assert code == 0, err
    # the independent count: every other row's duration, in the units row's unit
    body = list(csv.reader(io.StringIO(R.BASE_NCU_TOPN_CSV.decode())))[2:]
    want_ms = sum(float(r[j].replace(",", "")) for i, r in enumerate(body, 2) if i != 5) * R._scale_ms(rows, j)
    got = json.loads((tmp_path / "o.json").read_text())["total_gpu_time_ms"]
    assert got == pytest.approx(want_ms, rel=1e-9)
    assert float(orig.replace(",", "")) > 0


def test_a_damaged_ncu_report_is_one_line_without_native_log_noise(rd, tmp_path):
    raw = gzip.decompress(R.BASE_NCU_REP_GZ)
    p = tmp_path / "cut.ncu-rep"
    p.write_bytes(raw[:90198])  # a nameless kernel after the cut (was: AttributeError)
    _one_line_exit_2(["analyze", str(rd / "profile_topN.json"), "--counters", str(p), "--no-write"])
    p.write_bytes(raw[:50])     # ncu_report logs protobuf errors on fd 2: kept off the terminal
    _one_line_exit_2(["analyze", str(rd / "profile_topN.json"), "--counters", str(p), "--no-write"])
    _one_line_exit_2(["topn", str(p), "-o", str(tmp_path / "o.json")])


@pytest.mark.parametrize("content", [b'"ID","Kernel Name"\n"', b"\x00\x01garbage", b'"ID","Kernel Name",' + b"x" * 300000])
def test_malformed_ncu_csv_given_to_topn_and_counters(rd, tmp_path, content):
    p = tmp_path / "bad.csv"
    p.write_bytes(content)
    _one_line_exit_2(["topn", str(p), "-o", str(tmp_path / "o.json")])
    _one_line_exit_2(["analyze", str(rd / "profile_topN.json"), "--counters", str(p), "--no-write"])


# ---------------------------------------------------------------- CLI and write path
def test_usage_errors_are_one_line():
    _one_line_exit_2(["analyze", "--head-threshold", "abc"], "--head-threshold")
    _one_line_exit_2(["analyze", "/"], "/: a folder without profile_topN.json")   # a round folder is taken
    _one_line_exit_2(["no-such-command"], "No such command")


def test_artifacts_keep_the_umask_mode(rd):
    old = os.umask(0o022)
    try:
        assert hook.run(rd)["json"]
        assert (rd / ART).stat().st_mode & 0o777 == 0o644
        assert (rd / MD).stat().st_mode & 0o777 == 0o644
        os.umask(0o002)
        assert hook.run(rd)["json"]
        assert (rd / ART).stat().st_mode & 0o777 == 0o664
        code, _, err = R.cli(["topn", str(R.FIX / "traces" / "prefill.json.gz"), "-o", str(rd / "t.json"), "-q"])
        assert code == 0, err
        assert (rd / "t.json").stat().st_mode & 0o777 == 0o664
    finally:
        os.umask(old)


def test_a_hook_run_killed_over_a_good_artifact_leaves_a_pair(rd):
    # the data loss the issue reports: JSON and markdown from different runs, a temp file left
    import subprocess
    import sys

    assert hook.run(rd)["skill_errors"] == []
    old = (rd / ART).read_bytes(), (rd / MD).read_bytes()
    code = ("import os, signal, sys\nfrom roofline import hook\nfrom roofline.io import pairwrite\n"
            "real = os.replace\n"
            "def once(*a, **k):\n    real(*a, **k)\n    os.kill(os.getpid(), signal.SIGKILL)\n"
            "pairwrite.os.replace = once\n"
            f"hook.run({str(rd)!r}, stage='C')\n")
    env = dict(os.environ, PYTHONPATH=str(R.ROOT))
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=120)
    assert p.returncode == -9
    report.recover(rd)   # the next start
    js, md = (rd / ART).read_bytes(), (rd / MD).read_bytes()
    assert (js, md) != old and json.loads(js)["stage"] == "C"
    assert md.decode() == report.to_markdown(json.loads(js))
    assert not [x for x in rd.iterdir() if x.name.startswith(".")]


@pytest.mark.parametrize("lat,needle", [(1e-300, "1 ns to 11.6 days (1e-06..1e+09 ms), got 1e-300"),
                                        (1e308, "1 ns to 11.6 days (1e-06..1e+09 ms), got 1e+308")])
def test_an_impossible_latency_degrades_the_entry(rd, lat, needle):
    # 1e-300 ms made the achieved bandwidth overflow to inf, 1e308 ms the bytes upper bound:
    # written as null, a schema break
    top = copy.deepcopy(R.BASE_TOPN)
    name = top["entries"][0]["name"]
    top["entries"][0]["regimes"]["decode"]["base_latency_ms"] = lat
    (rd / "profile_topN.json").write_text(json.dumps(top))
    code, out, err = R.cli(["analyze", str(rd / "profile_topN.json"), "--format", "json", "--no-write"])
    assert code == 0, err
    art = json.loads(out)
    from roofline.io.schema import validate_artifact

    validate_artifact(art)
    reasons = {d["name"]: d["reason"] for d in art["degraded"]}
    assert needle in reasons[name]


@pytest.mark.broken_artifact("writes an invalid or oversized artifact on purpose")
def test_an_artifact_that_breaks_the_schema_is_never_written(rd):
    from jsonschema import ValidationError

    assert hook.run(rd)["json"]
    old = (rd / ART).read_bytes(), (rd / MD).read_bytes()
    art = json.loads(old[0])
    art["entries"][0]["confidence"] = 3
    with pytest.raises(ValidationError):
        report.write_artifact(art, rd)
    assert ((rd / ART).read_bytes(), (rd / MD).read_bytes()) == old


@pytest.mark.broken_artifact("writes an invalid or oversized artifact on purpose")
def test_plot_refuses_a_malformed_artifact_in_one_line(tmp_path):
    art = copy.deepcopy(R.BASE_ARTIFACT)
    art["entries"][4] = [art["entries"][4]]  # an entry that is not an object (was: AttributeError)
    p = tmp_path / "profile_roofline.json"
    p.write_text(json.dumps(art))
    _one_line_exit_2(["plot", str(p), "-o", str(tmp_path / "r.png")], "$.entries.4", "not a valid")
    assert not (tmp_path / "r.png").exists()


@pytest.mark.slow   # over ~5 s on a 2-core machine: `-m "not slow"` leaves it out
@pytest.mark.broken_artifact("writes an invalid or oversized artifact on purpose")
def test_plot_of_a_huge_artifact_draws_the_head_only(tmp_path):
    art = copy.deepcopy(R.BASE_ARTIFACT)
    extra = copy.deepcopy(art["entries"][-1])
    art["entries"] += [dict(extra, name=f"{extra['name']}_{i}") for i in range(20000)]  # was: minutes
    p = tmp_path / "profile_roofline.json"
    p.write_text(json.dumps(art))
    t0 = time.monotonic()
    code, out, err = R.cli(["plot", str(p), "-o", str(tmp_path / "r.png")])
    assert code == 0, err
    assert "drawing the first 64" in err and (tmp_path / "r.png").stat().st_size > 1000
    assert time.monotonic() - t0 < 60


def test_hook_called_with_odd_arguments(rd):
    assert hook.run()["skill_errors"][0]["where"] == "hook"          # no round_dir at all
    s = hook.run(rd, "env_report.json", "config.json", "roofline", 5.0, None, None, 8, None, None, "extra",
                 future_option=1)                                    # newer pipelines: ignored, said so
    assert s["json"] and any("future_option" in e["error"] and "#10" in e["error"] for e in s["skill_errors"])


@pytest.mark.parametrize("grid", [b"-5", b'"x"', b"null", b'{"a": 1}'])
def test_a_malformed_launch_grid_is_dropped_not_an_internal_error(tmp_path, grid):
    p = tmp_path / "t.json"
    p.write_bytes(R._layout(_kernel_item_with("grid", grid), "compact"))
    code, _, err = R.cli(["topn", str(p), "-o", str(tmp_path / "o.json"), "-q"])
    assert code == 0 and "internal error" not in err, err
    inputs.load_topn(tmp_path / "o.json")


@pytest.mark.parametrize("cat", ["cuda_runtime", "gpu_memcpy", "user_annotation", "cpu_op"])
def test_an_event_name_that_is_not_a_string_is_refused(tmp_path, cat):
    doc = {"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2,
                            "args": {"External id": 1, "correlation": 2}},
                           {"ph": "X", "cat": cat, "name": -5, "ts": 1, "dur": 1,
                            "args": {"External id": 1, "correlation": 2, "Input Dims": [[1]]}}]}
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc))
    _one_line_exit_2(["topn", str(p), "-o", str(tmp_path / "o.json")], "name is int")


def test_plot_refuses_nan_and_infinity(tmp_path):
    p = tmp_path / "profile_roofline.json"
    p.write_text(json.dumps(R.BASE_ARTIFACT).replace('"head_cap": 8', '"head_cap": -Infinity'))
    assert "-Infinity" in p.read_text()
    _one_line_exit_2(["plot", str(p), "-o", str(tmp_path / "r.png")], "Infinity is not a JSON number")


@pytest.mark.broken_artifact("odd values break the seed reader's consistency checks on purpose")
@pytest.mark.parametrize("field,value", [("compute_dtype", {"value": "bf16"}), ("arithmetic_intensity", 1e308),
                                         ("achieved_flops", 1e308), ("pct_gpu_time", 1e308)])
def test_plot_with_odd_but_schema_valid_values(tmp_path, field, value):
    art = copy.deepcopy(R.BASE_ARTIFACT)
    i = next(i for i, e in enumerate(art["entries"]) if e.get("modeled"))
    art["entries"][i][field] = value       # was: TypeError (unhashable) / OverflowError (inf axis)
    p = tmp_path / "profile_roofline.json"
    p.write_text(json.dumps(art))
    code, out, err = R.cli(["plot", str(p), "-o", str(tmp_path / "r.png")])
    assert code == 0 and "internal error" not in err, err
    if field not in ("compute_dtype", "pct_gpu_time"):   # (a share over 100: a marker at the largest size)
        assert art["entries"][i]["name"] in out  # named among the points not placed


def test_markdown_of_every_entry_incl_those_without_a_target_eff(tmp_path):
    """A head list wide enough to take a routing-sort kernel (no HBM verdict: target_eff None) writes
    its markdown (the real gpt-oss trace at --head-threshold 0.5 --head-cap 40 once stopped with a
    TypeError in that entry's achieved line)."""
    import trace_mutations as M
    from roofline import api
    from roofline.report.artifact import to_markdown

    trace = M.CORPUS / "gptoss_eager.json.gz"
    out = tmp_path / "profile_topN.json"
    code, _, err = M.R.cli(["topn", str(trace), "-o", str(out), "-q", "--force", *M.topn_args(trace)])
    assert code == 0, err
    art = api.analyze(out, head_threshold_pct=0.5, head_cap=40)
    none = [e for e in art["entries"] if e.get("modeled") and e.get("target_eff") is None]
    assert none, "the trace no longer has a head entry without a target_eff"
    md = to_markdown(art)
    for e in none:
        assert f"### {e['short_name']} (" in md
    assert "vs target_eff none (no HBM verdict for its class)" in md
