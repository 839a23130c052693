"""Issue 15, "Done when": no module under roofline/, ladder/, peaks/ over 500 lines, no function
over 60, read from the source with ast. A measured hot loop may stay whole: the comment lines
between its `def` and its first statement include one containing "hot loop" and the speed a split
would lose. Everything else over a limit is listed below with its reason, and an entry that is no
longer over its limit fails too (the list only shrinks)."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("roofline", "ladder", "peaks")
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60

# path (relative to the repository root) -> reason
MODULE_EXCEPTIONS: dict[str, str] = {
    "roofline/report.py": "514 lines after the regime rows and the ranks; to split",
}
# "path::qualified name" -> reason
FUNCTION_EXCEPTIONS: dict[str, str] = {}


def _sources():
    for folder in FOLDERS:
        for p in sorted((ROOT / folder).rglob("*.py")):
            yield p.relative_to(ROOT).as_posix(), p.read_text(encoding="utf-8")


def _functions(tree: ast.AST, prefix: str = ""):
    """(qualified name, node) of every function, nested ones and methods included."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + node.name, node
            yield from _functions(node, prefix + node.name + ".")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, prefix + node.name + ".")
        else:
            yield from _functions(node, prefix)


def is_hot_loop(node: ast.AST, lines: list[str]) -> bool:
    """A comment containing "hot loop" between the `def` line and the first statement."""
    header = lines[node.lineno - 1:node.body[0].lineno - 1]
    return any(ln.strip().startswith("#") and "hot loop" in ln.lower() for ln in header)


def measure(sources):
    """-> (modules over the limit, functions over the limit but not hot loops, hot loops)."""
    long_modules, long_functions, hot = {}, {}, {}
    for rel, src in sources:
        lines = src.splitlines()
        if len(lines) > MAX_MODULE_LINES:
            long_modules[rel] = len(lines)
        for qual, node in _functions(ast.parse(src)):
            n = node.end_lineno - node.lineno + 1
            if n > MAX_FUNCTION_LINES:
                key = f"{rel}::{qual}"
                (hot if is_hot_loop(node, lines) else long_functions)[key] = n
    return long_modules, long_functions, hot


def _short_name(key: str) -> str:
    """path::outer.inner -> path::inner (the exception lists name a function by its own name)."""
    path, qual = key.split("::")
    return f"{path}::{qual.rsplit('.', 1)[-1]}"


def test_no_module_over_500_lines_but_the_listed():
    long_modules, _, _ = measure(_sources())
    assert sorted(set(long_modules) - set(MODULE_EXCEPTIONS)) == []


def test_no_function_over_60_lines_but_hot_loops_and_the_listed():
    _, long_functions, _ = measure(_sources())
    assert sorted({_short_name(k) for k in long_functions} - set(FUNCTION_EXCEPTIONS)) == []


def test_the_exception_lists_only_shrink():
    long_modules, long_functions, _ = measure(_sources())
    assert sorted(set(MODULE_EXCEPTIONS) - set(long_modules)) == []
    assert sorted(set(FUNCTION_EXCEPTIONS) - {_short_name(k) for k in long_functions}) == []


def test_every_hot_loop_says_what_a_split_would_cost():
    # (none today: the trace parser's fast path was split, at no measured cost, in issue 15)
    _, _, hot = measure(_sources())
    texts = {k: src for k, src in _sources()}
    for key in hot:
        rel, qual = key.split("::")
        node = dict(_functions(ast.parse(texts[rel])))[qual]
        header = "\n".join(texts[rel].splitlines()[node.lineno - 1:node.body[0].lineno - 1])
        assert "ns" in header or "MB/s" in header or "%" in header, f"{key}: the hot-loop comment gives no measured cost"


def test_the_checker_rejects_a_long_function_and_a_fake_exemption():
    long_body = "\n".join(f"    x{i} = {i}" for i in range(70))
    src = f"def f():\n{long_body}\n\n\ndef g():\n    # hot loop: measured 1 ns\n{long_body}\n"
    _, long_functions, hot = measure([("roofline/fake.py", src)])
    assert long_functions == {"roofline/fake.py::f": 71} and hot == {"roofline/fake.py::g": 72}
    # a "hot loop" comment further down the body does not exempt the function
    src = f"def h():\n    x = 0\n    # hot loop\n{long_body}\n"
    _, long_functions, hot = measure([("roofline/fake.py", src)])
    assert "roofline/fake.py::h" in long_functions and not hot
    modules, _, _ = measure([("roofline/big.py", "x = 1\n" * 501)])
    assert modules == {"roofline/big.py": 501}
