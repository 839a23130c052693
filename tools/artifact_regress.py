#!/usr/bin/env python3
"""Every artifact the project can make from its own inputs, written whole, to prove a refactor changed
no byte: the bundled example, every Top-N under fixtures/, every trace under
fixtures/traces*/ (topn -> analyze), and every corpus trace (fixtures/corpus/, topn with its workload and
config -> analyze, at the default head scope and at the wide scope of benchmarks/corpus_accuracy.py).

    python tools/artifact_regress.py write DIR          # all artifacts (json + md + topN) into DIR
    python tools/artifact_regress.py diff DIR_A DIR_B   # exit 1 and list every file that differs
    python tools/artifact_regress.py check DIR          # write into a temp dir and diff against DIR

Each run goes into its own folder named after its input; the temporary folder's path is replaced by
`<TMP>` in every file written and the time of writing by `<TIME>`, so two runs in different places compare byte for byte.
"""
from __future__ import annotations

import difflib
import json
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import artifact_snapshot as snap  # noqa: E402  (the fixture runs and their env/config/workload)

FIX = ROOT / "fixtures"
CORPUS = FIX / "corpus"
# the one field that is the clock, not the analysis (the artifact's and the Top-N's time of writing)
_STAMP = re.compile(r'("(?:generated_at|created_at)": )"[^"]*"')
KEEP = ("profile_roofline.json", "profile_roofline.md", "profile_topN.json")


def _slug(p: Path) -> str:
    return p.relative_to(ROOT).as_posix().replace("/", "__")


def _collect(src: Path, dst: Path, tmp: Path, rc) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    (dst / "rc.txt").write_text(f"{rc}\n")
    for p in sorted(src.rglob("*")):
        if p.name in KEEP:
            rel = p.relative_to(src).as_posix().replace("/", "__")
            text = p.read_text().replace(str(tmp), "<TMP>").replace(str(ROOT), "<ROOT>")
            text = _STAMP.sub(r'\1"<TIME>"', text)
            (dst / rel).write_text(text)


def write(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        topns = [(p, FIX) for p in sorted(FIX.rglob("*topN*.json"))]
        topns.append((snap.EXAMPLE / "profile" / "round_1" / "profile_topN.json", snap.EXAMPLE))
        for i, (topn, stop) in enumerate(topns):
            o = tmp / f"a{i}"
            o.mkdir()
            args = ["analyze", str(topn), "--out", str(o)]
            for opt, name in (("--env", "env_report.json"), ("--config", "config.json")):
                f = snap._find_up(topn.parent, name, stop)
                if f is not None:
                    args += [opt, str(f)]
            _collect(o, out / ("analyze__" + _slug(topn)), tmp, snap._invoke(args))
        for i, trace in enumerate(sorted(FIX.glob("traces*/*.json.gz"))):
            d = tmp / f"t{i}" / "profile" / "round_1"
            d.mkdir(parents=True)
            topn = d / "profile_topN.json"
            stem = trace.name[: -len(".json.gz")]
            rc1 = snap._invoke(["topn", str(trace), "-o", str(topn), "--top", "100", "-q"]
                               + snap.TRACE_WORKLOAD.get(stem, []))
            args = ["analyze", str(topn)]
            env = trace.parent / snap.TRACE_ENVS.get(stem, "-")
            if env.is_file():
                args += ["--env", str(env)]
            if (trace.parent / "config.json").is_file():
                args += ["--config", str(trace.parent / "config.json")]
            rc2 = snap._invoke(args) if rc1 == 0 else None
            _collect(d, out / ("trace__" + _slug(trace)), tmp, [rc1, rc2])
        meta = json.loads((CORPUS / "corpus_meta.json").read_text())["cases"]
        for case in sorted(meta):
            if not (CORPUS / f"{case}.json.gz").is_file():
                continue
            m = meta[case]
            d, p = m["decode"], m["prefill"]
            isl, osl = p["tokens_per_seq"], max(d["steps"], 1)
            conc = d["batch"] if d["steps"] else p["batch"]
            rd = tmp / "c" / case / "profile" / "round_1"
            rd.mkdir(parents=True)
            topn = rd / "profile_topN.json"
            rc1 = snap._invoke(["topn", str(CORPUS / f"{case}.json.gz"), "-o", str(topn), "--force", "-q",
                                "--isl", str(isl), "--osl", str(osl), "--conc", str(conc),
                                "--config", str(CORPUS / "configs" / f"{case}.json")])
            rc2 = snap._invoke(["analyze", str(topn)]) if rc1 == 0 else None
            rcw = snap._invoke(["analyze", str(topn), "--head-threshold", "0", "--head-cap", "400",
                                "--out", str(rd / "wide")]) if rc1 == 0 else None
            _collect(rd, out / ("corpus__" + case), tmp, [rc1, rc2, rcw])
    print(f"wrote {sum(1 for _ in out.rglob('*') if _.is_file())} files under {out}", file=sys.stderr)


def diff(a: Path, b: Path) -> int:
    fa = {p.relative_to(a).as_posix() for p in a.rglob("*") if p.is_file()}
    fb = {p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file()}
    bad = 0
    for rel in sorted(fa | fb):
        if rel not in fa or rel not in fb:
            print(f"{rel}: only in {'B' if rel not in fa else 'A'}")
            bad += 1
            continue
        x, y = (a / rel).read_bytes(), (b / rel).read_bytes()
        if x != y:
            bad += 1
            d = list(difflib.unified_diff(x.decode().splitlines(), y.decode().splitlines(), lineterm="", n=0))
            print(f"{rel}: differs ({len(d)} diff lines)")
            for line in d[2:8]:
                print("   ", line[:160])
    print(f"{len(fa | fb)} files compared, {bad} differ")
    return 1 if bad else 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["write"] and len(argv) == 2:
        write(Path(argv[1]))
        return 0
    if argv[:1] == ["diff"] and len(argv) == 3:
        return diff(Path(argv[1]), Path(argv[2]))
    if argv[:1] == ["check"] and len(argv) == 2:
        with tempfile.TemporaryDirectory() as t:
            write(Path(t) / "now")
            return diff(Path(argv[1]), Path(t) / "now")
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
