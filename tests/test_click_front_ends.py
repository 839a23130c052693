"""Issue 15, knot 7: the click commands are grouped. Only the command-line front ends import click:
roofline/cli.py (the group), roofline/commands/ (the CLI layer, `roofline topn` included), and the
ladder's one front end, ladder/cli.py (`roofline ladder`), which sits with what it drives. The picture, the analysis, the peaks and the ladder's machinery never do; every
sub-command the group lists lives in one of those modules."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FRONT_ENDS = {"roofline/cli.py", "ladder/cli.py"}
# the module a LAZY_COMMANDS target names -> its file
MODULE_FILES = {"roofline.ladder.cli": "ladder/cli.py"}


def _is_front_end(rel: str) -> bool:
    return rel in FRONT_ENDS or rel.startswith("roofline/commands/")


def click_importers(sources) -> set[str]:
    out = set()
    for rel, text in sources:
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "click" for a in node.names):
                out.add(rel)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "click":
                out.add(rel)
    return out


def _sources():
    for d in ("roofline", "ladder", "peaks"):
        for p in sorted((ROOT / d).rglob("*.py")):
            yield p.relative_to(ROOT).as_posix(), p.read_text(encoding="utf-8")


def test_only_the_front_ends_import_click():
    users = click_importers(_sources())
    assert "roofline/commands/peaks.py" in users and "roofline/commands/plot.py" in users
    assert sorted(u for u in users if not _is_front_end(u)) == []


def test_every_sub_command_lives_in_a_front_end():
    from roofline.cli import LAZY_COMMANDS

    for name, (target, _) in LAZY_COMMANDS.items():
        mod = target.split(":")[0]
        rel = MODULE_FILES.get(mod, mod.replace(".", "/") + ".py")
        assert (ROOT / rel).is_file() and _is_front_end(rel), f"{name}: {target}"


def test_the_scan_catches_click_in_a_library_module():
    got = click_importers([("roofline/report/plot.py", "import click\n"), ("peaks/x.py", "def f():\n    from click import echo\n"),
                           ("roofline/a.py", "import clickhouse\n")])
    assert got == {"roofline/report/plot.py", "peaks/x.py"}
