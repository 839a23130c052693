"""The layout page (docs/layout.md, moved from the README in issue 35) matches the tree (issue 15, "Done when").

The section is the code block under `## Layout`. An entry line is `<indent><name>[, <name>...]`
followed by two or more spaces and what it holds; the indent is two spaces per level, and a line
indented by more than MAX_ENTRY_INDENT spaces continues the description above it. A name ending
in "/" is a folder: the entries indented under it are inside it; a name may be a path
("kernels/sm90/").

What must be listed: every top-level file and folder of the repository (hidden ones and build
outputs aside), and inside roofline/, ladder/, peaks/ and every folder in them that holds Python
modules, every module (`*.py`, `__init__.py` optional) and every sub-folder. Everything listed must exist. On failure the message says exactly which lines
to add (and under which folder) and which to remove.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# the packages described module by module: roofline/, ladder/, peaks/ and every folder inside them
# holding Python modules (today roofline/ingest, commands, counters, models, schema; a new one is
# covered when it appears)
PACKAGES = ("roofline", "ladder", "peaks")
MAX_ENTRY_INDENT = 12
IGNORED = {"__pycache__", "build", "dist", "out", "artifacts"}
NAME_RX = re.compile(r"^[A-Za-z0-9_.\-/]+$")


def layout_block(readme: str) -> list[str]:
    """The lines of the first code block after the `## Layout` heading."""
    m = re.search(r"^## Layout\s*$", readme, re.M)
    assert m, "docs/layout.md has no '## Layout' section"
    rest = readme[m.end():]
    nxt = re.search(r"^## ", rest, re.M)
    section = rest[: nxt.start()] if nxt else rest
    b = re.search(r"^```[^\n]*\n(.*?)^```", section, re.M | re.S)
    assert b, "the layout section has no code block"
    return b.group(1).splitlines()


def listed_paths(lines: list[str]) -> tuple[set[str], list[str]]:
    """(paths the block names, relative to the root, folders ending in "/"; lines it cannot read)."""
    out, bad = set(), []
    stack: list[tuple[int, str]] = []          # (indent, folder path) of the enclosing folders
    for ln in lines:
        if not ln.strip():
            continue
        indent = len(ln) - len(ln.lstrip(" "))
        if indent > MAX_ENTRY_INDENT:
            continue                            # a description's continuation
        names_part = re.split(r"\s{2,}", ln.strip(), maxsplit=1)[0]
        names = [n.strip() for n in names_part.split(",")]
        if indent % 2 or not all(NAME_RX.match(n) for n in names):
            bad.append(ln)
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1] if stack else ""
        for n in names:
            out.add(parent + n)
        if len(names) == 1 and names[0].endswith("/"):
            stack.append((indent, parent + names[0]))
    return out, bad


def _skip(name: str) -> bool:
    return name.startswith(".") or name in IGNORED or name.endswith(".egg-info")


def tree_files(root: Path) -> list[str]:
    """The repository's files, relative to root: git's view where there is one (tracked, and new files
    not ignored), else a walk of the folder."""
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=root,
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        out = None
    if out is not None and out.returncode == 0 and out.stdout.strip():
        files = [f for f in out.stdout.splitlines() if (root / f).is_file()]   # deleted, not yet staged: gone
    else:
        files = [p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()]
    return sorted(f for f in files if not any(_skip(part) for part in f.split("/")))


def _dirs(files: list[str]) -> set[str]:
    return {"/".join(f.split("/")[:i]) + "/" for f in files for i in range(1, f.count("/") + 1)}


def deep_packages(files: list[str], tops=PACKAGES) -> list[str]:
    """`tops` and every folder under them holding Python modules."""
    inner = {f.rsplit("/", 1)[0] for f in files if f.endswith(".py") and f.split("/")[0] in tops}
    return sorted(set(tops) | inner)


def required_paths(files: list[str], deep=None) -> set[str]:
    """Top-level files and folders, and the modules and sub-folders of the `deep` packages."""
    deep = deep_packages(files) if deep is None else deep
    req = {f.split("/")[0] + ("/" if "/" in f else "") for f in files}
    for d in deep:
        for f in files:
            if not f.startswith(d + "/"):
                continue
            rest = f[len(d) + 1:]
            if "/" in rest:
                req.add(f"{d}/{rest.split('/')[0]}/")
            elif rest.endswith(".py") and rest != "__init__.py":
                req.add(f)
    return req


def _covered(path: str, listed: set[str]) -> bool:
    """Listed itself, or (a folder) as the start of a listed path: "kernels/sm90/" covers "kernels/"."""
    return path in listed or (path.endswith("/") and any(x.startswith(path) for x in listed))


def differences(files: list[str], readme: str, deep=None) -> dict[str, list[str]]:
    listed, bad = listed_paths(layout_block(readme))
    existing = set(files) | _dirs(files)
    req = required_paths(files, deep)
    return {"add": sorted(p for p in req if not _covered(p, listed)),
            "remove": sorted(p for p in listed if p not in existing),
            "unreadable": bad}


def _message(diff: dict[str, list[str]]) -> str:
    out = ["docs/layout.md '## Layout' does not match the tree."]
    if diff["add"]:
        out.append("Add one line each (indented under its folder, then what it holds):")
        for p in diff["add"]:
            folder, _, name = p.rstrip("/").rpartition("/")
            out.append(f"  + {name}{'/' if p.endswith('/') else ''}   under {folder + '/' if folder else 'the top level'}")
    if diff["remove"]:
        out.append("Remove (no such file or folder):")
        out += [f"  - {p}" for p in diff["remove"]]
    if diff["unreadable"]:
        out.append("Lines that are neither an entry nor a continuation (see tests/test_readme_layout.py):")
        out += [f"  ? {ln!r}" for ln in diff["unreadable"]]
    return "\n".join(out)


def test_the_layout_section_matches_the_tree():
    diff = differences(tree_files(ROOT), (ROOT / "docs" / "layout.md").read_text(encoding="utf-8"))
    assert not any(diff.values()), _message(diff)


def test_the_section_is_read_as_intended():
    listed, bad = listed_paths(layout_block((ROOT / "docs" / "layout.md").read_text(encoding="utf-8")))
    assert not bad
    # nesting: modules under their package, a path entry, a folder's own entry
    assert {"pyproject.toml", "roofline/", "roofline/commands/analyze.py", "roofline/ingest/topn.py",
            "ladder/kernels/sm90/", "peaks/measure.py", "tests/"} <= listed
    assert "roofline/analyze.py" not in listed and "analyze.py" not in listed
    files = tree_files(ROOT)
    assert {"roofline", "roofline/ingest", "roofline/commands", "roofline/counters", "roofline/core/models", "ladder",
            "peaks"} <= set(deep_packages(files))
    assert "roofline/hook.py" in files and not any("__pycache__" in f or f.startswith(".git/") for f in files)


def test_the_check_catches_a_missing_and_a_stale_entry():
    files = ["pkg/__init__.py", "pkg/a.py", "pkg/b.py", "pkg/sub/x.py", "pkg/data/t.json", "top.txt"]
    readme = ("# x\n\n## Layout\n\n```\ntop.txt        a file\npkg/           the package\n"
              "  a.py         module a,\n               continued\n  gone.py      removed long ago\n"
              "  data/        data\n```\n\n## Next\n")
    diff = differences(files, readme, deep=("pkg", "pkg/sub"))
    assert diff == {"add": ["pkg/b.py", "pkg/sub/", "pkg/sub/x.py"], "remove": ["pkg/gone.py"], "unreadable": []}
    msg = _message(diff)
    assert "+ b.py   under pkg/" in msg and "+ sub/   under pkg/" in msg and "- pkg/gone.py" in msg
    # listed at the wrong level counts as both missing and stale
    diff = differences(files, readme.replace("  a.py ", "a.py   "), deep=("pkg",))
    assert "pkg/a.py" in diff["add"] and "a.py" in diff["remove"]
    # a package inside a package is described module by module too
    assert deep_packages(["pkg/__init__.py", "pkg/sub/x.py", "pkg/data/t.json", "other/y.py"],
                         tops=("pkg",)) == ["pkg", "pkg/sub"]
    # a line that is not an entry is reported, not skipped
    _, bad = listed_paths(["pkg/          x", " odd indent   y", "  a b c"])
    assert bad == [" odd indent   y", "  a b c"]
