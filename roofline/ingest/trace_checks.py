"""Checks of a parsed trace's kernel table (roofline/ingest/trace_tables.py) that a profiler's own
export always passes and a damaged or merged one may not (the real-trace mutation
campaign: tests/trace_mutations.py):

* one device: a Top-N describes ONE GPU (pct_gpu_time, launches per step, per-launch times); kernels
  of several devices in one trace would be summed as if one GPU ran them all, so the trace is
  refused, naming the devices and their launches (each rank's own trace is what `roofline topn`
  merges, docs/topn.md);
* no duplicated kernel event: a kernel event with the same name, device, start, duration, correlation
  and External id as another is the same launch written twice (two exports merged, a buffer flushed
  twice): it is counted once, and the Top-N's notes say how many were dropped.
Both run on the tables, so every reader (fast, parallel, ijson) gets them.
"""
from __future__ import annotations

from array import array
from collections import Counter

from roofline.ingest.trace_tables import ParsedTrace, TraceError


def check_one_device(pt: ParsedTrace) -> None:
    """Raise TraceError when the kernels ran on more than one device."""
    devs = Counter(d for d in pt.k_dev if d >= 0)
    if len(devs) > 1:
        each = ", ".join(f"device {d}: {n} launches" for d, n in sorted(devs.items()))
        raise TraceError(f"kernels of {len(devs)} GPUs in one trace ({each}): a Top-N describes one GPU; "
                         "give each GPU's own trace (one per rank: roofline topn merges ranks)")


def drop_duplicate_kernels(pt: ParsedTrace) -> int:
    """Drop the kernel events that repeat another exactly (same name, device, start, duration,
    correlation, External id); returns how many, and notes it in pt.notes."""
    n = pt.n_kernels
    dev = pt.k_dev if len(pt.k_dev) == n else array("q", [-1]) * n
    seen: set = set()
    keep = []
    for i in range(n):
        key = (pt.k_name[i], dev[i], pt.k_ts[i], pt.k_dur[i], pt.k_corr[i], pt.k_ext[i])
        if key in seen:
            continue
        seen.add(key)
        keep.append(i)
    dropped = n - len(keep)
    if not dropped:
        return 0
    us = sum(pt.k_dur) - sum(pt.k_dur[i] for i in keep)
    for col in ("k_name", "k_ts", "k_dur", "k_ext", "k_corr"):
        a = getattr(pt, col)
        setattr(pt, col, array(a.typecode, (a[i] for i in keep)))
    pt.k_dev = array("q", (dev[i] for i in keep))
    pt.notes.append(f"{dropped} kernel events ({us / 1000:.3f} ms) repeat another exactly (same kernel, device, "
                    "start, duration, correlation and External id): the same launch written twice, counted once")
    return dropped
