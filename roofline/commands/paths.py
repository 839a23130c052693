"""A round folder given where a file is expected: every command that reads one file of a round
(analyze: the Top-N; plot, rerun, feedback: the artifact) takes the round folder holding it, as
`compare` does."""
from __future__ import annotations

import sys
from pathlib import Path

import click


def in_round(path: Path, name: str, cmd: str, what: str) -> Path:
    """`path`, or `path/name` when `path` is a folder; a folder without it is one line, exit 2."""
    p = Path(path)
    if not p.is_dir():
        return p
    f = p / name
    if f.is_file():
        return f
    others = sorted(x.name for x in p.glob("profile_*.json"))
    click.echo(f"roofline {cmd}: {p}: a folder without {name}: expected {what} or the round folder holding it"
               + (f" (it holds {', '.join(others)})" if others else ""), err=True)
    sys.exit(2)
