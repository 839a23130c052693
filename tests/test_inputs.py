"""Bad input of each file: one clear line naming file, JSON path and expectation; exit 2 from the CLI."""
import json

import pytest
from click.testing import CliRunner

from roofline.cli import main
from roofline.io.errors import InputError
from roofline.core.inputs import parse_env, parse_topn, read_json

from conftest import entry, h200_env, topn


def _err(fn, data):
    with pytest.raises(InputError) as ei:
        fn(data, "f.json")
    return str(ei.value)


# a problem of the FILE: one InputError naming the file, the JSON path, what was expected and found
@pytest.mark.parametrize("data,msg", [
    ([], "f.json: (top level): expected a JSON object, got array"),
    ({}, "f.json: entries: required field is missing"),
    ({"entries": {}}, "f.json: entries: expected an array, got object"),
    ({"entries": [], "serving": {"n_decode_steps": "many"}}, "f.json: serving.n_decode_steps: expected a number, got string"),
    ({"entries": [], "serving": {"n_decode_steps": -2000}},
     "f.json: serving.n_decode_steps: expected a step count >= 0 (at most 2^48), got -2000"),
    ({"entries": [], "serving": {"n_prefill_steps": float("nan")}},
     "f.json: serving.n_prefill_steps: expected a step count >= 0 (at most 2^48), got NaN"),
    ({"entries": [], "serving": {"n_decode_steps": None}}, "f.json: serving.n_decode_steps: expected a number, got null"),
    ({"entries": [], "total_gpu_time_ms": -1.5}, "f.json: total_gpu_time_ms: expected a time >= 0 (ms), got -1.5"),
    ({"entries": [], "round": 2.5}, "f.json: round: expected an integer, got 2.5"),
    ({"entries": [], "round": -1}, "f.json: round: expected an integer >= 0, got -1"),
    ({"entries": [], "schema_version": True}, "f.json: schema_version: expected an integer, got boolean"),
])
def test_malformed_topn_is_rejected_with_its_path(data, msg):
    assert _err(parse_topn, data) == msg


# a problem INSIDE ONE ENTRY: never an InputError; the entry carries it (it degrades alone)
@pytest.mark.parametrize("e,problem", [
    (5, "entries[0]: expected an object (a Top-N entry), got 5"),
    ({"pct_gpu_time": 1, "regimes": {"decode": {"base_latency_ms": 1, "launches_per_step": 1}}},
     "entries[0].name: required field is missing"),
    (entry("", 7, 1), "entries[0].name: expected the kernel's name, got an empty string"),
    (entry("k\ud800", 7, 1), "entries[0].name: expected the kernel's name as text (valid Unicode), got a string that "
                              "is not valid Unicode (a lone surrogate, \\ud800 at character 1)"),
    (entry("k", "7", 1), "entries[0].pct_gpu_time: expected a share of GPU time in 0..100 (%), got string"),
    (entry("k", True, 1), "entries[0].pct_gpu_time: expected a share of GPU time in 0..100 (%), got boolean"),
    (entry("k", -5, 1), "entries[0].pct_gpu_time: expected a share of GPU time in 0..100 (%), got -5"),
    ({"name": "k", "pct_gpu_time": 7}, "entries[0].regimes: required field is missing"),
    ({"name": "k", "pct_gpu_time": 7, "regimes": {}}, "entries[0].regimes: expected at least one of 'decode' or 'prefill', "
                                                     "got object"),
    (entry("k", 7, None), "entries[0].regimes.decode.base_latency_ms: expected a launch time of 1 ns to 11.6 days "
                          "(1e-06..1e+09 ms), got null"),
    ({"name": "k", "pct_gpu_time": 7, "regimes": {"decode": {"base_latency_ms": 1}}},
     "entries[0].regimes.decode.launches_per_step: required field is missing"),
    (entry("k", 7, 1, lps=[3]), "entries[0].regimes.decode.launches_per_step: expected a positive number of launches "
                                "(at most 2^48), got array"),
    (entry("k", 7, 1, shapes={"M": 1}), "entries[0].shapes: expected an array of objects, got object"),
    (entry("k", 7, 1, shapes=[{"M": None, "N": 4, "K": 4}]),
     "entries[0].shapes[0].M: expected a positive dimension (at most 2^48), got null"),
    (entry("k", 7, 1, est_shape={"N": "64"}), "entries[0].est_shape.N: expected a positive dimension (at most 2^48), "
                                              "got string"),
    (entry("k", 7, 1, shapes=[{"shape": [4, -1]}]),
     "entries[0].shapes[0].shape[1]: expected a positive integer dimension (at most 2^48), got -1"),
    (entry("k", 7, 1, editable="yes"), "entries[0].editable: expected true or false, got string"),
    (entry("k", 7, 1, launches_per_logical_op=1.5),
     "entries[0].launches_per_logical_op: expected an integer >= 1 (at most 2^48), got 1.5"),
    (entry("k", 7, 1, launches_per_logical_op=None),
     "entries[0].launches_per_logical_op: expected an integer >= 1 (at most 2^48), got null"),
    (entry("k", 7, 1, dtypes={"act": 2}), "entries[0].dtypes.act: expected a string, got 2"),
    (entry("k", 7, 1, shape_launches=[3, float("inf")]),
     "entries[0].shape_launches[1]: expected a launch count >= 0, got Infinity"),
])
def test_a_bad_field_of_one_entry_is_that_entrys_problem(e, problem):
    t = parse_topn({"entries": [e, entry("ok", 7, 1.0)]}, "f.json")
    assert t.entries[0].problems == [problem]
    assert t.entries[1].problems == []


@pytest.mark.parametrize("mutate,missing", [
    (lambda e: e.pop("workload"), ["workload.isl", "workload.osl", "workload.conc"]),
    (lambda e: e["workload"].pop("conc"), ["workload.conc"]),
    (lambda e: (e.pop("model_dtype"), e.pop("model_arch_class")), ["model_dtype", "model_arch_class"]),
])
def test_left_out_env_fields_are_recorded_not_refused(mutate, missing):
    """Only what needs a left-out field degrades (docs/env_report.md); the file still loads."""
    env = h200_env()
    mutate(env)
    e = parse_env(env, "f.json")
    assert e.missing == missing
    assert sorted(e.workload) == sorted(k for k in ("isl", "osl", "conc") if f"workload.{k}" not in missing)


def test_impossible_values_degrade_the_entry_not_the_run():
    t = parse_topn({"entries": [entry("a", 7, -1.0), entry("b", 150, 1.0), entry("c", 7, float("nan")),
                                entry("d", 7, 1.0, shapes=[{"M": 0, "N": 4, "K": 4}]), entry("e", 7, 0.0)]}, "f.json")
    probs = {e.name: e.problems for e in t.entries}
    lat = "expected a launch time of 1 ns to 11.6 days (1e-06..1e+09 ms), got"
    assert probs["a"] == [f"entries[0].regimes.decode.base_latency_ms: {lat} -1"]
    assert probs["b"] == ["entries[1].pct_gpu_time: expected a share of GPU time in 0..100 (%), got 150"]
    assert probs["c"] == [f"entries[2].regimes.decode.base_latency_ms: {lat} NaN"]
    assert probs["d"] == ["entries[3].shapes[0].M: expected a positive dimension (at most 2^48), got 0"]
    assert probs["e"] == [f"entries[4].regimes.decode.base_latency_ms: {lat} 0"]
    assert t.entries[1].pct_gpu_time == 150  # kept (the entry degrades); a negative one is no share: NaN


def test_extra_fields_are_ignored():
    t = parse_topn({"entries": [entry("a", 7, 1.0, something_new={"x": 1})], "producer": "v9"}, "f.json")
    assert t.entries[0].name == "a"


def test_truncated_and_empty_and_missing_files(tmp_path):
    p = tmp_path / "t.json"
    p.write_text('{"entries": [{"name": "a", "pct_')
    with pytest.raises(InputError, match=r"t.json: not valid JSON \(Unterminated string .*\) - truncated\?$"):
        read_json(p)
    p.write_text("")
    with pytest.raises(InputError, match="t.json: file is empty, expected a JSON object"):
        read_json(p)
    with pytest.raises(InputError, match="nope.json: no such file"):
        read_json(tmp_path / "nope.json")


def _write(d, t, env=None):
    (d / "profile_topN.json").write_text(json.dumps(t))
    if env is not None:
        (d / "env_report.json").write_text(json.dumps(env))
    return d / "profile_topN.json"


@pytest.mark.parametrize("t,env,expect", [
    ('{"entries": [', h200_env(), "not valid JSON"),
    (topn(entry("a", 7, 1.0)), {"model_dtype": "bf16"},
     "env_report.json: required fields are missing: gfx, model_arch_class, workload.isl, workload.osl, workload.conc"),
    (topn(entry("a", 7, 1.0)), None, "no env_report.json beside it or in any parent directory: pass --env FILE"),
    ({"entries": "x"}, h200_env(), "profile_topN.json: entries: expected an array, got string"),
])
def test_cli_exits_2_with_one_line(tmp_path, t, env, expect):
    d = tmp_path / "r"
    d.mkdir()
    if isinstance(t, str):
        (d / "profile_topN.json").write_text(t)
        (d / "env_report.json").write_text(json.dumps(env))
        p = d / "profile_topN.json"
    else:
        p = _write(d, t, env)
    res = CliRunner().invoke(main, ["analyze", str(p)])
    assert res.exit_code == 2
    err = res.stderr.strip()
    assert "\n" not in err and "Traceback" not in err
    assert expect in err


def test_cli_unknown_device_without_props_degrades_and_exits_0(tmp_path):
    # seed L1: an unusable device description is not unusable input: every entry degrades
    d = tmp_path / "r"
    d.mkdir()
    p = _write(d, topn(entry("a", 7, 1.0, classification="gemm", shapes=[{"M": 64, "N": 4096, "K": 4096}])),
               h200_env(gfx="gfx1100", gpu_name="Radeon RX 7900"))
    res = CliRunner().invoke(main, ["analyze", str(p)])
    assert res.exit_code == 0, res.output
    art = json.loads((d / "profile_roofline.json").read_text())
    assert art["peaks"]["source"] == "derived" and art["peaks"]["confidence"] == "low"
    assert art["peaks"]["hbm_bw_bytes_s"] is None and art["peaks"]["flops"] == {}
    assert art["degraded"] == [{"name": "a", "reason": "no memory peak for Radeon RX 7900"}]
    assert "no peaks for Radeon RX 7900 (gfx1100)" in art["peaks"]["notes"][0]


def test_cli_empty_entries_succeeds_with_empty_table(tmp_path):
    d = tmp_path / "r"
    d.mkdir()
    p = _write(d, topn(), h200_env())
    res = CliRunner().invoke(main, ["analyze", str(p)])
    assert res.exit_code == 0
    assert "(no entry at or above the head threshold)" in res.stdout
    art = json.loads((d / "profile_roofline.json").read_text())
    assert art["entries"] == [] and art["degraded"] == []


def test_env_and_config_are_found_up_to_the_run_root_and_never_above(tmp_path):
    """The pipeline's layout <run>/profile/round_<R>/: the run folder is the last one searched; a
    stray env_report.json in a folder that holds many runs (a shared /tmp) belongs to none of them."""
    from roofline.core.inputs import UNLAID_LEVELS, find_upwards

    rnd = tmp_path / "runs" / "run1" / "profile" / "round_3"
    rnd.mkdir(parents=True)
    (tmp_path / "runs" / "env_report.json").write_text("{}")          # above the run root: not this run's
    assert find_upwards(rnd, "env_report.json") is None
    (tmp_path / "runs" / "run1" / "env_report.json").write_text("{}")  # at the run root
    assert find_upwards(rnd, "env_report.json") == (tmp_path / "runs" / "run1" / "env_report.json").resolve()
    # outside the layout: the folder and UNLAID_LEVELS above it
    deep = tmp_path / "x" / "y" / "z"
    deep.mkdir(parents=True)
    (tmp_path / "env_report.json").write_text("{}")
    assert UNLAID_LEVELS == 2 and find_upwards(deep, "env_report.json") is None
    assert find_upwards(deep.parent, "env_report.json") == (tmp_path / "env_report.json").resolve()
