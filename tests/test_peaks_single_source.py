"""Issue 15, knot 3: one lookup of a peak table, one bf16/fp16 rule, one HBM copy benchmark and one
quantile rule, read from the source with ast over every folder that ships or drives the package
(roofline/, ladder/, peaks/, tools/, benchmarks/), and the three users of the rule agree on its edge.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("roofline", "ladder", "peaks", "tools", "benchmarks")
PACKAGE = ("roofline", "ladder", "peaks")

# the lookup of a table by device name / alias
LOOKUP = "peaks/__init__.py::_by_name"
# the datasheet catalogue (GPUs WITHOUT a peak table, level L1) is another data set with its own
# looser match (vendor prefixes dropped): not a lookup of the peak tables
OTHER_NAME_MATCHES = {"roofline/core/devices.py::catalogue_lookup"}
RULE_GAP = "peaks/__init__.py::bf16_fp16_gap"
RULE = "peaks/__init__.py::bf16_fp16_agree"
COPY_BENCHMARK = "peaks/measure.py::copy_benchmark"
QUANTILES = "peaks/envelope.py::quantiles"


def _sources():
    for folder in FOLDERS:
        for p in sorted((ROOT / folder).rglob("*.py")):
            yield p.relative_to(ROOT).as_posix(), ast.parse(p.read_text(encoding="utf-8"))


def _functions(tree: ast.AST):
    """(name, node) of every function at any depth (a nested one counts as its own)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node


def _own_nodes(fn: ast.AST):
    """The nodes of `fn` itself, not those of the functions defined inside it."""
    todo = list(ast.iter_child_nodes(fn))
    while todo:
        n = todo.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        yield n
        todo.extend(ast.iter_child_nodes(n))


def _mentions(node: ast.AST, name: str) -> bool:
    return any((isinstance(n, ast.Name) and n.id == name) or (isinstance(n, ast.Attribute) and n.attr == name)
               for n in ast.walk(node))


def _is_names_key(n: ast.AST) -> bool:
    return isinstance(n, ast.Constant) and n.value == "names"


def name_matches(tree) -> set[str]:
    """Functions testing membership in a list built from a table's "names" (a lookup by alias)."""
    out = set()
    for name, fn in _functions(tree):
        for n in _own_nodes(fn):
            if isinstance(n, ast.Compare) and any(isinstance(op, ast.In) for op in n.ops) \
                    and any(any(_is_names_key(x) for x in ast.walk(c)) for c in n.comparators):
                out.add(name)
    return out


def _is_gap_formula(n: ast.AST) -> bool:
    """abs(x - y) / max(x, y)"""
    return (isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div)
            and isinstance(n.left, ast.Call) and getattr(n.left.func, "id", None) == "abs"
            and len(n.left.args) == 1 and isinstance(n.left.args[0], ast.BinOp) and isinstance(n.left.args[0].op, ast.Sub)
            and isinstance(n.right, ast.Call) and getattr(n.right.func, "id", None) == "max")


def rule_sites(tree) -> dict[str, set[str]]:
    """where the tolerance is assigned, compared against, and where the gap formula is written."""
    out = {"assign": set(), "compare": set(), "formula": set()}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "BF16_FP16_TOLERANCE"
                                                for t in node.targets):
            out["assign"].add(f"line {node.lineno}")
    for name, fn in _functions(tree):
        for n in _own_nodes(fn):
            if isinstance(n, ast.Compare) and _mentions(n, "BF16_FP16_TOLERANCE"):
                out["compare"].add(name)
            if _is_gap_formula(n):
                out["formula"].add(name)
    return out


def _calls(fn: ast.AST, attr: str) -> bool:
    return any(isinstance(n, ast.Call) and (getattr(n.func, "attr", None) == attr or getattr(n.func, "id", None) == attr)
               for n in ast.walk(fn))


def copy_sites(tree) -> dict[str, bool]:
    """Functions launching a device-to-device copy (torch `.copy_`, CuPy `copyto`, lambdas inside
    included) -> whether they time it through copy_benchmark."""
    return {name: _calls(fn, "copy_benchmark") for name, fn in _functions(tree)
            if any(isinstance(n, ast.Call) and getattr(n.func, "attr", None) in ("copy_", "copyto")
                   for n in _own_nodes(fn))}


QUANTILE_CALLS = ("percentile", "quantile", "quantiles", "nanpercentile", "nanquantile")


def quantile_sites(tree) -> tuple[set[str], set[str]]:
    """(functions named quantiles, functions calling a library's percentile/quantile)."""
    defs, lib = set(), set()
    for name, fn in _functions(tree):
        if name == "quantiles":
            defs.add(name)
        for n in _own_nodes(fn):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in QUANTILE_CALLS \
                    and isinstance(n.func.value, ast.Name) and n.func.value.id in ("np", "numpy", "statistics", "pd"):
                lib.add(name)
    return defs, lib


SOURCES = list(_sources())


def _collect(fn) -> dict:
    return {rel: fn(tree) for rel, tree in SOURCES}


def test_the_scan_sees_the_tree():
    rels = {rel for rel, _ in SOURCES}
    assert {"peaks/__init__.py", "peaks/measure.py", "ladder/bench.py", "roofline/commands/peaks.py"} <= rels


def test_one_lookup_of_a_peak_table_by_name():
    found = {f"{rel}::{name}" for rel, names in _collect(name_matches).items() for name in names}
    assert found - OTHER_NAME_MATCHES == {LOOKUP}, sorted(found)
    defs = {f"{rel}::{name}" for rel, tree in SOURCES for name, _ in _functions(tree)
            if name in ("find_table", "find", "resolve")}
    assert defs == {"peaks/__init__.py::find_table", "peaks/__init__.py::resolve"}, sorted(defs)


def test_one_bf16_fp16_rule():
    sites = _collect(rule_sites)
    assign = {rel for rel, s in sites.items() if s["assign"]}
    assert assign == {"peaks/__init__.py"} and len(sites["peaks/__init__.py"]["assign"]) == 1, assign
    compare = {f"{rel}::{n}" for rel, s in sites.items() for n in s["compare"]}
    assert compare == {RULE}, sorted(compare)
    formula = {f"{rel}::{n}" for rel, s in sites.items() for n in s["formula"]}
    assert formula == {RULE_GAP}, sorted(formula)


def test_one_copy_benchmark_and_one_quantile_rule():
    # the package (tools/device/ holds the profiled workloads, whose KV-cache writes are copies too)
    copies = {f"{rel}::{n}": uses for rel, s in _collect(copy_sites).items() for n, uses in s.items()
              if rel.split("/")[0] in PACKAGE}
    assert set(copies) == {"peaks/measure.py::measure_hbm", "ladder/bench.py::measure_hbm_copy"}, copies
    assert all(copies.values()), f"a device copy timed outside copy_benchmark: {copies}"
    defs = {f"{rel}::copy_benchmark" for rel, tree in SOURCES for name, _ in _functions(tree) if name == "copy_benchmark"}
    assert defs == {COPY_BENCHMARK}
    qdefs, qlib = set(), set()
    for rel, (d, lib) in _collect(quantile_sites).items():
        qdefs |= {f"{rel}::{n}" for n in d}
        qlib |= {f"{rel}::{n}" for n in lib}
    assert not qlib, f"quantiles computed by a library call instead of {QUANTILES}: {sorted(qlib)}"
    # the ladder keeps its (median, p20, p80) spelling, computed by the one rule
    assert qdefs == {QUANTILES, "ladder/bench.py::quantiles"}, sorted(qdefs)
    bench = dict(SOURCES)["ladder/bench.py"]
    ladder_q = next(fn for name, fn in _functions(bench) if name == "quantiles")
    assert _calls(ladder_q, "_quantiles")


def test_the_scans_catch_a_second_copy():
    src = ("def find(tables, key):\n    for p, d in tables:\n        if key in [n for n in d.get('names', [])]:\n"
           "            return p\n"
           "BF16_FP16_TOLERANCE = 0.05\n"
           "def gap(a, b):\n    return abs(a - b) / max(a, b) > BF16_FP16_TOLERANCE\n"
           "def bw(torch, src, dst, t):\n    ms = t(lambda: dst.copy_(src), 20)\n    return ms\n"
           "def q(xs):\n    import numpy as np\n    return np.percentile(xs, 20)\n")
    tree = ast.parse(src)
    assert name_matches(tree) == {"find"}
    s = rule_sites(tree)
    assert s["assign"] and s["compare"] == {"gap"} and s["formula"] == {"gap"}
    assert copy_sites(tree) == {"bw": False}
    assert quantile_sites(tree) == (set(), {"q"})


@pytest.mark.parametrize("gap", [0.049, 0.051])
def test_the_three_users_of_the_rule_agree_at_its_edge(gap):
    """from_table (the analysis flags the axis), validate_table (`peaks validate`) and the measure
    checks (`peaks measure` / `peaks envelope`) read one rule: all flag a 5.1% gap, none a 4.9% one."""
    import yaml

    from roofline.peaks import BF16_FP16_TOLERANCE, from_table, peaks_dir
    from roofline.peaks.render import checks
    from roofline.peaks.validate import validate_table

    t = yaml.safe_load((peaks_dir() / "h200.yaml").read_text())
    for d in ("bf16", "fp16"):   # plain measured figures (no recorded runs to be the envelope of)
        t["flops"][d]["measured"] = {k: v for k, v in t["flops"][d]["measured"].items()
                                     if k in ("value", "source", "date")}
    b = t["flops"]["bf16"]["measured"]["value"]
    t["flops"]["fp16"]["measured"]["value"] = b * (1 - gap)
    over = gap > BF16_FP16_TOLERANCE
    assert (from_table(t).compute_unusable_dtypes == ["bf16", "fp16"]) is over
    assert any("differ by" in e for e in validate_table(t)) is over
    line = next(ln for ok, ln in checks(t) if ln.startswith("bf16"))
    assert ("FLAGGED" in line) is over


def test_both_copy_benchmarks_count_read_plus_write_from_the_same_samples(monkeypatch):
    """The ladder's ceiling (CuPy; numpy stands in for it here, with the same ones/empty_like/copyto)
    and `peaks measure` read the copy the same way: bytes read + written over per-call times. The
    times are the recorded per-call samples of an H200 run (fixtures/peaks/runs/h200_run1.raw.json)."""
    import json

    import numpy as np

    from roofline.ladder import bench, gpu
    from roofline.peaks.measure import copy_benchmark

    raw = json.loads((ROOT / "fixtures" / "peaks" / "runs" / "h200_run1.raw.json").read_text())
    ms = raw["hbm"]["ms"]
    copied = []

    class Timer:
        def time(self, fn, reps=None):
            fn()
            copied.append(True)
            return ms[:reps]

    monkeypatch.setattr(gpu, "cupy", lambda: np)
    nbytes = 1 << 20
    got = bench.measure_hbm_copy(Timer(), nbytes)
    med = float(np.median(ms[:20]))
    assert copied and got["t_ms_median"] == pytest.approx(med, rel=1e-12)
    assert got["bytes_s"] == pytest.approx(2 * nbytes / (med * 1e-3), rel=1e-12)
    assert got["t_ms_p20"] == pytest.approx(float(np.percentile(ms[:20], 20)), rel=1e-12)
    # peaks measure's figure from the same samples: per-call rates, the recorded bytes per copy
    src, dst = np.arange(8.0), np.zeros(8)
    res = copy_benchmark(lambda: np.copyto(dst, src), raw["hbm"]["bytes_per_copy"] / 2, lambda f, r: (f(), ms)[1], 100)
    assert np.array_equal(dst, src) and res["bytes_per_copy"] == raw["hbm"]["bytes_per_copy"]
    assert res["bytes_s"] == pytest.approx([raw["hbm"]["bytes_per_copy"] / (t * 1e-3) for t in ms], rel=1e-12)
    assert float(np.median(res["bytes_s"])) == pytest.approx(raw["hbm"]["q"]["median"], rel=1e-9)
