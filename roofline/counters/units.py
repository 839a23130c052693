"""Numbers and units as Nsight Compute prints them, brought to ncu's base units: THE unit table
of every ncu reader (stage C's counters and `roofline topn`'s durations).

ncu's base units: byte, nsecond (printed "ns"), hz / "x/second" for rates, cycle, inst, %.
Without `--print-units base` the CLI scales units with DECIMAL prefixes (checked on the H200
fixture: 176.439296 Mbyte == 176,439,296 byte; 1.504 Kbyte/cycle == 1,504 byte/cycle;
3.198552 Ghz == 3,198,551,897.82 hz; 177.888 us == 177,888 ns), and in both modes it prints
thousands separators ("137,438,953,472").
"""
from __future__ import annotations

import re

from roofline.io.errors import RooflineError

_SI = {"": 1.0, "K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
       "m": 1e-3, "u": 1e-6, "n": 1e-9}
# time, as a duration, in nanoseconds (ncu's base for gpu__time_duration)
_TIME_NS = {"ns": 1.0, "nsecond": 1.0, "nanosecond": 1.0, "us": 1e3, "usecond": 1e3, "microsecond": 1e3,
            "ms": 1e6, "msecond": 1e6, "millisecond": 1e6, "s": 1e9, "second": 1e9}
# time, in a rate's denominator, in seconds (ncu's base for rates is "per second")
_TIME_S = {k: v * 1e-9 for k, v in _TIME_NS.items()}
# countable base words that may carry an SI prefix
_WORDS = ("byte", "inst", "cycle", "warp", "thread", "block", "sector", "request", "register",
          "cluster", "op", "flop", "SM", "wavefront", "transaction", "instruction")
_HZ = re.compile(r"^([kKMGT]?)hz$", re.IGNORECASE)


class UnitError(RooflineError, ValueError):
    """A unit this table does not know (the readers turn it into a CounterReadError)."""


def _count_factor(word: str) -> float:
    if word == "" or word == "%":
        return 1.0
    m = _HZ.match(word)
    if m:
        return _SI[m.group(1).upper() if m.group(1) else ""]
    for base in _WORDS:
        if word.endswith(base):
            prefix = word[: -len(base)]
            if prefix in _SI:
                return _SI[prefix]
    raise UnitError(f"unknown unit {word!r}")


def unit_factor(unit: str | None) -> float:
    """Multiplier that brings a value printed in `unit` to ncu's base unit."""
    u = (unit or "").strip()
    if u in _TIME_NS:
        return _TIME_NS[u]
    if "/" in u:
        num, den = u.split("/", 1)
        f_num = _count_factor(num.strip())
        den = den.strip()
        if den in _TIME_S:
            return f_num / _TIME_S[den]
        return f_num / _count_factor(den)
    return _count_factor(u)


def parse_number(text) -> float | None:
    """'1,234.5' -> 1234.5; '' / 'n/a' / non-numbers -> None."""
    if text is None:
        return None
    if isinstance(text, (int, float)):
        return float(text)
    s = str(text).strip().replace(",", "")
    if not s or s.lower() in ("n/a", "na", "nan", "-", "none"):
        return None
    try:
        return float(s)
    except ValueError:
        return None
