#!/usr/bin/env python3
"""The key figures of every artifact the fixtures produce, to pin behaviour across refactors.

    python tools/artifact_snapshot.py                 # print the snapshot (JSON) on stdout
    python tools/artifact_snapshot.py -o FILE         # write it to FILE
    python tools/artifact_snapshot.py --check FILE    # exit 1 and name what differs from FILE

What runs (in-process, through the click CLI, into a temporary folder, so fixtures/ is untouched):
- `roofline analyze` of every Top-N file under fixtures/ (`*topN*.json`) and of the bundled
  example (roofline/data/example/), with the env report and model config found beside the Top-N
  or in a parent folder (the same search `analyze` does, bounded to the fixture tree);
- `roofline topn` then `roofline analyze` of every trace under fixtures/traces*/ (`*.json.gz`),
  with the env report and config named in that folder's README (env_<kind>.json / config.json),
  else the starter env report `topn` writes, given the workload of the README.

Kept per run: the exit codes and, per artifact written, per entry the figures a reader acts on
(FIGURES: regime, bytes_est, roofline_pct, headroom_class, attainable_speedup,
expected_e2e_gain_pct, confidence). fixtures/artifact_snapshot.json holds the last one pinned;
tests/test_artifact_snapshot.py recomputes it and, on a change, prints which figure of which entry
moved, from what to what, so a re-pin says what it accepts.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures"
EXAMPLE = ROOT / "roofline" / "data" / "example"

# env report per real trace (fixtures/traces_real/README.md: env_*.json describe the workloads)
TRACE_ENVS = {"prefill_llama": "env_prefill.json", "decode_b64_cat": "env_decode.json",
              "graph_decode_mixed": "env_graph_decode.json", "graph_decode_replay_only": "env_graph_decode.json"}
# the workload of the small traces (fixtures/traces/README.md: 128-token prompts, 4 sequences in
# prefill, batch 8 over 8 decode steps), given to the starter env report `topn` writes
TRACE_WORKLOAD = {"prefill": ["--isl", "128", "--osl", "1", "--conc", "4"],
                  "decode": ["--isl", "128", "--osl", "8", "--conc", "8"],
                  "mixed": ["--isl", "128", "--osl", "4", "--conc", "4"]}

FIGURES = ("regime", "bytes_est", "roofline_pct", "headroom_class", "attainable_speedup", "expected_e2e_gain_pct",
           "confidence")
REL_TOL = 1e-9     # a float figure moved when it differs by more than this (relative)


def figures_dir(d: Path) -> dict[str, dict]:
    """Per artifact written under `d` (every profile_roofline.json), per entry (by kernel name; a
    repeated name gets #2, #3), the key FIGURES, plus the artifact's stage and degraded count."""
    out = {}
    for p in sorted(d.rglob("profile_roofline.json")):
        art = json.loads(p.read_text())
        ents: dict[str, dict] = {}
        for e in art.get("entries", []):
            key, n = e.get("name", "?"), 2
            while key in ents:
                key, n = f"{e.get('name', '?')}#{n}", n + 1
            ents[key] = {f: e.get(f) for f in FIGURES}
        out[p.relative_to(d).as_posix()] = {"stage": art.get("stage"), "degraded": len(art.get("degraded", [])),
                                           "entries": ents}
    return out


def _find_up(start: Path, name: str, stop: Path) -> Path | None:
    d = start
    while True:
        if (d / name).is_file():
            return d / name
        if d == stop or d.parent == d:
            return None
        d = d.parent


def _invoke(args: list[str]) -> int:
    from click.testing import CliRunner

    from roofline.cli import main
    r = CliRunner().invoke(main, args)
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise r.exception
    return r.exit_code


def run_all() -> dict:
    runs: dict[str, dict] = {}
    topns = [(p, FIX) for p in sorted(FIX.rglob("*topN*.json"))]
    topns.append((EXAMPLE / "profile" / "round_1" / "profile_topN.json", EXAMPLE))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for i, (topn, stop) in enumerate(topns):
            key = "analyze:" + topn.relative_to(ROOT).as_posix()
            out = tmp / f"a{i}"
            out.mkdir()
            args = ["analyze", str(topn), "--out", str(out), "--format", "json"]
            for opt, name in (("--env", "env_report.json"), ("--config", "config.json")):
                f = _find_up(topn.parent, name, stop)
                if f is not None:
                    args += [opt, str(f)]
            rc = _invoke(args)
            runs[key] = {"rc": rc, "artifacts": figures_dir(out)}
        for i, trace in enumerate(sorted(FIX.glob("traces*/*.json.gz"))):
            key = "topn+analyze:" + trace.relative_to(ROOT).as_posix()
            d = tmp / f"t{i}" / "profile" / "round_1"
            d.mkdir(parents=True)
            topn = d / "profile_topN.json"
            stem = trace.name[: -len(".json.gz")]
            rc1 = _invoke(["topn", str(trace), "-o", str(topn), "--top", "100", "-q"] + TRACE_WORKLOAD.get(stem, []))
            args = ["analyze", str(topn), "--format", "json"]
            env = trace.parent / TRACE_ENVS.get(stem, "-")
            if env.is_file():
                args += ["--env", str(env)]
            if (trace.parent / "config.json").is_file():
                args += ["--config", str(trace.parent / "config.json")]
            rc2 = _invoke(args) if rc1 == 0 else None
            runs[key] = {"rc": [rc1, rc2], "artifacts": figures_dir(d.parent.parent)}
    return {"about": "tools/artifact_snapshot.py: the key figures of each artifact per entry per fixture run",
            "runs": runs}


def _moved(x, y) -> bool:
    if isinstance(x, (int, float)) and isinstance(y, (int, float)) and not isinstance(x, bool):
        return abs(x - y) > REL_TOL * max(abs(x), abs(y))
    return x != y


def diff(old: dict, new: dict) -> list[str]:
    """One line per change: which run, artifact, entry and figure moved, from what to what."""
    lines = []
    for k in sorted(set(old["runs"]) | set(new["runs"])):
        a, b = old["runs"].get(k), new["runs"].get(k)
        if a is None or b is None:
            lines.append(f"{k}: {'new run' if a is None else 'run missing'}")
            continue
        if a["rc"] != b["rc"]:
            lines.append(f"{k}: exit codes {a['rc']} -> {b['rc']}")
        for f in sorted(set(a["artifacts"]) | set(b["artifacts"])):
            fa, fb = a["artifacts"].get(f), b["artifacts"].get(f)
            if fa is None or fb is None:
                lines.append(f"{k}: {f} {'new' if fa is None else 'no longer written'}")
                continue
            for field in ("stage", "degraded"):
                if fa[field] != fb[field]:
                    lines.append(f"{k}: {f}: {field} {fa[field]} -> {fb[field]}")
            for name in sorted(set(fa["entries"]) | set(fb["entries"])):
                ea, eb = fa["entries"].get(name), fb["entries"].get(name)
                if ea is None or eb is None:
                    lines.append(f"{k}: {f}: entry {name[:60]!r} {'new' if ea is None else 'gone'}")
                    continue
                lines += [f"{k}: {f}: {name[:60]!r}: {fig} {ea.get(fig)!r} -> {eb.get(fig)!r}"
                          for fig in FIGURES if _moved(ea.get(fig), eb.get(fig))]
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--out", type=Path)
    ap.add_argument("--check", type=Path)
    a = ap.parse_args(argv)
    snap = run_all()
    if a.check:
        lines = diff(json.loads(a.check.read_text()), snap)
        for line in lines:
            print(line, file=sys.stderr)
        return 1 if lines else 0
    text = json.dumps(snap, indent=1, sort_keys=True) + "\n"
    if a.out:
        a.out.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
