"""One Top-N for a run of several ranks (tensor parallel: one profiler trace per rank).

Each rank's trace is read alone, exactly as `roofline topn TRACE` reads it (every kernel kept),
then the per-rank Top-Ns are merged per kernel name (docs/topn.md, "Several ranks"):

* ``pct_gpu_time``: the MEAN over the ranks of each rank's share (a rank that never ran the kernel
  counts 0), so the shares of the merged Top-N still add up to at most 100;
* ``regimes.*.base_latency_ms``, ``launches_per_step``, ``launches``, ``total_ms``: the MEDIAN over the
  ranks that ran the kernel; shapes and the other fields come from the rank whose ``total_ms`` is
  the median (``ranks.shapes_from_rank``);
* ``ranks`` (per entry): every rank's figures, in the order of the top-level ``ranks.ranks``
  (null where a rank did not run the kernel), their spread (max - min, and over the median) and
  the slowest rank (the most GPU time in that kernel);
* ``collective`` (collective kernels): the waiting / transfer split of roofline/ingest/skew.py.

Which rank wrote a trace: Kineto's ``distributedInfo`` in the trace header (``rank``,
``world_size``, ``backend``; written when torch.distributed is initialised), else a rank number in
the file name (``rank0.json.gz``, ``rank-1.pt.trace.json``, ``trace_rk2.json``); ``ranks.rank_from`` says
which, per trace. Pure, except :func:`identify` and :func:`expand` (they look at files).
"""
from __future__ import annotations

import os
import re
import statistics
from dataclasses import dataclass, field

from roofline.ingest import skew
from roofline.ingest.topn import TopNError

_RANK_RX = re.compile(r"(?:rank|rk)[-_.]?(\d+)", re.IGNORECASE)
TRACE_SUFFIXES = (".json", ".json.gz")


@dataclass
class RankTrace:
    path: str
    rank: int
    world_size: int | None
    rank_from: str                    # "distributedInfo" | "file name"
    backend: str | None = None
    doc: dict | None = None           # the rank's own Top-N (every kernel)
    events: list = field(default_factory=list)   # its collectives (roofline.ingest.collectives)


def expand(sources) -> tuple[list[str], list[str]]:
    """The trace files named: files as given, and a folder's PyTorch traces (*.json / *.json.gz
    that sniff as one: roofline.io.filekinds; other files there are skipped). -> (paths, notes)."""
    from roofline.io.filekinds import sniff

    out: list[str] = []
    notes: list[str] = []
    for s in sources:
        if not os.path.isdir(s):
            out.append(s)
            continue
        cands = sorted(os.path.join(s, f) for f in os.listdir(s) if f.lower().endswith(TRACE_SUFFIXES))
        found = [p for p in cands if os.path.isfile(p) and sniff(p) == "torch_trace"]
        if not found:
            raise TopNError(f"{s}: the folder holds no PyTorch profiler trace (*.json or *.json.gz)")
        if len(found) < len(cands):
            notes.append(f"{s}: {len(cands) - len(found)} JSON file(s) that are no trace skipped "
                         f"({', '.join(os.path.basename(p) for p in cands if p not in found)[:200]})")
        out.extend(found)
    return out, notes


def _small_int(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 20 else None


def identify(path: str) -> RankTrace:
    """Which rank wrote the trace at ``path`` (raises TopNError when neither the header nor the
    file name says)."""
    from roofline.ingest.env_starter import trace_head

    try:
        di = trace_head(path).get("distributedInfo")
    except (OSError, EOFError, ValueError):
        di = None
    if isinstance(di, dict) and _small_int(di.get("rank")) is not None:
        ws = _small_int(di.get("world_size"))
        be = di.get("backend") if isinstance(di.get("backend"), str) else None
        return RankTrace(path, di["rank"], ws, "distributedInfo", be)
    m = _RANK_RX.findall(os.path.basename(path))
    if m:
        return RankTrace(path, int(m[-1]), None, "file name")
    raise TopNError(f"{path}: cannot tell which rank wrote it: no distributedInfo in the trace header (Kineto writes "
                    "it when torch.distributed is initialised) and no rank number in the file name (e.g. rank0.json.gz)")


def check(rts: list[RankTrace]) -> list[str]:
    """Refuse a set of traces that is not one run of distinct ranks; notes on what is missing."""
    seen: dict[int, str] = {}
    for rt in rts:
        if rt.rank in seen:
            raise TopNError(f"{rt.path}: rank {rt.rank} (from its {rt.rank_from}) is also {seen[rt.rank]}'s: "
                            "give one trace per rank")
        seen[rt.rank] = rt.path
    sizes = {rt.world_size for rt in rts if rt.world_size is not None}
    if len(sizes) > 1:
        raise TopNError(f"{rts[0].path}: the traces are of different runs: their distributedInfo world sizes are "
                        f"{', '.join(map(str, sorted(sizes)))}")
    notes = []
    ws = next(iter(sizes), None)
    if ws is not None and (len(rts) != ws or max(seen) >= ws):
        notes.append(f"world_size {ws} (distributedInfo) but {len(rts)} trace(s), ranks {', '.join(map(str, sorted(seen)))}: "
                     "the Top-N covers these ranks only")
    return notes


def _med(xs):
    m = statistics.median(xs)
    return int(m) if isinstance(m, float) and m.is_integer() and all(isinstance(x, int) for x in xs) else m


def _rank_block(es: list[dict | None], ranks: list[int]) -> dict:
    """An entry's per-rank figures (lists in rank order, null where absent), spread, slowest rank."""
    pres = [(r, e) for r, e in zip(ranks, es) if e is not None]
    tot = [e["total_ms"] for _, e in pres]
    med = statistics.median(tot)
    regs = sorted({k for _, e in pres for k in e["regimes"]})
    blk = {"pct_gpu_time": [e["pct_gpu_time"] if e else None for e in es],
           "total_ms": [e["total_ms"] if e else None for e in es],
           "launches": [e["launches"] if e else None for e in es],
           "base_latency_ms": {g: [e["regimes"][g]["base_latency_ms"] if e and g in e["regimes"] else None for e in es]
                               for g in regs},
           "launches_per_step": {g: [e["regimes"][g]["launches_per_step"] if e and g in e["regimes"] else None
                                     for e in es] for g in regs},
           "spread_total_ms": max(tot) - min(tot), "spread_rel": (max(tot) - min(tot)) / med if med > 0 else 0.0,
           "spread_launches": max(e["launches"] for _, e in pres) - min(e["launches"] for _, e in pres),
           "slowest_rank": max(pres, key=lambda p: (p[1]["total_ms"], -p[0]))[0],
           "fastest_rank": min(pres, key=lambda p: (p[1]["total_ms"], p[0]))[0]}
    absent = [r for r, e in zip(ranks, es) if e is None]
    if absent:
        blk["absent_on"] = absent
    return blk


def merged_entry(name: str, es: list[dict | None], ranks: list[int]) -> dict:
    """The merged entry of one kernel name from the ranks' entries (None where a rank lacks it)."""
    pres = [(r, e) for r, e in zip(ranks, es) if e is not None]
    by_t = sorted(pres, key=lambda p: (p[1]["total_ms"], p[0]))
    rep_rank, rep = by_t[(len(by_t) - 1) // 2]              # the (lower) median rank by total time
    out = {k: v for k, v in rep.items() if k not in ("pct_gpu_time", "regimes", "launches", "total_ms")}
    out["pct_gpu_time"] = round(sum(e["pct_gpu_time"] for _, e in pres) / len(ranks), 6)
    regs = {}
    for g in sorted({k for _, e in pres for k in e["regimes"]}):
        rr = [e["regimes"][g] for _, e in pres if g in e["regimes"]]
        regs[g] = {"base_latency_ms": statistics.median([x["base_latency_ms"] for x in rr]),
                   "launches_per_step": _med([x["launches_per_step"] for x in rr])}
    out["regimes"] = regs
    out["launches"] = _med([e["launches"] for _, e in pres])
    out["total_ms"] = statistics.median([e["total_ms"] for _, e in pres])
    blk = _rank_block(es, ranks)
    blk["shapes_from_rank"] = rep_rank
    if any(e.get("shapes") != rep.get("shapes") for _, e in pres):
        blk["shapes_differ"] = True
    if any(e.get("cuda_graph_replayed") for _, e in pres):
        out["cuda_graph_replayed"] = True
    out["ranks"] = blk
    # the order of an entry's keys as `roofline topn` writes them: name, short_name, pct first
    first = ("name", "short_name", "pct_gpu_time")
    return {**{k: out[k] for k in first if k in out}, **{k: v for k, v in out.items() if k not in first}}


def _collective_block(sums: dict[int, skew.RankSums], ranks: list[int]) -> dict:
    rs = [sums.get(r) for r in ranks]
    tot = sum(s.total_us for s in rs if s)
    wait = sum(s.waiting_us for s in rs if s)
    per_launch = [((s.total_us - s.waiting_us) / s.n / 1000.0, s.waiting_us / s.n / 1000.0) for s in rs if s and s.n]
    return {"transfer_ms_per_launch": statistics.median(x for x, _ in per_launch) if per_launch else None,
            "waiting_ms_per_launch": statistics.median(w for _, w in per_launch) if per_launch else None,
            "aligned_launches": [s.n if s else 0 for s in rs],
            "total_ms": [s.total_us / 1000.0 if s else None for s in rs],
            "waiting_ms": [s.waiting_us / 1000.0 if s else None for s in rs],
            "transfer_ms": [(s.total_us - s.waiting_us) / 1000.0 if s else None for s in rs],
            "waiting_share_per_rank": [s.waiting_us / s.total_us if s and s.total_us > 0 else None for s in rs],
            "waiting_share": wait / tot if tot > 0 else 0.0,
            "last_arrivals": [s.last_arrivals if s else 0 for s in rs]}


def _notes(rts: list[RankTrace], head: list[str]) -> list[str]:
    """The merge's notes, then each rank's: said once when every rank says it, else per rank."""
    out = list(head)
    per = [rt.doc.get("notes", []) for rt in rts]
    for i, ns in enumerate(per):
        for nt in ns:
            if all(nt in other for other in per):
                if i == 0:
                    out.append(nt)
            else:
                out.append(f"rank {rts[i].rank}: {nt}")
    return out


def _steps(rts: list[RankTrace], notes: list[str]) -> dict:
    st = [rt.doc.get("serving") or {} for rt in rts]
    out = {}
    for k in ("n_decode_steps", "n_prefill_steps"):
        vals = [int(s.get(k, 0)) for s in st]
        out[k] = int(statistics.median_low(vals))
        if len(set(vals)) > 1:
            notes.append(f"{k} differs across ranks ({', '.join(map(str, vals))}): the median, {out[k]}, is used")
    return out


def merge(rts: list[RankTrace], *, top: int | None = 30, min_pct: float = 0.0, round_no: int = 0,
          notes: list[str] | None = None) -> dict:
    """The run's Top-N from the ranks' own Top-Ns (``rt.doc``, every kernel) and collectives."""
    rts = sorted(rts, key=lambda rt: rt.rank)
    ranks = [rt.rank for rt in rts]
    per = [{e["name"]: e for e in rt.doc["entries"]} for rt in rts]
    names = sorted({n for p in per for n in p})
    entries = [merged_entry(n, [p.get(n) for p in per], ranks) for n in names]
    entries.sort(key=lambda e: (-e["pct_gpu_time"], e["name"]))
    streams, by_name, anotes = skew.align({rt.rank: rt.events for rt in rts})
    for e in entries:
        if e["name"] in by_name:
            e["collective"] = _collective_block(by_name[e["name"]], ranks)
    head = [f"{len(rts)} ranks merged ({', '.join(f'rank {rt.rank}: {os.path.basename(rt.path)} ({rt.rank_from})' for rt in rts)})",
            "pct_gpu_time is the MEAN over the ranks of each rank's share (a rank without the kernel counts 0); "
            "base_latency_ms, launches_per_step, launches and total_ms are the MEDIAN over the ranks that ran it; "
            "every rank's own figures are in the entry's `ranks`"] + list(notes or []) + anotes
    serving = _steps(rts, head)
    kept = [e for e in entries if e["pct_gpu_time"] >= min_pct][:top] if top is not None else \
        [e for e in entries if e["pct_gpu_time"] >= min_pct]
    if len(kept) < len(entries):
        head.append(f"{len(kept)} of {len(entries)} kernel names listed, "
                    f"{sum(e['pct_gpu_time'] for e in kept):.2f}% of GPU time (mean over ranks)")
    tot = [rt.doc["total_gpu_time_ms"] for rt in rts]
    doc = {"schema_version": 1, "round": round_no, "total_gpu_time_ms": sum(tot) / len(tot), "serving": serving,
           "entries": kept, "notes": _notes(rts, head),
           "source": {"kind": "torch_trace_ranks", "traces": [rt.doc.get("source", {}) for rt in rts]},
           "ranks": _run_block(rts, streams, tot)}
    dp = next((rt.doc["device_properties"] for rt in rts if rt.doc.get("device_properties")), None)
    if dp:
        doc["device_properties"] = dp
    return doc


def _run_block(rts: list[RankTrace], streams: list, tot: list[float]) -> dict:
    """The top-level `ranks`: who is who, each rank's GPU time, the straggler, the collectives."""
    ranks = [rt.rank for rt in rts]
    ws = next((rt.world_size for rt in rts if rt.world_size is not None), None)
    slowest = ranks[max(range(len(tot)), key=lambda i: (tot[i], -ranks[i]))]
    st = skew.straggler(streams)
    if st is None:
        st = {"rank": slowest, "how": "no rank waited at a collective in the traces: the rank with the most GPU time"}
    return {"world_size": ws if ws is not None else len(rts), "ranks": ranks,
            "traces": [os.path.basename(rt.path) for rt in rts], "rank_from": [rt.rank_from for rt in rts],
            "backend": next((rt.backend for rt in rts if rt.backend), None),
            "total_gpu_time_ms": tot, "slowest_rank": slowest, "straggler": st,
            "collectives": [skew.stream_summary(s) for s in streams]}
