"""A round folder given where a file is expected: every command that reads one file of a round
(analyze: the Top-N; plot, rerun, feedback: the artifact) takes the round folder holding it, as
`compare` does. A path that cannot even be looked at (a name over the system's limit, a folder
without read or search permission) is one line naming it, exit 2, never an internal error."""
from __future__ import annotations

import os
import re
import stat
import sys
from pathlib import Path

import click

from roofline.io.safeio import path_problem


def _fail(cmd: str, msg: str):
    click.echo(f"roofline {cmd}: {msg}", err=True)
    sys.exit(2)


def in_round(path: Path, name: str, cmd: str, what: str) -> Path:
    """`path`, or `path/name` when `path` is a folder; a folder without it is one line, exit 2."""
    p = Path(path)
    bad = path_problem(p)
    if bad:
        _fail(cmd, f"{p}: {bad}")
    try:
        is_dir = stat.S_ISDIR(os.stat(p).st_mode)
    except OSError:
        return p   # missing: the reader says "no such file"
    if not is_dir:
        return p
    f = p / name
    bad = path_problem(f)
    if bad:
        _fail(cmd, f"{f}: {bad}" + ("" if os.access(p, os.R_OK | os.X_OK) else
                                   f" (the folder {p} cannot be read: check its permissions)"))
    if f.is_file():
        return f
    try:
        others = sorted(x.name for x in p.glob("profile_*.json"))
    except OSError as exc:
        from roofline.io.safeio import os_problem

        _fail(cmd, f"{p}: {os_problem(exc)}")
    _fail(cmd, f"{p}: a folder without {name}: expected {what} or the round folder holding it"
          + (f" (it holds {', '.join(others)})" if others else ""))


# ------------------------------------------------------------------ numbers given on the command line
class FiniteFloat(click.ParamType):
    """A command-line number under the bounds a file's number has (docs/input_policy.md): finite
    (nan, inf, 1e400 and a 400-digit literal are refused), within [lo, hi] (`lo_open`: above lo)."""

    name = "float"

    def __init__(self, lo: float | None = None, hi: float | None = None, lo_open: bool = False):
        self.lo, self.hi, self.lo_open = lo, hi, lo_open

    def convert(self, value, param, ctx):
        import math

        if isinstance(value, str) and (not value.isascii() or "_" in value):   # float() takes "1_0", "٣"
            self.fail(f"{_shown(value)} is not a number", param, ctx)
        try:
            x = float(value)
        except (TypeError, ValueError, OverflowError):
            self.fail(f"{_shown(value)} is not a number", param, ctx)
        if not math.isfinite(x):
            self.fail(f"expected a finite number, got {_shown(value)}", param, ctx)
        if self.lo is not None and (x <= self.lo if self.lo_open else x < self.lo):
            want = "a positive number" if self.lo == 0 and self.lo_open else \
                f"a number {'>' if self.lo_open else '>='} {self.lo:g}"
            self.fail(f"expected {want}, got {_shown(value)}", param, ctx)
        if self.hi is not None and x > self.hi:
            self.fail(f"expected a number <= {self.hi:g}, got {_shown(value)}", param, ctx)
        return x


class Count(click.IntRange):
    """A command-line count (tokens, requests, steps) in lo..2^48, as the same field in a file
    (an env report's workload, a Top-N's step counts): 2^48+1, 10^20 and a 400-digit value are refused.
    An IntRange, so that --help shows the range."""

    def __init__(self, lo: int = 1):
        from roofline.io.values import MAX_DIM

        super().__init__(min=lo, max=MAX_DIM)
        self.lo = lo

    def convert(self, value, param, ctx):
        from roofline.io.values import MAX_DIM, MAX_INT_DIGITS

        if isinstance(value, int) and not isinstance(value, bool):
            n = value
        else:
            s = str(value).strip()
            if len(s.lstrip("+-")) > MAX_INT_DIGITS:
                self.fail(f"expected an integer in {self.lo}..2^48 ({MAX_DIM}), got {_shown(s)}", param, ctx)
            if not re.fullmatch(r"[+-]?[0-9]+", s):   # int() would also take "1_000" and other scripts' digits
                self.fail(f"{_shown(s)} is not an integer", param, ctx)
            n = int(s)
        if not self.lo <= n <= MAX_DIM:
            self.fail(f"expected an integer in {self.lo}..2^48 ({MAX_DIM}), got {_shown(str(n))}", param, ctx)
        return n


def _shown(value) -> str:
    """A value as a message shows it: a very long literal by its length."""
    s = str(value)
    digits = len(s.lstrip("+-"))
    return s if len(s) <= 24 else (f"a {digits}-digit integer" if s.lstrip("+-").isdigit() else s[:20] + "...")
