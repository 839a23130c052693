"""Issue 15, knot 4: one error tree (house rule 5, roofline/io/errors.py).

- every exception class defined in roofline/, ladder/ and peaks/ derives from RooflineError (found
  with ast, checked on the imported class: a second builtin base such as ValueError is allowed); a
  private class (`_Name`) may stay outside only as control flow inside its module: that module
  catches it by name;
- no code compares an exception's class name as a string (`exc.__class__.__name__ == "X"`,
  `type(exc).__name__ in (...)`): errors are matched by class.
"""
from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from roofline.io.errors import RooflineError

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = {"roofline": ROOT / "roofline", "roofline.ladder": ROOT / "ladder", "roofline.peaks": ROOT / "peaks"}


def _modules():
    for pkg, folder in FOLDERS.items():
        for p in sorted(folder.rglob("*.py")):
            parts = list(p.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if pkg == "roofline" and parts and parts[0] in ("ladder", "peaks"):
                continue
            yield ".".join([pkg, *parts]), p


def _caught_names(tree: ast.AST) -> set[str]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ExceptHandler) and node.type is not None:
            for n in ast.walk(node.type):
                if isinstance(n, ast.Name):
                    out.add(n.id)
    return out


def exception_classes():
    """(module, class name, class, caught in its module) of every exception class in the tree."""
    out = []
    for mod, p in _modules():
        tree = ast.parse(p.read_text(encoding="utf-8"))
        names = [n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.bases]
        if not names:
            continue
        m = importlib.import_module(mod)
        caught = _caught_names(tree)
        for name in names:
            cls = getattr(m, name, None)
            if isinstance(cls, type) and issubclass(cls, BaseException):
                out.append((mod, name, cls, name in caught))
    return out


CLASSES = exception_classes()


def test_the_walk_finds_the_errors():
    found = {name for _, name, _, _ in CLASSES}
    assert {"InputError", "CounterReadError", "UnitError", "TraceError", "TopNError", "NcuError", "BuildError",
            "NoGPU", "FeedbackError", "AdviseError", "PeaksMdError", "RerunError", "UnsafeInput"} <= found


@pytest.mark.parametrize("mod,name,cls,caught", CLASSES, ids=[f"{m}.{n}" for m, n, _, _ in CLASSES])
def test_every_error_is_in_the_one_tree(mod, name, cls, caught):
    if name.startswith("_") and caught:
        return   # private control flow, caught where it is raised
    assert issubclass(cls, RooflineError), f"{mod}.{name} derives from {[b.__name__ for b in cls.__mro__[1:]]}"


def test_builtin_second_bases_are_kept_where_callers_catch_them():
    from roofline.counters import CounterReadError
    from roofline.counters.units import UnitError
    from roofline.io.errors import RerunError
    from roofline.ladder.build import BuildError
    from roofline.io.safeio import UnsafeInput

    assert issubclass(CounterReadError, ValueError) and issubclass(UnitError, ValueError)
    assert issubclass(BuildError, RuntimeError) and issubclass(RerunError, RuntimeError)
    assert issubclass(UnsafeInput, OSError)


def name_comparisons(source: str) -> list[int]:
    """Lines that compare `X.__class__.__name__` / `type(X).__name__` with a string literal."""
    def is_class_name(n) -> bool:
        if not (isinstance(n, ast.Attribute) and n.attr in ("__name__", "__qualname__")):
            return False
        v = n.value
        return (isinstance(v, ast.Attribute) and v.attr == "__class__") or (
            isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "type")

    def is_text(n) -> bool:
        if isinstance(n, ast.Constant):
            return isinstance(n.value, str)
        return isinstance(n, (ast.Tuple, ast.List, ast.Set)) and any(is_text(e) for e in n.elts)

    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(is_class_name(s) for s in sides) and any(is_text(s) for s in sides):
                out.append(node.lineno)
    return out


def test_no_error_is_matched_by_its_class_name():
    bad = [f"{p.relative_to(ROOT)}:{ln}" for _, p in _modules()
           for ln in name_comparisons(p.read_text(encoding="utf-8"))]
    assert not bad, bad


def test_the_scan_catches_a_name_comparison():
    src = ('try:\n    f()\nexcept ValueError as exc:\n    if exc.__class__.__name__ != "CounterReadError":\n'
           '        raise\nif type(e).__name__ in ("TraceError", "X"):\n    pass\n'
           'if __name__ == "__main__":\n    pass\nmsg = f"{exc.__class__.__name__}: {exc}"\n')
    assert sorted(name_comparisons(src)) == [4, 6]


def test_the_cli_edge_turns_an_unreadable_counter_report_into_exit_2(tmp_path):
    """The error that analyze.py once matched by name: caught by class now, same line, exit 2."""
    from click.testing import CliRunner

    from roofline.cli import main

    topn = ROOT / "fixtures" / "hook" / "round_a_topN.json"
    bad = tmp_path / "counters.csv"
    bad.write_text("a,b\n1,2\n")
    res = CliRunner().invoke(main, ["analyze", str(topn), "--counters", str(bad), "--no-write"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"roofline analyze: {bad}: not a counter file"), lines
