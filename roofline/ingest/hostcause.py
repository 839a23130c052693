"""Why a host-bound step's GPU idles: the CPU-side activity that covers the GPU's idle gaps
(docs/method.md section 4, "What the host does"; docs/topn.md, `wall_time.<regime>.host`).

Inputs: the step windows of one regime (roofline.ingest.walltime), the GPU activity (every kernel
and memcpy/memset, the union over streams) and the host events of the trace
(roofline.ingest.host_scan). The rule, per idle gap [g0, g1) of a step (the GPU ran nothing):

1. the thread: the CPU thread that issued most runtime launch calls in the steps (the one that feeds
   the GPU; a serving loop's). Its events nest (a cpu_op holds runtime calls and other cpu_ops).
2. a gap that opens while that thread sits in a synchronising call (cudaStreamSynchronize,
   cudaDeviceSynchronize, cudaEventSynchronize, a blocking cudaMemcpy, cudaFree, a copy from
   pageable memory; a sync that returns up to SYNC_SLACK_US after g0 counts: the wake-up) is
   charged whole to that call: the host waited until the GPU ran dry, so everything it does until
   it launches again is exposed.
3. any other gap is charged, instant by instant, to the innermost event the thread is in (a
   runtime call that is neither a launch, a sync, a memcpy nor an allocation counts for the cpu_op
   around it: a library op's own queries belong to it); no event at all: `unrecorded`.
Pure: the ParsedTrace tables, the windows and the HostEvents in, a dict out
(roofline/ingest/hostcause_rules.py turns the charged time into named causes).
"""
from __future__ import annotations

import bisect
from collections import Counter

from roofline.ingest.hostcause_rules import HEAVY_CALL_US, NONE, causes_of, runtime_kind
from roofline.ingest.walltime import _union

HOST_BOUND_IDLE_PCT = 50.0   # a step whose GPU idles more than this is bound by the host, not a kernel
MAX_HOST_STEPS = 128         # a regime's first steps read for the host cause (bounds the pass on long traces)
SYNC_SLACK_US = 20.0         # a sync returning this long after the GPU went idle still caused the gap


def launch_thread(hev, lo: float, hi: float) -> tuple[int | None, float]:
    """(the thread with most launch calls in [lo, hi], its share of them); (None, 0) when no launch
    call is recorded (the thread with most events then, if any)."""
    launches, events = Counter(), Counter()
    for i in range(len(hev)):
        if hev.ts[i] < lo or hev.ts[i] > hi:
            continue
        events[hev.tid[i]] += 1
        if hev.cat[i] in (1, 2) and "aunch" in hev.names[hev.name[i]]:
            launches[hev.tid[i]] += 1
    if launches:
        tid, n = launches.most_common(1)[0]
        return tid, n / sum(launches.values())
    return (events.most_common(1)[0][0], 0.0) if events else (None, 0.0)


def segments(hev, tid: int) -> tuple[list[float], list[float], list[int], dict[int, int]]:
    """The thread's time cut into (start, end, owner) pieces: owner is the row its idle time is
    charged to (NONE: no event); and each row's enclosing cpu_op (row -> row)."""
    rows = sorted((i for i in range(len(hev)) if hev.tid[i] == tid), key=lambda i: (hev.ts[i], -hev.dur[i]))
    ss, se, so = [], [], []
    parent_op: dict[int, int] = {}
    stack: list[tuple[int, float, int, int]] = []   # (row, end, owner, innermost enclosing cpu_op)
    is_other: dict[int, bool] = {}

    def emit(a, b, owner):
        if b > a:
            ss.append(a)
            se.append(b)
            so.append(owner)

    t = float("-inf")
    for i in rows:
        s = hev.ts[i]
        while stack and stack[-1][1] <= s:
            _, end, owner, _ = stack.pop()
            emit(t, end, owner)
            t = max(t, end)
        emit(t, s, stack[-1][2] if stack else NONE)
        t = max(t, s)
        op = stack[-1][3] if stack else NONE
        parent_op[i] = op
        owner = i
        if op != NONE and hev.cat[i] in (1, 2):
            nk = hev.name[i]
            other = is_other.get(nk)
            if other is None:               # by name (a memcpy call's kind is never "other")
                other = is_other[nk] = runtime_kind(hev.names[nk], i, hev) == "other"
            if other:
                owner = op                  # a library op's own runtime queries count for the op
        stack.append((i, s + hev.dur[i], owner, i if hev.cat[i] == 0 else op))
    while stack:
        _, end, owner, _ = stack.pop()
        emit(t, end, owner)
        t = max(t, end)
    return ss, se, so, parent_op


def idle_gaps(busy, a: float, b: float) -> list[tuple[float, float]]:
    """The parts of [a, b) where no interval of the union ``busy`` (walltime._union) lies."""
    us, ue, _ = busy
    out = []
    i = max(bisect.bisect_right(us, a) - 1, 0)
    t = a
    while i < len(us) and us[i] < b:
        if ue[i] > t:
            if us[i] > t:
                out.append((t, us[i]))
            t = ue[i]
        i += 1
    if t < b:
        out.append((t, b))
    return out


def _add(into: dict, row: int, w: int, us: float) -> None:
    """Charge ``us`` of window ``w`` to ``row`` (sparse: a row shows in one window or a few)."""
    d = into.setdefault(row, {})
    d[w] = d.get(w, 0.0) + us


def charge(busy, wins: list[tuple[float, float]], hev, seg) -> dict:
    """Each window's idle time charged to rows of ``hev`` (rule above); ``busy``: the GPU activity
    (walltime._union), ``seg``: segments() of the launching thread.
    -> {"idle_us": [per window], "gaps": [idle gaps per window], "by_row": {row: {window: us}},
        "long": {row: {window: us}} (pieces of HEAVY_CALL_US or more in no op), "sync_gaps": {row: gaps},
        "parent_op": {row: row}}"""
    ss, se, so, parent_op = seg
    sync_rows = sorted((i for i in parent_op if hev.cat[i] in (1, 2)
                        and runtime_kind(hev.names[hev.name[i]], i, hev) in ("sync", "pageable")),
                       key=lambda i: hev.ts[i])
    sync_ts = [hev.ts[i] for i in sync_rows]
    n = len(wins)
    by_row: dict[int, dict[int, float]] = {}
    long_: dict[int, dict[int, float]] = {}     # host code in no op, a millisecond or more at a time
    sync_gaps: Counter = Counter()
    idle, n_gaps = [0.0] * n, [0] * n
    for w, (a, b) in enumerate(wins):
        for g0, g1 in idle_gaps(busy, a, b):
            idle[w] += g1 - g0
            n_gaps[w] += 1
            j = bisect.bisect_right(sync_ts, g0) - 1
            if j >= 0 and hev.ts[sync_rows[j]] + hev.dur[sync_rows[j]] + SYNC_SLACK_US >= g0:
                _add(by_row, sync_rows[j], w, g1 - g0)
                sync_gaps[sync_rows[j]] += 1
                continue
            k = max(bisect.bisect_right(ss, g0) - 1, 0)
            covered = 0.0
            while k < len(ss) and ss[k] < g1:
                o = min(se[k], g1) - max(ss[k], g0)
                if o > 0:
                    owner = so[k]
                    into = long_ if o >= HEAVY_CALL_US and (owner == NONE or hev.cat[owner] >= 3) else by_row
                    _add(into, owner, w, o)
                    covered += o
                k += 1
            if g1 - g0 - covered > 1e-9:
                _add(by_row, NONE, w, g1 - g0 - covered)
    return {"idle_us": idle, "gaps": n_gaps, "by_row": by_row, "long": long_, "sync_gaps": sync_gaps,
            "parent_op": parent_op}


def launches_in(hev, tid: int, wins) -> tuple[int, float]:
    """(launch calls of the thread inside the windows, their summed duration in us)."""
    starts = [a for a, _ in wins]
    n, us = 0, 0.0
    for i in range(len(hev)):
        if hev.tid[i] != tid or hev.cat[i] not in (1, 2) or "aunch" not in hev.names[hev.name[i]]:
            continue
        j = bisect.bisect_right(starts, hev.ts[i]) - 1
        if j >= 0 and hev.ts[i] < wins[j][1]:
            n += 1
            us += hev.dur[i]
    return n, us


def host_block(busy, wins: list[tuple[float, float]], hev, tid: int | None, share: float, seg) -> dict:
    """What the host does while the GPU idles in the steps ``wins`` of one regime (the Top-N's
    `wall_time.<regime>.host`, docs/topn.md); ``tid``/``share``: launch_thread(), ``seg``: its segments()."""
    if tid is None:
        return {"causes": [], "ops": [],
                "summary": "the trace records no CPU event in these steps: nothing in it names what the host did"}
    ch = charge(busy, wins, hev, seg)
    n_launch, launch_us = launches_in(hev, tid, wins)
    out = causes_of(hev, ch, len(wins), n_launch, launch_us)
    out["thread"] = tid
    if 0 < share < 0.9:
        out["thread_launch_share_pct"] = 100.0 * share
    return out


def add_host_causes(path: str, pt, gpu_ranges: dict, wall: dict, notes: list[str]) -> None:
    """Fill `host` into each regime of ``wall`` (walltime.wall_time) whose steps are host-bound
    (idle > HOST_BOUND_IDLE_PCT of the wall time), from one extra pass over the trace that reads the
    CPU events of those steps only (roofline.ingest.host_scan), the first MAX_HOST_STEPS of each
    regime (`steps_read` says so when there are more); a failed pass is a note."""
    from roofline.ingest.host_scan import scan_host_events
    from roofline.ingest.walltime import step_windows

    bound = sorted(reg for reg, w in wall.items() if isinstance(w, dict) and w["idle_pct"] > HOST_BOUND_IDLE_PCT)
    all_wins = step_windows(gpu_ranges)
    wins = [w for reg in bound for w in [x for x in all_wins if x[2] == reg][:MAX_HOST_STEPS]]
    if not wins:
        return
    lo, hi = min(w[0] for w in wins), max(w[1] for w in wins)
    try:
        hev = scan_host_events(path, lo, hi)
    except (OSError, EOFError, ValueError) as exc:
        notes.append(f"host events not read ({exc.__class__.__name__}): host-bound steps have no `host` cause")
        return
    tid, share = launch_thread(hev, lo, hi)
    seg = segments(hev, tid) if tid is not None else None
    busy = _union(list(pt.k_ts) + list(pt.m_ts), list(pt.k_dur) + list(pt.m_dur))
    for reg in bound:
        mine = [(a, b) for a, b, r, _, _ in wins if r == reg]
        wall[reg]["host"] = host_block(busy, mine, hev, tid, share, seg)
        if len(mine) < wall[reg]["steps"]:     # a long trace: its first MAX_HOST_STEPS steps
            wall[reg]["host"]["steps_read"] = len(mine)
