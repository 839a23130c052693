"""The collectives of a PyTorch (Kineto) trace: what each one moved and when it ran.

Two kinds, read in one streaming pass (:func:`scan_collectives`, beside the main parse, like the
CUDA-graph scan of graphs.py):

* ``kernel``: a GPU collective kernel, a kernel event whose name classify.py puts in op class comm
  (NCCL's ``ncclDevKernel_AllReduce_Sum_bf16_RING_LL``, ``ncclKernel_*``, custom all-reduce kernels).
  Kineto writes the collective's record on the NCCL kernel event itself (and on the
  ``record_param_comms`` cpu_op that launched it): ``"Collective name"`` (allreduce, all_gather,
  _allgather_base, reduce_scatter, _reduce_scatter_base, all_to_all, broadcast, send, recv, barrier,
  ...), ``"In msg nelems"``, ``"Out msg nelems"``, ``"dtype"`` (c10's ScalarType name: BFloat16,
  Float, ...), ``"Group size"``, ``"Process Group Name"``, ``"Process Group Ranks"``. Where the kernel
  lacks it, the record_param_comms op with the same External id gives it; where neither does, the
  NCCL kernel name gives the collective, the dtype and the algorithm (and no message size).
* ``host``: a collective of a backend that runs on the host, the ``user_annotation`` ``gloo:<op>``
  (ProcessGroupGloo; it leaves no collective kernel, only memcpy activity): its start is when the
  rank got there, its duration waiting + transfer; the message from its ``Input Dims`` / ``Input type``.

:func:`comm_shapes` turns a trace's collective kernels into the Top-N's shapes for op class comm
(`coll`, `nelems`, `group_size`, `algo`; dtypes), so that the analysis can put them on the
interconnect roof (roofline/core/models/collective.py).
"""
from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass

from roofline.core.classify import classify
from roofline.core.opclasses.aten import dtype_of
from roofline.core.opclasses import on_interconnect
from roofline.ingest.trace_tables import ITEM_START

_NAME_RX = re.compile(rb'"name"\s*:\s*"((?:[^"\\\n]|\\.)*)"')
_ITEM_END = b"\n  }"
# a block holds a collective only if one of these occurs in it (a C-speed pre-check)
_HINTS = (b"Collective name", b"gloo:", b"record_param_comms", b"nccl", b"all_reduce", b"allreduce", b"reduce_",
          b"all_gather", b"allgather", b"cross_device", b"custom_ar", b"one_shot", b"two_shot", b"multimem",
          b"all_to_all", b"alltoall", b"nvshmem", b"deep_ep", b"deepep")

# c10 ScalarType names (Kineto's "dtype") -> the Top-N's dtype names
SCALAR_TYPES = {"BFloat16": "bf16", "Half": "fp16", "Float": "fp32", "Double": "fp64", "Float8_e4m3fn": "fp8",
                "Float8_e5m2": "fp8", "Float8_e4m3fnuz": "fp8", "Float8_e5m2fnuz": "fp8", "Char": "int8",
                "Byte": "uint8", "Int": "int32", "Long": "int64", "Short": "int16", "Bool": "bool"}
# dtype tokens of NCCL kernel names (ncclDevKernel_AllReduce_Sum_bf16_RING_LL; older: ..._Sum_float)
_NAME_DTYPES = {"bf16": "bf16", "f16": "fp16", "half": "fp16", "f32": "fp32", "float": "fp32", "f64": "fp64",
                "double": "fp64", "i8": "int8", "u8": "uint8", "i32": "int32", "u32": "uint32", "i64": "int64",
                "u64": "uint64", "f8e4m3": "fp8", "f8e5m2": "fp8", "fp8": "fp8"}
_ALGOS = ("NVLS_TREE", "NVLS", "COLLNET_DIRECT", "COLLNET_CHAIN", "RING", "TREE", "PAT")

# collective names (Kineto's, c10d's, gloo's, NCCL kernel names) -> one name; first match wins
_COLL_RULES = [(re.compile(p, re.IGNORECASE), c) for p, c in (
    (r"all_?reduce|cross_device_reduce|custom_?ar|one_?shot|two_?shot|multimem", "all_reduce"),
    (r"reduce_?scatter", "reduce_scatter"),
    (r"all_?gather", "all_gather"),
    (r"all_?to_?all", "all_to_all"),
    (r"broadcast|bcast", "broadcast"),
    (r"send_?recv", "send_recv"),
    (r"barrier", "barrier"),
    (r"\bsend|_send|send$", "send"),
    (r"\brecv|_recv|recv$", "recv"),
    (r"reduce", "reduce"),
)]


def norm_collective(name: str | None) -> str | None:
    """A collective's name as the byte model knows it (all_reduce, all_gather, ...), or None."""
    for rx, c in _COLL_RULES:
        if name and rx.search(name):
            return c
    return None


@dataclass
class CollEvent:
    """One collective on one rank (times in us on the trace's clock)."""
    kind: str                 # "kernel" (a GPU collective kernel) | "host" (a host-side backend: gloo)
    name: str                 # the kernel's name, or the host op's (gloo:all_reduce)
    ts_us: float
    dur_us: float
    coll: str | None          # all_reduce | all_gather | reduce_scatter | ... (norm_collective)
    nelems: int | None        # the message: max(In msg nelems, Out msg nelems)
    dtype: str | None         # bf16, fp32, ...
    group_size: int | None
    pg: str                   # process group name ("" when unknown)
    algo: str | None          # RING | TREE | NVLS | ... (from an NCCL kernel name)
    size_from: str | None     # where the message size came from: kernel args | record_param_comms | Input Dims
    ext_id: int = -1


def _int(v) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v if v >= 0 else None
    if isinstance(v, float) and v.is_integer() and v >= 0:
        return int(v)
    return None


def _num(v) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    x = float(v)
    return x if x == x and abs(x) != float("inf") else None


def _from_name(name: str) -> tuple[str | None, str | None, str | None]:
    """(collective, dtype, algorithm) from a collective kernel's name."""
    base = name.split("(")[0]
    toks = [t for t in re.split(r"[_<>:, ]+", base) if t]
    dt = next((_NAME_DTYPES[t.lower()] for t in toks if t.lower() in _NAME_DTYPES), None)
    up = base.upper()
    algo = next((a for a in _ALGOS if re.search(rf"(?:^|_){a}(?:_|$)", up)), None)
    return norm_collective(base), dt, algo


def _record(args: dict) -> dict:
    """The collective record Kineto writes (kernel or record_param_comms args), normalised."""
    ins, outs = _int(args.get("In msg nelems")), _int(args.get("Out msg nelems"))
    sizes = [x for x in (ins, outs) if x is not None]
    dt = args.get("dtype")
    pg = args.get("Process Group Name")
    return {"coll": norm_collective(args.get("Collective name")) if isinstance(args.get("Collective name"), str) else None,
            "nelems": max(sizes) if sizes else None,
            "dtype": SCALAR_TYPES.get(dt) if isinstance(dt, str) else None,
            "group_size": _int(args.get("Group size")),
            "pg": pg if isinstance(pg, str) else ("" if pg is None else str(pg))}


def _host_message(args: dict) -> tuple[int | None, str | None]:
    """(elements, dtype) of a host collective from its Input Dims / Input type (the first tensor)."""
    dims, types = args.get("Input Dims"), args.get("Input type")
    if not isinstance(dims, list) or not dims or not isinstance(dims[0], list):
        return None, None
    d0 = dims[0]
    if d0 and isinstance(d0[0], list):      # a TensorList: its first tensor
        d0 = d0[0]
    if not all(_int(x) is not None for x in d0):
        return None, None
    n = 1
    for x in d0:
        n *= int(x)
    t0 = types[0] if isinstance(types, list) and types and isinstance(types[0], str) else ""
    return n, dtype_of(t0)


def _event_of(e: dict, pcomms: dict) -> CollEvent | None:
    """A decoded trace event -> a CollEvent (or None: not a collective). record_param_comms
    cpu_ops are collected into ``pcomms`` (External id -> record)."""
    if not isinstance(e, dict):
        return None
    cat, name = e.get("cat"), e.get("name")
    args = e.get("args") if isinstance(e.get("args"), dict) else {}
    if not isinstance(name, str):
        return None
    if cat == "cpu_op" and name == "record_param_comms":
        x = _int(args.get("External id"))
        if x is not None:
            pcomms[x] = _record(args)
        return None
    ts, dur = _num(e.get("ts")), _num(e.get("dur"))
    if ts is None or dur is None or dur < 0:
        return None
    if cat == "kernel" and on_interconnect(classify(name)):
        rec = _record(args) if "Collective name" in args or "In msg nelems" in args else {}
        coll, dt, algo = _from_name(name)
        return CollEvent("kernel", name, ts, dur, rec.get("coll") or coll, rec.get("nelems"), rec.get("dtype") or dt,
                         rec.get("group_size"), rec.get("pg", ""), algo,
                         "kernel args" if rec.get("nelems") is not None else None, _int(args.get("External id")) or -1)
    if cat == "user_annotation" and name.startswith("gloo:"):
        n, dt = _host_message(args)
        return CollEvent("host", name, ts, dur, norm_collective(name[5:]), n, dt, None, "", None,
                         "Input Dims" if n is not None else None, _int(args.get("External id")) or -1)
    return None


def _link_pcomms(evs: list[CollEvent], pcomms: dict) -> None:
    """Kernels without their own record take it from the record_param_comms op of the same External id."""
    for ev in evs:
        rec = pcomms.get(ev.ext_id) if ev.kind == "kernel" and ev.ext_id >= 0 else None
        if rec is None:
            continue
        if ev.nelems is None and rec["nelems"] is not None:
            ev.nelems, ev.size_from = rec["nelems"], "record_param_comms"
        ev.coll = ev.coll or rec["coll"]
        ev.dtype = ev.dtype or rec["dtype"]
        ev.group_size = ev.group_size or rec["group_size"]
        ev.pg = ev.pg or rec["pg"]


def _items(data: bytes, lim: int):
    """Decoded items of Kineto's layout holding a candidate name, among those starting before lim."""
    for m in _NAME_RX.finditer(data, 0, lim):
        nm = m.group(1)
        if not (nm.startswith(b"gloo:") or nm == b"record_param_comms" or on_interconnect(
                classify(nm.decode("utf-8", "replace")))):
            continue
        a = data.rfind(ITEM_START, 0, m.start())
        b = data.find(_ITEM_END, m.end())
        if a < 0 or b < 0:
            raise ValueError("not Kineto's layout")
        try:
            yield json.loads(data[a + 3:b + 4])
        except ValueError:
            raise ValueError("not Kineto's layout") from None


def scan_collectives(path: str, world_size: int | None = None) -> list[CollEvent]:
    """Every collective of the trace at ``path`` (plain or gzip), in start order. Kineto's
    pretty-printed layout is scanned in 8 MB blocks (only items with a collective's name are
    decoded); any other layout is read with ijson. ``world_size`` fills a missing group size (the
    default process group). Raises OSError/EOFError on an unreadable stream, ValueError on a
    malformed one."""
    from contextlib import closing

    from roofline.ingest.trace_tables import whole_item_blocks

    pcomms: dict[int, dict] = {}
    evs: list[CollEvent] = []
    try:
        with closing(whole_item_blocks(path)) as blocks:
            for data, cut in blocks:
                if any(h in data for h in _HINTS):
                    for e in _items(data, cut):
                        ev = _event_of(e, pcomms)
                        if ev is not None:
                            evs.append(ev)
    except ValueError:
        evs, pcomms = _scan_ijson(path)
    _link_pcomms(evs, pcomms)
    for ev in evs:
        if ev.group_size is None and world_size:
            ev.group_size = world_size
    evs.sort(key=lambda v: v.ts_us)
    return evs


def _scan_ijson(path: str) -> tuple[list[CollEvent], dict]:
    """The same, for any other layout (a general streaming parse of every event)."""
    import ijson

    from roofline.ingest.trace_tables import open_trace

    pcomms: dict[int, dict] = {}
    evs: list[CollEvent] = []
    stream, raw = open_trace(path)
    try:
        for e in ijson.items(stream, "traceEvents.item", use_float=True):
            ev = _event_of(e, pcomms)
            if ev is not None:
                evs.append(ev)
    except ijson.common.JSONError as exc:
        raise ValueError(f"malformed JSON ({str(exc)[:80]})") from None
    finally:
        stream.close()
        raw.close()
    return evs, pcomms


def shape_of(ev: CollEvent) -> tuple[tuple, dict, dict] | None:
    """(key, Top-N shape, dtypes) of a collective kernel launch, or None without a message size."""
    if ev.nelems is None or ev.coll is None or ev.group_size is None:
        return None
    shp = {"coll": ev.coll, "nelems": ev.nelems, "group_size": ev.group_size}
    if ev.algo:
        shp["algo"] = ev.algo
    dt = {"act": ev.dtype, "out": ev.dtype} if ev.dtype else {}
    return (ev.coll, ev.nelems, ev.group_size, ev.algo, ev.dtype), shp, dt


def comm_shapes(doc: dict, evs: list[CollEvent]) -> int:
    """Fill the shapes of the Top-N's comm entries from the trace's collective kernels (most
    launched shape first: shapes, shape_launches, shape_base_latency_ms, dtypes). Returns how many
    entries got shapes. An entry whose launches carry no message size gets `shape_unknown`."""
    by_name: dict[str, dict[tuple, list]] = defaultdict(dict)
    unsized: dict[str, int] = defaultdict(int)
    for ev in evs:
        if ev.kind != "kernel":
            continue
        s = shape_of(ev)
        if s is None:
            unsized[ev.name] += 1
            continue
        key, shp, dt = s
        slot = by_name[ev.name].setdefault(key, [shp, dt, 0, 0.0])
        slot[2] += 1
        slot[3] += ev.dur_us
    n = 0
    for e in doc.get("entries", []):
        if not on_interconnect(e.get("op_class")) or e.get("shapes"):
            continue
        got = by_name.get(e["name"])
        if not got:
            if unsized.get(e["name"]):
                e["shape_unknown"] = ("the collective's launches carry no message size (no 'In msg nelems' on the "
                                      "kernel or its record_param_comms op): profile with a torch that records them")
            continue
        lst = sorted(got.values(), key=lambda x: -x[2])
        e.pop("shape_unknown", None)     # the aten op that launched it (record_param_comms) has no shape rule
        e["shapes"] = [x[0] for x in lst]
        e["shape_launches"] = [x[2] for x in lst]
        e["shape_base_latency_ms"] = [x[3] / x[2] / 1000.0 for x in lst]
        dts = [x[1] for x in lst]
        if dts[0]:
            e["dtypes"] = dts[0]
        if any(d != dts[0] for d in dts):
            e["shape_dtypes"] = dts
        n += 1
    return n
