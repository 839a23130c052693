"""Streaming reader of PyTorch profiler Chrome traces (``export_chrome_trace``, plain or gzip).

One pass with ijson (its C backend, yajl2_c, when installed) over ``traceEvents``; the event list is
never materialised. What is kept is small and bounded by the number of *distinct* things:

* per GPU kernel launch: four numbers in ``array`` columns (name index, start, duration, link id);
* per cpu_op that carries ``Input Dims`` (record_shapes): its External id -> an interned signature
  (op name, dims, dtypes, concrete scalars); decode loops repeat the same signatures, so the table of
  signatures stays small while the id map holds one int pair per op;
* runtime launches (cuda_runtime / cuda_driver): correlation -> External id and start, used only
  for kernels that lack an External id, and to place launches in CPU-side step ranges;
* user_annotation / gpu_user_annotation ranges (record_function / NVTX-like step ranges).

Links (see ../shared/reference/H200.md): a kernel's ``External id`` equals that of the innermost
cpu_op that launched it (``aten::mm``, not ``aten::linear``); its ``correlation`` equals that of the
``cudaLaunchKernel`` (cuda_runtime) or ``cuLaunchKernelEx`` (cuda_driver) event.
"""
from __future__ import annotations

import gzip
import io
import os
import re
from array import array
from collections import Counter
from dataclasses import dataclass, field

import ijson

# Ops that never launch a kernel: skipping them keeps the External-id map small.
_NO_KERNEL_OPS = frozenset("""
aten::empty aten::empty_strided aten::empty_like aten::view aten::_unsafe_view aten::reshape aten::t
aten::transpose aten::permute aten::as_strided aten::expand aten::unsqueeze aten::squeeze aten::slice
aten::select aten::narrow aten::detach aten::detach_ aten::alias aten::resolve_conj aten::resolve_neg
aten::unbind aten::split aten::chunk aten::result_type aten::lift_fresh aten::set_ aten::numpy_T
aten::contiguous aten::to aten::view_as aten::expand_as aten::flatten aten::unflatten aten::split_with_sizes
aten::is_nonzero aten::item aten::_local_scalar_dense aten::size aten::stride aten::dim aten::type_as
""".split())

_LAUNCH_CATS = ("cuda_runtime", "cuda_driver")
_KERNEL_CATS = ("kernel",)
_MEM_CATS = ("gpu_memcpy", "gpu_memset")


class TraceError(Exception):
    """The file is not a usable PyTorch trace (message names the problem, not the file)."""


@dataclass
class OpSig:
    """An interned cpu_op signature (what record_shapes recorded for one call)."""
    name: str
    dims: tuple
    types: tuple
    concrete: tuple


@dataclass
class Range:
    name: str
    ts_us: float
    dur_us: float
    gpu: bool
    ext_id: int


@dataclass
class ParsedTrace:
    path: str
    bytes_read: int = 0
    kernel_names: list[str] = field(default_factory=list)
    # one row per kernel launch
    k_name: array = field(default_factory=lambda: array("l"))
    k_ts: array = field(default_factory=lambda: array("d"))
    k_dur: array = field(default_factory=lambda: array("d"))
    k_ext: array = field(default_factory=lambda: array("q"))
    k_corr: array = field(default_factory=lambda: array("q"))
    launch_dims: dict[int, Counter] = field(default_factory=dict)   # name idx -> Counter((grid, block))
    sigs: list[OpSig] = field(default_factory=list)
    op_by_ext: dict[int, int] = field(default_factory=dict)          # External id -> sig idx
    corr_ext: dict[int, int] = field(default_factory=dict)           # correlation -> External id
    corr_ts: dict[int, float] = field(default_factory=dict)          # correlation -> launch start (us)
    ranges: list[Range] = field(default_factory=list)
    mem: Counter = field(default_factory=Counter)                    # memcpy/memset name -> total us
    mem_count: Counter = field(default_factory=Counter)
    n_events: int = 0
    record_shapes: bool | None = None
    device_names: list[str] = field(default_factory=list)

    @property
    def n_kernels(self) -> int:
        return len(self.k_name)


def _open(path: str):
    """Binary stream over the (possibly gzipped) file, and a counter of raw bytes read."""
    f = open(path, "rb")
    head = f.read(2)
    f.seek(0)
    if head == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=f, mode="rb"), f
    return f, f


def _freeze(x):
    if isinstance(x, list):
        return tuple(_freeze(v) for v in x)
    return x


def _int(v, default=-1) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return default


def parse_trace(path: str, *, range_regex=None, keep_all_ops: bool = False) -> ParsedTrace:
    """Stream ``path`` once and return the compact tables above.

    ``range_regex``: a regex or a list of regexes (case-insensitive) of user_annotation /
    gpu_user_annotation names to keep as step ranges (also
    "ProfilerStep#N" ranges are always kept). Raises TraceError on a truncated / non-JSON / non-trace
    file.
    """
    if not os.path.exists(path):
        raise TraceError("no such file")
    pt = ParsedTrace(path=path)
    if isinstance(range_regex, str):
        range_regex = [range_regex]
    rxs = [re.compile(r, re.IGNORECASE) for r in (range_regex or ())]
    stream, raw = _open(path)
    name_idx: dict[str, int] = {}
    sig_idx: dict[tuple, int] = {}
    k_name, k_ts, k_dur, k_ext, k_corr = pt.k_name, pt.k_ts, pt.k_dur, pt.k_ext, pt.k_corr
    op_by_ext, corr_ext, corr_ts = pt.op_by_ext, pt.corr_ext, pt.corr_ts
    launch_dims = pt.launch_dims
    n = 0
    saw_trace_events = False
    try:
        # Top-level scalars first (record_shapes flag, device names) are cheap; events are streamed.
        for prefix, event, value in _toplevel_then_events(stream):
            if event == "event":
                n += 1
                e = value
                if not isinstance(e, dict):
                    continue
                cat = e.get("cat")
                if cat in _KERNEL_CATS:
                    nm = e.get("name", "")
                    i = name_idx.get(nm)
                    if i is None:
                        i = name_idx[nm] = len(pt.kernel_names)
                        pt.kernel_names.append(nm)
                        launch_dims[i] = Counter()
                    args = e.get("args") or {}
                    k_name.append(i)
                    k_ts.append(float(e.get("ts", 0.0)))
                    k_dur.append(float(e.get("dur", 0.0)))
                    k_ext.append(_int(args.get("External id")))
                    k_corr.append(_int(args.get("correlation")))
                    g, b = args.get("grid"), args.get("block")
                    if g is not None or b is not None:
                        launch_dims[i][(_freeze(g), _freeze(b))] += 1
                elif cat == "cpu_op":
                    args = e.get("args")
                    if not args:
                        continue
                    dims = args.get("Input Dims")
                    if dims is None:
                        continue
                    nm = e.get("name", "")
                    if nm in _NO_KERNEL_OPS and not keep_all_ops:
                        continue
                    key = (nm, _freeze(dims), _freeze(args.get("Input type") or ()),
                           _freeze(args.get("Concrete Inputs") or ()))
                    s = sig_idx.get(key)
                    if s is None:
                        s = sig_idx[key] = len(pt.sigs)
                        pt.sigs.append(OpSig(*key))
                    ext = _int(args.get("External id"))
                    if ext >= 0:
                        op_by_ext[ext] = s
                elif cat in _LAUNCH_CATS:
                    args = e.get("args")
                    if not args:
                        continue
                    c = _int(args.get("correlation"))
                    if c < 0:
                        continue
                    nm = e.get("name", "")
                    if "aunch" not in nm and "emcpy" not in nm and "emset" not in nm:
                        continue
                    x = _int(args.get("External id"))
                    if x >= 0:
                        corr_ext[c] = x
                    corr_ts[c] = float(e.get("ts", 0.0))
                elif cat in _MEM_CATS:
                    nm = e.get("name", "")
                    pt.mem[nm] += float(e.get("dur", 0.0))
                    pt.mem_count[nm] += 1
                elif cat in ("user_annotation", "gpu_user_annotation"):
                    nm = e.get("name", "")
                    if nm.startswith("ProfilerStep#") or any(r.search(nm) for r in rxs):
                        args = e.get("args") or {}
                        pt.ranges.append(Range(nm, float(e.get("ts", 0.0)), float(e.get("dur", 0.0)),
                                               cat == "gpu_user_annotation", _int(args.get("External id"))))
            elif event == "start_events":
                saw_trace_events = True
            elif prefix == "record_shapes":
                pt.record_shapes = bool(value)
            elif prefix == "deviceProperties.item.name" and isinstance(value, str):
                pt.device_names.append(value)
    except ijson.common.IncompleteJSONError as exc:
        raise TraceError(f"truncated or malformed JSON after {n} events ({_short(exc)})") from None
    except ijson.common.JSONError as exc:
        raise TraceError(f"not valid JSON ({_short(exc)})") from None
    except (OSError, EOFError, UnicodeDecodeError) as exc:  # bad gzip stream, truncated gzip
        raise TraceError(f"cannot read: {_short(exc)}") from None
    finally:
        pt.bytes_read = raw.tell()
        stream.close()
        raw.close()
    if not saw_trace_events:
        raise TraceError("not a Chrome trace: no top-level 'traceEvents' list")
    pt.n_events = n
    return pt


def _short(exc: BaseException) -> str:
    s = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return s[:160]


class _EventsMarker:
    pass


def _toplevel_then_events(stream):
    """Yield (prefix, kind, value): top-level scalars of interest, then each traceEvents item.

    ijson.items() builds each event dict in C (yajl2_c); ``use_float`` avoids Decimal, which is 5x
    slower to build. A single ijson.parse pass would be slower (one Python step per token), so the
    few top-level fields we want are read by ijson.parse only up to 'traceEvents', then the rest of
    the *same* stream continues with items(). Kineto writes deviceProperties and record_shapes
    before traceEvents; when they come after, they are simply not read.
    """
    # Read the head (before traceEvents) into memory: it is tiny (device properties).
    buf = bytearray()
    chunk = stream.read(1 << 16)
    while chunk:
        buf += chunk
        k = buf.find(b'"traceEvents"')
        if k >= 0:
            break
        if len(buf) > (64 << 20):  # a 64 MB head without traceEvents: not a torch trace
            break
        chunk = stream.read(1 << 16)
    k = buf.find(b'"traceEvents"')
    if k < 0:
        # No traceEvents key in the head: let ijson validate the whole thing (error or no events).
        rest = _Chain(bytes(buf), stream)
        for prefix, event, value in ijson.parse(rest, use_float=True):
            if prefix == "record_shapes" and event == "number":
                yield prefix, "scalar", value
        return
    head = bytes(buf[:k])
    # Top-level scalars of the head: parse "head + empty traceEvents" as a small document.
    try:
        for prefix, event, value in ijson.parse(io.BytesIO(head + b'"traceEvents": []}'), use_float=True):
            if prefix in ("record_shapes", "deviceProperties.item.name"):
                yield prefix, "scalar", value
    except ijson.common.JSONError:
        pass  # odd head: the main pass below still validates the events
    # Main pass: re-feed a document '{' + from "traceEvents" onwards.
    yield "", "start_events", None
    rest = _Chain(b"{" + bytes(buf[k:]), stream)
    for e in ijson.items(rest, "traceEvents.item", use_float=True):
        yield "", "event", e


class _Chain(io.RawIOBase):
    """A readable stream: some bytes first, then the rest of another stream."""

    def __init__(self, first: bytes, rest):
        self._first = memoryview(first)
        self._pos = 0
        self._rest = rest

    def readable(self):
        return True

    def readinto(self, b):
        if self._pos < len(self._first):
            m = min(len(b), len(self._first) - self._pos)
            b[:m] = self._first[self._pos:self._pos + m]
            self._pos += m
            return m
        data = self._rest.read(len(b))
        m = len(data)
        b[:m] = data
        return m

    def read(self, size=-1):
        if size is None or size < 0:
            size = 1 << 20
        ba = bytearray(size)
        m = self.readinto(ba)
        return bytes(ba[:m])
