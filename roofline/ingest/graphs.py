"""CUDA-graph replays in a PyTorch (Kineto) trace.

Serving engines (vLLM, SGLang) capture decode steps into CUDA graphs and replay them. In the trace a
replay is one runtime event, ``cudaGraphLaunch`` (cat ``cuda_runtime``) or ``cuGraphLaunch`` (cat
``cuda_driver``); every kernel the graph runs is a ``kernel`` event whose ``correlation`` equals
that launch's. No cpu_op launched those kernels inside the profiled window (the ops ran once, at
capture time), so ``record_shapes`` has nothing to attach to them: replayed kernels carry no shapes
even when record_shapes was on.

What gives them shapes: one eager (un-captured) step inside the profiled window, whose aten ops
launch the same kernels by name, so `roofline topn` fills the shapes of the kernel name from those
launches; or measured counters at stage C (`roofline analyze --counters`).

:func:`scan_graph_launches` is a separate streaming pass (it runs only when some kernels have no
op link); :func:`graph_replay_summary` is pure.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from roofline.core.hints import GRAPH_HOWTO  # noqa: F401  (said by lint and topn too)

# the event's name, then (inside the same item, before its args close) its correlation id
_GRAPH_RX = re.compile(rb'"name"\s*:\s*"(cu(?:da)?GraphLaunch\w*)"[^}]*?"correlation"\s*:\s*(\d+)')
_BLOCK = 8 << 20
_OVERLAP = 8 << 10          # an event item is far shorter than this



@dataclass
class GraphLaunches:
    corr: set[int] = field(default_factory=set)
    names: Counter = field(default_factory=Counter)     # cudaGraphLaunch / cuGraphLaunch -> events

    @property
    def count(self) -> int:
        return sum(self.names.values())


def scan_graph_launches(path: str) -> GraphLaunches:
    """Every graph-launch runtime event of the trace at ``path`` (plain or gzip): names and correlation
    ids. Streams the file in 8 MB blocks; raises OSError/EOFError on an unreadable stream."""
    from roofline.ingest.trace_tables import open_trace

    out = GraphLaunches()
    stream, raw = open_trace(path)
    try:
        carry = b""
        while True:
            chunk = stream.read(_BLOCK)
            data = carry + chunk
            if not data:
                break
            last = not chunk
            # matches starting in the last _OVERLAP bytes are left for the next round (they may be cut)
            lim = len(data) if last else max(len(data) - _OVERLAP, 0)
            hit = data.find(b"GraphLaunch") >= 0     # a C-speed pre-check: most blocks have none
            for m in (_GRAPH_RX.finditer(data, 0, len(data)) if hit else ()):
                if m.start() >= lim:
                    break
                out.names[m.group(1).decode()] += 1
                out.corr.add(int(m.group(2)))
            if last:
                break
            carry = data[lim:]
        return out
    finally:
        stream.close()
        raw.close()


def graph_replay_summary(pt, gl: GraphLaunches) -> dict | None:
    """What the replays mean for this trace: replayed launches, their GPU time, the kernel names they
    ran, and how many of those names also ran eagerly with a shape link (those get shapes anyway).
    None when the trace has no graph launch."""
    if gl.count == 0:
        return None
    op_by_ext = pt.op_by_ext
    replayed_names: Counter = Counter()
    eager_linked: set[int] = set()
    n_rep, us_rep = 0, 0.0
    total_us = sum(pt.k_dur) or 0.0
    corr = gl.corr
    for i in range(pt.n_kernels):
        k = pt.k_name[i]
        if pt.k_corr[i] in corr:
            replayed_names[k] += 1
            n_rep += 1
            us_rep += pt.k_dur[i]
        elif pt.k_ext[i] >= 0 and pt.k_ext[i] in op_by_ext:
            eager_linked.add(k)
    names = [pt.kernel_names[k] for k in replayed_names]
    mapped = [pt.kernel_names[k] for k in replayed_names if k in eager_linked]
    return {"graph_launches": gl.count, "launch_events": dict(gl.names), "replayed_kernel_launches": n_rep,
            "replayed_gpu_time_ms": us_rep / 1000.0,
            "replayed_pct_gpu_time": (100.0 * us_rep / total_us) if total_us else 0.0,
            "replayed_kernel_names": len(names), "names_with_eager_shapes": len(mapped),
            "replayed_only": sorted(set(names) - set(mapped))}


def graph_note(s: dict) -> str:
    """The one note `roofline topn` writes for a trace with graph replays."""
    head = (f"CUDA-graph replays: {s['graph_launches']} graph launch(es) "
            f"({', '.join(f'{k} x{v}' for k, v in s['launch_events'].items())}) ran "
            f"{s['replayed_kernel_launches']} kernel launches ({s['replayed_pct_gpu_time']:.1f}% of GPU time, "
            f"{s['replayed_kernel_names']} kernel names); ")
    n, k = s["replayed_kernel_names"], s["names_with_eager_shapes"]
    if n and k == n:
        return head + ("every one of those kernel names also ran eagerly in the window, so their shapes come from "
                       "those launches (replayed kernels themselves carry no shapes)")
    if k:
        head += (f"{k} of those names also ran eagerly in the window and take their shapes from those launches; "
                 f"the other {n - k} ")
    else:
        head += "they "
    return head + "have no shapes: " + GRAPH_HOWTO


def needs_scan(pt) -> bool:
    """True when some kernel launch has no op link (the only case where graph replays change what
    topn says)."""
    op_by_ext = pt.op_by_ext
    return any(x < 0 or x not in op_by_ext for x in pt.k_ext)
