"""What a value read from an input file is, for the input policy of docs/input_policy.md: the
numbers JSON cannot carry (NonFinite), how a value found is named in a message (`found`), the
text check (a lone surrogate is no text), and the ranges every loader shares.

NaN, Infinity and -Infinity are not JSON, but Python's json writes them; a literal beyond a float
(1e5000) or an integer of thousands of digits is JSON but no usable number. The loaders read all of
them as NonFinite: the non-finite float each stands for, with the text it was written as. The rule
of the field the value is in then judges it (a file-level field refuses the file, an entry's field
degrades that entry, a field nothing reads is ignored), so one such value never decides more than
its own field.
"""
from __future__ import annotations

import math
from typing import Any

# the contract's "no value of mine" in its closed enums (bound_type, headroom_class): compared by this
# name, never by a literal that also names an op class (tests/test_opclasses.py scans for those)
UNKNOWN = "unknown"

MAX_DIM = 2 ** 48  # no tensor dimension, token count, step count or batch is this large: a corrupt
                   # value (and products of such numbers overflow a float)
MIN_LATENCY_MS = 1e-6  # 1 ns: no kernel launch is shorter (and a rate over a shorter time overflows)
MAX_LATENCY_MS = 1e9   # 11.6 days: no kernel launch is longer (and peak x time overflows)
MAX_INT_DIGITS = 309   # an integer literal with more digits is beyond any float (1.8e308)


class NonFinite(float):
    """A number JSON cannot carry, as read: the non-finite float it stands for (NaN, +inf, -inf)
    and `text`, how the file wrote it ("NaN", "1e5000", "a 5001-digit integer")."""

    text: str

    def __new__(cls, value: float, text: str):
        obj = super().__new__(cls, value)
        obj.text = text
        return obj

    def __getnewargs__(self):  # copy / pickle keep the text
        return float(self), self.text

    def __repr__(self) -> str:
        return self.text

    __str__ = __repr__


def json_constant(name: str) -> NonFinite:
    """json.loads' parse_constant: NaN, Infinity, -Infinity."""
    return NonFinite(float(name), name)


def json_float(text: str) -> float:
    """json.loads' parse_float: a literal beyond a float (1e5000) is kept as NonFinite."""
    x = float(text)
    return x if math.isfinite(x) else NonFinite(x, text if len(text) <= 24 else text[:12] + "..." + text[-6:])


def json_int(text: str):
    """json.loads' parse_int: an integer beyond any float is kept as NonFinite (Python would refuse
    one of over 4,300 digits with a ValueError)."""
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        return NonFinite(-math.inf if text.startswith("-") else math.inf, f"a {digits}-digit integer")
    return int(text)


def is_number(v: Any) -> bool:
    """A JSON number (a bool is not one)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def finite(v: Any) -> bool:
    """A number that is finite (an integer beyond any float is not)."""
    if not is_number(v):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:
        return False


def found(v: Any) -> str:
    """How a value found is named in a message: a number by its value, anything else by its
    JSON type (null, boolean, string, array, object)."""
    if isinstance(v, NonFinite):
        return v.text
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
        return f"{v:g}"
    if isinstance(v, int):
        if abs(v) < 10 ** 30:
            return str(v)
        return f"{float(v):g}" if abs(v) < 10 ** 308 else f"a {len(str(abs(v)))}-digit integer"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


def text_problem(s: str) -> str | None:
    """Why a string is no text (a lone surrogate: JSON escapes such as \\ud800 that encode no
    character), or None."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (f"a string that is not valid Unicode (a lone surrogate, "
                f"{s[exc.start].encode('utf-8', 'backslashreplace').decode()} at character {exc.start})")
    return None


def printable(s: str) -> str:
    """A string as it can be written (a lone surrogate escaped as \\udXXX)."""
    return s.encode("utf-8", "backslashreplace").decode("utf-8")
