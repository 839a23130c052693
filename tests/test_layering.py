"""The layering, read from the source with ast (module-level and function-level imports alike):

- the ladder (roofline.ladder, folder ladder/) imports nothing from the analysis side: only itself,
  the peak tables (roofline.peaks: data), the typed errors, the counter readers and the file-kind
  sniffer; ceilings reach it through roofline.peaks or as arguments;
- the peak tables import only themselves, the errors and the safe reader (roofline.io.safeio, a leaf);
- roofline.core.analysis and the pipeline entry roofline.hook never reach the CLI layer
  (roofline.commands, roofline.cli), directly or through what they import.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = {"roofline": ROOT / "roofline", "roofline.ladder": ROOT / "ladder", "roofline.peaks": ROOT / "peaks"}
CLI_LAYER = ("roofline.commands", "roofline.cli")
# the analysis side: what the ladder must not import (an allow-list below makes this exhaustive)
ANALYSIS_SIDE = ("roofline.core.analysis", "roofline.report.artifact", "roofline.core.routing", "roofline.core.shapes", "roofline.core.models",
                 "roofline.core.opclasses",
                 "roofline.core.inputs", "roofline.commands", "roofline.cli", "roofline.rerun", "roofline.stagec",
                 "roofline.api", "roofline.hook", "roofline.core.contract", "roofline.core.devices",
                 "roofline.feedback", "roofline.ingest", "roofline.core.calc", "roofline.report.plot", "roofline.core.defaults")
# roofline.core.classify (kernel name -> op class) is neither: the counter readers match names with it
LADDER_MAY_IMPORT = ("roofline.ladder", "roofline.peaks", "roofline.io.errors", "roofline.counters", "roofline.io.filekinds",
                     "roofline.io.safeio")   # safeio: bounded, non-blocking reads (a leaf utility)
PEAKS_MAY_IMPORT = ("roofline.peaks", "roofline.io.errors", "roofline.io.safeio")


def _under(name: str, prefixes) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _may(name: str, allowed) -> bool:
    # the top package itself is imported with any of its sub-packages (`from roofline import peaks`)
    # ... and a parent package of an allowed module (`from roofline.io import safeio` loads roofline/io/__init__.py,
    # a docstring)
    return name == "roofline" or _under(name, allowed) or any(a.startswith(name + ".") for a in allowed)


def modules() -> dict[str, Path]:
    out = {}
    for pkg, folder in FOLDERS.items():
        for p in folder.rglob("*.py"):
            parts = list(p.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join([pkg, *parts])
            if pkg == "roofline" and _under(name, ("roofline.ladder", "roofline.peaks")):
                continue  # owned by the mapped folders
            out[name] = p
    return out


def imports_of(source: str, module: str, is_package: bool) -> set[str]:
    """Every module name `source` imports (absolute, relative resolved), at any depth of the file."""
    out = set()
    base = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                stem = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                mod = ".".join(stem + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)   # `from roofline import commands`
    return {m for m in out if m == "roofline" or m.startswith("roofline.")}


def graph() -> dict[str, set[str]]:
    mods = modules()
    g = {}
    for name, p in mods.items():
        raw = imports_of(p.read_text(encoding="utf-8"), name, p.name == "__init__.py")
        # keep the names that are modules (drop `from roofline.x import function`)
        g[name] = {m for m in raw if m in mods}
    return g


def reach(g: dict[str, set[str]], start: str) -> dict[str, list[str]]:
    """module -> one import chain from `start` to it."""
    seen, todo = {start: [start]}, [start]
    while todo:
        m = todo.pop()
        for n in sorted(g.get(m, ())):
            if n not in seen:
                seen[n] = seen[m] + [n]
                todo.append(n)
    return seen


G = graph()


def test_the_scan_sees_the_tree():
    assert {"roofline.ladder.dispatch", "roofline.ladder.advise", "roofline.peaks", "roofline.peaks.md",
            "roofline.hook", "roofline.core.analysis", "roofline.commands.rerun", "roofline.stagec.rerun"} <= set(G)
    assert "roofline.ladder.dispatch" in G["roofline.rerun"] and "roofline.rerun" in G["roofline.commands.rerun"]


@pytest.mark.parametrize("mod", sorted(m for m in G if _under(m, ("roofline.ladder",))))
def test_the_ladder_imports_nothing_from_the_analysis_side(mod):
    bad = sorted(m for m in G[mod] if not _may(m, LADDER_MAY_IMPORT) or _under(m, ANALYSIS_SIDE))
    assert not bad, f"{mod} imports {bad}"


@pytest.mark.parametrize("mod", sorted(m for m in G if _under(m, ("roofline.peaks",))))
def test_the_peak_tables_import_only_themselves_and_the_errors(mod):
    bad = sorted(m for m in G[mod] if not _may(m, PEAKS_MAY_IMPORT))
    assert not bad, f"{mod} imports {bad}"


@pytest.mark.parametrize("start", ["roofline.hook", "roofline.core.analysis", "roofline.api", "roofline.stagec.rerun",
                                   "roofline.core.procedure", "roofline.core.calc"])
def test_the_pipeline_side_never_reaches_the_cli_layer(start):
    chains = {m: c for m, c in reach(G, start).items() if _under(m, CLI_LAYER)}
    assert not chains, " ; ".join(" -> ".join(c) for c in chains.values())


def test_the_scan_catches_a_function_level_import_and_a_relative_one():
    src = "def f():\n    from roofline.commands.rerun import rerun_artifact\n"
    assert "roofline.commands.rerun" in imports_of(src, "roofline.hook", False)
    src = "from ..rerun import shape_class\nimport roofline.report.artifact as r\n"
    got = imports_of(src, "roofline.ladder.advise", False)
    assert {"roofline.rerun", "roofline.report.artifact"} <= got
    # and the rule rejects them
    assert _under("roofline.rerun", ANALYSIS_SIDE) and not _may("roofline.rerun", LADDER_MAY_IMPORT)
    g = dict(G, **{"roofline.hook": G["roofline.hook"] | {"roofline.commands.rerun"}})
    assert "roofline.commands.rerun" in reach(g, "roofline.hook")


@pytest.mark.parametrize("start", sorted(m for m in G if _under(m, ("roofline.ladder",))))
def test_nothing_the_ladder_imports_reaches_the_analysis_side(start):
    # roofline/__init__ imports its API only inside functions (`roofline.analyze`), which importing
    # roofline.ladder never calls: the top package counts as a leaf here
    g = dict(G, roofline=set())
    chains = {m: c for m, c in reach(g, start).items() if _under(m, ANALYSIS_SIDE)}
    assert not chains, " ; ".join(" -> ".join(c) for c in chains.values())
