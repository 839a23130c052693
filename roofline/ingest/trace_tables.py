"""The compact tables a PyTorch trace is read into (:class:`ParsedTrace`), the errors of the trace
readers, and the small helpers every reader shares: opening the file within roofline.io.safeio's
limits, reading a number field, decoding one event, checking what follows the last event.

The readers: roofline/ingest/trace_fast.py (Kineto's layout, split at item boundaries),
trace_parallel.py (the fast path in several processes), trace_ijson.py (any other layout), all
folding events through trace_sink.py; roofline/ingest/torch_trace.py picks one (``parse_trace``).
"""
from __future__ import annotations

import json
import os
from array import array
from collections import Counter
from dataclasses import dataclass, field

from roofline.io.errors import RooflineError

# Ops that never launch a kernel: skipping them keeps the External-id map small.
NO_KERNEL_OPS = frozenset("""
aten::empty aten::empty_strided aten::empty_like aten::view aten::_unsafe_view aten::reshape aten::t
aten::transpose aten::permute aten::as_strided aten::expand aten::unsqueeze aten::squeeze aten::slice
aten::select aten::narrow aten::detach aten::detach_ aten::alias aten::resolve_conj aten::resolve_neg
aten::unbind aten::split aten::chunk aten::result_type aten::lift_fresh aten::set_ aten::numpy_T
aten::contiguous aten::to aten::view_as aten::expand_as aten::flatten aten::unflatten aten::split_with_sizes
aten::is_nonzero aten::item aten::_local_scalar_dense aten::size aten::stride aten::dim aten::type_as
""".split())

USED_CATS = frozenset(("kernel", "cpu_op", "cuda_runtime", "cuda_driver", "gpu_memcpy", "gpu_memset",
                       "user_annotation", "gpu_user_annotation"))

# what a malformed event can raise inside the sink (a string where a number belongs, a list
# where a name belongs, nesting too deep for json): the trace is refused with one line
MALFORMED = (ValueError, TypeError, KeyError, AttributeError, IndexError, RecursionError, OverflowError)
MAX_ITEM_BYTES = 16 << 20   # one trace event larger than this is not a profiler event (Kineto's: < 1 MB)
MAX_DUR_US = 1e12           # 11.6 days: a longer kernel is a corrupt value (and sums would overflow)


class TraceError(RooflineError):
    """The file is not a usable PyTorch trace (message names the problem, not the file)."""


class Fatal(RooflineError):
    """A limit was hit (size, nesting): stop, do not retry with the other parser. Raised as
    TraceError by parse_trace."""


class Unsupported(RooflineError):
    """The layout is not the one the fast path splits (fall back to ijson)."""


@dataclass
class OpSig:
    """An interned cpu_op signature (what record_shapes recorded for one call)."""
    name: str
    dims: tuple
    types: tuple
    concrete: tuple
    # NB: "Input Strides" (recorded by torch >= 2.x with record_shapes): a 0 stride marks a
    # broadcast (expanded) dimension, whose elements are not separate memory
    strides: tuple = ()


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
    k_dev: array = field(default_factory=lambda: array("q"))         # the kernel's device (-1: not recorded)
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
    m_ts: array = field(default_factory=lambda: array("d"))          # one row per memcpy/memset: start (us)
    m_dur: array = field(default_factory=lambda: array("d"))         # ... its duration (us)
    n_events: int = 0
    record_shapes: bool | None = None
    device_names: list[str] = field(default_factory=list)
    device_properties: list[dict] = field(default_factory=list)     # kineto's deviceProperties records
    engine: str = ""                                                 # which parser read it
    notes: list[str] = field(default_factory=list)                   # what the checks of the tables changed

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


ITEM_START = b"\n  {"   # an item of Kineto's pretty-printed traceEvents list starts on its own line
BLOCK = 8 << 20


def whole_item_blocks(path: str):
    """Yield (data, cut) over the trace at ``path`` (plain or gzip) in BLOCK-sized reads: data[:cut]
    holds whole items of Kineto's pretty-printed layout (an item starts at ITEM_START), the rest is
    carried into the next block. Use it under contextlib.closing so the file is closed however the
    reader stops; raises OSError/EOFError on an unreadable stream."""
    stream, raw = open_trace(path)
    try:
        carry = b""
        while True:
            chunk = stream.read(BLOCK)
            data = carry + chunk
            if not data:
                return
            last = not chunk
            cut = len(data) if last else max(data.rfind(ITEM_START), 0)
            yield data, cut
            if last:
                return
            carry = data[cut:]
    finally:
        stream.close()
        raw.close()


def open_trace(path: str):
    """Binary stream over the (possibly gzipped) file, and a counter of raw bytes read. Regular
    files only; gzip is decompressed within roofline.io.safeio's size and ratio limits (a bomb stops
    with an error instead of expanding)."""
    from roofline.io import safeio

    f = safeio.open_regular(path)
    try:
        size = os.fstat(f.fileno()).st_size
        head = f.read(2)
        f.seek(0)
        if head == b"\x1f\x8b":
            return safeio.GzipLimited(f, path, size, limit_env="ROOFLINE_MAX_TRACE_BYTES"), f
        if size > safeio.limit("ROOFLINE_MAX_TRACE_BYTES"):
            raise Fatal(f"the file is larger than ROOFLINE_MAX_TRACE_BYTES "
                        f"({safeio.limit('ROOFLINE_MAX_TRACE_BYTES')} bytes)")
    except BaseException:
        f.close()
        raise
    return f, f


def dims3(v):
    """A launch's grid/block as a tuple of ints, or None when it is anything else."""
    if isinstance(v, list) and v and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return tuple(v)
    return None


def num(v, what: str) -> float:
    """A number field of an event: int or float, finite (a string or a bool is refused)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TraceError(f"an event's {what} is {type(v).__name__} {str(v)[:40]!r}, expected a number")
    x = float(v)
    if x != x or x in (float("inf"), float("-inf")):
        raise TraceError(f"an event's {what} is {v}, expected a finite number")
    return x


def freeze(x):
    if isinstance(x, list):
        return tuple(freeze(v) for v in x)
    return x


def to_int(v, default=-1) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return default


def short(exc: BaseException) -> str:
    """The first line of an error, printable text only (yajl's message is a bytes repr that quotes
    the offending input: a binary file's bytes never reach the terminal)."""
    text = str(exc).strip()
    if text[:2] in ("b'", 'b"'):
        import ast

        try:
            text = ast.literal_eval(text).decode("utf-8", "replace").strip()
        except (ValueError, SyntaxError, UnicodeDecodeError):
            pass
    s = text.splitlines()[0] if text else type(exc).__name__
    return "".join(c if c.isprintable() and c != "\ufffd" else "?" for c in s)[:160]


def decode_event(loads, ev: bytes, handle) -> None:
    try:
        e = loads(ev)
    except ValueError as exc:
        raise TraceError(f"malformed JSON in an event ({short(exc)})") from None
    except RecursionError:
        raise TraceError("an event is nested too deeply") from None
    handle(e)


def check_tail(tail: bytes) -> None:
    """What follows the last event must close the array and the document."""
    t = tail.lstrip(b" \t\r\n,")
    try:
        json.loads(b'{"traceEvents": [' + t)
    except ValueError as exc:
        raise TraceError(f"truncated or malformed JSON after the last event ({short(exc)})") from None
