"""Stage C's re-run of an artifact's GEMM heads, end to end: the pipeline hook (`roofline.hook.rerun`)
and the click command (`roofline rerun`, roofline/commands/rerun.py) both call `rerun_artifact`.
Stage C is a merge of measured counters (docs/method.md sections 6 and 9):

1. the heads are measured (roofline/stagec/rerun.py: plan, time, with --counters profile), one
   counter record each, its timing in it;
2. the records are written as a counters file beside the artifact (rerun_counters.json, the form
   `analyze --counters` reads: roofline/counters/records.py); a head measured by an earlier re-run
   and not now keeps its record there;
3. with a counter reading among them, the artifact is `analyze --counters rerun_counters.json`
   of its Top-N (the one analysis, whose stage-C merge puts the measured bytes on the memory axis
   and writes each re-run's timing onto its entry); timings alone are written onto the artifact
   as it stands (the same write-back), and so are they when its Top-N is gone (L4);
4. the artifact pair is rewritten and one playbook record per measured head appended.

Also the public import path of the dispatch table builder (`python -m roofline.rerun
--build-dispatch ...`)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from roofline.io.errors import RerunError

from roofline.ladder.dispatch import (  # noqa: F401
    DECODE_SKINNY_MAX_M, NOISE_BAND_ISOLATED, PREFILL_ALIGN, build_dispatch_table, choose_level,
    default_dispatch_table, dispatch_order, merge_benches, shape_class)
from roofline.core.opclasses import Problem, gemm_problems  # noqa: F401
from roofline.stagec.measurement import counters_record  # noqa: F401
from roofline.core.writeback import write_back  # noqa: F401

COUNTERS_FILE = "rerun_counters.json"


def rerun_artifact(artifact: Path, entries=(), counters: bool = False, dispatch: Path | None = None,
                   playbook_dir: Path | None = None, progress=None, level: int | None = None,
                   l2: str = "auto") -> dict:
    """The whole re-run. Returns {"rerun": [names], "skipped": {name: why}, "playbook": path|None}.
    Raises RerunError (a RooflineError and a RuntimeError) with one line when the machine cannot do
    it; a failed counter run is L4, recorded in the entry."""
    from roofline.stagec import rerun as measure

    artifact = Path(artifact)
    art = measure.read_artifact(artifact)
    records, skipped = measure.measure_heads(art, entries, counters, dispatch, progress, level, l2)
    pb = None
    if records:
        path = write_counters(artifact.parent / COUNTERS_FILE, records)
        art = merged(art, artifact, path, records)
        pb = _write(art, artifact, [r.name for r in records], playbook_dir)
    return {"rerun": [r.name for r in records], "skipped": skipped, "playbook": str(pb) if pb else None}


def write_counters(path: Path, records: list) -> Path:
    """This re-run's records into the counters file `path`, beside the records of heads an earlier
    re-run measured and this one did not (a head's record is its latest re-run's)."""
    import roofline.counters as _counters
    from roofline.counters.records import records_text
    from roofline.report.artifact import atomic_write

    now = {r.name for r in records}
    earlier = []
    if path.is_file():
        try:
            earlier = [r for r in _counters.load(path) if r.name not in now]
        except _counters.CounterReadError:
            earlier = []   # not a re-run's counters file: replaced by this one
    atomic_write(path, records_text(earlier + list(records)))
    return path


def merged(art: dict, artifact: Path, path: Path, records: list) -> dict:
    """The stage-C artifact: `analyze --counters path` of the artifact's Top-N when a counter was
    read, else (timings only, or the Top-N gone: L4) the timings written onto `art` as it stands."""
    from roofline.core.writeback import merge_reruns
    from roofline.counters import measurement

    note = None
    if any(not r.read_nothing for r in records):
        try:
            return analyze_with(art, artifact, path)
        except RerunError as exc:   # the Top-N behind the artifact is gone: L4
            note = f"L4: counters recorded in measured.counters but not merged ({exc})"
    merge_reruns(art, measurement.isolated_timings({r.name: measurement.of(r.name, r) for r in records}), note)
    return art


def analyze_with(art: dict, artifact: Path, counters_path: Path) -> dict:
    """`analyze --counters counters_path` of the Top-N behind the artifact, with its own inputs and
    head settings. Raises RerunError when the Top-N cannot be found."""
    import roofline.api as api
    from roofline.core.defaults import HEAD_CAP, HEAD_THRESHOLD_PCT

    inp = art.get("inputs") or {}
    here = Path(artifact).parent
    topn = next((Path(p) for p in (inp.get("topn"), here / "profile_topN.json") if p and Path(p).is_file()), None)
    if topn is None:
        raise RerunError(f"the Top-N behind {artifact} was not found (inputs.topn, or "
                         "profile_topN.json beside it)")
    env = inp.get("env") if inp.get("env") and Path(inp["env"]).is_file() else None
    cfg = inp.get("config") if inp.get("config") and Path(inp["config"]).is_file() else None
    return api.analyze(topn, env, cfg, stage="C", counters=counters_path,
                       head_threshold_pct=art.get("head_threshold_pct", HEAD_THRESHOLD_PCT),
                       head_cap=art.get("head_cap", HEAD_CAP))


def _write(art: dict, artifact: Path, names: list[str], playbook_dir):
    """The artifact pair rewritten; one playbook record per re-run head. Returns the playbook's
    path (None when nothing was written there)."""
    from roofline.report import artifact as report
    from roofline.stagec import playbook

    report.write_artifact(art, artifact.parent)
    pb = None
    if playbook_dir is not False:
        d = playbook_dir or playbook.knowledge_dir(artifact.parent)
        for name in names:
            ent = next(x for x in art["entries"] if x["name"] == name)
            pb, _ = playbook.append_playbook(d, playbook.rerun_record(art, ent))
    return pb


if __name__ == "__main__":  # pragma: no cover - the table builder
    from roofline.io.safeio import load_json   # the bench results, bounded as every input
    if len(sys.argv) >= 4 and sys.argv[1] in ("--build-dispatch", "--build-fp8-dispatch"):
        # BENCH ... [--class CLS BENCH ...] OUT: the benches after --class CLS inform that class only
        from roofline.ladder.dispatch import only_class
        benches, cls = [], None
        for a in sys.argv[2:-1]:
            if cls == "":
                cls = a
                continue
            if a == "--class":
                cls = ""
                continue
            b = load_json(a)
            benches.append(only_class(b, cls) if cls else b)
        tbl = build_dispatch_table(merge_benches(benches), dtype="fp8" if "fp8" in sys.argv[1] else "bf16")
        Path(sys.argv[-1]).write_text(json.dumps(tbl, indent=1) + "\n")
    elif len(sys.argv) >= 4 and sys.argv[1] in ("--build-grouped-dispatch", "--build-grouped-fp8-dispatch"):
        from roofline.ladder.dispatch import build_grouped_table
        benches = [load_json(p) for p in sys.argv[2:-1]]
        tbl = build_grouped_table(merge_benches(benches), dtype="fp8" if "fp8" in sys.argv[1] else "bf16")
        Path(sys.argv[-1]).write_text(json.dumps(tbl, indent=1) + "\n")
    else:
        sys.exit("usage: python -m roofline.rerun --build-dispatch|--build-fp8-dispatch BENCH.json [BENCH.json ...] "
                 "[--class CLS BENCH.json ...] OUT.json\n"
                 "       python -m roofline.rerun --build-grouped-dispatch|--build-grouped-fp8-dispatch BENCH_MOE.json [...] OUT.json")
