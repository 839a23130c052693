#!/usr/bin/env python3
"""The move of `roofline/` into floors (the floors of docs/layout.md): old module path -> new module path, applied to
every text file of the repo (imports, mock targets, module strings, file paths in docs and tests).

    python tools/relayout.py --move      # git mv + rewrite (once, on the tree being moved)
    python tools/relayout.py FILE...     # rewrite only these files (a branch merged after the move)

Idempotent on already-rewritten text: each old dotted name is matched only where it is followed by
no identifier character, and no new name starts with an old one that is itself moved.
"""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# old dotted module (under roofline.) -> new dotted module
MOVES = {
    # the analysis core
    "analysis": "core.analysis", "procedure": "core.procedure", "classify": "core.classify",
    "shapes": "core.shapes", "regimes": "core.regimes", "residency": "core.residency",
    "necessary": "core.necessary", "levers": "core.levers", "routing": "core.routing",
    "hints": "core.hints", "contract": "core.contract", "defaults": "core.defaults",
    "devices": "core.devices", "roofmath": "core.roofmath", "wall": "core.wall",
    "workload": "core.workload", "multirank": "core.multirank", "lint": "core.lint",
    "calc": "core.calc", "inputs": "core.inputs", "topn_entry": "core.topn_entry",
    "opclasses": "core.opclasses", "models": "core.models",
    "stagec.merge": "core.merge", "stagec.plausible": "core.plausible",
    "stagec.writeback": "core.writeback", "stagec.judge": "core.judge",
    # input / output at the ground
    "errors": "io.errors", "safeio": "io.safeio", "pairwrite": "io.pairwrite",
    "filekinds": "io.filekinds", "values": "io.values", "kernelnames": "io.kernelnames",
    "config_check": "io.config_check", "schema": "io.schema",
    # the report
    "report": "report.artifact", "report_extra": "report.extra", "report_host": "report.host",
    "report_levers": "report.levers", "report_ranks": "report.ranks", "plot": "report.plot",
    "plot_ranks": "report.plot_ranks", "calc_html": "report.calc_html",
}
PKGS = {"opclasses", "models", "schema"}  # moved whole (folders)

_names = sorted(MOVES, key=len, reverse=True)
# `roofline.report` is both an old module and a new package: never match it where a new module follows
_NEW_REPORT = "|".join(v.split(".", 1)[1] for v in MOVES.values() if v.startswith("report."))
_DOTTED = re.compile(r"\broofline\.(" + "|".join(re.escape(n) for n in _names) + r")(?![\w])"
                     r"(?!(?<=report)(?:\.| import )(?:" + _NEW_REPORT + r")\b)")
_PATHS = re.compile(r"\broofline/(?:(" + "|".join(re.escape(n.replace(".", "/")) for n in _names if n not in PKGS)
                    + r")(\.py)|(" + "|".join(sorted(PKGS)) + r")(/))")


def _from_roofline_imports(text: str) -> str:
    """`from roofline[.pkg] import a, b as c` where a name moved -> one line per target package."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text
    lines = text.splitlines(keepends=True)
    edits = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ImportFrom) and node.module and node.level == 0
                and (node.module == "roofline" or node.module.startswith("roofline."))):
            continue
        prefix = node.module[len("roofline."):] + "." if node.module != "roofline" else ""
        if not any(prefix + a.name in MOVES for a in node.names):
            continue
        indent = re.match(r"\s*", lines[node.lineno - 1]).group(0)
        tail = lines[node.end_lineno - 1].rstrip("\n")
        comment = ""
        m = re.search(r"\)?\s*(#.*)$", tail)
        if m and "#" in tail:
            comment = "  " + m.group(1)
        keep, new = [], {}
        for a in node.names:
            if prefix + a.name in MOVES:
                pkg, _, mod = ("roofline." + MOVES[prefix + a.name]).rpartition(".")
                alias = a.asname or a.name
                new.setdefault(pkg, []).append(mod + (f" as {alias}" if alias != mod else ""))
            else:
                keep.append(a.name + (f" as {a.asname}" if a.asname else ""))
        out = []
        if keep:
            out.append(f"{indent}from {node.module} import {', '.join(keep)}")
        out += [f"{indent}from {pkg} import {', '.join(names)}" for pkg, names in new.items()]
        out[0] += comment
        edits.append((node.lineno - 1, node.end_lineno, [l + "\n" for l in out]))
    for start, end, rep in sorted(edits, reverse=True):
        lines[start:end] = rep
    return "".join(lines)


def rewrite(text: str, is_py: bool) -> str:
    if is_py:
        text = _from_roofline_imports(text)
    text = _DOTTED.sub(lambda m: "roofline." + MOVES[m.group(1)], text)
    text = _PATHS.sub(lambda m: "roofline/" + MOVES[(m.group(1) or m.group(3)).replace("/", ".")].replace(".", "/")
                      + (m.group(2) or m.group(4)), text)
    return text


def files():
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    for p in out.split():
        if p.endswith((".py", ".md", ".toml", ".sh", ".cfg", ".ini", ".txt", ".yaml", ".yml", ".json")) and p != "tools/relayout.py":
            yield ROOT / p


def move():
    def git(*a):
        subprocess.run(["git", *a], cwd=ROOT, check=True)
    for d in ("core", "io", "report"):
        (ROOT / "roofline" / d).mkdir(exist_ok=True)
    for old, new in MOVES.items():
        src = ROOT / "roofline" / (old.replace(".", "/") + ("" if old in PKGS else ".py"))
        dst = ROOT / "roofline" / (new.replace(".", "/") + ("" if old in PKGS else ".py"))
        git("mv", str(src), str(dst))


def main(argv):
    if argv[:1] == ["--move"]:
        move()
        targets = list(files())
    else:
        targets = [Path(a) for a in argv]
    n = 0
    for p in targets:
        if not p.is_file() or p.suffix == ".json" and p.stat().st_size > 200_000:
            continue
        try:
            t = p.read_text()
        except UnicodeDecodeError:
            continue
        new = rewrite(t, p.suffix == ".py")
        if new != t:
            p.write_text(new)
            n += 1
    print(f"rewrote {n} files", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
