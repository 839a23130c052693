#!/usr/bin/env python3
"""A digest of every artifact the fixtures produce, to pin behaviour across refactors.

    python tools/artifact_snapshot.py                 # print the digest (JSON) on stdout
    python tools/artifact_snapshot.py -o FILE         # write it to FILE
    python tools/artifact_snapshot.py --check FILE    # exit 1 and name what differs from FILE

What runs (in-process, through the click CLI, into a temporary folder, so fixtures/ is untouched):
- `roofline analyze` of every Top-N file under fixtures/ (`*topN*.json`) and of the bundled
  example (roofline/data/example/), with the env report and model config found beside the Top-N
  or in a parent folder (the same search `analyze` does, bounded to the fixture tree);
- `roofline topn` then `roofline analyze` of every trace under fixtures/traces*/ (`*.json.gz`),
  with the env report and config named in that folder's README (env_<kind>.json / config.json),
  else the starter env report `topn` writes, given the workload of the README.

Normalized before hashing: `generated_at` and other timestamps, and absolute paths (replaced by
their last component, so a moved peak table or a temporary folder does not count as a change).
The digest keeps, per run, the sha256 of every normalized file written and the exit codes;
fixtures/artifact_snapshot.json holds the last one pinned (re-pinned only for a meant change: the
wall-time fields and the decode-attention prior note of 2026-12-01, every other field unchanged), and
tests/test_artifact_snapshot.py recomputes it.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
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

TS_RX = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[+-]\d{2}:\d{2}|Z)?")
# an absolute path: starts a string or follows whitespace, a quote, a backtick, a paren or '='
PATH_RX = re.compile(r"(?:(?<=^)|(?<=[\s\"'`(=\[]))(/[^\s\"'`()\[\],;]+)", re.M)
TS_KEYS = {"generated_at", "timestamp", "created_at", "written_at"}


def _base(m: re.Match) -> str:
    return "<abs>/" + m.group(1).rstrip("/").rsplit("/", 1)[-1]


def norm_text(s: str) -> str:
    return PATH_RX.sub(_base, TS_RX.sub("<ts>", s))


def norm_json(x):
    if isinstance(x, dict):
        return {k: ("<ts>" if k in TS_KEYS else norm_json(v)) for k, v in x.items()}
    if isinstance(x, list):
        return [norm_json(v) for v in x]
    if isinstance(x, str):
        return norm_text(x)
    return x


def digest_dir(d: Path, skip: set[str]) -> dict[str, str]:
    out = {}
    for p in sorted(d.rglob("*")):
        if not p.is_file() or p.name in skip:
            continue
        rel = p.relative_to(d).as_posix()
        text = p.read_text()
        if p.suffix == ".json":
            body = json.dumps(norm_json(json.loads(text)), sort_keys=True, indent=1)
        elif p.suffix == ".jsonl":
            body = "\n".join(json.dumps(norm_json(json.loads(l)), sort_keys=True) for l in text.splitlines() if l.strip())
        else:
            body = norm_text(text)
        out[rel] = hashlib.sha256(body.encode()).hexdigest()
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
            runs[key] = {"rc": rc, "files": digest_dir(out, skip=set())}
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
            runs[key] = {"rc": [rc1, rc2], "files": digest_dir(d.parent.parent, skip=set())}
    return {"about": "tools/artifact_snapshot.py: sha256 of each normalized artifact per fixture run",
            "runs": runs}


def diff(old: dict, new: dict) -> list[str]:
    lines = []
    for k in sorted(set(old["runs"]) | set(new["runs"])):
        a, b = old["runs"].get(k), new["runs"].get(k)
        if a != b:
            if a is None or b is None:
                lines.append(f"{k}: {'new run' if a is None else 'run missing'}")
                continue
            if a["rc"] != b["rc"]:
                lines.append(f"{k}: exit codes {a['rc']} -> {b['rc']}")
            for f in sorted(set(a["files"]) | set(b["files"])):
                if a["files"].get(f) != b["files"].get(f):
                    lines.append(f"{k}: {f} differs")
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
