#!/usr/bin/env python3
"""The README's (and docs/guide.md's) checked outputs: every ```console block preceded by `<!-- checked-output -->` holds
`$ roofline ...` commands and what they print. tests/test_tutorial.py runs them and compares;

    python tools/readme_outputs.py            # rewrite the blocks with what the commands print now
    python tools/readme_outputs.py --check    # exit 1 and name the stale block, change nothing

The commands run in a fresh temporary folder that sees the repository's fixtures/ (so the paths
they print are the relative ones the README shows), in README order (later commands read what
earlier ones wrote).
"""
from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BLOCK_RX = re.compile(r"(<!-- checked-output[^>]*-->\n```console\n)(.*?)(```)", re.S)


def parse_block(body: str) -> list[tuple[str, str]]:
    """[(command, expected output)] of one block."""
    steps, cmd, lines = [], None, []
    for line in body.splitlines():
        if line.startswith("$ "):
            if cmd is not None:
                steps.append((cmd, "\n".join(lines)))
            cmd, lines = line[2:], []
        else:
            lines.append(line)
    if cmd is not None:
        steps.append((cmd, "\n".join(lines)))
    return steps


def run(cmd: str) -> tuple[int, str]:
    """Run one `roofline ...` command in-process; (exit code, stdout and stderr as printed)."""
    from click.testing import CliRunner

    from roofline.cli import main

    args = shlex.split(cmd)
    if args[0] != "roofline":
        raise ValueError(f"only roofline commands are checked, got {cmd!r}")
    r = CliRunner().invoke(main, args[1:])
    return r.exit_code, r.output.rstrip("\n")


def in_sandbox(fn):
    """Call fn() with the working directory a fresh folder holding a link to fixtures/."""
    old = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="roofline_readme_") as d:
        (Path(d) / "fixtures").symlink_to(ROOT / "fixtures")
        os.chdir(d)
        try:
            return fn(Path(d))
        finally:
            os.chdir(old)


def regenerate(text: str) -> tuple[str, list[str]]:
    """(README with every checked block re-run, names of the commands whose output changed)."""
    changed: list[str] = []

    def one(m):
        out = []
        for cmd, expected in parse_block(m.group(2)):
            rc, got = run(cmd)
            if rc != 0:
                raise SystemExit(f"`{cmd}` exited {rc}:\n{got}")
            if got != expected.rstrip("\n"):
                changed.append(cmd)
            out.append(f"$ {cmd}\n{got}\n")
        return m.group(1) + "".join(out) + m.group(3)

    return in_sandbox(lambda _d: BLOCK_RX.sub(one, text)), changed


# the files whose checked blocks this tool regenerates (the README first: its commands write run/)
FILES = ("README.md", "docs/guide.md")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="re-run the README's (and docs/guide.md's) checked command outputs")
    ap.add_argument("--check", action="store_true", help="only report stale blocks (exit 1)")
    a = ap.parse_args(argv)
    stale = False
    for name in FILES:
        doc = ROOT / name
        new, changed = regenerate(doc.read_text(encoding="utf-8"))
        for c in changed:
            print(f"stale: {name}: $ {c}")
        stale = stale or bool(changed)
        if not a.check and changed:
            doc.write_text(new, encoding="utf-8")
            print(f"rewrote {len(changed)} block output(s) in {doc}")
    return 1 if (a.check and stale) else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
