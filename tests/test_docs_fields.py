"""Every field the tools write is documented, and the figures the docs quote are today's.

The outputs are real: `roofline topn` of every bundled and real H200 trace and of an Nsight Compute
report (the Top-N and its starter env report), `roofline analyze` of each (stage B), of the worked
example, with real counters (stage C), after `roofline feedback`, and the recorded stage-C re-run
artifacts in fixtures/. Each key they hold, at any depth, must appear (in backticks) on its page:
docs/topn.md, docs/env_report.md, docs/artifact.md. Keys that are data, not field names (dtypes
keyed by name, a dict of regimes or of runtime event names), are listed in MAPS with the page
that says what their keys are.
"""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from roofline.cli import main

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
FIX = ROOT / "fixtures"
TRACES = sorted((FIX / "traces").glob("*.json.gz")) + sorted((FIX / "traces_real").glob("*.json.gz"))

# containers whose keys are data (a dtype, a regime, an event name, a metric), with the page saying so
MAPS = {
    "topn": {"source.cuda_graph.launch_events", "wall_time", "entries[].aten_ops", "device_properties[]",
             "entries[].launch_neighbours.before", "entries[].launch_neighbours.after", "entries[].counters.extra",
             "entries[].dataflow.producers", "entries[].dataflow.consumers", "entries[].dataflow.examples",
             "trace_evidence.kv_caches[].tokens_written"},
    "env": {"generated_by.sources"},
    "artifact": {"peaks.flops", "peaks.flops_kind", "peaks.sources",
                 "entries[].counters.tensor_flops_by_dtype",
                 "entries[].counters.extra", "wall_time", "entries[].measured.counters",
                 "entries[].shape", "entries[].shapes_used[].shape", "entries[].per_shape[].shape",
                 "entries[].regime_verdicts[].shape", "entries[].aten_ops",
                 "workload_projection.step_gpu_ms", "workload_projection.steps_per_batch"},
}
PAGES = {"topn": "topn.md", "env": "env_report.md", "artifact": "artifact.md"}


def _run(args):
    r = CliRunner().invoke(main, [str(a) for a in args])
    assert r.exit_code == 0, (args, r.output)
    return r


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """{kind: [documents]} written by the tools on the fixtures."""
    d = tmp_path_factory.mktemp("docs_fields")
    out = {"topn": [], "env": [], "artifact": []}
    for i, tr in enumerate(TRACES + [FIX / "ncu_topn" / "small.ncu-rep.gz"]):
        rd = d / f"run{i}" / "profile" / "round_1"
        extra = ["--gfx", "sm_90", "--model-dtype", "bf16"] if "ncu" in tr.name else []
        _run(["topn", tr, "-o", rd / "profile_topN.json", "--isl", 1024, "--osl", 16, "--conc", 32, "-q", *extra])
        _run(["analyze", rd / "profile_topN.json"])
        out["topn"].append(json.loads((rd / "profile_topN.json").read_text()))
        out["env"].append(json.loads((rd / "env_report.json").read_text()))
        out["artifact"].append(json.loads((rd / "profile_roofline.json").read_text()))
    # stage C with real counters, then a feedback record on one entry
    c = d / "stage_c" / "profile" / "round_1"
    c.mkdir(parents=True)
    shutil.copy(FIX / "hook" / "round_b_topN.json", c / "profile_topN.json")
    shutil.copy(FIX / "hook" / "env_report.json", c.parent.parent / "env_report.json")
    _run(["analyze", c / "profile_topN.json", "--counters", FIX / "ncu" / "known_raw.csv"])
    art = json.loads((c / "profile_roofline.json").read_text())
    _run(["feedback", c, "--kernel", art["entries"][0]["name"], "--isolated-speedup", 1.2])
    out["artifact"].append(json.loads((c / "profile_roofline.json").read_text()))
    ex = d / "example"
    shutil.copytree(ROOT / "roofline" / "data" / "example", ex)
    _run(["analyze", ex / "profile" / "round_1" / "profile_topN.json"])
    out["artifact"].append(json.loads((ex / "profile" / "round_1" / "profile_roofline.json").read_text()))
    # the recorded stage-C re-runs (written by `roofline rerun` on the H200)
    out["artifact"] += [json.loads(p.read_text()) for p in sorted((FIX / "rerun_real").glob("*/profile/round_1/profile_roofline.json"))]
    return out


def key_paths(doc, prefix: str = "", maps: frozenset = frozenset()) -> set[tuple[str, str]]:
    """(path, key) of every key at any depth; list items as `[]`; a MAPS container's own keys are
    data and not collected (what is inside them still is)."""
    out: set[tuple[str, str]] = set()
    if isinstance(doc, dict):
        for k, v in doc.items():
            p = f"{prefix}.{k}" if prefix else k
            if prefix not in maps:
                out.add((p, k))
            out |= key_paths(v, p, maps)
    elif isinstance(doc, list):
        for v in doc:
            out |= key_paths(v, f"{prefix}[]", maps)
    return out


def test_the_walker_sees_nested_keys_and_skips_data_keys():
    doc = {"a": {"b": [{"c": 1}]}, "m": {"bf16": {"d": 2}}}
    got = {k for _, k in key_paths(doc, maps=frozenset({"m"}))}
    assert got == {"a", "b", "c", "m", "d"}


@pytest.mark.parametrize("kind", ["topn", "env", "artifact"])
def test_every_field_the_tools_write_is_documented(outputs, kind):
    page = (DOCS / PAGES[kind]).read_text(encoding="utf-8")
    documented = set(re.findall(r"`([A-Za-z_][\w]*)", page)) | set(re.findall(r"[.`]([a-z_]\w*)`", page))
    seen = set()
    for doc in outputs[kind]:
        seen |= key_paths(doc, maps=frozenset(MAPS[kind]))
    assert len(seen) > {"topn": 40, "env": 10, "artifact": 80}[kind]
    missing = sorted({p for p, k in seen if k not in documented})
    assert not missing, f"docs/{PAGES[kind]} does not name these fields the tools write: {missing}"


def test_the_maps_are_real_and_documented(outputs):
    """Each MAPS container exists in some output (no stale exemption) and its page names it."""
    for kind, paths in MAPS.items():
        paths_ = {p for doc in outputs[kind] for p, _ in key_paths(doc)}
        seen = {q[:i] for q in paths_ for i in range(1, len(q) + 1)}   # every prefix: "a[]" of "a[].b"
        page = (DOCS / PAGES[kind]).read_text(encoding="utf-8")
        for p in paths:
            assert p in seen, (kind, p)
            assert f"`{p.split('.')[-1].replace('[]', '')}`" in page, (kind, p)


def _assigned(path: Path, var: str) -> set[str]:
    """Keys the code assigns as `var["key"] =` (or `var.setdefault("key"`) in one module."""
    src = path.read_text(encoding="utf-8")
    return set(re.findall(rf'\b{var}\["([a-z_]+)"\]\s*=', src)) | set(re.findall(rf'\b{var}\.setdefault\("([a-z_]+)"', src))


def test_fields_written_only_in_rare_cases_are_documented_too():
    """The outputs above hold the fields the fixtures reach; a field the builder writes only in a case
    no fixture has (shape_dtypes: one kernel name with shapes of different dtypes; regime_assumed;
    shape_unknown) is found in the code that writes it."""
    page = (DOCS / "topn.md").read_text(encoding="utf-8")
    keys = _assigned(ROOT / "roofline" / "ingest" / "topn.py", "e") | _assigned(ROOT / "roofline" / "commands" / "topn.py", "doc")
    keys |= _assigned(ROOT / "roofline" / "commands" / "topn_read.py", "doc")   # the one-trace steps
    assert {"shape_dtypes", "shape_unknown", "regime_assumed", "folded_kernels", "wall_time"} <= keys
    assert not sorted(k for k in keys if f"`{k}`" not in page)
    art_page = (DOCS / "artifact.md").read_text(encoding="utf-8")
    # the per-entry steps' values (roofline/core/entry.py): each field entry_fields writes is an entry field
    from dataclasses import fields

    from roofline.core import entry as values

    akeys = {f.name for c in (values.Placement, values.Figures, values.Target, values.Flags, values.Verdict,
                              values.Measured, values.Necessity) for f in fields(c)} - {"rates", "verdict"}
    akeys |= _assigned(ROOT / "roofline" / "core" / "procedure.py", "out") | _assigned(ROOT / "roofline" / "core" / "analysis.py", "art")
    akeys |= _assigned(ROOT / "roofline" / "core" / "wall.py", "e") | _assigned(ROOT / "roofline" / "stagec" / "feedback.py", "e")
    akeys |= _assigned(ROOT / "roofline" / "core" / "writeback.py", "e")
    assert {"per_shape", "attainable_speedup_uncapped", "wall_time", "measured_attainable_speedup"} <= akeys
    assert not sorted(k for k in akeys if f"`{k}`" not in art_page)
