#!/usr/bin/env python3
"""The long reliability campaign: >= 10,000 generated cases over every input the tool
reads, with fresh random cases on every run (the CI-sized, derandomized run is
tests/test_reliability_campaign.py; both use the engine in tests/reliability.py, which says what
a case is and which invariants each case checks).

    PYTHONPATH=. python3 benchmarks/reliability_campaign.py [--cases 10000] [--seed N] [--limit-s 60]

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
           "ncu_csv": 90, "counters_ncu_csv": 60, "rocprof_csv": 60, "ncu_rep": 30, "artifact": 40}
CATEGORIES = ("crash", "hang", "wrong accept", "data loss", "memory")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=None, help="hypothesis seed (default: random)")
    ap.add_argument("--limit-s", type=float, default=60.0, help="a case running longer is a hang")
    ap.add_argument("--max-gib", type=float, default=8.0, help="address-space cap (RLIMIT_AS), GiB")
    args = ap.parse_args()
    cap = int(args.max_gib * (1 << 30))
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    os.environ["ROOFLINE_CAMPAIGN_LONG"] = "1"  # the sizes too slow for CI (a 20,000-entry artifact)
    from hypothesis import HealthCheck, Phase, given, seed, settings

    import reliability as R

    strategies = {"topn": R.topn_cases(), "env": R.env_cases(), "config": R.config_cases(),
                  "peaks": R.peaks_cases(), "trace_fast": R.trace_cases("fast"),
                  "trace_compact": R.trace_cases("compact"), "ncu_csv": R.csv_cases("ncu_csv"),
                  "counters_ncu_csv": R.csv_cases("counters_ncu_csv"), "rocprof_csv": R.csv_cases("rocprof_csv"),
                  "ncu_rep": R.ncu_rep_cases(), "artifact": R.artifact_cases()}
    s0 = args.seed if args.seed is not None else random.SystemRandom().randrange(2 ** 32)
    total_w = sum(WEIGHTS.values())
    counts = collections.Counter()
    found: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    examples: list[str] = []
    peaks: list[tuple[float, str]] = []   # (MB the peak RSS grew by, case): what drove the peak
    t_all = time.time()
    print(f"reliability campaign: {args.cases} cases, seed {s0}, case limit {args.limit_s:.0f} s, "
          f"address space cap {args.max_gib:g} GiB", flush=True)
    per_kind = {k: max(1, args.cases * w // total_w) for k, w in WEIGHTS.items()}
    per_kind["topn"] += max(0, args.cases - sum(per_kind.values()))  # at least --cases in all
    for i, (kind, w) in enumerate(WEIGHTS.items()):
        n = per_kind[kind]
        t0 = time.time()

        @seed(s0 + i)
        @settings(max_examples=n, deadline=None, database=None, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck))
        @given(case=strategies[kind])
        def one(case):
            counts[kind] += 1
            rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            vs = R.run_case(case, limit_s=args.limit_s)
            grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0
            if grew > 0:
                peaks.append((grew / 1024, f"{kind} [{case.label}]"[:120]))
            for v in vs:
                cat = next((c for c in CATEGORIES if v.startswith(c)), "crash")
                found[kind][cat] += 1
                if len(examples) < 50:
                    examples.append(v)

        one()
        f = found[kind]
        print(f"{kind:17s} {counts[kind]:6d} cases  " + "  ".join(f"{c} {f[c]}" for c in CATEGORIES)
              + f"  {time.time() - t0:7.1f} s", flush=True)
    # then the deterministic sweep: every field x every wrong type / boundary value
    t0 = time.time()
    for case in R.sweep_cases():
        counts["sweep"] += 1
        for v in R.run_case(case, limit_s=args.limit_s):
            cat = next((c for c in CATEGORIES if v.startswith(c)), "crash")
            found["sweep"][cat] += 1
            if len(examples) < 50:
                examples.append(v)
    f = found["sweep"]
    print(f"{'sweep (all fields)':17s} {counts['sweep']:6d} cases  " + "  ".join(f"{c} {f[c]}" for c in CATEGORIES)
          + f"  {time.time() - t0:7.1f} s", flush=True)
    # and the input policy, field by field (tests/input_policy.py): every numeric field of every
    # input kind x ten bad values, each against the outcome docs/input_policy.md gives
    import input_policy as P

    t0 = time.time()
    pcases = P.all_cases()
    counts["policy"] = len(pcases)
    for v in P.run_all(pcases):
        cat = next((c for c in CATEGORIES if v.startswith(c)), "policy")
        found["policy"][cat] += 1
        if len(examples) < 50:
            examples.append(v)
    f = found["policy"]
    print(f"{'policy (fields)':17s} {counts['policy']:6d} cases  " + "  ".join(f"{c} {f[c]}" for c in CATEGORIES)
          + f"  policy {f['policy']}  {time.time() - t0:7.1f} s", flush=True)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    tot = collections.Counter()
    for f in found.values():
        tot.update(f)
    n_all = sum(counts.values())
    print(f"{'TOTAL':17s} {n_all:6d} cases  " + "  ".join(f"{c} {tot[c]}" for c in CATEGORIES)
          + f"  {time.time() - t_all:7.1f} s  peak RSS {rss_mb:.0f} MB")
    top = sorted(peaks, reverse=True)[:3]
    if top:
        print("largest peak-RSS steps: " + "; ".join(f"+{mb:.0f} MB {label}" for mb, label in top))
    for v in examples:
        print("  " + v)
    return 1 if sum(tot.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
