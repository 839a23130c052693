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
    assert "roofline.io.schema" in g["roofline.report.artifact"] and "roofline.core.merge" in g["roofline.core.procedure"]
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
    assert _imports("roofline.io.schema", False) == set()
    assert "roofline.report.artifact" not in {d for m in MODS if m.startswith("roofline.io.schema") for d in _imports(m, False)}


def circles(g: dict[str, set[str]]) -> list[list[str]]:
    """Every import circle of `g` (its strongly connected components of two modules or more, each
    sorted), a package's edges to its own submodules left out (importing a package runs its
    __init__, which may hand its submodules on: that is no circle)."""
    edges = {m: sorted(d for d in ds if d in g and not d.startswith(m + ".")) for m, ds in g.items()}
    index, low, on, stack, out, n = {}, {}, set(), [], [], [0]

    def strong(v):                       # Tarjan, iterative over each node's edge list
        work = [(v, 0)]
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            u, i = work.pop()
            if i < len(edges[u]):
                work.append((u, i + 1))
                w = edges[u][i]
                if w not in index:
                    index[w] = low[w] = n[0]
                    n[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, 0))
                elif w in on:
                    low[u] = min(low[u], index[w])
                continue
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[u])
            if low[u] == index[u]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == u:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))

    for m in sorted(edges):
        if m not in index:
            strong(m)
    return sorted(out)


def test_no_import_circle_counting_lazy_and_type_only_imports():
    """Every import counts: module level, inside a function, under `if TYPE_CHECKING:`. A lazy or
    type-only import still says that one module needs the other; two that need each other are one
    module split in two, or a layer running up."""
    g = {m: _imports(m, False) for m in MODS}
    assert circles(g) == []


def test_the_circle_scan_catches_a_lazy_one_and_a_type_only_one():
    g = {m: _imports(m, False) for m in MODS}
    assert "roofline.io.pairwrite" in g["roofline.report.artifact"]
    lazy = dict(g, **{"roofline.io.pairwrite": g["roofline.io.pairwrite"] | {"roofline.report.artifact"}})   # a lazy import back
    assert any({"roofline.io.pairwrite", "roofline.report.artifact"} <= set(c) for c in circles(lazy))
    src = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from roofline.report.artifact import to_json\n"
    tree = ast.parse(src)
    assert any(isinstance(n, ast.ImportFrom) and n.module == "roofline.report.artifact" for n in ast.walk(tree))
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"p": {"p.x"}, "p.x": {"p"}}) == []        # a package and its own submodule


def _room(mod: str) -> str:
    """The floor plan's room of a module: a sub-package of roofline (its folder) or a top module."""
    parts = mod.split(".")
    return ".".join(parts[:2]) if parts[0] == "roofline" and len(parts) > 1 else mod


def test_no_arrow_runs_up_between_the_folders():
    """Drawn with each sub-package (roofline/stagec/, roofline/counters/, the ladder, ...) as one room,
    the house still has floors: no two rooms import each other, through any chain of imports (an
    import from a lower floor up to a higher one would close such a circle). The top package
    `roofline` (roofline/__init__.py: the lazy facade `roofline.analyze`) is the roof: left out."""
    rooms: dict[str, set[str]] = {}
    for m, ds in ((m, _imports(m, False)) for m in MODS if m != "roofline"):
        rooms.setdefault(_room(m), set()).update(_room(d) for d in ds if d != "roofline" and _room(d) != _room(m))
    assert circles(rooms) == []
    # the core reads counters, peaks and the ground; stage C sits above it and the core never reaches up
    assert {"roofline.counters", "roofline.peaks", "roofline.io"} <= rooms["roofline.core"]
    assert not rooms["roofline.core"] & {"roofline.stagec", "roofline.report", "roofline.ingest", "roofline.api"}
