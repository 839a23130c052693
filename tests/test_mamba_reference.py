"""Bamba (Mamba2 hybrid) on transformers' torch reference path (fixtures/corpus/bamba_mamba2): the byte
models of its broadcasting muls and its reductions against the DRAM bytes Nsight Compute measured for
the same launches, and the reference-path rule (roofline/core/opclasses/ssd_reference.py; docs/method.md
section 12). Every expected figure is computed here from the fixtures (the trace, ncu_rows.json.gz,
config.json), never typed in."""
from __future__ import annotations

import copy
import functools
import gzip
import json
import math
from pathlib import Path
from collections import Counter, defaultdict

import pytest

from hybrid_corpus import CORPUS, topn_path
from roofline import api
from roofline.core import opclasses
from roofline.ingest.trace_tables import OpSig, freeze
from roofline.io.kernelnames import short_name
from roofline.core.models import elementwise
from roofline.core.opclasses import ssd_reference
from roofline.peaks import DTYPE_BYTES, resolve

CASE = "bamba_mamba2"
BAND = 0.15


def L2() -> float:
    return resolve("NVIDIA H200").l2_bytes()


def _base(name: str) -> str:
    return short_name(name).split("[")[0]


@functools.lru_cache(maxsize=None)
def aligned_prefill() -> list[tuple[dict, dict | None, dict]]:
    """(kernel event, its aten op event, the ncu row at the same position) for the prefill step: the
    trace's kernels in GPU order inside the prefill_step range, position by position with ncu's launches
    of the same step (the base kernel names must agree everywhere)."""
    ev = json.load(gzip.open(CORPUS / f"{CASE}.json.gz"))["traceEvents"]
    ops = {e["args"].get("External id"): e for e in ev if e.get("cat") == "cpu_op"}
    rng = next(e for e in ev if e.get("cat") == "gpu_user_annotation" and e["name"] == "prefill_step")
    ks = sorted((e for e in ev if e.get("cat") == "kernel" and rng["ts"] <= e["ts"] <= rng["ts"] + rng["dur"]),
                key=lambda e: e["ts"])
    ncu = [r for r in json.load(gzip.open(CORPUS / "ncu_rows.json.gz"))["rows"]
           if r["case"] == CASE and r["regime"] == "prefill"]
    assert [_base(k["name"]) for k in ks] == [_base(r["name"]) for r in ncu]
    return [(k, ops.get(k["args"].get("External id")), r) for k, r in zip(ks, ncu)]


def _sig(op: dict) -> OpSig:
    a = op["args"]
    return OpSig(op["name"], freeze(a.get("Input Dims", [])), freeze(a.get("Input type", [])),
                 freeze(a.get("Concrete Inputs", [])), freeze(a.get("Input Strides", [])))


def _dram(r: dict) -> float:
    return (r["dram__bytes_read.sum"] or 0) + (r["dram__bytes_write.sum"] or 0)


@functools.lru_cache(maxsize=None)
def head_ops() -> list[dict]:
    """One record per 6-d mul / sum signature of the prefill step: the shape its trace signature gives,
    launches per op call (counted in the trace), the model's bytes per launch, ncu's mean DRAM bytes
    (and writes) per launch of its launches."""
    calls = Counter(op["args"]["External id"] for k, op, _ in aligned_prefill() if op is not None)
    groups = defaultdict(list)
    for k, op, r in aligned_prefill():
        if op is None or op["name"] not in ("aten::mul", "aten::sum"):
            continue
        dims = op["args"]["Input Dims"][0]
        if len(dims) == 6 and r["gpu__time_duration.sum"] > 100e3:
            groups[json.dumps([op["name"], op["args"]["Input Dims"], op["args"]["Input Strides"],
                               op["args"].get("Concrete Inputs")])].append((op, r, calls[op["args"]["External id"]]))
    out = []
    for launches in groups.values():
        op, _, n = launches[0]
        shape, dt = opclasses.trace_shape("elementwise", _sig(op))
        if n > 1:
            shape = dict(shape, op_launches=n)
        b = {f"{k}_bytes": DTYPE_BYTES[v] for k, v in dt.items()}
        model = elementwise.model(shape, b).candidates[0].bytes_est
        out.append({"op": op["name"], "dims": op["args"]["Input Dims"], "shape": shape, "model": model,
                    "out_bytes": shape["elems_out"] * b["out_bytes"] / n,
                    "ncu": sum(_dram(r) for _, r, _ in launches) / len(launches),
                    "ncu_write": sum(r["dram__bytes_write.sum"] for _, r, _ in launches) / len(launches)})
    return out


@functools.lru_cache(maxsize=None)
def config() -> dict:
    return json.loads((CORPUS / "configs" / f"{CASE}.json").read_text())


@functools.lru_cache(maxsize=None)
def artifact() -> dict:
    return api.analyze(topn_path(CASE), config=config())


def _heads(art: dict) -> list[dict]:
    return sorted(art["entries"], key=lambda e: -e["pct_gpu_time"])[:3]


def test_each_launch_of_a_split_op_does_its_share_and_writes_the_broadcast():
    """TensorIterator splits each op whose byte offsets exceed 32 bits: the trace links 2, 4 or 8 launches
    to one aten op call, and ncu shows each launch writing its share of the BROADCAST output (the
    [4, 1, 256, 256, 128, 128] product of C[:, :, :, None] * B[:, :, None], not the largest input)."""
    ops = head_ops()
    assert {o["shape"].get("op_launches") for o in ops} >= {2, 4, 8}
    for o in (x for x in ops if x["op"] == "aten::mul" and x["shape"].get("op_launches")):
        # NB: a split launch writes 0.5-2 GB, far past the L2: its writes all reach DRAM
        assert o["ncu_write"] == pytest.approx(o["out_bytes"], rel=0.01), o["dims"]
        assert o["shape"]["elems_out"] > max(math.prod(d) for d in o["dims"] if d)   # larger than every input


def test_model_bytes_per_launch_match_ncu_or_the_reread_bound():
    """Every 6-d mul / sum of the prefill step: the model's bytes per launch within +-15% of ncu's DRAM
    bytes, or, where ncu reads more, an input re-read past the L2 (its reuse window above half the L2)
    with the excess under that re-read's bound."""
    l2 = L2()
    for o in head_ops():
        err = o["model"] / o["ncu"] - 1
        if abs(err) <= BAND:
            continue
        sh = o["shape"]
        assert err < 0 and sh.get("reuse_window_bytes", 0) > l2 / 2, (o["dims"], err)
        assert 0 < o["ncu"] - o["model"] <= sh["reread_bytes"] / sh.get("op_launches", 1), o["dims"]


def test_reread_named_in_the_entry_notes():
    """The re-read operand's entry names the cause in its notes (what benchmarks/corpus_accuracy.py reads)."""
    e = _heads(artifact())[0]
    reread = [o for o in head_ops() if o["shape"].get("reuse_window_bytes", 0) > L2() / 2]
    assert reread and "is re-read" in e["notes"]


def test_bamba_heads_are_the_reference_chunk_scan_with_the_lever():
    """The three heads (the muls, the sums over [b, chunks, chunk, chunk, heads, d_state]) get the
    reference-path verdict: necessary bytes at most the fused chunk scan's, the lever with its evidence
    and its saving, and the route by the larger gain."""
    cfg = config()
    for e in _heads(artifact()):
        lv = [x for x in e["levers_detail"] if x["kind"] == ssd_reference.KIND]
        assert len(lv) == 1, e["short_name"]
        assert lv[0]["text"] == ssd_reference.LEVER
        for word in (f"{cfg['mamba_n_heads']} heads", f"d_state {cfg['mamba_d_state']}",
                     f"chunk {cfg['mamba_chunk_size']}", "no fused Mamba kernel", "conv_depthwise2d"):
            assert word in lv[0]["evidence"], word
        # the saving: the regime's share less the time of the necessary work at the kernel's present pace;
        # the fused scan's FLOPs run on the tensor cores at the model dtype's roof (bf16), the moved ones at
        # this kernel's (fp32)
        bw, pf = e["achieved_bw_bytes_s"] / e["hbm_util"], e["achieved_flops"] / e["compute_util"]
        pf_nec = resolve("NVIDIA H200").compute_peak("bf16")
        assert cfg["dtype"] == "bfloat16" and pf_nec > 10 * pf
        kept = (max(e["bytes_necessary"] / bw, e["flops_necessary"] / pf_nec)
                / max(e["bytes_est"] / bw, e["flops_est"] / pf))
        assert e["bytes_necessary"] < 0.05 * e["bytes_est"]
        assert e["avoidable_gain_pct"] == pytest.approx(e["regime_pct_gpu_time"] * (1 - kept), rel=1e-3)
        assert lv[0]["saves_pct"] == pytest.approx(e["avoidable_gain_pct"], rel=1e-9)
        assert e["route"] == "byte_reduction"
        assert (e.get("byte_reduction_levers") or e["other_levers"])[0] == ssd_reference.LEVER
    top = _heads(artifact())[0]
    assert top["avoidable_gain_pct"] > top["expected_e2e_gain_pct"]


def test_necessary_is_the_fused_scan_of_the_config():
    """bytes_necessary of the sums' head: each shape's launch at most the fused chunk scan of the layer
    (the chunk_scan model's Mamba2 roles at the config's dims and the op's sequences and chunks), shared
    over the op's launches."""
    cfg = config()
    m = ssd_reference.mamba_dims(cfg)
    e = _heads(artifact())[1]
    rows = e["per_shape"]
    want = 0.0
    for r in rows:
        dims = [int(x) for x in r["shape"]["dims"].split("x")]
        need = ssd_reference.fused(dims[0], dims[1], m, DTYPE_BYTES[cfg["dtype"].replace("bfloat16", "bf16")])[0]
        want += r["weight"] * min(r["bytes_est"], need / r["shape"].get("op_launches", 1))
    assert e["bytes_necessary"] == pytest.approx(want, rel=1e-6)
    # the fused scan's own floor, from the config alone: x read and y written once (bf16), one fp32 state
    # of heads x head_dim x d_state per chunk and sequence written
    b, chunks = (int(x) for x in rows[0]["shape"]["dims"].split("x")[:2])
    tok = b * chunks * m["L"]
    floor = 2 * tok * m["H"] * m["P"] * 2 + b * chunks * m["H"] * m["P"] * m["N"] * 4
    assert floor <= ssd_reference.fused(b, chunks, m, 2)[0] <= 4 * floor


def _analyse_with(doc_change=None, config_change=None) -> dict:
    doc = json.loads(open(topn_path(CASE)).read())
    if doc_change:
        doc_change(doc)
    cfg = copy.deepcopy(config())
    if config_change:
        cfg = config_change(cfg)
    return api.analyze(doc, env=str(Path(topn_path(CASE)).with_name("env_report.json")), config=cfg)


def test_no_mamba_config_no_verdict():
    """The same big broadcast muls under a config without Mamba2 keys (a llama's): no reference-path verdict."""
    llama = json.loads((CORPUS / "configs" / "llama_prefill_decode.json").read_text())
    art = _analyse_with(config_change=lambda c: llama)
    for e in _heads(art):
        assert all(x["kind"] != ssd_reference.KIND for x in e["levers_detail"])
        assert e["bytes_necessary"] == pytest.approx(e["bytes_est"])


def test_fused_kernels_in_the_trace_no_verdict():
    """Where the trace ran a fused Mamba kernel, the big muls are not the reference chunk scan."""
    def fused(doc):
        doc["trace_evidence"]["ssm_kernels"]["fused"] = {"_chunk_scan_fwd_kernel": 3}
    for e in _heads(_analyse_with(doc_change=fused)):
        assert all(x["kind"] != ssd_reference.KIND for x in e["levers_detail"])


def test_no_kernel_evidence_says_what_is_missing():
    """A Top-N without trace_evidence.ssm_kernels (an older roofline topn): no guess, the entry says why."""
    art = _analyse_with(doc_change=lambda d: d["trace_evidence"].pop("ssm_kernels"))
    e = _heads(art)[0]
    assert e["bytes_necessary"] is None and "ssm_kernels" in e["notes"]


def test_llama_trace_no_reference_path():
    """A real llama trace (corpus: its own config, no Mamba keys): no entry gets the reference-path kind."""
    from hybrid_corpus import topn_path as tp

    art = api.analyze(tp("llama_prefill_decode"),
                      config=json.loads((CORPUS / "configs" / "llama_prefill_decode.json").read_text()))
    assert art["entries"]
    assert all(x["kind"] != ssd_reference.KIND for e in art["entries"] for x in e.get("levers_detail") or [])


def test_kernel_evidence_reads_the_trace():
    """roofline topn writes which Mamba kernels ran: none fused, the reference conv by its launches."""
    doc = json.loads(open(topn_path(CASE)).read())
    ev = doc["trace_evidence"]["ssm_kernels"]
    assert ev["fused"] == {}
    trace = json.load(gzip.open(CORPUS / f"{CASE}.json.gz"))["traceEvents"]
    n = sum(1 for k in trace if k.get("cat") == "kernel" and "conv_depthwise2d" in k["name"])
    assert sum(ev["reference"].values()) == n > 0


def test_dims_must_match_the_config():
    """The same trace under a config of half the Mamba2 heads (64, where every op's heads dim is 128): the
    dims say nothing about a chunk scan of that config, so no verdict (every reference tensor, the state
    passing's [b, chunks + 1, chunks + 1, heads, head_dim, d_state] included, carries the heads)."""
    def half_heads(c):
        return dict(c, mamba_n_heads=c["mamba_n_heads"] // 2)
    for e in _heads(_analyse_with(config_change=half_heads)):
        assert all(x["kind"] != ssd_reference.KIND for x in e["levers_detail"])
        assert e["bytes_necessary"] == pytest.approx(e["bytes_est"])
