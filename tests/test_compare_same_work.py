"""Issue 34 item 4: `roofline compare` refuses rounds of different work (device, model dtype, model
config, every common kernel's shapes) with one line naming what differs, and the playbook stays
byte for byte unchanged; a kernel whose shapes differ is left out of an otherwise valid compare.
Real rounds: the fp8 Llama and the Qwen3 MoE corpus rounds (their Top-Ns, env reports, configs and
the Llama round's recorded playbook)."""
import json
import shutil

from click.testing import CliRunner

from roofline.cli import main

from conftest import FIXTURES

RC = FIXTURES / "rerun_corpus"


def _copy(tmp_path, name):
    if not (tmp_path / "corpus" / "configs").exists():
        shutil.copytree(FIXTURES / "corpus" / "configs", tmp_path / "corpus" / "configs")
    d = tmp_path / "rerun_corpus" / name
    shutil.copytree(RC / name, d)
    return d


def _playbook_bytes(d):
    return {f.name: f.read_bytes() for f in sorted((d / "knowledge").glob("*"))}


def _compare(a, b, *extra):
    return CliRunner().invoke(main, ["compare", str(a), str(b), *extra])


def test_a_llama_round_against_a_qwen3_round_is_refused_and_records_nothing(tmp_path):
    llama, qwen = _copy(tmp_path, "llama_fp8_prefill_decode"), _copy(tmp_path, "qwen3moe_grouped_mm")
    before, before_q = _playbook_bytes(llama), _playbook_bytes(qwen)
    assert before["backend_playbook.jsonl"]          # a playbook with records already
    r = _compare(llama / "profile" / "round_1", qwen / "profile" / "round_1", "--e2e-delta-pct", "3")
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1, r.output
    ea = json.loads((llama / "profile" / "round_1" / "env_report.json").read_text())
    eb = json.loads((qwen / "profile" / "round_1" / "env_report.json").read_text())
    assert f"model_dtype {ea['model_dtype']} -> {eb['model_dtype']}" in r.stderr
    ca = json.loads((tmp_path / "corpus" / "configs" / "llama_fp8_prefill_decode.json").read_text())
    cb = json.loads((tmp_path / "corpus" / "configs" / "qwen3moe_grouped_mm.json").read_text())
    k = next(k for k in ("hidden_size", "num_attention_heads", "num_key_value_heads") if ca.get(k) != cb.get(k))
    assert f"{k} {ca[k]} -> {cb[k]}" in r.stderr and "not the same work" in r.stderr
    assert _playbook_bytes(llama) == before
    assert _playbook_bytes(qwen) == before_q


def test_the_same_round_with_another_model_config_is_refused(tmp_path):
    a = _copy(tmp_path, "llama_fp8_prefill_decode")
    b = tmp_path / "b" / "profile" / "round_2"
    shutil.copytree(a / "profile" / "round_1", b)
    env = json.loads((b / "env_report.json").read_text())
    env["config_path"] = str(tmp_path / "corpus" / "configs" / "qwen3moe_grouped_mm.json")
    (b / "env_report.json").write_text(json.dumps(env))
    (b / "profile_roofline.json").unlink()
    before = _playbook_bytes(a)
    r = _compare(a / "profile" / "round_1", b / "profile_topN.json")
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "not the same work (model config " in r.stderr and "model_dtype" not in r.stderr
    assert _playbook_bytes(a) == before


def test_a_kernel_with_other_shapes_is_left_out_and_never_recorded(tmp_path):
    a = _copy(tmp_path, "llama_fp8_prefill_decode")
    ra = a / "profile" / "round_1"
    art = json.loads((ra / "profile_roofline.json").read_text())
    t = json.loads((ra / "profile_topN.json").read_text())
    heads = [e["name"] for e in art["entries"] if e.get("attainable_speedup")]
    moved, same = heads[0], heads[1]
    for e in t["entries"]:
        if e["name"] in (moved, same):           # both 1.5x faster in B; `moved` also has other shapes
            for g in e["regimes"].values():
                g["base_latency_ms"] /= 1.5
        if e["name"] == moved:
            e["shapes"] = [dict(s, **{k: v * 2 for k, v in s.items() if isinstance(v, int) and not isinstance(v, bool)})
                           for s in e["shapes"]]
    rb = tmp_path / "rerun_corpus" / a.name / "profile" / "round_2"
    rb.mkdir()
    shutil.copy(ra / "env_report.json", rb / "env_report.json")
    t["round"] = 2
    (rb / "profile_topN.json").write_text(json.dumps(t))
    n_before = len((a / "knowledge" / "backend_playbook.jsonl").read_text().splitlines())
    r = _compare(ra, rb, "--kernel", moved, "--format", "json")
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    rows = {x["kernel"]: x for x in res["kernels"]}
    assert res["not_compared"] == [moved]
    assert rows[moved]["measured_inrun_speedup"] is None and rows[moved]["status"].startswith("different work")
    assert abs(rows[same]["measured_inrun_speedup"] - 1.5) < 1e-9
    new = [json.loads(x) for x in (a / "knowledge" / "backend_playbook.jsonl").read_text().splitlines()][n_before:]
    assert [x["kernel"] for x in new] == [same]
    assert any("1 kernel(s) in both rounds have other captured shapes" in w for w in res["warnings"])


def test_a_playbook_proposal_needs_three_records_of_one_device_and_names_them(tmp_path):
    real = [json.loads(x) for x in (RC / "llama_fp8_prefill_decode" / "knowledge" / "backend_playbook.jsonl")
            .read_text().splitlines()]
    base = next(r for r in real if r["roofline_pct"] and r["op_class"] == "gemm")
    recs = [dict(base, measured_isolated_speedup=s, model_contradicted=False) for s in (1.2, 1.3, 1.4)]
    kn = tmp_path / "knowledge"
    kn.mkdir()

    def playbook(rs):
        (kn / "backend_playbook.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rs))
        r = CliRunner().invoke(main, ["playbook", str(kn)])
        assert r.exit_code == 0, r.output
        return r.stdout

    out = playbook(recs)
    want = min(1.0, base["roofline_pct"] * 1.3)
    assert f"proposed target_eff[gemm] = {want:.2f}" in out and "rests on records #1, #2, #3" in out
    assert "proposed target_eff" not in playbook(recs[:2])          # two are not enough
    other = dict(recs[2], device="AMD Instinct MI355X")
    out = playbook(recs[:2] + [other])
    assert "proposed target_eff" not in out and "the records come from 2 devices" in out
