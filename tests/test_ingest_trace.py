"""Top-N from real PyTorch traces (made on the H200 by tools/device/make_trace_fixtures.py).

The independent count is the profiler's own ``key_averages()`` per kernel, which the device script
saved in fixtures/traces/fixtures_meta.json beside the traces, with the GEMM / attention shapes the
script itself used.
"""
import gzip
import json
import os
from collections import defaultdict

import pytest

# the device image (where `pytest -m gpu` runs) lacks ijson, a CPU-side dependency: said as a skip
pytest.importorskip("ijson", reason="ijson is not installed (pip install -e '.[dev]'): the trace parsers' tests need it")

from click.testing import CliRunner  # noqa: E402

from roofline.commands.topn import topn  # noqa: E402
from roofline.ingest.torch_trace import parse_trace  # noqa: E402

FIX = os.path.join(os.path.dirname(__file__), "..", "fixtures", "traces")
META = json.load(open(os.path.join(FIX, "fixtures_meta.json")))
TRACES = ("prefill", "decode", "mixed")


def _path(k):
    return os.path.join(FIX, f"{k}.json.gz")


def _ka_kernels(k):
    """key_averages rows that are kernels (not the step ranges, not memset/memcpy)."""
    ranges = {"decode_step", "prefill_step"}
    return {n: v for n, v in META["traces"][k]["key_averages"].items()
            if n not in ranges and not n.startswith(("Memset", "Memcpy"))}


@pytest.fixture(scope="module")
def docs(tmp_path_factory):
    out = {}
    d = tmp_path_factory.mktemp("topn")
    for k in TRACES:
        o = d / f"{k}.json"
        r = CliRunner().invoke(topn, [_path(k), "-o", str(o), "--top", "100"])
        assert r.exit_code == 0, r.output
        out[k] = json.load(open(o))
    return out


@pytest.mark.parametrize("k", TRACES)
def test_totals_match_key_averages(docs, k):
    """Per kernel: GPU time within 0.1% of key_averages and the same launch count; total too."""
    doc, ka = docs[k], _ka_kernels(k)
    ents = {e["name"]: e for e in doc["entries"]}
    # split-K reduce kernels are folded into the GEMM they complete: their launches and time are
    # listed under that GEMM and counted in its time, never lost
    folded = defaultdict(lambda: [0, 0.0])
    for e in doc["entries"]:
        for f in e.get("folded_kernels", []):
            folded[f["name"]][0] += f["launches"]
            folded[f["name"]][1] += f["total_ms"]
    assert set(ents) | set(folded) == set(ka)
    for n, (c, ms) in folded.items():
        assert c == ka[n]["count"] and ms * 1000 == pytest.approx(ka[n]["device_time_total_us"], rel=1e-3), n
    for n, e in ents.items():
        ref = ka[n]
        own_ms = e["total_ms"] - sum(f["total_ms"] for f in e.get("folded_kernels", []))
        assert e["launches"] == ref["count"], n
        assert own_ms * 1000 == pytest.approx(ref["device_time_total_us"], rel=1e-3), n
    total_ref_ms = sum(v["device_time_total_us"] for v in ka.values()) / 1000
    assert doc["total_gpu_time_ms"] == pytest.approx(total_ref_ms, rel=1e-3)
    assert sum(e["pct_gpu_time"] for e in doc["entries"]) == pytest.approx(100.0, abs=1e-3)
    for e in doc["entries"]:
        assert e["pct_gpu_time"] == pytest.approx(100 * e["total_ms"] / doc["total_gpu_time_ms"], abs=1e-5)


@pytest.mark.parametrize("k", ("prefill", "decode"))
def test_gemm_shapes_equal_script(docs, k):
    """(M, N, K) recovered from the trace == the shapes the script's linears used, with counts."""
    meta = META["traces"][k]
    steps = meta["steps"][meta["regime"]]
    want = {(g["M"], g["N"], g["K"]): g["calls_per_step"] * steps for g in meta["gemm_shapes"]}
    got = defaultdict(int)
    for e in docs[k]["entries"]:
        if e.get("classification") != "gemm" or "splitKreduce" in e["name"]:
            continue   # the split-K reduce is the second launch of an already counted GEMM
        for s, c in zip(e["shapes"], e["shape_launches"]):
            got[(s["M"], s["N"], s["K"])] += c
        assert e["dtypes"] == {"act": "bf16", "weight": "bf16", "out": "bf16"}
    assert dict(got) == want


def test_attention_shapes_equal_script(docs):
    for k in ("prefill", "decode"):
        meta = META["traces"][k]["attn_shapes"][0]
        ents = [e for e in docs[k]["entries"] if e.get("classification") == "attn"]
        assert ents, k
        seqs = set()
        for e in ents:
            for s in e["shapes"]:
                assert (s["batch"], s["q_len"], s["n_q_heads"], s["n_kv_heads"], s["head_dim"], s["causal"]) == \
                    (meta["batch"], meta["q_len"], meta["n_q_heads"], meta["n_kv_heads"], meta["head_dim"], meta["causal"])
                seqs.add(s["seq_len"])
            assert e["dtypes"]["kv"] == "bf16"
        want = set(meta["seq_len"]) if isinstance(meta["seq_len"], list) else {meta["seq_len"]}
        assert seqs == want


def test_norm_and_elementwise_shapes(docs):
    d, b = META["model"]["d"], META["traces"]["decode"]["batch"]
    ff = META["model"]["d_ff"]
    by_short = {e["short_name"]: e for e in docs["decode"]["entries"]}
    silu = by_short["elementwise_kernel[silu_kernel]"]
    assert silu["shapes"][0] == {"elems_in": b * ff, "elems_out": b * ff}
    add = by_short["vectorized_elementwise_kernel[CUDAFunctor_add]"]
    assert add["shapes"][0] == {"elems_in": 2 * b * d, "elems_out": b * d}
    gather = by_short["indexSelectSmallIndex"]      # embedding rows of the batch's tokens, not the table
    assert gather["shapes"][0] == {"elems_in": b * d + b, "elems_out": b * d}
    norms = [e for e in docs["decode"]["entries"] if e.get("classification") == "norm"]
    assert norms and all(e["shapes"][0]["elems_out"] == b * d for e in norms)


def test_steps_and_launches_per_step(docs):
    for k in ("prefill", "decode"):
        meta = META["traces"][k]
        reg = meta["regime"]
        n = meta["steps"][reg]
        assert docs[k]["serving"][f"n_{reg}_steps"] == n
        for e in docs[k]["entries"]:
            r = e["regimes"][reg]
            assert r["launches_per_step"] * n == pytest.approx(e["launches"])
            assert r["base_latency_ms"] * e["launches"] == pytest.approx(e["total_ms"])


def test_mixed_trace_splits_regimes_by_ranges(docs):
    """1 prefill + 4 decode steps in one trace: per-step launches equal the single-regime traces'."""
    mixed = docs["mixed"]
    assert mixed["serving"] == {"n_decode_steps": 4, "n_prefill_steps": 1}
    per = {k: {e["name"]: e["regimes"][META["traces"][k]["regime"]]["launches_per_step"] for e in docs[k]["entries"]}
           for k in ("prefill", "decode")}
    n_checked = 0
    for e in mixed["entries"]:
        for reg in ("prefill", "decode"):
            if reg in e["regimes"]:
                assert e["regimes"][reg]["launches_per_step"] == per[reg][e["name"]], (reg, e["name"])
                n_checked += 1
    assert n_checked >= 19
    assert not any("outside any step range" in n for n in mixed["notes"])


def test_fast_and_ijson_engines_agree():
    for k in TRACES:
        a = parse_trace(_path(k), range_regex=["decode", "prefill"], engine="fast")
        b = parse_trace(_path(k), range_regex=["decode", "prefill"], engine="ijson")
        assert a.kernel_names == b.kernel_names and a.k_dur == b.k_dur and a.k_ext == b.k_ext
        assert a.n_events == b.n_events and len(a.ranges) == len(b.ranges)
        assert {x: a.sigs[s] for x, s in a.op_by_ext.items()} == {x: b.sigs[s] for x, s in b.op_by_ext.items()}


def _rewrite(src, dst, keep):
    doc = json.load(gzip.open(src))
    doc["traceEvents"] = [e for e in doc["traceEvents"] if keep(e)]
    with open(dst, "w") as f:
        json.dump(doc, f, indent=2)   # also a layout the fast path does not split: ijson fallback


def test_no_step_info_is_assumed_and_said(tmp_path):
    p = tmp_path / "noranges.json"
    _rewrite(_path("decode"), p, lambda e: e.get("cat") not in ("user_annotation", "gpu_user_annotation"))
    o = tmp_path / "t.json"
    r = CliRunner().invoke(topn, [str(p), "-o", str(o)])
    assert r.exit_code == 0, r.output
    doc = json.load(open(o))
    assert doc["serving"] == {"n_decode_steps": 1, "n_prefill_steps": 0}
    assert any(n.startswith("ASSUMED") for n in doc["notes"])
    assert "ASSUMED" in r.output   # echoed (stderr is mixed into output by CliRunner)
    r = CliRunner().invoke(topn, [str(p), "-o", str(o), "--decode-steps", "8"])
    assert r.exit_code == 0
    doc = json.load(open(o))
    assert doc["serving"]["n_decode_steps"] == 8
    nv = [e for e in doc["entries"] if e["name"] == "nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT"][0]
    assert nv["regimes"]["decode"]["launches_per_step"] == 4.0
    r = CliRunner().invoke(topn, [str(p), "-o", str(o), "--prefill-steps", "2", "--decode-steps", "8"])
    assert r.exit_code == 2


def test_round_from_path_and_top(tmp_path):
    o = tmp_path / "profile" / "round_7" / "profile_topN.json"
    r = CliRunner().invoke(topn, [_path("decode"), "-o", str(o), "--top", "3"])
    assert r.exit_code == 0, r.output
    doc = json.load(open(o))
    assert doc["round"] == 7 and len(doc["entries"]) == 3
    assert doc["entries"][0]["pct_gpu_time"] >= doc["entries"][1]["pct_gpu_time"] >= doc["entries"][2]["pct_gpu_time"]
    # the split-K reduce kernel is folded into its GEMM, so it is not a kernel name of its own
    n_names = sum(1 for n in _ka_kernels("decode") if "splitKreduce" not in n)
    assert any(f"3 of {n_names} kernel names listed" in n for n in doc["notes"])


# ------------------------------------------------------------------ inputs that must be rejected

def _bad(tmp_path, name, data: bytes):
    p = tmp_path / name
    p.write_bytes(data)
    return p


def _run_bad(path, tmp_path, *extra):
    r = CliRunner().invoke(topn, [str(path), "-o", str(tmp_path / "o.json"), *extra])
    assert r.exit_code == 2, r.output
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert len(lines) == 1 and "Traceback" not in r.output, r.output
    assert os.path.basename(str(path)) in lines[0]
    assert not (tmp_path / "o.json").exists()
    return lines[0]


def test_reject_truncated(tmp_path):
    raw = gzip.open(_path("decode")).read()
    msg = _run_bad(_bad(tmp_path, "trunc.json", raw[: len(raw) // 2]), tmp_path)
    assert "truncated" in msg or "malformed" in msg
    msg = _run_bad(_bad(tmp_path, "trunc2.json", raw[:-40]), tmp_path)
    assert "truncated" in msg or "malformed" in msg
    gz = open(_path("decode"), "rb").read()
    _run_bad(_bad(tmp_path, "trunc.json.gz", gz[: len(gz) // 2]), tmp_path)


def test_reject_non_trace(tmp_path):
    assert "this is a model config.json, not a profile" in _run_bad(_bad(tmp_path, "cfg.json", b'{"hidden_size": 4096}'),
                                                                     tmp_path)
    assert "traceEvents" in _run_bad(_bad(tmp_path, "other.json", b'{"x": 4096}'), tmp_path)
    _run_bad(_bad(tmp_path, "list.json", b"[1, 2, 3]"), tmp_path)
    _run_bad(_bad(tmp_path, "text.json", b"hello, not json"), tmp_path)
    _run_bad(_bad(tmp_path, "empty.json", b""), tmp_path)
    _run_bad(tmp_path / "missing.json", tmp_path)


def test_reject_trace_without_kernels(tmp_path):
    p = tmp_path / "cpuonly.json"
    _rewrite(_path("decode"), p, lambda e: e.get("cat") != "kernel")
    assert "no GPU kernel" in _run_bad(p, tmp_path)


def test_reject_kernels_everywhere_but_empty_events(tmp_path):
    assert "no GPU kernel" in _run_bad(_bad(tmp_path, "e.json", b'{"traceEvents": []}'), tmp_path)


# ------------------------------------------------------------------ parser paths agree

def _norm(x):
    # launch (runtime) events are read by the fast path only when needed: compared separately
    return (sorted(zip((x.kernel_names[i] for i in x.k_name), x.k_ts, x.k_dur, x.k_ext, x.k_corr)),
            {e: x.sigs[s] for e, s in x.op_by_ext.items()},
            sorted((r.name, r.ts_us, r.gpu) for r in x.ranges), x.n_events,
            {x.kernel_names[i]: c for i, c in x.launch_dims.items()}, x.record_shapes, x.device_names)


@pytest.mark.parametrize("k", TRACES)
def test_parallel_and_layouts_agree_with_ijson(k, tmp_path, monkeypatch):
    """The 2-/3-process split, Kineto's layout, json.dump(indent=2) and a compact-separator layout
    (the per-item path without the regex jump) all give what the general ijson parse gives."""
    from roofline.ingest import torch_trace
    ref = _norm(parse_trace(_path(k), range_regex=["decode", "prefill"], engine="ijson"))
    raw = gzip.open(_path(k)).read()
    plain = tmp_path / "plain.json"
    plain.write_bytes(raw)
    monkeypatch.setattr(torch_trace, "_PARALLEL_MIN_BYTES", 0)
    for w in (1, 2, 3):
        assert _norm(parse_trace(str(plain), range_regex=["decode", "prefill"], engine="fast", workers=w)) == ref, w
    doc = json.loads(raw)
    for name, kw in (("indent.json", {"indent": 2}), ("compact.json", {"indent": 1, "separators": (",", ":")})):
        p = tmp_path / name
        p.write_text(json.dumps(doc, **kw))
        for w in (1, 2):
            assert _norm(parse_trace(str(p), range_regex=["decode", "prefill"], engine="fast", workers=w)) == ref, (name, w)


def test_parallel_truncated_is_an_error(tmp_path, monkeypatch):
    from roofline.ingest import torch_trace
    from roofline.ingest.torch_trace import TraceError
    raw = gzip.open(_path("decode")).read()
    p = tmp_path / "cut.json"
    p.write_bytes(raw[:-100])
    monkeypatch.setattr(torch_trace, "_PARALLEL_MIN_BYTES", 0)
    with pytest.raises(TraceError):
        parse_trace(str(p), engine="auto", workers=2)


def test_cpu_side_ranges_place_kernels_like_gpu_ranges(tmp_path, monkeypatch):
    """Without gpu_user_annotation events, kernels are placed through their launch's CPU time
    (correlation -> cuda_runtime/cuda_driver event inside a record_function range): the fast path
    then reads the launch events too, and the result equals the GPU-range placement."""
    from roofline.ingest import torch_trace
    p = tmp_path / "cpu_ranges.json"
    _rewrite(_path("mixed"), p, lambda e: e.get("cat") != "gpu_user_annotation")
    ref = parse_trace(str(p), range_regex=["decode", "prefill"], engine="ijson")
    monkeypatch.setattr(torch_trace, "_PARALLEL_MIN_BYTES", 0)
    for w in (1, 2):
        pt = parse_trace(str(p), range_regex=["decode", "prefill"], engine="fast", workers=w)
        assert "launch events" in pt.engine
        assert (pt.corr_ext, pt.corr_ts) == (ref.corr_ext, ref.corr_ts) and len(pt.l_corr) > 0
    o = tmp_path / "t.json"
    r = CliRunner().invoke(topn, [str(p), "-o", str(o), "--top", "100"])
    assert r.exit_code == 0, r.output
    doc = json.load(open(o))
    assert "CPU-side ranges" in doc["notes"][0]
    gpu_doc = json.loads(CliRunner().invoke(topn, [_path("mixed"), "-o", str(tmp_path / "g.json"), "--top", "100"])
                         .output and open(tmp_path / "g.json").read())
    assert {e["name"]: e["regimes"] for e in doc["entries"]} == {e["name"]: e["regimes"] for e in gpu_doc["entries"]}
