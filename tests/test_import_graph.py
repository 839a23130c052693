"""The package's import graph (roofline/, ladder/ as roofline.ladder, peaks/ as roofline.peaks), read
from the source with ast: no two modules import each other at module level or lazily within
one layer named below, and the artifact schema imports nothing of the package (the report module
imports it to write the artifact it validates, not the reverse)."""
from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

TREES = (("roofline", "roofline"), ("ladder", "roofline.ladder"), ("peaks", "roofline.peaks"))


def _modules() -> dict[str, Path]:
    out = {}
    for folder, pkg in TREES:
        for p in (ROOT / folder).rglob("*.py"):
            rel = p.relative_to(ROOT / folder).with_suffix("")
            out[".".join([pkg, *[x for x in rel.parts if x != "__init__"]])] = p
    return out


MODS = _modules()


def _resolve(name: str) -> str | None:
    while name and name not in MODS:
        name = name.rpartition(".")[0]
    return name or None


def _imports(mod: str, module_level_only: bool) -> set[str]:
    p = MODS[mod]
    tree = ast.parse(p.read_text(encoding="utf-8"))
    nodes = tree.body if module_level_only else list(ast.walk(tree))
    here = mod.split(".") if p.name == "__init__.py" else mod.split(".")[:-1]
    out = set()
    for n in nodes:
        if isinstance(n, ast.Import):
            out |= {_resolve(a.name) for a in n.names}
        elif isinstance(n, ast.ImportFrom):
            base = ".".join(here[:len(here) - n.level + 1] + ([n.module] if n.module else [])) if n.level \
                else (n.module or "")
            for a in n.names:
                sub = f"{base}.{a.name}"
                out.add(sub if sub in MODS else _resolve(base))
    return out - {None, mod}


def test_the_graph_is_read():
    g = {m: _imports(m, False) for m in MODS}
    assert "roofline.schema" in g["roofline.report"] and "roofline.stagec.merge" in g["roofline.procedure"]
    assert len(MODS) > 100


def test_no_module_level_import_circle():
    g = {m: _imports(m, True) for m in MODS}
    seen, stack, cycles = set(), [], []

    def visit(m):
        if m in stack:
            cycles.append(stack[stack.index(m):] + [m])
            return
        if m in seen:
            return
        seen.add(m)
        stack.append(m)
        for d in sorted(g[m]):
            if not d.startswith(m + "."):       # a package's own submodules are not a circle
                visit(d)
        stack.pop()

    for m in sorted(g):
        visit(m)
    assert not cycles, cycles


def test_the_schema_imports_nothing_of_the_package():
    assert _imports("roofline.schema", False) == set()
    assert "roofline.report" not in {d for m in MODS if m.startswith("roofline.schema") for d in _imports(m, False)}
