"""roofline/ingest/trace_checks.py on a real trace (fixtures/corpus/llama_graph_decode.json.gz, the
CUDA-graph Llama decode), damaged as tests/trace_mutations.py damages it, through the CLI: a kernel
event written twice is counted once and noted; kernels of two devices in one trace are refused
with one line naming the file and the devices. Both readers (the fast path on Kineto's layout, ijson
on a one-line export) are checked."""
import json
import random

import pytest

import reliability as R
import trace_mutations as M

TRACE = M.CORPUS / "llama_graph_decode.json.gz"


def _topn(tmp_path, data: bytes, layout: str):
    if layout == "compact":   # the same events on one line: the ijson reader
        data = json.dumps(json.loads(data)).encode()
    src = tmp_path / "trace.json"
    src.write_bytes(data)
    out = tmp_path / "topn.json"
    code, _, err = R.cli(["topn", str(src), "-o", str(out), "-q", "--no-env-report"])
    return code, err, (json.loads(out.read_text()) if code == 0 else None), src


@pytest.mark.parametrize("layout", ["fast", "compact"])
def test_a_kernel_event_written_twice_counts_once_with_a_note(tmp_path, layout):
    it = M.items_of(TRACE)
    code, err, base, _ = _topn(tmp_path, it.join(it.bodies), layout)
    assert code == 0, err
    data, _ = M.m_duplicate(it, random.Random(0), 0.1)
    n_dup = len(data.split(b'"cat": "kernel"')) - len(it.join(it.bodies).split(b'"cat": "kernel"'))
    assert n_dup == int(0.1 * len(it.idx("kernel"))) > 0
    code, err, got, _ = _topn(tmp_path, data, layout)
    assert code == 0, err
    assert got["total_gpu_time_ms"] == pytest.approx(base["total_gpu_time_ms"], rel=1e-12)
    for a, b in zip(base["entries"], got["entries"]):
        assert (a["name"], a["pct_gpu_time"], a["regimes"]) == (b["name"], b["pct_gpu_time"], b["regimes"])
    note = next(n for n in got["notes"] if "repeat another exactly" in n)
    assert note.startswith(f"{n_dup} kernel events")


@pytest.mark.parametrize("layout", ["fast", "compact"])
@pytest.mark.parametrize("how", ["copy", "names"])
def test_kernels_of_two_devices_are_refused_naming_them(tmp_path, layout, how):
    it = M.items_of(TRACE)
    data, _ = M.m_device(it, random.Random(0), how)
    code, err, _, src = _topn(tmp_path, data, layout)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert str(src) in lines[0] and "kernels of 2 GPUs in one trace" in lines[0]
    n = len(it.idx("kernel"))
    n1 = n if how == "copy" else sum(1 for i in it.idx("kernel") if it.events[i]["name"] in
                                     set(sorted({it.events[j]["name"] for j in it.idx("kernel")})[::2]))
    assert f"device 1: {n1} launches" in lines[0] and f"device 0: {(n if how == 'copy' else n - n1)} launches" in lines[0]


def test_launches_linked_to_no_op_are_named_in_the_entry(tmp_path):
    """Half the kernels of the eager Llama prefill+decode trace lose their External id, and so do
    their launches: each head entry says how many of its launches are linked to no aten op (counted
    here from the damaged events), and analyze carries it into the entry's notes."""
    trace = M.CORPUS / "llama_prefill_decode.json.gz"
    data, _ = M.m_unlink(M.items_of(trace), random.Random(0), "ext_all", 0.5)
    src = tmp_path / "trace.json"
    src.write_bytes(data)
    ks = [e for e in json.loads(data)["traceEvents"] if e.get("cat") == "kernel"]
    topn = tmp_path / "profile_topN.json"
    code, _, err = R.cli(["topn", str(src), "-o", str(topn), "-q", *M.topn_args(trace)])
    assert code == 0, err
    code, out, err = R.cli(["analyze", str(topn), "--format", "json", "--no-write"])
    assert code == 0, err
    art = json.loads(out)
    checked = 0
    for e in art["entries"]:
        mine = [k for k in ks if k["name"] == e["name"]]
        n = sum(1 for k in mine if "External id" not in k["args"])
        if n:
            assert f"{n} of its {len(mine)} launches" in e["notes"] and "linked to no aten op" in e["notes"]
            checked += 1
    assert checked >= 3
