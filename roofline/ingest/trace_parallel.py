"""The fast path in several processes, for a large uncompressed trace: the file is split into
byte ranges at item boundaries, each scanned in its own (forked) process, and the compact tables
are merged, kernel names and op signatures re-interned."""
from __future__ import annotations

import os
from array import array

from roofline.ingest.trace_fast import find_head, scan_items
from roofline.ingest.trace_sink import Sink
from roofline.ingest.trace_tables import ParsedTrace, TraceError, Unsupported
from roofline.io import safeio


def _bounds(path: str, pt: ParsedTrace, workers: int):
    """(item marker, byte offsets where each worker's range starts, the file size + 1 end)."""
    with safeio.open_regular(path) as f:   # special files refused, never blocks
        marker, _, j = find_head(f, pt)
        if marker is None:
            raise Unsupported()
        size = os.fstat(f.fileno()).st_size
        bounds = [j]
        for w in range(1, workers):
            off = j + (size - j) * w // workers
            f.seek(off)
            blk = f.read(4 << 20)
            i = blk.find(marker)
            if i < 0:
                raise Unsupported()
            b = off + i + len(marker) - 1
            if b <= bounds[-1]:
                raise Unsupported()
            bounds.append(b)
        bounds.append(size)
    return marker, bounds, size


def parallel_parse(path: str, rxs, keep_all_ops: bool, workers: int, cats=None) -> ParsedTrace:
    """Split an uncompressed trace into ``workers`` byte ranges at item boundaries; scan each in
    its own process (fork), merge the compact tables. Raises Unsupported to fall back."""
    import multiprocessing as mp
    pt = ParsedTrace(path=path)
    marker, bounds, size = _bounds(path, pt, workers)
    ctx = mp.get_context("fork")
    jobs = []
    for w in range(1, workers):
        rd, wr = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_worker, args=(wr, path, bounds[w], bounds[w + 1], marker, rxs, keep_all_ops,
                                               w == workers - 1, cats), daemon=True)
        p.start()
        wr.close()
        jobs.append((p, rd))
    sink = Sink(pt, rxs, keep_all_ops)
    with safeio.open_regular(path) as f:   # special files refused, never blocks
        f.seek(bounds[0])
        lim = _Limited(f, bounds[1] - bounds[0])
        scan_items(lim.read, b"", marker, sink, last=(workers == 1), cats=cats)
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
        sink = Sink(pt, rxs, keep_all_ops)
        with safeio.open_regular(path) as f:   # special files refused, never blocks
            f.seek(a)
            scan_items(_Limited(f, b - a).read, b"", marker, sink, last=last, cats=cats)
        pt.n_events = sink.n
        conn.send(("ok", pt))
    except TraceError as exc:
        conn.send(("error", str(exc)))
    except BaseException as exc:  # report, never hang the parent
        conn.send(("error", f"worker failed: {type(exc).__name__}: {exc}"))
    finally:
        conn.close()


def _merge(pt: ParsedTrace, sink: Sink, part: ParsedTrace) -> None:
    """Append a worker's tables to ``pt``, re-interning kernel names and op signatures."""
    kmap = [sink.kernel_index(nm) for nm in part.kernel_names]
    for i_part, c in part.launch_dims.items():
        pt.launch_dims[kmap[i_part]].update(c)
    pt.k_name.extend(array("l", (kmap[i] for i in part.k_name)))
    pt.k_ts.extend(part.k_ts)
    pt.k_dur.extend(part.k_dur)
    pt.k_ext.extend(part.k_ext)
    pt.k_corr.extend(part.k_corr)
    pt.k_dev.extend(part.k_dev)
    smap = [_sig_index(pt, sink, sig) for sig in part.sigs]
    pt.op_ext.extend(part.op_ext)
    pt.op_sig.extend(array("l", (smap[s] for s in part.op_sig)))
    pt.l_corr.extend(part.l_corr)
    pt.l_ext.extend(part.l_ext)
    pt.l_ts.extend(part.l_ts)
    pt.ranges.extend(part.ranges)
    pt.mem.update(part.mem)
    pt.mem_count.update(part.mem_count)
    pt.m_ts.extend(part.m_ts)
    pt.m_dur.extend(part.m_dur)
    sink.n += part.n_events


def _sig_index(pt: ParsedTrace, sink: Sink, sig) -> int:
    """The index in pt.sigs of a worker's signature (the worker's OpSig object is kept when new)."""
    key = (sig.name, sig.dims, sig.types, sig.concrete, sig.strides)
    s = sink.sig_idx.get(key)
    if s is None:
        s = sink.sig_idx[key] = len(pt.sigs)
        pt.sigs.append(sig)
    return s
