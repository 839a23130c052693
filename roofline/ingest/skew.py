"""Launch skew across ranks at their collectives: who waited, for how long, and for whom.

A collective cannot finish before every rank of its group has arrived, so on each rank its time
is waiting + transfer. The ranks' collectives are aligned by their sequence: the Nth collective
of a stream (the same kind, collective and process group) on every rank is the same operation
(c10d issues a group's collectives in the same order on every rank). For the Nth one:

    last arrival   = max over ranks of its start
    waiting(rank)  = last arrival - the rank's own start      (at most its duration)
    transfer(rank) = its duration - waiting(rank)

The rank that arrived last waited for nobody; what the others waited for it is charged to it,
and the rank charged the most over the run is the straggler. The starts are compared on the
traces' clocks: traces written on one host share the clock (Kineto's timestamps are the host's),
traces of several hosts may not. The check: the ranks' ends of one collective should agree (it
completes everywhere at about the same time); their median spread is reported, and a spread
above the median transfer time is said in the notes (the waiting is then off by about that much).
Pure functions; times in us in, ms out.
"""
from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field

from roofline.ingest.collectives import CollEvent


@dataclass
class RankSums:
    """One rank's sums over the aligned collectives of one stream or one kernel name (us)."""
    n: int = 0
    total_us: float = 0.0
    waiting_us: float = 0.0
    last_arrivals: int = 0          # collectives this rank reached last
    waited_for_us: float = 0.0      # what the other ranks waited for it, summed

    def add(self, dur: float, wait: float) -> None:
        self.n += 1
        self.total_us += dur
        self.waiting_us += wait


@dataclass
class Stream:
    """The aligned collectives of one (kind, collective, process group) on every rank."""
    kind: str
    coll: str | None
    pg: str
    ranks: list[int]
    instances: int
    counts: dict[int, int]                               # collectives of this stream per rank
    per_rank: dict[int, RankSums] = field(default_factory=dict)
    end_spread_us: list[float] = field(default_factory=list)
    instance_wait_us: list[float] = field(default_factory=list)   # every rank's waiting at the Nth, summed
    waits_us: list[list[float]] = field(default_factory=list)     # the Nth: each rank's waiting (rank order)
    last_rank: list[int] = field(default_factory=list)            # the Nth: the rank that arrived last
    names: list[str] = field(default_factory=list)
    message_elems: int | None = None
    mismatched: int = 0                                  # aligned instances whose message size differs across ranks


def _streams(per_rank: dict[int, list[CollEvent]]) -> dict[tuple, dict[int, list[CollEvent]]]:
    out: dict[tuple, dict[int, list[CollEvent]]] = defaultdict(lambda: defaultdict(list))
    for r, evs in per_rank.items():
        for ev in sorted(evs, key=lambda v: v.ts_us):
            out[(ev.kind, ev.coll, ev.pg)][r].append(ev)
    return out


def align(per_rank: dict[int, list[CollEvent]]) -> tuple[list[Stream], dict[str, dict[int, RankSums]], list[str]]:
    """-> (streams, per collective kernel name: per-rank sums, notes). Only streams every rank has
    are aligned; a stream whose ranks hold different counts is aligned over its first N (said)."""
    ranks = sorted(per_rank)
    streams: list[Stream] = []
    by_name: dict[str, dict[int, RankSums]] = defaultdict(lambda: defaultdict(RankSums))
    notes: list[str] = []
    for (kind, coll, pg), evs in sorted(_streams(per_rank).items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        what = f"{kind} {coll or '?'}" + (f" (group {pg})" if pg else "")
        if sorted(evs) != ranks:
            notes.append(f"{what}: seen on rank(s) {', '.join(map(str, sorted(evs)))} only: not aligned")
            continue
        counts = {r: len(v) for r, v in evs.items()}
        n = min(counts.values())
        if len(set(counts.values())) > 1:
            notes.append(f"{what}: the ranks hold {', '.join(f'{counts[r]}' for r in ranks)} of them: the first {n} "
                         "aligned by their order")
        st = Stream(kind, coll, pg, ranks, n, counts, {r: RankSums() for r in ranks},
                    names=sorted({ev.name for v in evs.values() for ev in v}))
        sizes = []
        for i in range(n):
            row = {r: evs[r][i] for r in ranks}
            _one(row, st, by_name)
            sz = {ev.nelems for ev in row.values()}
            if len(sz) > 1:
                st.mismatched += 1
            sizes.extend(s for s in sz if s is not None)
        st.message_elems = int(statistics.median(sizes)) if sizes else None
        tot_w = sum(st.instance_wait_us)
        if n > 2 and tot_w > 0 and max(st.instance_wait_us) > 0.5 * tot_w:
            i = st.instance_wait_us.index(max(st.instance_wait_us))
            notes.append(f"{what}: one collective (number {i + 1} of {n}) holds {max(st.instance_wait_us) / tot_w:.0%} of "
                         f"the waiting ({max(st.instance_wait_us) / 1000:.3f} ms; e.g. the ranks' profilers started at "
                         "different times); the others waited "
                         f"{(tot_w - max(st.instance_wait_us)) / 1000:.3f} ms together")
        if st.mismatched:
            notes.append(f"{what}: {st.mismatched} of {n} aligned collectives have different message sizes across "
                         "ranks: the sequence alignment may be off there")
        streams.append(st)
    return streams, {k: dict(v) for k, v in by_name.items()}, notes


def _one(row: dict[int, CollEvent], st: Stream, by_name) -> None:
    """One aligned collective across the ranks: waiting per rank, charged to the last arrival."""
    last_r = max(row, key=lambda r: (row[r].ts_us, r))
    last = row[last_r].ts_us
    waited = 0.0
    ws = []
    for r in st.ranks:
        ev = row[r]
        w = min(max(last - ev.ts_us, 0.0), ev.dur_us)
        st.per_rank[r].add(ev.dur_us, w)
        by_name[ev.name][r].add(ev.dur_us, w)
        waited += w
        ws.append(w)
    st.waits_us.append(ws)
    st.last_rank.append(last_r)
    st.per_rank[last_r].last_arrivals += 1
    st.per_rank[last_r].waited_for_us += waited
    by_name[row[last_r].name][last_r].last_arrivals += 1
    ends = [ev.ts_us + ev.dur_us for ev in row.values()]
    st.end_spread_us.append(max(ends) - min(ends))
    st.instance_wait_us.append(waited)


def straggler(streams: list[Stream]) -> dict | None:
    """The rank the others waited for the most, over every aligned stream (None: nobody waited)."""
    charged: dict[int, float] = defaultdict(float)
    lasts: dict[int, int] = defaultdict(int)
    total_wait = 0.0
    for st in streams:
        for r, s in st.per_rank.items():
            charged[r] += s.waited_for_us
            lasts[r] += s.last_arrivals
            total_wait += s.waiting_us
    if not charged or total_wait <= 0:
        return None
    r = max(charged, key=lambda k: (charged[k], lasts[k], -k))
    ranks = sorted(charged)
    out = {"rank": r, "waited_for_ms": charged[r] / 1000.0,
           "share_of_all_waiting": charged[r] / total_wait,
           "last_arrivals": [lasts[k] for k in ranks], "waited_for_ms_per_rank": [charged[k] / 1000.0 for k in ranks],
           "how": "the rank the other ranks waited for the most at their aligned collectives (waiting charged to "
                  "the last rank to arrive)"}
    # one collective holding most of the waiting (profilers started at different times, a warm-up):
    # the straggler of the rest of the run too
    big = max(((w, st.last_rank[i]) for st in streams for i, w in enumerate(st.instance_wait_us)), default=None)
    if big is not None and big[0] > 0.5 * total_wait:
        rest = dict(charged)
        rest[big[1]] -= big[0]
        if sum(rest.values()) > 0:
            r2 = max(rest, key=lambda k: (rest[k], lasts[k], -k))
            out["without_largest_wait"] = {"rank": r2, "waited_for_ms": rest[r2] / 1000.0,
                                           "waited_for_ms_per_rank": [rest[k] / 1000.0 for k in ranks]}
    return out


def stream_summary(st: Stream) -> dict:
    """One stream for the Top-N's `ranks.collectives` (ms; lists in rank order)."""
    rs = [st.per_rank[r] for r in st.ranks]
    total = [s.total_us / 1000.0 for s in rs]
    wait = [s.waiting_us / 1000.0 for s in rs]
    spread = statistics.median(st.end_spread_us) if st.end_spread_us else None
    xfer = [(s.total_us - s.waiting_us) / max(s.n, 1) for s in rs]
    d = {"kind": st.kind, "collective": st.coll, "process_group": st.pg or None, "names": st.names,
         "instances": st.instances, "counts": [st.counts[r] for r in st.ranks], "message_elems": st.message_elems,
         "total_ms": total, "waiting_ms": wait, "transfer_ms": [t - w for t, w in zip(total, wait)],
         "waiting_share": [w / t if t > 0 else 0.0 for t, w in zip(total, wait)],
         "last_arrivals": [s.last_arrivals for s in rs], "waited_for_ms": [s.waited_for_us / 1000.0 for s in rs],
         "end_spread_us_median": spread,
         "largest_wait": ({"number": st.instance_wait_us.index(max(st.instance_wait_us)) + 1,
                           "waiting_ms": max(st.instance_wait_us) / 1000.0} if st.instance_wait_us else None),
         "clock_check": "ok"}
    if spread is not None and xfer and spread > max(statistics.median(xfer), 1.0):
        d["clock_check"] = (f"the ranks' ends of one collective differ by {spread:.1f} us (median), more than its "
                            "transfer: the traces' clocks may not be aligned (traces of several hosts?); the waiting "
                            "is off by about that much")
    return d
