#!/usr/bin/env python3
"""The long reliability campaign: >= 10,000 generated cases over every input the tool
reads, with fresh random cases on every run (the CI-sized, derandomized run is
tests/test_reliability_campaign.py; both use the engine in tests/reliability.py, which says what
a case is and which invariants each case checks).

    PYTHONPATH=. python3 benchmarks/reliability_campaign.py [--cases 10000] [--seed N] [--limit-s 60]
        [--only KIND,...] [--out benchmarks/reliability_campaign_results.md]

Round four added the commands' kinds (tests/reliability_cmds.py): `flags` (the workload
flags of analyze and topn against the env report's bounds), `compare` (round B damaged at random),
`dispatch` (rerun --dispatch without a GPU), and the `memory` cases: each run in a fresh interpreter
whose peak RSS (resource.getrusage) is the measure (a gzipped counter file that expands to 1 GiB,
/dev/zero as a dispatch table and as a round file, a 100,000-entry Top-N); over MEMORY_LIMIT_MB
is a memory failure. (Measured as the child's VmHWM: getrusage's ru_maxrss survives exec, so a child
of a large campaign process would report the parent's size.)

After the random cases, a deterministic sweep: every field of the Top-N, env report and config x
every wrong type, and every number x every boundary value; then the input policy's field-by-field
sweep (tests/input_policy.py: every numeric field of every input kind x NaN, +-Infinity, null, a
string, a boolean, an array, a negative, zero, 10^5000, against the outcome docs/input_policy.md
gives; a mismatch counts as "policy"). Prints one line per input kind and a total: cases, crashes, hangs, wrong accepts, data loss,
memory failures, wall time and the peak RSS of the process; then every violation found (at most
50). Exit 1 when any invariant broke. The address space is capped (--max-gib, default 8) so that
an unbounded allocation shows up as a MemoryError instead of swapping the machine.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import random
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

# the share of the cases each input kind gets (the CI run's proportions)
WEIGHTS = {"topn": 260, "env": 100, "config": 90, "peaks": 90, "trace_fast": 120, "trace_compact": 80,
           "ncu_csv": 90, "counters_ncu_csv": 60, "rocprof_csv": 60, "ncu_rep": 30, "artifact": 40,
           "flags": 60, "compare": 60, "dispatch": 40}
CMD_KINDS = ("flags", "compare", "dispatch")
CATEGORIES = ("crash", "hang", "wrong accept", "data loss", "memory", "contract")
MEMORY_LIMIT_MB = 600   # a bounded reader stays at the interpreter plus one piece; the 1 GiB case was 2,080 MB


MEMORY_CASES = {
    # label -> (setup in the fresh interpreter, the CLI arguments; {w} is its work folder)
    "analyze --counters: .ncu-rep.gz expanding to 1 GiB": (
        "R.write_expanding_gzip(w / 'big.ncu-rep.gz', 1 << 30, ratio=150); rd, _ = R._round(w / 'run', None)",
        "['analyze', str(rd), '--counters', str(w / 'big.ncu-rep.gz'), '-q']"),
    "topn: the same .ncu-rep.gz": (
        "R.write_expanding_gzip(w / 'big.ncu-rep.gz', 1 << 30, ratio=150)",
        "['topn', str(w / 'big.ncu-rep.gz'), '-o', str(w / 'o.json')]"),
    "rerun --dispatch /dev/zero": (
        "rd, _ = R._round(w / 'run', None); R.cli(['analyze', str(rd), '-q']); (w / 'z.json').symlink_to('/dev/zero')",
        "['rerun', str(rd), '--dispatch', str(w / 'z.json')]"),
    "compare: /dev/zero as round B's Top-N": (
        "rd, _ = R._round(w / 'run', None); R.cli(['analyze', str(rd), '-q']); (w / 'b').mkdir(); "
        "(w / 'b' / 'profile_topN.json').symlink_to('/dev/zero')",
        "['compare', str(rd), str(w / 'b')]"),
    "analyze: a 100,000-entry Top-N": (
        "rd, paths = R._round(w / 'run', None); R.write_big_topn(paths['topn'], 100_000)",
        "['analyze', str(rd), '-q']"),
}


def memory_case(label: str, limit_s: float) -> tuple[list[str], float, float]:
    """One memory case in a fresh interpreter: (violations, its peak RSS in MB, seconds)."""
    import subprocess
    import tempfile

    setup, args = MEMORY_CASES[label]
    code = ("import json, sys, time\nfrom pathlib import Path\nsys.path.insert(0, 'tests')\n"
            "import reliability as R\n"
            f"w = Path(sys.argv[1])\n{setup}\nt0 = time.time()\ncode, out, err = R.cli({args})\n"
            "print(json.dumps({'code': code, 'err': err[-400:], 's': time.time() - t0, "
            "'rss_kb': R.peak_rss_kb()}))\n")
    with tempfile.TemporaryDirectory(prefix="roofline-mem-") as w:
        try:
            p = subprocess.run([sys.executable, "-c", code, w], cwd=ROOT, capture_output=True, text=True,
                               timeout=limit_s * 10, env=dict(os.environ, PYTHONPATH=str(ROOT)))
        except subprocess.TimeoutExpired:
            return [f"hang: memory [{label}]: over {limit_s * 10:.0f} s"], 0.0, limit_s * 10
    try:
        r = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return [f"crash: memory [{label}]: {p.stderr.strip()[-300:]}"], 0.0, 0.0
    import reliability as R

    v = R._cli_violations(r["code"], "", r["err"], f"memory [{label}]")
    mb = r["rss_kb"] / 1024
    if mb > MEMORY_LIMIT_MB:
        v.append(f"memory: [{label}]: peak RSS {mb:.0f} MB (limit {MEMORY_LIMIT_MB} MB)")
    return v, mb, r["s"]


def _strategies():
    import reliability as R
    import reliability_cmds as C

    return {"topn": R.topn_cases(), "env": R.env_cases(), "config": R.config_cases(),
            "peaks": R.peaks_cases(), "trace_fast": R.trace_cases("fast"),
            "trace_compact": R.trace_cases("compact"), "ncu_csv": R.csv_cases("ncu_csv"),
            "counters_ncu_csv": R.csv_cases("counters_ncu_csv"), "rocprof_csv": R.csv_cases("rocprof_csv"),
            "ncu_rep": R.ncu_rep_cases(), "artifact": R.artifact_cases(), "flags": C.flag_cases(),
            "compare": C.compare_cases(), "dispatch": C.dispatch_cases()}


class Tally:
    def __init__(self):
        self.counts = collections.Counter()
        self.found: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        self.examples: list[str] = []
        self.lines: list[str] = []

    def add(self, kind: str, violations, default: str = "crash") -> None:
        for v in violations:
            cat = next((c for c in CATEGORIES if v.startswith(c)), default)
            self.found[kind][cat] += 1
            if len(self.examples) < 50:
                self.examples.append(v)

    def line(self, name: str, kind: str, seconds: float, tail: str = "") -> None:
        f = self.found[kind]
        text = (f"{name:19s} {self.counts[kind]:6d} cases  " + "  ".join(f"{c} {f[c]}" for c in CATEGORIES)
                + f"{tail}  {seconds:7.1f} s")
        self.lines.append(text)
        print(text, flush=True)


def _random_kind(t: Tally, kind: str, n: int, seed_n: int, limit_s: float, peaks: list) -> None:
    from hypothesis import HealthCheck, Phase, given, seed, settings

    import reliability as R
    import reliability_cmds as C

    t0 = time.time()

    @seed(seed_n)
    @settings(max_examples=n, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(case=_strategies()[kind])
    def one(case):
        t.counts[kind] += 1
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        vs = C.run_cmd_case(case, limit_s) if kind in CMD_KINDS else R.run_case(case, limit_s=limit_s)
        grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0
        if grew > 0:
            peaks.append((grew / 1024, f"{kind} [{case.label}]"[:120]))
        t.add(kind, vs)

    one()
    t.line(kind, kind, time.time() - t0)


def _sweeps(t: Tally, limit_s: float) -> None:
    import input_policy as P
    import reliability as R

    t0 = time.time()
    for case in R.sweep_cases():   # every field x every wrong type / boundary value
        t.counts["sweep"] += 1
        t.add("sweep", R.run_case(case, limit_s=limit_s))
    t.line("sweep (all fields)", "sweep", time.time() - t0)
    t0 = time.time()
    pcases = P.all_cases()   # the input policy, field by field, against docs/input_policy.md
    t.counts["policy"] = len(pcases)
    t.add("policy", P.run_all(pcases), default="contract")
    t.line("policy (fields)", "policy", time.time() - t0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=None, help="hypothesis seed (default: random)")
    ap.add_argument("--limit-s", type=float, default=60.0, help="a case running longer is a hang")
    ap.add_argument("--max-gib", type=float, default=8.0, help="address-space cap (RLIMIT_AS), GiB")
    ap.add_argument("--only", default="", help="comma-separated kinds (and/or sweep, memory); default: all")
    ap.add_argument("--out", default=None, help="also write the summary as markdown to this file")
    args = ap.parse_args()
    cap = int(args.max_gib * (1 << 30))
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    os.environ["ROOFLINE_CAMPAIGN_LONG"] = "1"  # the sizes too slow for CI (a 20,000-entry artifact)
    only = {k for k in args.only.split(",") if k}
    kinds = {k: w for k, w in WEIGHTS.items() if not only or k in only}
    s0 = args.seed if args.seed is not None else random.SystemRandom().randrange(2 ** 32)
    t, peaks, t_all = Tally(), [], time.time()
    head = (f"reliability campaign: {args.cases} cases, seed {s0}, case limit {args.limit_s:.0f} s, "
            f"address space cap {args.max_gib:g} GiB" + (f", only {args.only}" if only else ""))
    print(head, flush=True)
    total_w = sum(kinds.values()) or 1
    per_kind = {k: max(1, args.cases * w // total_w) for k, w in kinds.items()}
    if per_kind:
        first = next(iter(per_kind))
        per_kind[first] += max(0, args.cases - sum(per_kind.values()))  # at least --cases in all
    for i, kind in enumerate(WEIGHTS):
        if kind in per_kind:
            _random_kind(t, kind, per_kind[kind], s0 + i, args.limit_s, peaks)
    if not only or "sweep" in only:
        _sweeps(t, args.limit_s)
    mem = []
    if not only or "memory" in only:
        t0 = time.time()
        for label in MEMORY_CASES:
            t.counts["memory"] += 1
            v, mb, sec = memory_case(label, args.limit_s)
            t.add("memory", v)
            mem.append(f"  {label}: peak RSS {mb:.0f} MB, {sec:.1f} s" + (f"  ({'; '.join(v)[:160]})" if v else ""))
        t.line("memory (subprocess)", "memory", time.time() - t0)
        for m in mem:
            print(m)
    return _total(t, peaks, mem, head, t_all, args.out)


def _total(t: Tally, peaks, mem, head, t_all, out) -> int:
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    tot = collections.Counter()
    for f in t.found.values():
        tot.update(f)
    n_all = sum(t.counts.values())
    text = (f"{'TOTAL':19s} {n_all:6d} cases  " + "  ".join(f"{c} {tot[c]}" for c in CATEGORIES)
            + f"  {time.time() - t_all:7.1f} s  peak RSS {rss_mb:.0f} MB")
    print(text)
    top = sorted(peaks, reverse=True)[:3]
    tail = ["largest peak-RSS steps: " + "; ".join(f"+{mb:.0f} MB {label}" for mb, label in top)] if top else []
    for line in tail + ["  " + v for v in t.examples]:
        print(line)
    if out:
        Path(out).write_text("# Reliability campaign: last run\n\nWritten by `benchmarks/reliability_campaign.py "
                             "--out` (docs/reliability.md says what each column counts).\n\n```\n"
                             + "\n".join([head, *t.lines, *mem, text, *tail, *("  " + v for v in t.examples)])
                             + "\n```\n")
    return 1 if sum(tot.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
