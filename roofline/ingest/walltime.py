"""Wall time of the serving steps, from the trace's GPU-side step ranges (docs/topn.md, `wall_time`).

A kernel's share of GPU time says nothing about a step whose GPU sits idle while the host launches,
schedules or syncs. On the GPU timeline each step runs from the start of its range to the start of
the next step (the last one to the end of its range): the steps partition the time from the first
step to the last, gaps between steps (host work) included. Inside each step: the time some kernel
ran (the union over streams, so overlapping kernels count once), the time only a memcpy/memset ran,
and the rest, when the GPU did nothing. Pure: the ParsedTrace tables in, numbers out.
"""
from __future__ import annotations

import bisect

SOURCE = ("GPU-side step ranges (gpu_user_annotation): each step from its start to the next step's start "
          "(the last one to its end); kernel and memcpy/memset time as the union over streams")


def step_windows(gpu_ranges: dict) -> list[tuple[float, float, str, str, int]]:
    """-> [(start_us, end_us, regime, range name, External id)], ordered: one per step (a step's
    ranges on several streams share an External id and are one step)."""
    hull: dict = {}
    for reg, rs in gpu_ranges.items():
        for r in rs:
            key = (reg, r.ext_id) if r.ext_id >= 0 else (reg, id(r))
            a, b = r.ts_us, r.ts_us + r.dur_us
            if key in hull:
                h = hull[key]
                hull[key] = (min(h[0], a), max(h[1], b), reg, h[3], r.ext_id)
            else:
                hull[key] = (a, b, reg, r.name, r.ext_id)
    steps = sorted(hull.values())
    out = []
    for i, (a, b, reg, name, ext) in enumerate(steps):
        end = steps[i + 1][0] if i + 1 < len(steps) else b
        out.append((a, max(a, end), reg, name, ext))
    return out


def _union(starts, durs) -> tuple[list[float], list[float], list[float]]:
    """Disjoint sorted intervals covering [s, s + d): (starts, ends, prefix sums of lengths)."""
    ivs = sorted((s, s + d) for s, d in zip(starts, durs) if d > 0)
    us, ue = [], []
    for a, b in ivs:
        if us and a <= ue[-1]:
            ue[-1] = max(ue[-1], b)
        else:
            us.append(a)
            ue.append(b)
    pre = [0.0]
    for a, b in zip(us, ue):
        pre.append(pre[-1] + (b - a))
    return us, ue, pre


def _covered(u, a: float, b: float) -> float:
    """Length of the union `u` inside [a, b]."""
    us, ue, pre = u
    if b <= a or not us:
        return 0.0
    i = bisect.bisect_right(us, a) - 1       # the interval that may straddle a
    j = bisect.bisect_left(us, b)            # intervals [i+1, j) start inside (a, b)
    tot = pre[j] - pre[max(i + 1, 0)]
    if i >= 0:
        tot += max(0.0, min(ue[i], b) - a)
    if j - 1 > i and ue[j - 1] > b:          # the last one inside sticks out past b
        tot -= ue[j - 1] - b
    return tot


def wall_time(pt, gpu_ranges: dict) -> dict | None:
    """Per regime: steps, wall time, and the GPU-busy / memcpy-only / idle shares of it (percent).
    None without GPU-side step ranges."""
    wins = step_windows(gpu_ranges)
    if not wins:
        return None
    ku = _union(pt.k_ts, pt.k_dur)
    allu = _union(list(pt.k_ts) + list(pt.m_ts), list(pt.k_dur) + list(pt.m_dur))
    acc: dict[str, list[float]] = {}
    for a, b, reg, _name, _ext in wins:
        k = _covered(ku, a, b)
        x = acc.setdefault(reg, [0, 0.0, 0.0, 0.0])
        x[0] += 1
        x[1] += b - a
        x[2] += k
        x[3] += _covered(allu, a, b) - k
    out: dict = {}
    for reg, (n, wall, busy, mem) in acc.items():
        pct = (lambda v: 100.0 * v / wall) if wall > 0 else (lambda v: 0.0)
        out[reg] = {"steps": n, "wall_ms": wall / 1e3, "step_wall_ms": wall / 1e3 / n,
                    "gpu_busy_pct": pct(busy), "memcpy_pct": pct(mem), "idle_pct": max(0.0, 100.0 - pct(busy) - pct(mem))}
    out["source"] = SOURCE
    return out


def graph_steps(pt, gpu_ranges: dict, graph_corr: set) -> dict[str, int]:
    """regime -> how many of its steps ran a kernel replayed from a CUDA graph (a kernel whose
    correlation id is a graph launch's, inside the step's window)."""
    wins = step_windows(gpu_ranges)
    starts = [w[0] for w in wins]
    hit: set[int] = set()
    for i in range(pt.n_kernels):
        if pt.k_corr[i] in graph_corr:
            j = bisect.bisect_right(starts, pt.k_ts[i]) - 1
            if j >= 0 and pt.k_ts[i] < wins[j][1]:
                hit.add(j)
    out: dict[str, int] = {}
    for j in hit:
        out[wins[j][2]] = out.get(wins[j][2], 0) + 1
    return out
