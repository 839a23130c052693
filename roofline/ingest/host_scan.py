"""The host (CPU) events of a PyTorch (Kineto) trace inside a time span: a separate streaming pass
that `roofline topn` runs only when some regime's steps are host-bound (roofline.ingest.hostcause).

The main parse (roofline/ingest/torch_trace.py) keeps no CPU-side durations: cpu_ops only as
signatures, runtime launches only as links, and it skips the runtime events altogether when no
link needs them. What keeps a GPU idle is on the CPU side, so this pass reads, for every event of
category cpu_op, cuda_runtime, cuda_driver, user_annotation or python_function that overlaps the
span: its name, thread, start and duration; for a cpu_op of 1 ms or more its ``Input Dims``
(per-shape evidence); for memcpy runtime calls and gpu_memcpy events their correlation (a copy
from pageable memory). Kineto's pretty-printed layout is matched in place at C speed (one regex
per event, nothing decoded); a file in any other layout is read with ijson.
"""
from __future__ import annotations

import json
import re
from array import array
from dataclasses import dataclass, field

from roofline.ingest.trace_tables import ITEM_START, Unsupported

CATS = ("cpu_op", "cuda_runtime", "cuda_driver", "user_annotation", "python_function", "gpu_memcpy")
DIMS_MIN_US = 1000.0     # a cpu_op this long keeps its Input Dims (the per-shape evidence)
_ALT = b"|".join(c.encode() for c in CATS)
_N = rb"(-?[0-9][0-9.eE+-]*)"
# Kineto's layout: '"cat": "X", "name": "...", "pid": N, "tid": N,\n    "ts": F, "dur": F' in one go;
# the second alternative catches an event of a used category in any other layout (-> ijson)
_EVENT_RX = re.compile(rb'"cat": "(' + _ALT + rb')", "name": "((?:[^"\\\n]|\\.)*)", "pid": -?\d+, "tid": (-?\d+),'
                       rb'\s*"ts": ' + _N + rb', "dur": ' + _N + rb'|"cat"\s*:\s*"(?:' + _ALT + rb')"')
_CAT_B = {c.encode(): i for i, c in enumerate(CATS)}
_CORR_RX = re.compile(rb'"correlation": (\d+)')
_DIMS_RX = re.compile(rb'"Input Dims": (\[[\d\[\], \t\-]*\])')


@dataclass
class HostEvents:
    """CPU-side events overlapping the span, one row each (times in us on the trace's clock)."""
    names: list[str] = field(default_factory=list)
    cat: array = field(default_factory=lambda: array("b"))      # index into CATS
    name: array = field(default_factory=lambda: array("l"))     # index into names
    tid: array = field(default_factory=lambda: array("q"))
    ts: array = field(default_factory=lambda: array("d"))
    dur: array = field(default_factory=lambda: array("d"))
    dims: dict[int, list] = field(default_factory=dict)          # row -> Input Dims (cpu_ops >= DIMS_MIN_US)
    corr: dict[int, int] = field(default_factory=dict)           # row -> correlation (memcpy calls)
    memcpy_kind: dict[int, str] = field(default_factory=dict)    # correlation -> gpu_memcpy name
    engine: str = ""
    _idx: dict = field(default_factory=dict, repr=False)
    _idx_b: dict = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return len(self.ts)

    def _name_index(self, name: str) -> int:
        i = self._idx.get(name)
        if i is None:
            i = self._idx[name] = len(self.names)
            self.names.append(name)
        return i

    def _append(self, cat: int, i: int, tid: int, ts: float, dur: float) -> int:
        self.cat.append(cat)
        self.name.append(i)
        self.tid.append(tid)
        self.ts.append(ts)
        self.dur.append(dur)
        return len(self.ts) - 1

    def add(self, cat: int, name: str, tid: int, ts: float, dur: float) -> int:
        return self._append(cat, self._name_index(name), tid, ts, dur)

    def add_b(self, cat: int, nm: bytes, tid: int, ts: float, dur: float) -> int:
        """add() with the name as the trace's raw bytes (decoded once per distinct name)."""
        i = self._idx_b.get(nm)
        if i is None:
            i = self._idx_b[nm] = self._name_index(_decode(nm))
        return self._append(cat, i, tid, ts, dur)


def scan_host_events(path: str, lo_us: float, hi_us: float) -> HostEvents:
    """The host events of the trace at ``path`` (plain or gzip) overlapping [lo_us, hi_us].
    Raises OSError/EOFError on an unreadable stream, ValueError on a malformed one."""
    try:
        return _scan_kineto(path, lo_us, hi_us)
    except Unsupported:          # not Kineto's pretty-printed layout
        return _scan_ijson(path, lo_us, hi_us)


def _scan_kineto(path: str, lo: float, hi: float) -> HostEvents:
    from contextlib import closing

    from roofline.ingest.trace_tables import whole_item_blocks

    out = HostEvents(engine="in place (Kineto's layout)")
    with closing(whole_item_blocks(path)) as blocks:
        for data, cut in blocks:
            _scan_block(data, cut, lo, hi, out)
    return out


def _scan_block(data: bytes, cut: int, lo: float, hi: float, out: HostEvents) -> None:
    """The events of data[:cut] (whole items) into ``out``. Per event only the match and two floats
    are built; names are interned by their bytes; the item's end is looked for only where a field
    past the duration is read (a memcpy's correlation, a long cpu_op's Input Dims)."""
    add = out.add_b
    for m in _EVENT_RX.finditer(data, 0, cut):
        c, nm, tid, ts, dur = m.groups()
        if c is None:
            raise Unsupported("an event outside Kineto's layout")
        ts, dur = float(ts), float(dur)
        if ts > hi or ts + dur < lo or dur < 0:
            continue
        k = _CAT_B[c]
        if k == 5 or (k in (1, 2) and b"emcpy" in nm):      # gpu_memcpy, or a memcpy runtime call
            end = data.find(ITEM_START, m.end(), cut)
            cm = _CORR_RX.search(data, m.end(), cut if end < 0 else end)
            if k == 5:
                if cm is not None:
                    out.memcpy_kind[int(cm.group(1))] = _decode(nm)
                continue
            row = add(k, nm, int(tid), ts, dur)
            if cm is not None:
                out.corr[row] = int(cm.group(1))
            continue
        row = add(k, nm, int(tid), ts, dur)
        if k == 0 and dur >= DIMS_MIN_US:
            end = data.find(ITEM_START, m.end(), cut)
            dm = _DIMS_RX.search(data, m.end(), cut if end < 0 else end)
            if dm is not None:
                out.dims[row] = json.loads(dm.group(1))


def _decode(nm: bytes) -> str:
    return json.loads(b'"' + nm + b'"') if b"\\" in nm else nm.decode("utf-8", "replace")


def _scan_ijson(path: str, lo: float, hi: float) -> HostEvents:
    """The same for any other layout (a general streaming parse of every event)."""
    import ijson

    from roofline.ingest.trace_tables import open_trace

    out = HostEvents(engine="ijson")
    stream, raw = open_trace(path)
    try:
        for e in ijson.items(stream, "traceEvents.item", use_float=True):
            _take(e, lo, hi, out)
    except ijson.common.JSONError as exc:
        raise ValueError(f"malformed JSON ({str(exc)[:80]})") from None
    finally:
        stream.close()
        raw.close()
    return out


def _take(e, lo: float, hi: float, out: HostEvents) -> None:
    """One decoded event into ``out`` (other categories, and events outside the span, are skipped)."""
    if not isinstance(e, dict) or e.get("cat") not in CATS or not isinstance(e.get("name"), str):
        return
    ts, dur, tid = e.get("ts"), e.get("dur"), e.get("tid")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (ts, dur)) or dur < 0:
        return
    if ts > hi or ts + dur < lo:
        return
    args = e.get("args") if isinstance(e.get("args"), dict) else {}
    k = CATS.index(e["cat"])
    corr = args.get("correlation")
    if e["cat"] == "gpu_memcpy":
        if isinstance(corr, int):
            out.memcpy_kind[corr] = e["name"]
        return
    row = out.add(k, e["name"], tid if isinstance(tid, int) and not isinstance(tid, bool) else -1, float(ts), float(dur))
    if k in (1, 2) and "emcpy" in e["name"] and isinstance(corr, int):
        out.corr[row] = corr
    if k == 0 and dur >= DIMS_MIN_US and isinstance(args.get("Input Dims"), list):
        out.dims[row] = args["Input Dims"]
