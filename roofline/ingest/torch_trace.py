"""Streaming reader of PyTorch profiler Chrome traces (``export_chrome_trace``, plain or gzip).

Two parsers fill the same compact tables; neither ever holds the event list:

* the fast path (default): Kineto writes ``traceEvents`` pretty-printed, one item per
  "\\n  {" at a fixed indentation (JSON strings cannot hold a raw newline, so that marker only
  starts an item). Blocks of 8 MB are split at those markers; a regex jumps to the items we use
  (kernels, runtime launches, cpu_ops that can launch kernels, step ranges); their fields are read
  in place (a cpu_op's signature bytes are decoded once per distinct signature), anything
  unexpected is decoded with json. An uncompressed file of 64 MB or more is split into byte ranges
  at item boundaries, one process each (2 by default; ROOFLINE_TOPN_WORKERS or ``workers``
  overrides). The head and the tail after the array are validated, so truncation is an error.
* ijson (its C backend, yajl2_c): a general streaming parse for any other layout, and the judge
  when the fast path meets something it does not expect.

What is kept is bounded by the number of distinct things plus a few numbers per launch:

* per GPU kernel launch: five numbers in ``array`` columns (name index, start, duration, links);
* per cpu_op that carries ``Input Dims`` (record_shapes): its External id and an interned
  signature (op name, dims, dtypes, concrete scalars); decode loops repeat the same signatures;
* per runtime launch (cuda_runtime / cuda_driver): correlation, External id and start, used only
  for kernels that lack an External id, and to place launches in CPU-side step ranges (the fast
  path reads them, in a second pass, only when one of those is the case);
* user_annotation / gpu_user_annotation step ranges (record_function names).

Links (see ../shared/reference/H200.md): a kernel's ``External id`` equals that of the innermost
cpu_op that launched it (``aten::mm``, not ``aten::linear``); its ``correlation`` equals that of the
``cudaLaunchKernel`` (cuda_runtime) or ``cuLaunchKernelEx`` (cuda_driver) event.
"""
from __future__ import annotations

import io
import json
import os
import re
from array import array
from collections import Counter
from dataclasses import dataclass, field

import ijson

from roofline.errors import RooflineError

# The fast path decodes few whole items (most fields are read in place), so the stdlib's json is
# enough there: orjson measured only ~3% faster end to end.
_loads = json.loads

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
_USED_CATS = frozenset(("kernel", "cpu_op", "cuda_runtime", "cuda_driver", "gpu_memcpy", "gpu_memset",
                        "user_annotation", "gpu_user_annotation"))


class TraceError(RooflineError):
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
    # column arrays (compact, and cheap to send back from a worker process); dicts built on demand
    op_ext: array = field(default_factory=lambda: array("q"))        # cpu_op External id
    op_sig: array = field(default_factory=lambda: array("l"))        # ... its signature idx
    l_corr: array = field(default_factory=lambda: array("q"))        # launch (runtime) correlation
    l_ext: array = field(default_factory=lambda: array("q"))         # ... its External id (-1: none)
    l_ts: array = field(default_factory=lambda: array("d"))          # ... its CPU start (us)
    ranges: list[Range] = field(default_factory=list)
    mem: Counter = field(default_factory=Counter)                    # memcpy/memset name -> total us
    mem_count: Counter = field(default_factory=Counter)
    n_events: int = 0
    record_shapes: bool | None = None
    device_names: list[str] = field(default_factory=list)
    device_properties: list[dict] = field(default_factory=list)     # kineto's deviceProperties records
    engine: str = ""                                                 # which parser read it

    @property
    def n_kernels(self) -> int:
        return len(self.k_name)

    @property
    def op_by_ext(self) -> dict[int, int]:
        """External id -> signature idx of the cpu_op (a later op with the same id wins)."""
        return dict(zip(self.op_ext, self.op_sig))

    @property
    def corr_ext(self) -> dict[int, int]:
        """correlation -> External id of the runtime launch."""
        return {c: x for c, x in zip(self.l_corr, self.l_ext) if x >= 0}

    @property
    def corr_ts(self) -> dict[int, float]:
        """correlation -> CPU start (us) of the runtime launch."""
        return dict(zip(self.l_corr, self.l_ts))


def _open(path: str):
    """Binary stream over the (possibly gzipped) file, and a counter of raw bytes read. Regular
    files only; gzip is decompressed within roofline.safeio's size and ratio limits (a bomb stops
    with an error instead of expanding)."""
    from roofline import safeio

    f = safeio.open_regular(path)
    try:
        size = os.fstat(f.fileno()).st_size
        head = f.read(2)
        f.seek(0)
        if head == b"\x1f\x8b":
            return safeio.GzipLimited(f, path, size, limit_env="ROOFLINE_MAX_TRACE_BYTES"), f
        if size > safeio.limit("ROOFLINE_MAX_TRACE_BYTES"):
            raise _Fatal(f"the file is larger than ROOFLINE_MAX_TRACE_BYTES "
                         f"({safeio.limit('ROOFLINE_MAX_TRACE_BYTES')} bytes)")
    except BaseException:
        f.close()
        raise
    return f, f


class _Fatal(Exception):
    """A limit was hit (size, nesting): stop, do not retry with the other parser. Raised as
    TraceError by parse_trace."""


# what a malformed event can raise inside the sink (a string where a number belongs, a list
# where a name belongs, nesting too deep for json): the trace is refused with one line
_MALFORMED = (ValueError, TypeError, KeyError, AttributeError, IndexError, RecursionError, OverflowError)
_MAX_ITEM_BYTES = 16 << 20   # one trace event larger than this is not a profiler event (Kineto's: < 1 MB)
_MAX_DUR_US = 1e12           # 11.6 days: a longer kernel is a corrupt value (and sums would overflow)


def _dims3(v):
    """A launch's grid/block as a tuple of ints, or None when it is anything else."""
    if isinstance(v, list) and v and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return tuple(v)
    return None


def _num(v, what: str) -> float:
    """A number field of an event: int or float, finite (a string or a bool is refused)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TraceError(f"an event's {what} is {type(v).__name__} {str(v)[:40]!r}, expected a number")
    x = float(v)
    if x != x or x in (float("inf"), float("-inf")):
        raise TraceError(f"an event's {what} is {v}, expected a finite number")
    return x


def _freeze(x):
    if isinstance(x, list):
        return tuple(_freeze(v) for v in x)
    return x


def _int(v, default=-1) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return default


class _Sink:
    """Folds events (dicts) into a ParsedTrace; shared by the fast path and the ijson path."""

    def __init__(self, pt: ParsedTrace, rxs, keep_all_ops: bool):
        self.pt, self.rxs, self.keep_all_ops = pt, rxs, keep_all_ops
        self.name_idx: dict[str, int] = {}
        self.sig_idx: dict[tuple, int] = {}
        self.bsig: dict[tuple, int] = {}
        self.ksig: dict[tuple, int] = {}
        self.name_idx_b: dict[bytes, int] = {}
        self.dims_b: dict[tuple, tuple] = {}
        self.n = 0

    def cpu_op_bytes(self, nm: bytes, ext: int, dims: bytes, types: bytes | None, conc: bytes | None) -> None:
        """A cpu_op seen only as raw bytes of its fields: decoded once per distinct signature."""
        self.n += 1
        key = (nm, dims, types, conc)
        s = self.bsig.get(key)
        if s is None:
            d = (json.loads(nm.join((b'"', b'"'))), _freeze(json.loads(dims)),
                 _freeze(json.loads(types)) if types else (), _freeze(json.loads(conc)) if conc else ())
            s = self.sig_idx.get(d)
            if s is None:
                s = self.sig_idx[d] = len(self.pt.sigs)
                self.pt.sigs.append(OpSig(*d))
            self.bsig[key] = s
        if ext >= 0:
            self.pt.op_ext.append(ext)
            self.pt.op_sig.append(s)

    def kernel_fields(self, nm: bytes, ts: bytes, dur: bytes, ext: bytes, corr: bytes, grid: bytes,
                      block: bytes) -> None:
        """A kernel item read in place by _kernel_at (raw bytes of its fields)."""
        self.n += 1
        pt = self.pt
        i = self.name_idx_b.get(nm)
        if i is None:
            name = json.loads(b'"' + nm + b'"') if b"\\" in nm else nm.decode("utf-8", "replace")
            i = self.name_idx.get(name)
            if i is None:
                i = self.name_idx[name] = len(pt.kernel_names)
                pt.kernel_names.append(name)
                pt.launch_dims[i] = Counter()
            self.name_idx_b[nm] = i
        d_us = float(dur)
        if not 0.0 <= d_us <= _MAX_DUR_US:
            raise TraceError(f"a kernel's dur is {dur.decode(errors='replace')[:40]}, expected a finite time >= 0")
        pt.k_name.append(i)
        pt.k_ts.append(_num(float(ts), "ts"))
        pt.k_dur.append(d_us)
        pt.k_ext.append(int(ext))
        pt.k_corr.append(int(corr))
        key = (grid, block)
        d = self.dims_b.get(key)
        if d is None:
            d = self.dims_b[key] = (tuple(int(v) for v in grid.split(b",") if v.strip()),
                                    tuple(int(v) for v in block.split(b",") if v.strip()))
        pt.launch_dims[i][d] += 1

    def launch_fields(self, ts: bytes, ext: bytes, corr: bytes) -> None:
        self.n += 1
        self.pt.l_corr.append(int(corr))
        self.pt.l_ext.append(int(ext))
        self.pt.l_ts.append(float(ts))

    def cpu_op_key(self, nm: bytes, ext: int, key: bytes) -> bool:
        """A cpu_op given as its name and the raw bytes of its signature args; False: not decodable."""
        s = self.ksig.get((nm, key))
        if s is None:
            try:
                d = json.loads(b"{" + key + b"}")
                name = json.loads(b'"' + nm + b'"')
            except ValueError:
                return False
            if not isinstance(d, dict):
                return False
            dims = d.get("Input Dims")
            if dims is None:
                s = -1
            else:
                sk = (name, _freeze(dims), _freeze(d.get("Input type") or ()), _freeze(d.get("Concrete Inputs") or ()))
                s = self.sig_idx.get(sk)
                if s is None:
                    s = self.sig_idx[sk] = len(self.pt.sigs)
                    self.pt.sigs.append(OpSig(*sk))
            self.ksig[(nm, key)] = s
        self.n += 1
        if s >= 0:
            self.pt.op_ext.append(ext)
            self.pt.op_sig.append(s)
        return True

    def handle(self, e) -> None:
        # hot loop: once per decoded event on the general (ijson) path and the fast path's fallbacks;
        # each call level a split adds costs ~56 ns per event (timeit), ~0.7% of a scan of the
        # 100 MB bench trace (see _scan_items). Kept whole: one dispatch on the event's "cat".
        self.n += 1
        if not isinstance(e, dict):
            return
        cat = e.get("cat")
        pt = self.pt
        if cat in _USED_CATS and not isinstance(e.get("name", ""), str):
            raise TraceError(f"a {cat} event's name is {type(e.get('name')).__name__}, expected a string")
        if cat in _KERNEL_CATS:
            nm = e.get("name", "")
            if not isinstance(nm, str):
                raise TraceError(f"a kernel's name is {type(nm).__name__}, expected a string")
            ts_us, dur_us = _num(e.get("ts", 0.0), "ts"), _num(e.get("dur", 0.0), "dur")
            if not 0.0 <= dur_us <= _MAX_DUR_US:
                raise TraceError(f"a kernel's dur is {dur_us}, expected a time >= 0 (us) below {_MAX_DUR_US:g}")
            i = self.name_idx.get(nm)
            if i is None:
                i = self.name_idx[nm] = len(pt.kernel_names)
                pt.kernel_names.append(nm)
                pt.launch_dims[i] = Counter()
            args = e.get("args") or {}
            if not isinstance(args, dict):
                raise TraceError(f"a kernel's args is {type(args).__name__}, expected an object")
            pt.k_name.append(i)
            pt.k_ts.append(ts_us)
            pt.k_dur.append(dur_us)
            pt.k_ext.append(_int(args.get("External id")))
            pt.k_corr.append(_int(args.get("correlation")))
            g, b = _dims3(args.get("grid")), _dims3(args.get("block"))  # provenance: a malformed one is dropped
            if g is not None or b is not None:
                pt.launch_dims[i][(g, b)] += 1
        elif cat == "cpu_op":
            args = e.get("args")
            if not args:
                return
            dims = args.get("Input Dims")
            if dims is None:
                return
            nm = e.get("name", "")
            if nm in _NO_KERNEL_OPS and not self.keep_all_ops:
                return
            key = (nm, _freeze(dims), _freeze(args.get("Input type") or ()),
                   _freeze(args.get("Concrete Inputs") or ()))
            s = self.sig_idx.get(key)
            if s is None:
                s = self.sig_idx[key] = len(pt.sigs)
                pt.sigs.append(OpSig(*key))
            ext = _int(args.get("External id"))
            if ext >= 0:
                pt.op_ext.append(ext)
                pt.op_sig.append(s)
        elif cat in _LAUNCH_CATS:
            args = e.get("args")
            if not args:
                return
            c = _int(args.get("correlation"))
            if c < 0:
                return
            nm = e.get("name", "")
            if "aunch" not in nm and "emcpy" not in nm and "emset" not in nm:
                return
            pt.l_corr.append(c)
            pt.l_ext.append(_int(args.get("External id")))
            pt.l_ts.append(_num(e.get("ts", 0.0), "ts"))
        elif cat in _MEM_CATS:
            nm = e.get("name", "")
            pt.mem[nm] += _num(e.get("dur", 0.0), "dur")
            pt.mem_count[nm] += 1
        elif cat in ("user_annotation", "gpu_user_annotation"):
            nm = e.get("name", "")
            if nm.startswith("ProfilerStep#") or any(r.search(nm) for r in self.rxs):
                args = e.get("args") or {}
                pt.ranges.append(Range(nm, _num(e.get("ts", 0.0), "ts"), _num(e.get("dur", 0.0), "dur"),
                                       cat == "gpu_user_annotation", _int(args.get("External id"))))


def parse_trace(path: str, *, range_regex=None, keep_all_ops: bool = False, engine: str = "auto",
                workers: int | None = None) -> ParsedTrace:
    """Stream ``path`` once and return the compact tables above.

    ``range_regex``: a regex or a list of regexes (case-insensitive) of user_annotation /
    gpu_user_annotation names to keep as step ranges ("ProfilerStep#N" ranges are always kept).
    ``engine``: "fast" (item-at-a-time split of Kineto's pretty-printed layout; the fields we use are
    read in place, other items decoded with json), "ijson" (a general streaming parse), or "auto"
    (fast when the layout is recognised, else ijson; a fast-path failure is re-checked by ijson so
    that an unusual but valid layout still parses). ``workers``: processes for an uncompressed file
    of 64 MB or more on the fast path (default: 2 where there are 2 CPUs; each worker scans one
    byte range that starts at an item boundary). Raises TraceError on a truncated / non-JSON /
    non-trace file.
    """
    if not os.path.exists(path):
        raise TraceError("no such file")
    from roofline import safeio

    try:
        safeio.check_regular(path)  # a FIFO, a device or a directory is refused, never read
    except OSError as exc:
        raise TraceError(str(exc) if isinstance(exc, safeio.UnsafeInput) else f"cannot read: {_short(exc)}") from None
    try:
        return _parse_trace(path, range_regex, keep_all_ops, engine, workers)
    except _Fatal as exc:
        raise TraceError(str(exc)) from None
    except safeio.UnsafeInput as exc:  # a decompression or nesting limit
        raise TraceError(exc.problem) from None
    except _MALFORMED as exc:
        raise TraceError(f"malformed event ({_short(exc)})") from None


def _parse_trace(path, range_regex, keep_all_ops, engine, workers) -> ParsedTrace:
    from roofline import safeio

    if isinstance(range_regex, str):
        range_regex = [range_regex]
    rxs = [re.compile(r, re.IGNORECASE) for r in (range_regex or ())]
    if engine in ("auto", "fast"):
        if workers is None:
            env = os.environ.get("ROOFLINE_TOPN_WORKERS", "")
            workers = int(env) if env.isdigit() and int(env) > 0 else min(2, os.cpu_count() or 1)
        try:
            # Runtime launch events matter only for kernels without an External id and for step
            # ranges that exist on the CPU side alone: read them in a second pass, when needed.
            pt = _fast_once(path, rxs, keep_all_ops, workers, _NO_LAUNCH_CATS_B)
            if any(x < 0 for x in pt.k_ext) or (pt.ranges and not any(r.gpu for r in pt.ranges)):
                lp = _fast_once(path, rxs, keep_all_ops, workers, _LAUNCH_CATS_B)
                pt.l_corr, pt.l_ext, pt.l_ts = lp.l_corr, lp.l_ext, lp.l_ts
                pt.engine += " + a pass for launch events"
            return pt
        except _Unsupported:
            if engine == "fast":
                raise TraceError("layout not supported by the fast path") from None
        except (_Fatal, safeio.UnsafeInput):
            raise
        except TraceError:
            if engine == "fast":
                raise
        except (OSError, EOFError) as exc:  # bad gzip stream, truncated gzip
            raise TraceError(f"cannot read: {_short(exc)}") from None
        except _MALFORMED as exc:  # an item the fast path misread: ijson judges
            if engine == "fast":
                raise TraceError(f"malformed event ({_short(exc)})") from None
    return _ijson_parse(path, rxs, keep_all_ops)


def _fast_once(path, rxs, keep_all_ops, workers, cats) -> ParsedTrace:
    """One fast-path pass reading the items of categories ``cats``; several processes for a large
    uncompressed file (falls back to one when the split is not possible)."""
    if workers > 1 and os.path.getsize(path) >= _PARALLEL_MIN_BYTES:
        with open(path, "rb") as f:
            gz = f.read(2) == b"\x1f\x8b"
        if not gz:
            try:
                return _parallel_parse(path, rxs, keep_all_ops, workers, cats)
            except _Unsupported:
                pass
    pt = ParsedTrace(path=path)
    sink = _Sink(pt, rxs, keep_all_ops)
    stream, raw = _open(path)
    try:
        _fast_parse(stream, pt, sink, cats)
        pt.engine = "fast (1 process)"
        pt.n_events = sink.n
        pt.bytes_read = raw.tell()
        return pt
    finally:
        stream.close()
        raw.close()


def _ijson_parse(path, rxs, keep_all_ops) -> ParsedTrace:
    pt = ParsedTrace(path=path)
    sink = _Sink(pt, rxs, keep_all_ops)
    from roofline import safeio

    stream, raw = _open(path)
    saw_trace_events = False
    try:
        # ijson builds each event in memory: bound its nesting and size first
        guarded = safeio.DepthGuard(stream, path, max_item_bytes=_MAX_ITEM_BYTES)
        for prefix, event, value in _toplevel_then_events(guarded):
            if event == "event":
                sink.handle(value)
            elif event == "start_events":
                saw_trace_events = True
            elif prefix == "record_shapes":
                pt.record_shapes = bool(value)
            elif prefix == "deviceProperties.item.name" and isinstance(value, str):
                pt.device_names.append(value)
            elif prefix == "deviceProperties.item" and isinstance(value, dict):
                pt.device_properties.append(value)
    except safeio.UnsafeInput:
        raise
    except ijson.common.IncompleteJSONError as exc:
        raise TraceError(f"truncated or malformed JSON after {sink.n} events ({_short(exc)})") from None
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
    pt.n_events = sink.n
    pt.engine = f"ijson ({ijson.backend})"   # yajl2_c is the C backend; 'python' is ~10x slower
    return pt


# ------------------------------------------------------------------------------ fast path

class _Unsupported(Exception):
    """The layout is not the one the fast path splits (fall back to ijson)."""


_NAME_RX = re.compile(rb'"name"\s*:\s*"((?:[^"\\]|\\.)*)"')
_EXT_RX = re.compile(rb'"External id"\s*:\s*(\d+)')
_DIMS_RX = re.compile(rb'"Input Dims"\s*:\s*(\[[\d\[\], \t\-]*\])')
_STRLIST = rb'(\[(?:\s*"(?:[^"\\\n]|\\.)*"\s*,?)*\s*\])'
_TYPES_RX = re.compile(rb'"Input type"\s*:\s*' + _STRLIST)
_CONC_RX = re.compile(rb'"Concrete Inputs"\s*:\s*' + _STRLIST)
_NUM_AT = re.compile(rb'-?[0-9][0-9.eE+-]*')


def _field(data: bytes, key: bytes, start: int, end: int):
    """(raw number bytes, end index) of '<key><number>' in data[start:end], or None."""
    i = data.find(key, start, end)
    if i < 0:
        return None
    m = _NUM_AT.match(data, i + len(key), end)
    return None if m is None else (m.group(), m.end())


_N = rb'(-?[0-9][0-9.eE+-]*)'
# Kineto's kernel / launch layout, matched at the quote that closes the "cat" value
_KERNEL_AT = re.compile(
    rb'", "name": "([^"\\\n]*)",[^\n]*\n[ \t]*"ts": ' + _N + rb', "dur": ' + _N
    + rb',[^\n]*\n[ \t]*"args": \{\n[ \t]*"External id": (-?\d+),[^\n]*?"correlation": (\d+),'
    rb'[^\n]*?"grid": \[([0-9, ]*)\],[^\n]*?"block": \[([0-9, ]*)\]')
_LAUNCH_AT = re.compile(
    rb'", "name": "[^"\\\n]*",[^\n]*\n[ \t]*"ts": ' + _N
    + rb',[^\n]*\n[ \t]*"args": \{\n[ \t]*"External id": (-?\d+),[^\n]*?"correlation": (\d+)')


def _kernel_at(data: bytes, q: int, end: int):
    """Fields of a kernel item in Kineto's layout, from the end of its "cat" value; None: decode it."""
    m = _KERNEL_AT.match(data, q, end)
    if m is not None:
        return m.groups()
    if not data.startswith(b', "name": "', q + 1):
        return None
    na = q + 12
    ne = data.find(b'"', na, end)
    if ne < 0:
        return None
    nm = data[na:ne]
    if b"\\" in nm:
        return None
    f = _field(data, b'"ts": ', ne, end)
    if f is None:
        return None
    ts, i = f
    f = _field(data, b'"dur": ', i, end)
    if f is None:
        return None
    dur, i = f
    f = _field(data, b'"External id": ', i, end)
    if f is None:
        return None
    ext, i = f
    f = _field(data, b'"correlation": ', i, end)
    if f is None:
        return None
    corr, i = f
    g = data.find(b'"grid": [', i, end)
    if g < 0:
        return None
    ge = data.find(b"]", g, end)
    b = data.find(b'"block": [', ge, end)
    if ge < 0 or b < 0:
        return None
    be = data.find(b"]", b, end)
    if be < 0:
        return None
    return nm, ts, dur, ext, corr, data[g + 9:ge], data[b + 10:be]


def _launch_at(data: bytes, q: int, end: int):
    """(ts, External id, correlation) of a runtime launch item in Kineto's layout, or None."""
    m = _LAUNCH_AT.match(data, q, end)
    if m is not None:
        return m.groups()
    f = _field(data, b'"ts": ', q, end)
    if f is None:
        return None
    ts, i = f
    f = _field(data, b'"External id": ', i, end)
    if f is None:
        return None
    ext, i = f
    f = _field(data, b'"correlation": ', i, end)
    if f is None:
        return None
    return ts, ext, f[0]


_NO_KERNEL_B = frozenset(n.encode() for n in _NO_KERNEL_OPS)
_PARSE_CATS = frozenset({b"kernel", b"gpu_memcpy", b"gpu_memset", b"user_annotation", b"gpu_user_annotation"})
_BLOCK = 8 << 20


_WS_RUN = re.compile(rb"[ \t\r\n]*")


def _find_head(stream, pt: ParsedTrace):
    """Read up to the first item of traceEvents. Returns (marker, first-item bytes, offset of the
    first item in the (decompressed) stream), or (None, tail bytes, -1) for an empty list."""
    buf = bytearray()
    k = -1
    while True:
        chunk = stream.read(1 << 16)
        if not chunk:
            break
        buf += chunk
        if k < 0:  # look only at the new bytes (a rescan of the whole head is quadratic)
            k = buf.find(b'"traceEvents"', max(0, len(buf) - len(chunk) - 16))
        if k >= 0 and buf.find(b"[", max(k, len(buf) - len(chunk))) >= 0:
            break
        if len(buf) > (64 << 20):
            raise _Unsupported()
    k = buf.find(b'"traceEvents"')
    if k < 0:
        raise _Unsupported()
    head = bytes(buf[:k]).rstrip()
    try:
        hd = json.loads(head[:-1] + b"}" if head.endswith(b",") else head + b"}")
    except ValueError:
        raise _Unsupported() from None
    if not isinstance(hd, dict):
        raise _Unsupported()
    if "record_shapes" in hd:
        pt.record_shapes = bool(hd["record_shapes"])
    for d in hd.get("deviceProperties") or ():
        if isinstance(d, dict) and isinstance(d.get("name"), str):
            pt.device_names.append(d["name"])
            pt.device_properties.append(d)
    lb = buf.find(b"[", k)
    if buf[k + len(b'"traceEvents"'):lb].strip() != b":":
        raise _Unsupported()
    j = lb + 1
    while True:
        j = _WS_RUN.match(buf, j).end()
        if j < len(buf):
            break
        if len(buf) > (64 << 20):  # megabytes of blanks before the first event: not a profiler trace
            raise _Fatal("no event in the first 64 MiB of the traceEvents list")
        chunk = stream.read(1 << 16)
        if not chunk:
            raise TraceError("truncated JSON: the traceEvents list never closes")
        buf += chunk
    if buf[j:j + 1] == b"]":
        return None, bytes(buf[j:]), -1
    nl = buf.rfind(b"\n", lb, j)
    if buf[j:j + 1] != b"{" or nl < 0 or buf[nl + 1:j].strip():
        raise _Unsupported()
    return bytes(buf[nl:j + 1]), bytes(buf[j:]), j


def _fast_parse(stream, pt: ParsedTrace, sink: _Sink, cats) -> None:
    """Split the traceEvents array at its item boundaries, decode only the events we use.

    Kineto (torch.profiler's export_chrome_trace) writes one array item per "\n  {" at a fixed
    indentation; JSON strings cannot hold a raw newline, so "\n" + indent + "{" only starts an item.
    Memory stays at one 8 MB block. Items of the categories in ``cats`` are read (see
    _scan_items); the others are only counted. The head and the tail after the array are
    validated with json, so a truncated file is an error.
    """
    marker, data, _ = _find_head(stream, pt)
    if marker is None:
        _check_tail(data + stream.read())
        return
    _scan_items(stream.read, data, marker, sink, last=True, cats=cats)


_ALL_CATS = (b"kernel", b"gpu_memcpy", b"gpu_memset", b"user_annotation", b"gpu_user_annotation",
             b"cuda_runtime", b"cuda_driver", b"cpu_op")
_LAUNCH_CATS_B = (b"cuda_runtime", b"cuda_driver")
_NO_LAUNCH_CATS_B = tuple(c for c in _ALL_CATS if c not in _LAUNCH_CATS_B)


def _skip_names(no_kernel, lead: bytes = b'"') -> bytes:
    """A negative lookahead for '<lead>, "name": "<a no-kernel op>"'."""
    if not no_kernel:
        return b""
    return b"(?!" + lead + b', "name": "(?:' + b"|".join(re.escape(n) for n in sorted(no_kernel)) + b')")'


def _interest_rx(no_kernel, cats=_ALL_CATS) -> re.Pattern:
    """Items worth a look, found at C speed: the categories we use, minus cpu_ops that never launch
    a kernel (by name, in Kineto's '"cat": "cpu_op", "name": "..."' layout; other layouts are
    looked at and skipped by name in Python). Group 1 is the category."""
    alts = [c for c in cats if c != b"cpu_op"]
    if b"cpu_op" in cats:
        alts.append(b"cpu_op" + _skip_names(no_kernel))
    return re.compile(rb'"cat"\s*:\s*"(' + b"|".join(alts) + b')"')


_INTEREST = {}


def _scan_items(read, data: bytes, marker: bytes, sink: _Sink, last: bool, cats=None) -> None:
    # hot loop: the fast path over every trace event (benchmarks/bench_topn.py --mb 100 --only ours1:
    # 100.7 MB, ~214k events, 1.62 s = 62 MB/s in one process). Its lookups are bound once into
    # locals the per-item closure reads; split into module functions, each call level added per
    # item costs ~56 ns (timeit on the 2-core CI machine), ~0.7% of the scan per level, and the
    # hoisted names become argument or global loads. Kept whole (issue 15 allows a measured hot loop).
    """Feed every item of ``data`` + what ``read`` returns to ``sink``. ``data`` starts at an item.

    ``last``: the stream ends with the array's tail (else it ends exactly before an item).
    A regex jumps straight to the items worth reading (by their "cat"); the rest are only counted."""
    loads = _loads
    handle = sink.handle
    name_search = _NAME_RX.search
    dims_search, ext_search, types_search, conc_search = _DIMS_RX.search, _EXT_RX.search, _TYPES_RX.search, _CONC_RX.search
    cpu_op_bytes, cpu_op_key = sink.cpu_op_bytes, sink.cpu_op_key
    kernel_fields, launch_fields = sink.kernel_fields, sink.launch_fields
    no_kernel = _NO_KERNEL_B if not sink.keep_all_ops else frozenset()
    cats = tuple(cats or _ALL_CATS)
    interest = _INTEREST.get((no_kernel, cats))
    if interest is None:
        interest = _INTEREST[(no_kernel, cats)] = _interest_rx(no_kernel, cats)
    parse_cats = _PARSE_CATS
    mlen = len(marker) - 1                   # items start at the "{" after "\n" + indent
    data = data or b""

    def item(pos, nxt, c, q):
        # hot loop: called once per event of interest (see _scan_items: ~214k per 100 MB); a split
        # adds a call level per event (~56 ns each, ~0.7% of the scan) and loses the closure's locals.
        # pos..nxt: the item; c: its "cat" value; q: index of the quote closing that value
        if c == b"":
            sink.n += 1
        elif c == b"kernel":
            f = _kernel_at(data, q, nxt) if q >= 0 else None
            if f is not None:
                kernel_fields(*f)
            else:
                _decode(loads, data[pos:nxt].rstrip(b" \t\r\n,"), handle)
        elif c in parse_cats:
            _decode(loads, data[pos:nxt].rstrip(b" \t\r\n,"), handle)
        elif c == b"cpu_op" or c == b"cuda_runtime" or c == b"cuda_driver":
            nmb = None
            if q >= 0 and data.startswith(b', "name": "', q + 1):
                na = q + 12
                nmb = data[na:data.find(b'"', na, nxt)]
                if b"\\" in nmb:
                    nmb = None
            if nmb is None:
                nm = name_search(data, pos, nxt)
                nmb = nm.group(1) if nm is not None else None
            if c != b"cpu_op":
                g = nmb if nmb is not None else b"aunch"
                if b"aunch" in g or b"emcpy" in g or b"emset" in g:
                    f = _launch_at(data, q, nxt) if q >= 0 else None
                    if f is not None:
                        launch_fields(*f)
                    else:
                        _decode(loads, data[pos:nxt].rstrip(b" \t\r\n,"), handle)
                else:
                    sink.n += 1
            elif nmb is not None and nmb in no_kernel:
                sink.n += 1
            else:
                # args: '"External id": N,<signature fields>, "Ev Idx": K' -> the signature's
                # bytes are the key; each distinct one is decoded once
                done = False
                x = data.find(b'"External id": ', pos, nxt)
                if x >= 0 and nmb is not None:
                    x += 15
                    cm_ = data.find(b",", x, nxt)
                    ei = data.find(b', "Ev Idx"', x, nxt)
                    if 0 < cm_ < ei:
                        key = data[cm_ + 1:ei]
                        if b'"Sequence number"' not in key and b'"Fwd thread id"' not in key:
                            try:
                                ext = int(data[x:cm_])
                            except ValueError:
                                ext = -1
                            if ext >= 0:
                                done = cpu_op_key(nmb, ext, key)
                if not done:
                    dm = dims_search(data, pos, nxt)
                    if dm is None:
                        ev = data[pos:nxt]
                        if b'"Input Dims"' in ev:
                            _decode(loads, ev.rstrip(b" \t\r\n,"), handle)
                        else:
                            sink.n += 1
                    else:
                        xm = ext_search(data, pos, nxt)
                        tm = types_search(data, pos, nxt)
                        cm = conc_search(data, pos, nxt)
                        if nmb is None or xm is None or (tm is None and data.find(b'"Input type"', pos, nxt) >= 0) \
                                or (cm is None and data.find(b'"Concrete Inputs"', pos, nxt) >= 0):
                            _decode(loads, data[pos:nxt].rstrip(b" \t\r\n,"), handle)
                        else:
                            cpu_op_bytes(nmb, int(xm.group(1)), dm.group(1),
                                         tm.group(1) if tm else None, cm.group(1) if cm else None)
        else:
            sink.n += 1

    while True:
        chunk = read(_BLOCK)
        eof = not chunk
        if not eof:
            data = data + chunk if data else chunk
        n_data = len(data)
        # [0, lim): complete items; an item ends where the next marker starts
        if eof and not last:
            lim, rest = n_data, n_data       # a middle chunk: its last item is complete
        else:
            lm = data.rfind(marker)
            lim, rest = (lm, lm + mlen) if lm > 0 else (0, 0)
        if lim <= 0 and n_data > _MAX_ITEM_BYTES:  # an item with no end in sight: never buffer it all
            raise _Fatal(f"one trace event is larger than {_MAX_ITEM_BYTES >> 20} MiB: not a profiler trace")
        if lim > 0:
            n_items = data.count(marker, 0, lim) + 1
            visited = 0
            last_st = -1
            for m in interest.finditer(data, 0, lim):
                st = data.rfind(marker, 0, m.start())
                st = 0 if st < 0 else st + mlen
                if st == last_st:            # a second "cat" key inside the same item
                    continue
                last_st = st
                en = data.find(marker, m.end(), lim)
                item(st, lim if en < 0 else en, m.group(1), m.end() - 1)
                visited += 1
            sink.n += n_items - visited
        data = data[rest:] if rest < n_data else b""
        if eof:
            break
    if not last:
        return
    # the last item: decode it with raw_decode to find where the array's tail begins
    try:
        text = data.decode("utf-8")
        obj, end = json.JSONDecoder().raw_decode(text)
    except ValueError as exc:
        raise TraceError(f"truncated or malformed JSON in the last event ({_short(exc)})") from None
    handle(obj)
    _check_tail(text[end:].encode())


# ------------------------------------------------------------------ two processes for big files

_PARALLEL_MIN_BYTES = 64 << 20


def _parallel_parse(path: str, rxs, keep_all_ops: bool, workers: int, cats=None) -> ParsedTrace:
    """Split an uncompressed trace into ``workers`` byte ranges at item boundaries; scan each in
    its own process (fork), merge the compact tables. Raises _Unsupported to fall back."""
    import multiprocessing as mp
    pt = ParsedTrace(path=path)
    with open(path, "rb") as f:
        marker, first, j = _find_head(f, pt)
        if marker is None:
            raise _Unsupported()
        size = os.fstat(f.fileno()).st_size
        bounds = [j]
        for w in range(1, workers):
            off = j + (size - j) * w // workers
            f.seek(off)
            blk = f.read(4 << 20)
            i = blk.find(marker)
            if i < 0:
                raise _Unsupported()
            b = off + i + len(marker) - 1
            if b <= bounds[-1]:
                raise _Unsupported()
            bounds.append(b)
        bounds.append(size)
    ctx = mp.get_context("fork")
    jobs = []
    for w in range(1, workers):
        rd, wr = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_worker, args=(wr, path, bounds[w], bounds[w + 1], marker, rxs, keep_all_ops,
                                               w == workers - 1, cats), daemon=True)
        p.start()
        wr.close()
        jobs.append((p, rd))
    sink = _Sink(pt, rxs, keep_all_ops)
    with open(path, "rb") as f:
        f.seek(bounds[0])
        lim = _Limited(f, bounds[1] - bounds[0])
        _scan_items(lim.read, b"", marker, sink, last=(workers == 1), cats=cats)
    parts = []
    err = None
    for p, rd in jobs:
        try:
            res = rd.recv()
        except EOFError:
            res = ("error", "a worker process died")
        p.join()
        if res[0] == "error":
            err = err or res[1]
        else:
            parts.append(res[1])
    if err:
        raise TraceError(err)
    for part in parts:
        _merge(pt, sink, part)
    pt.n_events = sink.n
    pt.bytes_read = size
    pt.engine = f"fast ({workers} processes)"
    return pt


class _Limited:
    def __init__(self, f, n):
        self.f, self.left = f, n

    def read(self, n):
        if self.left <= 0:
            return b""
        b = self.f.read(min(n, self.left))
        self.left -= len(b)
        return b


def _worker(conn, path, a, b, marker, rxs, keep_all_ops, last, cats=None):
    try:
        pt = ParsedTrace(path=path)
        sink = _Sink(pt, rxs, keep_all_ops)
        with open(path, "rb") as f:
            f.seek(a)
            _scan_items(_Limited(f, b - a).read, b"", marker, sink, last=last, cats=cats)
        pt.n_events = sink.n
        conn.send(("ok", pt))
    except TraceError as exc:
        conn.send(("error", str(exc)))
    except BaseException as exc:  # report, never hang the parent
        conn.send(("error", f"worker failed: {type(exc).__name__}: {exc}"))
    finally:
        conn.close()


def _merge(pt: ParsedTrace, sink: _Sink, part: ParsedTrace) -> None:
    """Append a worker's tables to ``pt``, re-interning kernel names and op signatures."""
    kmap = []
    for nm in part.kernel_names:
        i = sink.name_idx.get(nm)
        if i is None:
            i = sink.name_idx[nm] = len(pt.kernel_names)
            pt.kernel_names.append(nm)
            pt.launch_dims[i] = Counter()
        kmap.append(i)
    for i_part, c in part.launch_dims.items():
        pt.launch_dims[kmap[i_part]].update(c)
    pt.k_name.extend(array("l", (kmap[i] for i in part.k_name)))
    pt.k_ts.extend(part.k_ts)
    pt.k_dur.extend(part.k_dur)
    pt.k_ext.extend(part.k_ext)
    pt.k_corr.extend(part.k_corr)
    smap = []
    for sig in part.sigs:
        key = (sig.name, sig.dims, sig.types, sig.concrete)
        s = sink.sig_idx.get(key)
        if s is None:
            s = sink.sig_idx[key] = len(pt.sigs)
            pt.sigs.append(sig)
        smap.append(s)
    pt.op_ext.extend(part.op_ext)
    pt.op_sig.extend(array("l", (smap[s] for s in part.op_sig)))
    pt.l_corr.extend(part.l_corr)
    pt.l_ext.extend(part.l_ext)
    pt.l_ts.extend(part.l_ts)
    pt.ranges.extend(part.ranges)
    pt.mem.update(part.mem)
    pt.mem_count.update(part.mem_count)
    sink.n += part.n_events


def _decode(loads, ev: bytes, handle) -> None:
    try:
        e = loads(ev)
    except ValueError as exc:
        raise TraceError(f"malformed JSON in an event ({_short(exc)})") from None
    except RecursionError:
        raise TraceError("an event is nested too deeply") from None
    handle(e)


def _check_tail(tail: bytes) -> None:
    """What follows the last event must close the array and the document."""
    t = tail.lstrip(b" \t\r\n,")
    try:
        json.loads(b'{"traceEvents": [' + t)
    except ValueError as exc:
        raise TraceError(f"truncated or malformed JSON after the last event ({_short(exc)})") from None


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
        k = buf.find(b'"traceEvents"', max(0, len(buf) - len(chunk) - 16))  # the new bytes only
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
        for d in ijson.items(io.BytesIO(head + b'"traceEvents": []}'), "deviceProperties.item", use_float=True):
            yield "deviceProperties.item", "object", d
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
