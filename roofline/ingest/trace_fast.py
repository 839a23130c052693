"""The fast path: Kineto writes ``traceEvents`` pretty-printed, one item per "\\n  {" at a fixed
indentation (JSON strings cannot hold a raw newline, so that marker only starts an item). Blocks
of 8 MB are split at those markers; a regex jumps to the items we use (kernels, runtime launches,
cpu_ops that can launch kernels, step ranges); their fields are read in place (a cpu_op's
signature bytes are decoded once per distinct signature), anything unexpected is decoded with
json. The head and the tail after the array are validated, so truncation is an error.

Speed (benchmarks/bench_topn.py --only ours1; figures in benchmarks/bench_topn_results.md): the
per-item reader is a closure over locals bound once per scan (``_item_reader``), and the cpu_op
branch, the one that needs most code, is a second closure (``_cpu_op_reader``).
"""
from __future__ import annotations

import json
import re

from roofline.ingest.trace_sink import Sink
from roofline.ingest.trace_tables import (MAX_ITEM_BYTES, NO_KERNEL_OPS, Fatal, ParsedTrace, TraceError,
                                          Unsupported, check_tail, decode_event, short)

# The fast path decodes few whole items (most fields are read in place), so the stdlib's json is
# enough there: orjson measured only ~3% faster end to end.
_loads = json.loads

_NAME_RX = re.compile(rb'"name"\s*:\s*"((?:[^"\\]|\\.)*)"')
_EXT_RX = re.compile(rb'"External id"\s*:\s*(\d+)')
_DIMS_RX = re.compile(rb'"Input Dims"\s*:\s*(\[[\d\[\], \t\-]*\])')
_STRIDES_RX = re.compile(rb'"Input Strides"\s*:\s*(\[[\d\[\], \t\-]*\])')
_STRLIST = rb'(\[(?:\s*"(?:[^"\\\n]|\\.)*"\s*,?)*\s*\])'
_TYPES_RX = re.compile(rb'"Input type"\s*:\s*' + _STRLIST)
_CONC_RX = re.compile(rb'"Concrete Inputs"\s*:\s*' + _STRLIST)
_NUM_AT = re.compile(rb'-?[0-9][0-9.eE+-]*')

_N = rb'(-?[0-9][0-9.eE+-]*)'
# Kineto's kernel / launch layout, matched at the quote that closes the "cat" value
_KERNEL_AT = re.compile(
    rb'", "name": "([^"\\\n]*)",[^\n]*\n[ \t]*"ts": ' + _N + rb', "dur": ' + _N
    + rb',[^\n]*\n[ \t]*"args": \{\n[ \t]*"External id": (-?\d+),(?:[^\n]*?"device": (\d+),)?[^\n]*?"correlation": (\d+),'
    rb'[^\n]*?"grid": \[([0-9, ]*)\],[^\n]*?"block": \[([0-9, ]*)\]')
_LAUNCH_AT = re.compile(
    rb'", "name": "[^"\\\n]*",[^\n]*\n[ \t]*"ts": ' + _N
    + rb',[^\n]*\n[ \t]*"args": \{\n[ \t]*"External id": (-?\d+),[^\n]*?"correlation": (\d+)')

NO_KERNEL_B = frozenset(n.encode() for n in NO_KERNEL_OPS)
_PARSE_CATS = frozenset({b"kernel", b"gpu_memcpy", b"gpu_memset", b"user_annotation", b"gpu_user_annotation"})
BLOCK = 8 << 20
ALL_CATS = (b"kernel", b"gpu_memcpy", b"gpu_memset", b"user_annotation", b"gpu_user_annotation",
            b"cuda_runtime", b"cuda_driver", b"cpu_op")
LAUNCH_CATS_B = (b"cuda_runtime", b"cuda_driver")
NO_LAUNCH_CATS_B = tuple(c for c in ALL_CATS if c not in LAUNCH_CATS_B)
_WS_RUN = re.compile(rb"[ \t\r\n]*")
_INTEREST: dict = {}


def _field(data: bytes, key: bytes, start: int, end: int):
    """(raw number bytes, end index) of '<key><number>' in data[start:end], or None."""
    i = data.find(key, start, end)
    if i < 0:
        return None
    m = _NUM_AT.match(data, i + len(key), end)
    return None if m is None else (m.group(), m.end())


def _fields(data: bytes, keys, i: int, end: int):
    """The raw numbers of '<key><number>' for each key in turn, each after the one before; None
    when one is missing."""
    out = []
    for key in keys:
        f = _field(data, key, i, end)
        if f is None:
            return None
        out.append(f[0])
        i = f[1]
    return out, i


def kernel_at(data: bytes, q: int, end: int):
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
    f = _fields(data, (b'"ts": ', b'"dur": ', b'"External id": ', b'"correlation": '), ne, end)
    if f is None:
        return None
    (ts, dur, ext, corr), i = f
    dv = _field(data, b'"device": ', ne, end)   # Kineto writes it between External id and correlation
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
    return nm, ts, dur, ext, None if dv is None else dv[0], corr, data[g + 9:ge], data[b + 10:be]


def launch_at(data: bytes, q: int, end: int):
    """(ts, External id, correlation) of a runtime launch item in Kineto's layout, or None."""
    m = _LAUNCH_AT.match(data, q, end)
    if m is not None:
        return m.groups()
    f = _fields(data, (b'"ts": ', b'"External id": ', b'"correlation": '), q, end)
    return None if f is None else tuple(f[0])


def _read_head(stream) -> tuple[bytearray, int]:
    """Read until the '[' after "traceEvents" is in the buffer. -> (buffer, index of the key)."""
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
            raise Unsupported()
    k = buf.find(b'"traceEvents"')
    if k < 0:
        raise Unsupported()
    return buf, k


def _head_fields(head: bytes, pt: ParsedTrace) -> None:
    """record_shapes and deviceProperties from the document's head (what precedes traceEvents)."""
    try:
        hd = json.loads(head[:-1] + b"}" if head.endswith(b",") else head + b"}")
    except ValueError:
        raise Unsupported() from None
    if not isinstance(hd, dict):
        raise Unsupported()
    if "record_shapes" in hd:
        pt.record_shapes = bool(hd["record_shapes"])
    for d in hd.get("deviceProperties") or ():
        if isinstance(d, dict) and isinstance(d.get("name"), str):
            pt.device_names.append(d["name"])
            pt.device_properties.append(d)


def find_head(stream, pt: ParsedTrace):
    """Read up to the first item of traceEvents. Returns (marker, first-item bytes, offset of the
    first item in the (decompressed) stream), or (None, tail bytes, -1) for an empty list."""
    buf, k = _read_head(stream)
    _head_fields(bytes(buf[:k]).rstrip(), pt)
    lb = buf.find(b"[", k)
    if buf[k + len(b'"traceEvents"'):lb].strip() != b":":
        raise Unsupported()
    j = lb + 1
    while True:
        j = _WS_RUN.match(buf, j).end()
        if j < len(buf):
            break
        if len(buf) > (64 << 20):  # megabytes of blanks before the first event: not a profiler trace
            raise Fatal("no event in the first 64 MiB of the traceEvents list")
        chunk = stream.read(1 << 16)
        if not chunk:
            raise TraceError("truncated JSON: the traceEvents list never closes")
        buf += chunk
    if buf[j:j + 1] == b"]":
        return None, bytes(buf[j:]), -1
    nl = buf.rfind(b"\n", lb, j)
    if buf[j:j + 1] != b"{" or nl < 0 or buf[nl + 1:j].strip():
        raise Unsupported()
    return bytes(buf[nl:j + 1]), bytes(buf[j:]), j


def fast_parse(stream, pt: ParsedTrace, sink: Sink, cats) -> None:
    """Split the traceEvents array at its item boundaries, decode only the events we use.

    Kineto (torch.profiler's export_chrome_trace) writes one array item per "\n  {" at a fixed
    indentation; JSON strings cannot hold a raw newline, so "\n" + indent + "{" only starts an item.
    Memory stays at one 8 MB block. Items of the categories in ``cats`` are read (see
    scan_items); the others are only counted. The head and the tail after the array are
    validated with json, so a truncated file is an error.
    """
    marker, data, _ = find_head(stream, pt)
    if marker is None:
        check_tail(data + stream.read())
        return
    scan_items(stream.read, data, marker, sink, last=True, cats=cats)


def _skip_names(no_kernel, lead: bytes = b'"') -> bytes:
    """A negative lookahead for '<lead>, "name": "<a no-kernel op>"'."""
    if not no_kernel:
        return b""
    return b"(?!" + lead + b', "name": "(?:' + b"|".join(re.escape(n) for n in sorted(no_kernel)) + b')")'


def _interest_rx(no_kernel, cats=ALL_CATS) -> re.Pattern:
    """Items worth a look, found at C speed: the categories we use, minus cpu_ops that never launch
    a kernel (by name, in Kineto's '"cat": "cpu_op", "name": "..."' layout; other layouts are
    looked at and skipped by name in Python). Group 1 is the category."""
    alts = [c for c in cats if c != b"cpu_op"]
    if b"cpu_op" in cats:
        alts.append(b"cpu_op" + _skip_names(no_kernel))
    return re.compile(rb'"cat"\s*:\s*"(' + b"|".join(alts) + b')"')


def _cpu_op_reader(sink: Sink):
    """-> cpu_op(data, pos, nxt, nmb): read the cpu_op item data[pos:nxt] named ``nmb`` (None:
    the name was not found in place) into ``sink``. The lookups are bound once, as locals."""
    loads, handle = _loads, sink.handle
    dims_search, ext_search, types_search, conc_search = _DIMS_RX.search, _EXT_RX.search, _TYPES_RX.search, _CONC_RX.search
    strides_search = _STRIDES_RX.search
    cpu_op_bytes, cpu_op_key = sink.cpu_op_bytes, sink.cpu_op_key

    def cpu_op(data, pos, nxt, nmb):
        # args: '"External id": N,<signature fields>, "Ev Idx": K' -> the signature's bytes are
        # the key; each distinct one is decoded once
        x = data.find(b'"External id": ', pos, nxt)
        if x >= 0 and nmb is not None:
            x += 15
            cm_ = data.find(b",", x, nxt)
            ei = data.find(b', "Ev Idx"', x, nxt)
            if 0 < cm_ < ei:
                key = data[cm_ + 1:ei]
                # NB: a compiled graph's Triton launch records its args AFTER "Ev Idx" (External id,
                # Record function id, Ev Idx, Input Dims, ..., kernel_name): the key then holds no
                # signature, and the search below reads it
                if b'"Sequence number"' not in key and b'"Fwd thread id"' not in key \
                        and (b'"Input Dims"' in key or data.find(b'"Input Dims"', ei, nxt) < 0):
                    try:
                        ext = int(data[x:cm_])
                    except ValueError:
                        ext = -1
                    if ext >= 0 and cpu_op_key(nmb, ext, key):
                        return
        dm = dims_search(data, pos, nxt)
        if dm is None:
            ev = data[pos:nxt]
            if b'"Input Dims"' in ev:
                decode_event(loads, ev.rstrip(b" \t\r\n,"), handle)
            else:
                sink.n += 1
            return
        xm = ext_search(data, pos, nxt)
        tm = types_search(data, pos, nxt)
        cm = conc_search(data, pos, nxt)
        sm = strides_search(data, pos, nxt)
        if nmb is None or xm is None or (tm is None and data.find(b'"Input type"', pos, nxt) >= 0) \
                or (cm is None and data.find(b'"Concrete Inputs"', pos, nxt) >= 0) \
                or (sm is None and data.find(b'"Input Strides"', pos, nxt) >= 0):
            decode_event(loads, data[pos:nxt].rstrip(b" \t\r\n,"), handle)
        else:
            cpu_op_bytes(nmb, int(xm.group(1)), dm.group(1), tm.group(1) if tm else None, cm.group(1) if cm else None,
                         sm.group(1) if sm else None)

    return cpu_op


def _item_reader(sink: Sink, no_kernel):
    """-> item(data, pos, nxt, c, q): read the item data[pos:nxt] whose "cat" is ``c`` (``q``: the
    index of the quote closing that value) into ``sink``. Called once per item of interest."""
    loads, handle = _loads, sink.handle
    name_search = _NAME_RX.search
    kernel_fields, launch_fields = sink.kernel_fields, sink.launch_fields
    parse_cats = _PARSE_CATS
    cpu_op = _cpu_op_reader(sink)

    def item(data, pos, nxt, c, q):
        if c == b"":
            sink.n += 1
        elif c == b"kernel":
            f = kernel_at(data, q, nxt) if q >= 0 else None
            if f is not None:
                kernel_fields(*f)
            else:
                decode_event(loads, data[pos:nxt].rstrip(b" \t\r\n,"), handle)
        elif c in parse_cats:
            decode_event(loads, data[pos:nxt].rstrip(b" \t\r\n,"), handle)
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
                    f = launch_at(data, q, nxt) if q >= 0 else None
                    if f is not None:
                        launch_fields(*f)
                    else:
                        decode_event(loads, data[pos:nxt].rstrip(b" \t\r\n,"), handle)
                else:
                    sink.n += 1
            elif nmb is not None and nmb in no_kernel:
                sink.n += 1
            else:
                cpu_op(data, pos, nxt, nmb)
        else:
            sink.n += 1

    return item


def scan_items(read, data: bytes, marker: bytes, sink: Sink, last: bool, cats=None) -> None:
    """Feed every item of ``data`` + what ``read`` returns to ``sink``. ``data`` starts at an item.

    ``last``: the stream ends with the array's tail (else it ends exactly before an item).
    A regex jumps straight to the items worth reading (by their "cat"); the rest are only counted."""
    no_kernel = NO_KERNEL_B if not sink.keep_all_ops else frozenset()
    cats = tuple(cats or ALL_CATS)
    interest = _INTEREST.get((no_kernel, cats))
    if interest is None:
        interest = _INTEREST[(no_kernel, cats)] = _interest_rx(no_kernel, cats)
    data = _scan_blocks(read, data or b"", marker, sink, _item_reader(sink, no_kernel), interest, last)
    if last:
        _last_item(data, sink)


def _scan_blocks(read, data: bytes, marker: bytes, sink: Sink, item, interest, last: bool) -> bytes:
    """Read ``read`` in blocks, hand each complete item of interest to ``item``, count the others.
    Returns the bytes left after the last marker (the last item and the tail) when ``last``."""
    mlen = len(marker) - 1                   # items start at the "{" after "\n" + indent
    while True:
        chunk = read(BLOCK)
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
        if lim <= 0 and n_data > MAX_ITEM_BYTES:  # an item with no end in sight: never buffer it all
            raise Fatal(f"one trace event is larger than {MAX_ITEM_BYTES >> 20} MiB: not a profiler trace")
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
                item(data, st, lim if en < 0 else en, m.group(1), m.end() - 1)
                visited += 1
            sink.n += n_items - visited
        data = data[rest:] if rest < n_data else b""
        if eof:
            return data


def _last_item(data: bytes, sink: Sink) -> None:
    """The last item: decode it with raw_decode to find where the array's tail begins."""
    try:
        text = data.decode("utf-8")
        obj, end = json.JSONDecoder().raw_decode(text)
    except ValueError as exc:
        raise TraceError(f"truncated or malformed JSON in the last event ({short(exc)})") from None
    sink.handle(obj)
    check_tail(text[end:].encode())
