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

This module picks the parser (``parse_trace``); the parts live beside it: trace_tables.py (the
tables, the errors, shared helpers), trace_sink.py (events -> tables), trace_fast.py (the fast
path), trace_parallel.py (the fast path in several processes), trace_ijson.py (the ijson path).

What is kept is bounded by the number of distinct things plus a few numbers per launch:

* per GPU kernel launch: five numbers in ``array`` columns (name index, start, duration, links);
* per cpu_op that carries ``Input Dims`` (record_shapes): its External id and an interned
  signature (op name, dims, dtypes, concrete scalars); decode loops repeat the same signatures;
* per runtime launch (cuda_runtime / cuda_driver): correlation, External id and start, used only
  for kernels that lack an External id, and to place launches in CPU-side step ranges (the fast
  path reads them, in a second pass, only when one of those is the case);
* user_annotation / gpu_user_annotation step ranges (record_function names).

Links (Kineto's trace format): a kernel's ``External id`` equals that of the innermost
cpu_op that launched it (``aten::mm``, not ``aten::linear``); its ``correlation`` equals that of the
``cudaLaunchKernel`` (cuda_runtime) or ``cuLaunchKernelEx`` (cuda_driver) event.
"""
from __future__ import annotations

import os
import re

from roofline.ingest.trace_fast import LAUNCH_CATS_B, NO_LAUNCH_CATS_B, fast_parse
from roofline.ingest.trace_ijson import ijson_parse
from roofline.io import safeio
from roofline.ingest.trace_parallel import parallel_parse
from roofline.ingest.trace_sink import Sink
# the tables and the error, importable from here (the CLI, the Top-N builder and the tests do)
from roofline.ingest.trace_tables import (MALFORMED, Fatal, OpSig, ParsedTrace, Range, TraceError,  # noqa: F401
                                          Unsupported, open_trace, short)

_PARALLEL_MIN_BYTES = 64 << 20   # an uncompressed file this large is read by several processes


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
    from roofline.io import safeio

    try:
        safeio.check_regular(path)  # a FIFO, a device or a directory is refused, never read
    except OSError as exc:
        raise TraceError(str(exc) if isinstance(exc, safeio.UnsafeInput) else f"cannot read: {short(exc)}") from None
    from roofline.ingest.trace_checks import check_one_device, drop_duplicate_kernels

    try:
        pt = _parse_trace(path, range_regex, keep_all_ops, engine, workers)
        check_one_device(pt)          # a Top-N is one GPU's
        drop_duplicate_kernels(pt)    # the same launch written twice counts once (noted)
        from roofline.ingest.gathers import resolve_index_outputs
        resolve_index_outputs(pt)     # an aten::index's rows from the op consuming its output (noted)
        return pt
    except Fatal as exc:
        raise TraceError(str(exc)) from None
    except safeio.UnsafeInput as exc:  # a decompression or nesting limit
        raise TraceError(exc.problem) from None
    except MALFORMED as exc:
        raise TraceError(f"malformed event ({short(exc)})") from None


def _parse_trace(path, range_regex, keep_all_ops, engine, workers) -> ParsedTrace:
    from roofline.io import safeio

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
            pt = _fast_once(path, rxs, keep_all_ops, workers, NO_LAUNCH_CATS_B)
            if (any(x < 0 for x in pt.k_ext) or (pt.ranges and not any(r.gpu for r in pt.ranges))
                    or kernels_outside_gpu_steps(pt)):
                lp = _fast_once(path, rxs, keep_all_ops, workers, LAUNCH_CATS_B)
                pt.l_corr, pt.l_ext, pt.l_ts = lp.l_corr, lp.l_ext, lp.l_ts
                pt.engine += " + a pass for launch events"
            return pt
        except Unsupported:
            if engine == "fast":
                raise TraceError("layout not supported by the fast path") from None
        except (Fatal, safeio.UnsafeInput):
            raise
        except TraceError:
            if engine == "fast":
                raise
        except (OSError, EOFError) as exc:  # bad gzip stream, truncated gzip
            raise TraceError(f"cannot read: {short(exc)}") from None
        except MALFORMED as exc:  # an item the fast path misread: ijson judges
            if engine == "fast":
                raise TraceError(f"malformed event ({short(exc)})") from None
    return ijson_parse(path, rxs, keep_all_ops)


def kernels_outside_gpu_steps(pt) -> bool:
    """Step ranges on both sides and a kernel outside every GPU-side one: the launch events are read
    too, so that topn can place such kernels by the CPU step range that launched them."""
    import bisect

    steps = [r for r in pt.ranges if not r.name.startswith("ProfilerStep#")]
    gpu = sorted((r.ts_us, r.ts_us + r.dur_us) for r in steps if r.gpu)
    if not gpu or all(r.gpu for r in steps):
        return False
    starts, ends = [a for a, _ in gpu], []
    for _, b in gpu:                       # running max of the ends: overlapping ranges
        ends.append(max(b, ends[-1]) if ends else b)
    for t in pt.k_ts:
        j = bisect.bisect_right(starts, t) - 1
        if j < 0 or t > ends[j]:
            return True
    return False


def _fast_once(path, rxs, keep_all_ops, workers, cats) -> ParsedTrace:
    """One fast-path pass reading the items of categories ``cats``; several processes for a large
    uncompressed file (falls back to one when the split is not possible)."""
    if workers > 1 and os.path.getsize(path) >= _PARALLEL_MIN_BYTES:
        with safeio.open_regular(path) as f:   # special files refused, never blocks
            gz = f.read(2) == b"\x1f\x8b"
        if not gz:
            try:
                return parallel_parse(path, rxs, keep_all_ops, workers, cats)
            except Unsupported:
                pass
    pt = ParsedTrace(path=path)
    sink = Sink(pt, rxs, keep_all_ops)
    stream, raw = open_trace(path)
    try:
        fast_parse(stream, pt, sink, cats)
        pt.engine = "fast (1 process)"
        pt.n_events = sink.n
        pt.bytes_read = raw.tell()
        return pt
    finally:
        stream.close()
        raw.close()
