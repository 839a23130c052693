"""The README's layout section matches the tree: every top-level folder and every folder of the
package (roofline/, ladder/, peaks/) is named, and every path the section names exists."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def layout_names() -> dict[str, list[str]]:
    """parent folder ('' for the root) -> the names the README's layout block lists under it."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"## Layout\n+```\n(.*?)```", text, re.S).group(1)
    out: dict[str, list[str]] = {"": []}
    parent = ""
    for line in block.splitlines():
        m = re.match(r"( *)(\S+(?:, \S+)*)( {2,}|$)", line)
        if not m or (m.group(1) and len(m.group(1)) > 2):
            continue   # a continuation line of a description
        names = [n.rstrip(",") for n in m.group(2).split(", ")]
        if not m.group(1):
            out[""] += names
            parent = names[0] if names[0].endswith("/") else ""
            out.setdefault(parent, [])
        elif parent:
            out[parent] += names
    return out


def test_every_named_path_exists():
    names = layout_names()
    missing = [f"{par}{n}" for par, ns in names.items() for n in ns if not (ROOT / par / n).exists()]
    assert not missing, f"the README's layout names what the tree lacks: {missing}"


def test_every_folder_is_named():
    names = layout_names()
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    top = {p.split("/")[0] + "/" for p in tracked if "/" in p and not p.startswith(".")}
    assert top - set(names[""]) == set(), f"top-level folders missing from the layout: {sorted(top - set(names['']))}"
    for pkg in ("roofline/", "ladder/"):
        subs = {p[len(pkg):].split("/")[0] + "/" for p in tracked if p.startswith(pkg) and p.count("/") >= 2}
        listed = {n.split("/")[0] + "/" for n in names[pkg] if "/" in n}
        assert subs - listed == set(), f"{pkg}: folders missing from the layout: {sorted(subs - listed)}"


def test_the_parser_reads_the_block():
    names = layout_names()
    assert {"roofline/", "ladder/", "peaks/", "fixtures/", "tests/", "pyproject.toml"} <= set(names[""])
    assert "hook.py" in names["roofline/"] and "kernels/sm90/" in names["ladder/"] and "calc_html.py" in names["roofline/"]
