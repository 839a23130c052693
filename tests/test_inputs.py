"""Bad input of each file: one clear line naming file, JSON path and expectation; exit 2 from the CLI."""
import json

import pytest
from click.testing import CliRunner

from roofline.cli import main
from roofline.errors import InputError
from roofline.inputs import parse_env, parse_topn, read_json

from conftest import entry, h200_env, topn


def _err(fn, data):
    with pytest.raises(InputError) as ei:
        fn(data, "f.json")
    return str(ei.value)


@pytest.mark.parametrize("data,msg", [
    ([], "f.json: (top level): expected a JSON object, got array"),
    ({}, "f.json: entries: required field is missing"),
    ({"entries": {}}, "f.json: entries: expected an array, got object"),
    ({"entries": [5]}, "f.json: entries[0]: expected an object, got number"),
    ({"entries": [{"pct_gpu_time": 1, "regimes": {}}]}, "f.json: entries[0].name: required field is missing"),
    ({"entries": [{"name": "k", "pct_gpu_time": "7", "regimes": {}}]},
     "f.json: entries[0].pct_gpu_time: expected a number, got string"),
    ({"entries": [{"name": "k", "pct_gpu_time": True, "regimes": {}}]},
     "f.json: entries[0].pct_gpu_time: expected a number, got boolean"),
    ({"entries": [{"name": "k", "pct_gpu_time": 7}]}, "f.json: entries[0].regimes: required field is missing"),
    ({"entries": [{"name": "k", "pct_gpu_time": 7, "regimes": {}}]},
     "f.json: entries[0].regimes: expected at least one of 'decode' or 'prefill'"),
    ({"entries": [entry("k", 7, None)]}, "f.json: entries[0].regimes.decode.base_latency_ms: expected a number, got null"),
    ({"entries": [{"name": "k", "pct_gpu_time": 7, "regimes": {"decode": {"base_latency_ms": 1}}}]},
     "f.json: entries[0].regimes.decode.launches_per_step: required field is missing"),
    ({"entries": [entry("k", 7, 1, shapes={"M": 1})]}, "f.json: entries[0].shapes: expected an array of objects, got object"),
    ({"entries": [entry("k", 7, 1, editable="yes")]}, "f.json: entries[0].editable: expected true or false, got string"),
    ({"entries": [entry("k", 7, 1, launches_per_logical_op=1.5)]},
     "f.json: entries[0].launches_per_logical_op: expected an integer, got number"),
    ({"entries": [entry("k", 7, 1, dtypes={"act": 2})]}, "f.json: entries[0].dtypes.act: expected a string, got number"),
    ({"entries": [], "serving": {"n_decode_steps": "many"}}, "f.json: serving.n_decode_steps: expected a number, got string"),
])
def test_malformed_topn_is_rejected_with_its_path(data, msg):
    assert _err(parse_topn, data) == msg


@pytest.mark.parametrize("mutate,msg", [
    (lambda e: e.pop("gfx"), "f.json: gfx: required field is missing"),
    (lambda e: (e.pop("gfx"), e.pop("workload")),
     "f.json: required fields are missing: gfx, workload.isl, workload.osl, workload.conc"),
    (lambda e: e.clear(), "f.json: not an env report: required fields are missing: gfx, model_dtype, "
                          "model_arch_class, workload.isl, workload.osl, workload.conc"),
    (lambda e: e.update(workload=None), "f.json: workload: expected an object, got null"),
    (lambda e: e["workload"].update(isl="1k"), "f.json: workload.isl: expected a number, got string"),
    (lambda e: e["workload"].update(osl=0), "f.json: workload.osl: expected a positive number, got 0.0"),
    (lambda e: e.update(model_dtype=8), "f.json: model_dtype: expected a string, got number"),
])
def test_malformed_env_is_rejected(mutate, msg):
    env = h200_env()
    mutate(env)
    assert _err(parse_env, env) == msg


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
    assert probs["a"] == ["regimes.decode.base_latency_ms is -1.0: must be a positive time"]
    assert probs["b"] == ["pct_gpu_time 150.0 is outside 0..100"]
    assert probs["c"] == ["regimes.decode.base_latency_ms is nan: must be a positive time"]
    assert probs["d"] == ["shapes[0].M is 0: a dimension must be positive"]
    assert probs["e"] == ["regimes.decode.base_latency_ms is 0.0: must be a positive time"]


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
    with pytest.raises(InputError, match="nope.json: file not found"):
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
