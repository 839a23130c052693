"""One Top-N entry, field by field (docs/input_policy.md, "Inside one entry").

Every problem inside an entry (a value of the wrong type; NaN, Infinity, or a literal beyond a
float; null where a number belongs; a negative or zero count or dimension; one beyond 2^48; a
name that is missing, empty or not valid Unicode) is a problem OF THAT ENTRY: it is recorded in
`Entry.problems` as "<JSON path>: expected <what>, got <found>", and the analysis degrades that
entry alone (level L2) while the others are analysed. Nothing here raises. Fields no model reads
are ignored, never judged. null stands for "absent" only in an optional field that is not a
number (short_name, classification, editable, est_shape, shapes, dtypes and their values): a
number is never null.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from roofline.core import opclasses as _opclasses
from roofline.io.values import (MAX_DIM, MAX_LATENCY_MS, MIN_LATENCY_MS, finite, found, is_number, printable,
                             text_problem)

REGIMES = ("decode", "prefill")
BOOL_KEYS = frozenset({"paged", "causal", "reduce",   # reduce: elementwise shape of a reduction (roofline topn)
                       "state_in", "z", "state_update"})   # linear attention / state space: opclasses/recurrent.py
# shape keys the byte/FLOP models read as numbers (roofline/core/shapes.py, roofline/models), registered
# per op class (roofline/opclasses); every key some model reads (numbers among them: stage, q_len)
DIM_KEYS = _opclasses.dim_keys()
READ_KEYS = frozenset().union(*(oc.shape_keys for oc in _opclasses.REGISTRY.values()))

LATENCY = f"a launch time of 1 ns to 11.6 days ({MIN_LATENCY_MS:g}..{MAX_LATENCY_MS:g} ms)"
DIMENSION = "a positive dimension (at most 2^48)"


@dataclass
class Regime:
    base_latency_ms: float | None      # None: the value in the file is unusable (see Entry.problems)
    launches_per_step: float | None


@dataclass
class Entry:
    index: int
    name: str                          # the kernel name; "entries[i]" when the file gives none usable
    pct_gpu_time: float                # NaN when the file gives no usable share (the entry is in degraded[] only)
    regimes: dict[str, Regime]
    short_name: str | None = None
    classification: str | None = None
    editable: bool = True
    launches_per_logical_op: int = 1
    est_shape: dict | None = None
    shapes: list[dict] | None = None
    dtypes: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)   # bad values -> degrade this entry (L2)
    notes: list[str] = field(default_factory=list)      # said in the entry's notes (another entry has its name)
    raw: dict = field(default_factory=dict)


class _Fields:
    """Reads the fields of entries[i]; a bad value becomes a problem, never an exception."""

    def __init__(self, i: int):
        self.where = f"entries[{i}]"
        self.problems: list[str] = []

    def bad(self, path: str, expected: str, v: Any = None, got: str | None = None) -> None:
        where = f"{self.where}.{path}" if path else self.where
        self.problems.append(f"{where}: {expected}" if got == "" else
                             f"{where}: expected {expected}, got {got or found(v)}")

    def number(self, v: Any, path: str, expected: str, ok: Callable[[float], bool]) -> float | None:
        """A finite number for which ok() holds, else a problem (and None)."""
        if not finite(v) or not ok(float(v)):
            self.bad(path, expected, v)
            return None
        return float(v)

    def text(self, v: Any, path: str, expected: str = "a string") -> str | None:
        """An optional string (null = absent): valid Unicode text, else a problem (and None)."""
        if v is None:
            return None
        if not isinstance(v, str):
            self.bad(path, expected, v)
            return None
        why = text_problem(v)
        if why:
            self.bad(path, "text (valid Unicode)", got=why)
            return None
        return v

    def flag(self, v: Any, path: str) -> bool | None:
        """An optional boolean (null = absent), else a problem (and None)."""
        if v is None or isinstance(v, bool):
            return v
        self.bad(path, "true or false", v)
        return None


def parse_entry(e: Any, i: int) -> Entry:
    """entries[i] -> Entry; its problems in Entry.problems (the analysis degrades it on any)."""
    f = _Fields(i)
    if not isinstance(e, dict):
        f.bad("", "an object (a Top-N entry)", e)
        return Entry(index=i, name=f.where, pct_gpu_time=math.nan, regimes={}, problems=f.problems)
    ent = Entry(index=i, name=_name(f, e), pct_gpu_time=_pct(f, e), regimes=_regimes(f, e), raw=e)
    ent.short_name = f.text(e.get("short_name"), "short_name")
    cls = f.text(e.get("classification"), "classification")
    ent.classification = cls.strip().lower() if cls else None
    ed = f.flag(e.get("editable"), "editable")
    ent.editable = True if ed is None else ed
    if "launches_per_logical_op" in e:
        n = f.number(e["launches_per_logical_op"], "launches_per_logical_op", "an integer >= 1 (at most 2^48)",
                     lambda x: x.is_integer() and 1 <= x <= MAX_DIM)
        ent.launches_per_logical_op = int(n) if n is not None else 1
    if e.get("est_shape") is not None:
        ent.est_shape = _shape(f, e["est_shape"], "est_shape")
    if e.get("shapes") is not None:
        if isinstance(e["shapes"], list):
            ent.shapes = [_shape(f, s, f"shapes[{j}]") for j, s in enumerate(e["shapes"])]
        else:
            f.bad("shapes", "an array of objects", e["shapes"])
    _per_shape_numbers(f, e)
    if e.get("dtypes") is not None:
        if isinstance(e["dtypes"], dict):
            ent.dtypes = {k: t for k, x in e["dtypes"].items() if (t := f.text(x, f"dtypes.{k}")) is not None}
        else:
            f.bad("dtypes", "an object", e["dtypes"])
    ent.problems = f.problems
    return ent


def _name(f: _Fields, e: dict) -> str:
    """The kernel name, or the entry's place ("entries[i]") when it has no usable one."""
    if "name" not in e:
        f.bad("name", "required field is missing", got="")
        return f.where
    v = e["name"]
    if not isinstance(v, str):
        f.bad("name", "the kernel's name (a string)", v)
        return f.where
    why = text_problem(v)
    if why:
        f.bad("name", "the kernel's name as text (valid Unicode)", got=why)
        return printable(v)
    if not v.strip():
        f.bad("name", "the kernel's name", got="an empty string" if not v else "only blanks")
        return f.where
    return v


def _pct(f: _Fields, e: dict) -> float:
    """The share of GPU time: NaN when unusable; a value above 100 is kept (the entry degrades)."""
    if "pct_gpu_time" not in e:
        f.bad("pct_gpu_time", "required field is missing", got="")
        return math.nan
    v = e["pct_gpu_time"]
    if not finite(v) or v < 0:
        f.bad("pct_gpu_time", "a share of GPU time in 0..100 (%)", v)
        return math.nan
    if v > 100:
        f.bad("pct_gpu_time", "a share of GPU time in 0..100 (%)", v)
    return float(v)


def _regimes(f: _Fields, e: dict) -> dict[str, Regime]:
    if "regimes" not in e:
        f.bad("regimes", "required field is missing", got="")
        return {}
    regs = e["regimes"]
    if not isinstance(regs, dict):
        f.bad("regimes", "an object", regs)
        return {}
    out: dict[str, Regime] = {}
    for rname in REGIMES:
        if rname not in regs:
            continue  # other keys are ignored
        r, rp = regs[rname], f"regimes.{rname}"
        if not isinstance(r, dict):
            f.bad(rp, "an object {base_latency_ms, launches_per_step}", r)
            out[rname] = Regime(None, None)
            continue
        vals = []
        for key, expected, ok in (("base_latency_ms", LATENCY, lambda x: MIN_LATENCY_MS <= x <= MAX_LATENCY_MS),
                                  ("launches_per_step", "a positive number of launches (at most 2^48)",
                                   lambda x: 0 < x <= MAX_DIM)):
            if key not in r:
                f.bad(f"{rp}.{key}", "required field is missing", got="")
                vals.append(None)
            else:
                vals.append(f.number(r[key], f"{rp}.{key}", expected, ok))
        out[rname] = Regime(*vals)
    if not out:
        f.bad("regimes", "at least one of 'decode' or 'prefill'", regs)
    return out


def _shape(f: _Fields, s: Any, path: str) -> dict:
    """One shape object: the dimensions and flags a model reads checked, other keys kept unjudged."""
    if not isinstance(s, dict):
        f.bad(path, "an object (a shape)", s)
        return {}
    out: dict = {}
    for k, x in s.items():
        kp = f"{path}.{k}"
        if k in BOOL_KEYS:
            b = f.flag(x, kp)
            if b is not None:
                out[k] = b
        elif k == "shape":
            dims = _dims_list(f, x, kp)
            if dims is not None:
                out[k] = dims
        elif k in DIM_KEYS or (k in READ_KEYS and (is_number(x) or x is None)):
            if f.number(x, kp, DIMENSION, lambda v: 0 < v <= MAX_DIM) is not None:
                out[k] = x
        else:
            out[k] = x  # read by no model: kept (roofline.core.lint names it), never judged
    return out


def _dims_list(f: _Fields, x: Any, path: str) -> list[int] | None:
    if not isinstance(x, list):
        f.bad(path, "an array of positive integers", x)
        return None
    ok = True
    for j, d in enumerate(x):
        if f.number(d, f"{path}[{j}]", "a positive integer dimension (at most 2^48)",
                    lambda v: v.is_integer() and 0 < v <= MAX_DIM) is None:
            ok = False
    return [int(d) for d in x] if ok else None


def _per_shape_numbers(f: _Fields, e: dict) -> None:
    """shape_launches (launches of each captured shape) and shape_base_latency_ms (its mean time)."""
    for key, expected, ok in (("shape_launches", "a launch count >= 0", lambda x: 0 <= x <= MAX_DIM),
                              ("shape_base_latency_ms", LATENCY, lambda x: MIN_LATENCY_MS <= x <= MAX_LATENCY_MS)):
        v = e.get(key)
        if v is None:
            continue
        if not isinstance(v, list):
            f.bad(key, "an array of numbers, one per shape", v)
            continue
        for j, x in enumerate(v):
            f.number(x, f"{key}[{j}]", expected, ok)


def same_names(entries: list[Entry]) -> None:
    """Entries that share a kernel name are kept apart, each with its share as given (a writer
    that splits one kernel by shape or regime means two rows); each says so in its notes."""
    by_name: dict[str, list[Entry]] = {}
    for e in entries:
        if not e.problems or e.name != f"entries[{e.index}]":
            by_name.setdefault(e.name, []).append(e)
    for group in by_name.values():
        if len(group) < 2:
            continue
        for e in group:
            others = ", ".join(f"entries[{o.index}] ({found(o.pct_gpu_time)}%)" for o in group if o is not e)
            e.notes.append(f"the kernel name of this entry (entries[{e.index}]) is also that of {others}: "
                           "kept apart, each with its own pct_gpu_time as given, not merged")
