"""Load and validate the pipeline's files (docs/input_policy.md; formats: docs/topn.md, docs/env_report.md,
docs/config.md) into typed records.

A problem of a FILE (missing, not JSON, the wrong top-level type, no entries list, a top-level field
missing or of the wrong type or out of range: a negative step count, a non-finite workload figure)
-> InputError, one line: file, JSON path, what was expected, what was found. A problem INSIDE ONE
ENTRY of a Top-N (any bad value of any of its fields) is never an input error: it is recorded on the
entry as `problems` (roofline.core.topn_entry) and the analysis degrades that entry only.
Extra fields are ignored, never an error; NaN / Infinity / a number beyond a float is read as
roofline.io.values.NonFinite and judged by the rule of the field it is in.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roofline.io.errors import InputError
from roofline.core.topn_entry import DIM_KEYS, REGIMES, Entry, Regime, parse_entry, same_names  # noqa: F401 (re-exported)
from roofline.io.values import (MAX_DIM, finite, found, is_number, json_constant, json_float, json_int,
                             text_problem)

PCT_SUM_TOLERANCE = 1.0  # percent points of rounding slack in a Top-N's pct_gpu_time sum


def read_json(path: str | Path) -> Any:
    """Parse a JSON input file. Only a regular file is read (a FIFO, a device or a directory is
    refused without blocking), within roofline.io.safeio's size limit and nesting depth. NaN,
    Infinity and numbers beyond a float are read as NonFinite (the field's rule judges them)."""
    from roofline.io import safeio

    p = Path(path)
    try:
        raw = safeio.read_bytes(p)
    except FileNotFoundError:
        raise InputError(str(p), "", "file not found") from None
    except safeio.UnsafeInput as exc:
        raise InputError(str(p), "", exc.problem) from None
    except OSError as exc:
        raise InputError(str(p), "", f"cannot be read ({exc.__class__.__name__}: {exc.strerror or exc})") from None
    if raw[:2] == b"\x1f\x8b":
        raise InputError(str(p), "", "is gzip-compressed: expected a plain JSON file (gunzip it first)")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(str(p), "", f"cannot be read (not UTF-8 text: byte {exc.start})") from None
    if not text.strip():
        raise InputError(str(p), "", "file is empty, expected a JSON object")
    if not safeio.json_depth_ok(raw):
        raise InputError(str(p), "", f"JSON nested deeper than {safeio.MAX_JSON_DEPTH} levels")
    try:
        return json.loads(text, parse_constant=json_constant, parse_float=json_float, parse_int=json_int)
    except RecursionError:
        raise InputError(str(p), "", "JSON nested too deeply") from None
    except json.JSONDecodeError as exc:
        truncated = exc.pos >= len(text.rstrip()) - 1 or exc.msg.startswith("Unterminated")
        raise InputError(str(p), "", f"not valid JSON ({exc.msg}, line {exc.lineno} column {exc.colno})"
                         + (" - truncated?" if truncated else "")) from None


class _V:
    """Typed-field validator of the file-level fields: a bad value is an InputError naming the
    file, the JSON path, what was expected and what was found."""

    def __init__(self, file: str):
        self.file = file

    def fail(self, path: str, expected: str, got: Any = ..., found_text: str | None = None):
        tail = f", got {found_text}" if found_text else ("" if got is ... else f", got {found(got)}")
        raise InputError(self.file, path, f"expected {expected}{tail}")

    def obj(self, v, path):
        if not isinstance(v, dict):
            self.fail(path, "an object", v)
        return v

    def num(self, v, path):
        """A number (NonFinite included: the caller's range check names it)."""
        if not is_number(v):
            self.fail(path, "a number", v)
        try:
            return float(v)
        except OverflowError:  # an integer beyond any float
            self.fail(path, "a number of usable size", v)

    def in_range(self, v, path, expected: str, lo: float, hi: float, lo_open: bool = False) -> float:
        """A finite number in lo..hi (above lo when lo_open), else an InputError."""
        x = self.num(v, path)
        if not math.isfinite(x) or x > hi or x < lo or (lo_open and x == lo):
            self.fail(path, expected, v)
        return x

    def int_(self, v, path):
        if not finite(v) or not float(v).is_integer():
            self.fail(path, "an integer", v)
        return int(v)

    def str_(self, v, path):
        if not isinstance(v, str):
            self.fail(path, "a string", v)
        why = text_problem(v)
        if why:
            self.fail(path, "text (valid Unicode)", found_text=why)
        return v

    def bool_(self, v, path):
        if not isinstance(v, bool):
            self.fail(path, "true or false", v)
        return v

    def req(self, d: dict, key: str, path: str):
        if key not in d:
            raise InputError(self.file, f"{path}.{key}" if path else key, "required field is missing")
        return d[key]


@dataclass
class TopN:
    path: str
    entries: list[Entry]
    schema_version: int | None = None
    round: int | None = None
    total_gpu_time_ms: float | None = None
    n_decode_steps: float | None = None
    n_prefill_steps: float | None = None
    raw: dict = field(default_factory=dict)


@dataclass
class Env:
    path: str | None
    gfx: str
    model_dtype: str | None         # None: not in the file (entries without dtypes degrade)
    model_arch_class: str | None    # recorded only
    workload: dict[str, float]      # the keys the file gives (a stage-A fill that needs another degrades)
    gpu_name: str | None = None
    kv_cache_dtype: str | None = None
    tp: int | None = None           # the run's tensor-parallel degree as the user gives it (None: not given)
    missing: list[str] = field(default_factory=list)   # required fields the file leaves out
    raw: dict = field(default_factory=dict)


def _bad_number(x: float) -> bool:
    return math.isnan(x) or math.isinf(x)


STEPS = "a step count >= 0 (at most 2^48)"


def parse_topn(data: Any, file: str = "profile_topN.json") -> TopN:
    """A Top-N document -> TopN. File-level problems raise InputError; each entry's own problems
    are kept on the entry (roofline.core.topn_entry)."""
    v = _V(file)
    if not isinstance(data, dict):
        v.fail("(top level)", "a JSON object", data)
    entries_raw = v.req(data, "entries", "")
    if not isinstance(entries_raw, list):
        v.fail("entries", "an array", entries_raw)
    serving = data.get("serving")
    steps: dict[str, float | None] = {"n_decode_steps": None, "n_prefill_steps": None}
    if serving is not None:
        v.obj(serving, "serving")
        for k in steps:
            if k in serving:
                # a negative or non-finite count would pick the regime of every kernel: refused
                steps[k] = v.in_range(serving[k], f"serving.{k}", STEPS, 0, MAX_DIM)
    total = (v.in_range(data["total_gpu_time_ms"], "total_gpu_time_ms", "a time >= 0 (ms)", 0, math.inf)
             if "total_gpu_time_ms" in data else None)
    sv = _count(v, data, "schema_version")
    rnd = _count(v, data, "round")
    entries = [parse_entry(e, i) for i, e in enumerate(entries_raw)]
    same_names(entries)
    pct_sum = sum(e.pct_gpu_time for e in entries if not _bad_number(e.pct_gpu_time) and 0 <= e.pct_gpu_time <= 100)
    if pct_sum > 100 + PCT_SUM_TOLERANCE:
        # shares of one window cannot add up to more than all of it: no entry's share can be trusted
        raise InputError(file, "entries", f"pct_gpu_time values sum to {pct_sum:.4g}%, more than 100%")
    return TopN(path=file, entries=entries, schema_version=sv, round=rnd, total_gpu_time_ms=total,
                n_decode_steps=steps["n_decode_steps"], n_prefill_steps=steps["n_prefill_steps"], raw=data)


def _count(v: _V, data: dict, key: str) -> int | None:
    """schema_version / round: an integer >= 0, copied into the artifact (a number is never null)."""
    if key not in data:
        return None
    n = v.int_(data[key], key)
    if not 0 <= n <= MAX_DIM:
        v.fail(key, "an integer >= 0", data[key])
    return n


# config.json keys read as numbers (roofline/core/shapes.py)
CONFIG_INT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "num_experts_per_tok", "moe_topk",
                   "top_k", "hidden_size", "d_model", "moe_intermediate_size", "expert_intermediate_size",
                   "num_attention_heads", "n_head", "num_key_value_heads", "num_kv_heads", "head_dim")
ENV_STRINGS = ("gfx", "model_dtype", "model_arch_class")


ENV_REQUIRED = ("gfx", "model_dtype", "model_arch_class", "workload.isl", "workload.osl", "workload.conc")


def missing_env_fields(data: dict) -> list[str]:
    """The required env-report fields `data` leaves out, all of them, in ENV_REQUIRED's order."""
    wl = data.get("workload")
    return [k for k in ENV_REQUIRED if (k not in data if "." not in k else
                                        not isinstance(wl, dict) or k.split(".")[1] not in wl)]


def parse_env(data: Any, file: str = "env_report.json") -> Env:
    """An env report. Every field it reads is file-level: a bad one raises InputError naming it;
    fields it does not read (framework, ...) are never judged. A left-out field: without `gfx`
    nothing can be analysed (InputError naming every left-out field at once, `.missing` holds
    them); the others are recorded in `Env.missing` and only what needs them degrades (an entry
    without captured dtypes needs model_dtype; a stage-A fill needs the workload)."""
    v = _V(file)
    if not isinstance(data, dict):
        v.fail("(top level)", "a JSON object", data)
    missing = missing_env_fields(data)
    if "gfx" in missing:
        err = (InputError(file, "gfx", "required field is missing") if missing == ["gfx"] else
               InputError(file, "", ("not an env report: " if len(missing) == len(ENV_REQUIRED) else "")
                          + f"required fields are missing: {', '.join(missing)}"))
        err.missing = missing
        raise err
    gfx = v.str_(data["gfx"], "gfx")
    mdt = v.str_(data["model_dtype"], "model_dtype") if "model_dtype" in data else None
    mac = v.str_(data["model_arch_class"], "model_arch_class") if "model_arch_class" in data else None
    wl = v.obj(data["workload"], "workload") if "workload" in data else {}
    workload = {}
    for k in ("isl", "osl", "conc"):
        if k not in wl:
            continue
        p = f"workload.{k}"
        x = v.num(wl[k], p)
        if x <= 0 or _bad_number(x):
            v.fail(p, "a positive number", wl[k])
        if x > MAX_DIM:
            v.fail(p, f"at most {MAX_DIM}", wl[k])
        workload[k] = x
    env = Env(path=file, gfx=gfx, model_dtype=mdt, model_arch_class=mac, workload=workload, missing=missing,
              raw=data)
    if data.get("gpu_name") is not None:
        env.gpu_name = v.str_(data["gpu_name"], "gpu_name")
    if data.get("kv_cache_dtype") is not None:
        env.kv_cache_dtype = v.str_(data["kv_cache_dtype"], "kv_cache_dtype")
    if data.get("config_path") is not None:
        v.str_(data["config_path"], "config_path")
    if data.get("tp") is not None:
        n = v.int_(data["tp"], "tp")
        if not 1 <= n <= MAX_DIM:
            v.fail("tp", "an integer >= 1 (the tensor-parallel degree)", data["tp"])
        env.tp = n
    return env


CONFIG_STR_KEYS = ("model_type", "_name_or_path")   # read as names, never judged: of another type, left out


def parse_config(data: Any, file: str = "config.json") -> dict:
    """A Hugging Face config.json. Multimodal configs keep the LM under `text_config`; it is merged
    over the top level. Only numbers are read from it, by name, when a shape needs them: those
    must be integers in 0..2^48; every other key is never judged."""
    v = _V(file)
    if not isinstance(data, dict):
        v.fail("(top level)", "a JSON object", data)
    merged = dict(data)
    tc = data.get("text_config")
    if isinstance(tc, dict):
        merged.update(tc)
    for k in CONFIG_INT_KEYS:
        x = merged.get(k)
        if x is None:
            continue
        where = f"text_config.{k}" if isinstance(tc, dict) and k in tc else k
        n = v.int_(x, where)  # "64" or true is refused, never coerced
        if n < 0 or n > MAX_DIM:
            v.fail(where, f"an integer in 0..{MAX_DIM}", x)
    for k in CONFIG_STR_KEYS:   # names read as text (the model family): one of another type is no name
        if k in merged and not isinstance(merged[k], str):
            del merged[k]
    return merged


def load_topn(path) -> TopN:
    return parse_topn(read_json(path), str(path))


def load_env(path) -> Env:
    return parse_env(read_json(path), str(path))


def load_config(path) -> dict:
    return parse_config(read_json(path), str(path))


UNLAID_LEVELS = 2   # outside the pipeline's layout: the folder and two above it (the layout's depth)


def find_upwards(start: Path, name: str, max_levels: int | None = None) -> Path | None:
    """Look for `name` in `start` and each parent up to the run root: in the pipeline's layout
    (<run>/profile/round_<R>/...) the run folder and never above it (a stray file in a folder that
    holds many runs, /tmp say, belongs to none of them); elsewhere the folder and UNLAID_LEVELS above."""
    import re

    d = start.resolve()
    if max_levels is None:
        max_levels = UNLAID_LEVELS
        for depth, p in enumerate((d, *d.parents)):
            if re.fullmatch(r"round_\d+", p.name):
                max_levels = depth + (2 if p.parent.name == "profile" else 1)
                break
    for _ in range(max_levels + 1):
        cand = d / name
        if cand.is_file():
            return cand
        if d.parent == d:
            break
        d = d.parent
    return None
