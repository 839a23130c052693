#!/usr/bin/env python3
"""The real-trace mutation campaign: every real trace of the fixtures
(fixtures/corpus/*.json.gz, fixtures/traces/, fixtures/traces_real/) x every mutation class of
tests/trace_mutations.py (truncated mid-event, kernel events duplicated, events out of order, links
removed, a second device or stream, GPU clock offsets, an older profiler's field names), each run
through `roofline topn` + `roofline analyze` (the CLI, in this process) beside the undamaged trace and
classified: error (exit 2, one line naming the file), identical, degraded (every differing kernel
says why), silent (a number differs and nothing says why), bad error. The quick CI part is
tests/test_reliability_real_traces.py.

    PYTHONPATH=. python3 benchmarks/real_trace_campaign.py [--only SUBSTRING] [--md FILE]

Prints one line per mutation (cases and outcomes), the totals, and every silent difference and bad
error found. Exit 1 when any case is silent or a bad error.
"""
from __future__ import annotations

import argparse
import collections
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

OUTCOMES = ("error", "degraded", "identical", "silent", "bad error")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="only traces whose file name contains this")
    ap.add_argument("--md", default=None, help="write the figures as a markdown table to this file")
    args = ap.parse_args()
    import trace_mutations as M

    t_all = time.time()
    trs = [t for t in M.traces() if args.only in t.name]
    by_mut: dict = collections.defaultdict(collections.Counter)
    by_cls: dict = collections.defaultdict(collections.Counter)
    problems, examples = [], {}
    for tr in trs:
        t0 = time.time()
        M.baseline(tr)
        c = collections.Counter()
        for _, cls, label in M.all_cases([tr]):
            r = M.run_case(tr, cls, label)
            o = r["outcome"]
            c[o] += 1
            by_mut[(cls, label)][o] += 1
            by_cls[cls][o] += 1
            examples.setdefault((cls, label, o), f"{tr.name}: {str(r['detail'])[:300]}")
            if o in ("silent", "bad error"):
                problems.append(f"{o}: {tr.parent.name}/{tr.name} [{cls}: {label}]: {r['detail']}"[:900])
        print(f"{tr.parent.name + '/' + tr.name:48s} " + "  ".join(f"{o} {c[o]}" for o in OUTCOMES)
              + f"  {time.time() - t0:5.1f} s", flush=True)
    tot = collections.Counter()
    for v in by_cls.values():
        tot.update(v)
    n = sum(tot.values())
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\n{'mutation':62s} " + " ".join(f"{o:>9s}" for o in OUTCOMES))
    for (cls, label), v in by_mut.items():
        print(f"{(cls + ': ' + label)[:62]:62s} " + " ".join(f"{v[o]:9d}" for o in OUTCOMES))
    print(f"TOTAL: {n} cases over {len(trs)} traces: " + ", ".join(f"{o} {tot[o]}" for o in OUTCOMES)
          + f"; {time.time() - t_all:.0f} s, peak RSS {rss:.0f} MB")
    for p in problems[:60]:
        print("  " + p)
    if args.md:
        rows = ["| class | mutation | cases | " + " | ".join(OUTCOMES) + " | an example |",
                "|---|---|---|" + "---|" * len(OUTCOMES) + "---|"]
        for (cls, label), v in by_mut.items():
            ex = next((examples[(cls, label, o)] for o in ("silent", "bad error", "degraded", "error")
                       if (cls, label, o) in examples), "")
            rows.append(f"| {cls} | {label} | {sum(v.values())} | " + " | ".join(str(v[o]) for o in OUTCOMES)
                        + f" | {ex[:160].replace('|', '/')} |")
        rows.append(f"| **all** | | **{n}** | " + " | ".join(f"**{tot[o]}**" for o in OUTCOMES) + " | |")
        Path(args.md).write_text("\n".join(rows) + "\n")
    return 1 if tot["silent"] or tot["bad error"] else 0


if __name__ == "__main__":
    sys.exit(main())
