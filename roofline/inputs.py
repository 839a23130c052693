"""Load and validate the pipeline's files (docs/topn.md, docs/env_report.md, docs/config.md) into typed records.

Malformed file (missing, not JSON, wrong top-level type, required field missing, field of the wrong
type) -> InputError, one line: file, JSON path, what was expected. A well-typed but impossible value
inside one entry (negative/zero/NaN latency, pct above 100, a zero dimension) is NOT an input error:
it is recorded on the entry as `problems` and the analysis degrades that entry only.
Extra fields are ignored, never an error.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roofline.errors import InputError
from roofline import opclasses as _opclasses

REGIMES = ("decode", "prefill")
MAX_DIM = 2 ** 48  # no tensor dimension, token count or batch is this large: a corrupt value (and
                   # products of such numbers overflow a float)
MIN_LATENCY_MS = 1e-6  # 1 ns: no kernel launch is shorter (and a rate over a shorter time overflows)
MAX_LATENCY_MS = 1e9   # 11.6 days: no kernel launch is longer (and peak x time overflows)
PCT_SUM_TOLERANCE = 1.0  # percent points of rounding slack in a Top-N's pct_gpu_time sum


def _tname(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


def read_json(path: str | Path) -> Any:
    """Parse a JSON input file. Only a regular file is read (a FIFO, a device or a directory is
    refused without blocking), within roofline.safeio's size limit and nesting depth."""
    from roofline import safeio

    p = Path(path)
    try:
        raw = safeio.read_bytes(p)
    except FileNotFoundError:
        raise InputError(str(p), "", "file not found") from None
    except safeio.NotRegularFile as exc:
        raise InputError(str(p), "", exc.problem) from None
    except safeio.InputTooLarge as exc:
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
        return json.loads(text, parse_constant=_no_constant)
    except _NonFinite as exc:
        raise InputError(str(p), "", f"not valid JSON ({exc} is not a JSON number)") from None
    except RecursionError:
        raise InputError(str(p), "", "JSON nested too deeply") from None
    except json.JSONDecodeError as exc:
        truncated = exc.pos >= len(text.rstrip()) - 1 or exc.msg.startswith("Unterminated")
        raise InputError(str(p), "", f"not valid JSON ({exc.msg}, line {exc.lineno} column {exc.colno})"
                         + (" - truncated?" if truncated else "")) from None


class _NonFinite(ValueError):
    pass


def _no_constant(name: str):
    """NaN / Infinity are not JSON (Python's json accepts them by default): refuse them."""
    raise _NonFinite(name)


class _V:
    """Small typed-field validator that knows the file name for its messages."""

    def __init__(self, file: str):
        self.file = file

    def fail(self, path: str, expected: str, got: Any = ...):
        tail = "" if got is ... else f", got {_tname(got)}"
        raise InputError(self.file, path, f"expected {expected}{tail}")

    def obj(self, v, path):
        if not isinstance(v, dict):
            self.fail(path, "an object", v)
        return v

    def num(self, v, path):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            self.fail(path, "a number", v)
        try:
            return float(v)
        except OverflowError:  # an integer beyond any float
            self.fail(path, "a number of usable size", v)

    def int_(self, v, path):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not v.is_integer()):
            self.fail(path, "an integer", v)
        return int(v)

    def str_(self, v, path):
        if not isinstance(v, str):
            self.fail(path, "a string", v)
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
class Regime:
    base_latency_ms: float
    launches_per_step: float


@dataclass
class Entry:
    index: int
    name: str
    pct_gpu_time: float
    regimes: dict[str, Regime]
    short_name: str | None = None
    classification: str | None = None
    editable: bool = True
    launches_per_logical_op: int = 1
    est_shape: dict | None = None
    shapes: list[dict] | None = None
    dtypes: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)   # impossible values -> degrade this entry
    raw: dict = field(default_factory=dict)


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
    missing: list[str] = field(default_factory=list)   # required fields the file leaves out
    raw: dict = field(default_factory=dict)


def _bad_number(x: float) -> bool:
    return math.isnan(x) or math.isinf(x)


def parse_topn(data: Any, file: str = "profile_topN.json") -> TopN:
    v = _V(file)
    v.obj(data, "(top level)") if isinstance(data, dict) else v.fail("(top level)", "a JSON object", data)
    entries_raw = v.req(data, "entries", "")
    if not isinstance(entries_raw, list):
        v.fail("entries", "an array", entries_raw)
    serving = data.get("serving")
    n_dec = n_pre = None
    if serving is not None:
        v.obj(serving, "serving")
        if "n_decode_steps" in serving:
            n_dec = v.num(serving["n_decode_steps"], "serving.n_decode_steps")
        if "n_prefill_steps" in serving:
            n_pre = v.num(serving["n_prefill_steps"], "serving.n_prefill_steps")
    total = v.num(data["total_gpu_time_ms"], "total_gpu_time_ms") if "total_gpu_time_ms" in data else None
    sv = v.int_(data["schema_version"], "schema_version") if "schema_version" in data else None
    rnd = v.int_(data["round"], "round") if "round" in data else None
    entries = [_parse_entry(v, e, i) for i, e in enumerate(entries_raw)]
    pct_sum = sum(e.pct_gpu_time for e in entries if not _bad_number(e.pct_gpu_time) and 0 <= e.pct_gpu_time <= 100)
    if pct_sum > 100 + PCT_SUM_TOLERANCE:
        # shares of one window cannot add up to more than all of it: no entry's share can be trusted
        raise InputError(file, "entries", f"pct_gpu_time values sum to {pct_sum:.4g}%, more than 100%")
    return TopN(path=file, entries=entries, schema_version=sv, round=rnd, total_gpu_time_ms=total,
                n_decode_steps=n_dec, n_prefill_steps=n_pre, raw=data)


def _parse_entry(v: _V, e: Any, i: int) -> Entry:
    p = f"entries[{i}]"
    v.obj(e, p)
    name = v.str_(v.req(e, "name", p), f"{p}.name")
    pct = v.num(v.req(e, "pct_gpu_time", p), f"{p}.pct_gpu_time")
    regs_raw = v.obj(v.req(e, "regimes", p), f"{p}.regimes")
    problems: list[str] = []
    if not name.strip():
        problems.append("name is empty")
    if _bad_number(pct) or pct < 0 or pct > 100:
        problems.append(f"pct_gpu_time {pct} is outside 0..100")
    regimes: dict[str, Regime] = {}
    for rname, r in regs_raw.items():
        if rname not in REGIMES:
            continue  # extra fields are ignored
        rp = f"{p}.regimes.{rname}"
        v.obj(r, rp)
        lat = v.num(v.req(r, "base_latency_ms", rp), f"{rp}.base_latency_ms")
        lps = v.num(v.req(r, "launches_per_step", rp), f"{rp}.launches_per_step")
        if _bad_number(lat) or lat <= 0:
            problems.append(f"regimes.{rname}.base_latency_ms is {lat}: must be a positive time")
        elif lat < MIN_LATENCY_MS:
            problems.append(f"regimes.{rname}.base_latency_ms is {lat:g}: below 1 ns, not a kernel time")
        elif lat > MAX_LATENCY_MS:
            problems.append(f"regimes.{rname}.base_latency_ms is {lat:g}: over 11 days, not a kernel time")
        if _bad_number(lps) or lps <= 0:
            problems.append(f"regimes.{rname}.launches_per_step is {lps}: must be positive")
        regimes[rname] = Regime(lat, lps)
    if not regimes:
        raise InputError(v.file, f"{p}.regimes", "expected at least one of 'decode' or 'prefill'")
    ent = Entry(index=i, name=name, pct_gpu_time=pct, regimes=regimes, problems=problems, raw=e)
    if "short_name" in e and e["short_name"] is not None:
        ent.short_name = v.str_(e["short_name"], f"{p}.short_name")
    if "classification" in e and e["classification"] is not None:
        ent.classification = v.str_(e["classification"], f"{p}.classification").strip().lower()
    if "editable" in e and e["editable"] is not None:
        ent.editable = v.bool_(e["editable"], f"{p}.editable")
    if "launches_per_logical_op" in e and e["launches_per_logical_op"] is not None:
        n = v.int_(e["launches_per_logical_op"], f"{p}.launches_per_logical_op")
        if n < 1:
            problems.append(f"launches_per_logical_op is {n}: must be >= 1")
        ent.launches_per_logical_op = max(n, 1)
    if "est_shape" in e and e["est_shape"] is not None:
        ent.est_shape = _shape(v, e["est_shape"], f"{p}.est_shape", problems)
    if "shapes" in e and e["shapes"] is not None:
        if not isinstance(e["shapes"], list):
            v.fail(f"{p}.shapes", "an array of objects", e["shapes"])
        ent.shapes = [_shape(v, s, f"{p}.shapes[{j}]", problems) for j, s in enumerate(e["shapes"])]
    if "dtypes" in e and e["dtypes"] is not None:
        d = v.obj(e["dtypes"], f"{p}.dtypes")
        ent.dtypes = {k: v.str_(x, f"{p}.dtypes.{k}") for k, x in d.items() if x is not None}
    return ent


_BOOL_KEYS = {"paged", "causal", "reduce"}   # reduce: elementwise shape of a reduction (roofline topn)
# shape keys the byte/FLOP models read as numbers (roofline/shapes.py, roofline/models)
DIM_KEYS = _opclasses.dim_keys()   # registered per op class (roofline/opclasses)
# config.json keys read as numbers (roofline/shapes.py)
CONFIG_INT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "num_experts_per_tok", "moe_topk",
                   "top_k", "hidden_size", "d_model", "moe_intermediate_size", "expert_intermediate_size",
                   "num_attention_heads", "n_head", "num_key_value_heads", "num_kv_heads", "head_dim")


def _shape(v: _V, s: Any, path: str, problems: list[str]) -> dict:
    v.obj(s, path)
    out: dict = {}
    for k, x in s.items():
        if k in _BOOL_KEYS:
            out[k] = v.bool_(x, f"{path}.{k}")
        elif k == "shape":
            if not isinstance(x, list):
                v.fail(f"{path}.shape", "an array of integers", x)
            dims = [v.int_(d, f"{path}.shape[{j}]") for j, d in enumerate(x)]
            if any(d <= 0 for d in dims):
                problems.append(f"{path.split('.', 1)[1]}.shape has a zero or negative dimension: {dims}")
            elif any(d > MAX_DIM for d in dims):
                problems.append(f"{path.split('.', 1)[1]}.shape has a dimension above {MAX_DIM}: {dims}")
            out[k] = dims
        elif isinstance(x, (int, float)) and not isinstance(x, bool):
            xf = v.num(x, f"{path}.{k}")
            if _bad_number(xf) or x <= 0:
                problems.append(f"{path.split('.', 1)[1]}.{k} is {x}: a dimension must be positive")
            elif xf > MAX_DIM:
                problems.append(f"{path.split('.', 1)[1]}.{k} is {x}: above {MAX_DIM}, not a real dimension")
            out[k] = x
        elif k in DIM_KEYS:
            if x is not None:
                v.fail(f"{path}.{k}", "a number (a dimension)", x)  # "64" or true is refused, never coerced
            # null: the dimension is absent (filled from est_shape / config / workload, or degraded)
        else:
            out[k] = x  # unknown keys kept, never an error
    return out


ENV_REQUIRED = ("gfx", "model_dtype", "model_arch_class", "workload.isl", "workload.osl", "workload.conc")


def missing_env_fields(data: dict) -> list[str]:
    """The required env-report fields `data` leaves out, all of them, in ENV_REQUIRED's order."""
    wl = data.get("workload")
    return [k for k in ENV_REQUIRED if (k not in data if "." not in k else
                                        not isinstance(wl, dict) or k.split(".")[1] not in wl)]


def parse_env(data: Any, file: str = "env_report.json") -> Env:
    """An env report. A field of the wrong type is an InputError. A left-out field: without `gfx`
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
        workload[k] = v.num(wl[k], f"workload.{k}")
        if workload[k] <= 0 or _bad_number(workload[k]):
            raise InputError(file, f"workload.{k}", f"expected a positive number, got {workload[k]}")
        if workload[k] > MAX_DIM:
            raise InputError(file, f"workload.{k}", f"expected at most {MAX_DIM}, got {workload[k]:g}")
    env = Env(path=file, gfx=gfx, model_dtype=mdt, model_arch_class=mac, workload=workload, missing=missing,
              raw=data)
    if data.get("gpu_name") is not None:
        env.gpu_name = v.str_(data["gpu_name"], "gpu_name")
    if data.get("kv_cache_dtype") is not None:
        env.kv_cache_dtype = v.str_(data["kv_cache_dtype"], "kv_cache_dtype")
    return env


def parse_config(data: Any, file: str = "config.json") -> dict:
    """A Hugging Face config.json. Multimodal configs keep the LM under `text_config`; it is merged
    over the top level. Only numbers are read from it, by name, when a shape needs them."""
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
            raise InputError(file, where, f"expected an integer in 0..{MAX_DIM}, got {n}")
    return merged


def load_topn(path) -> TopN:
    return parse_topn(read_json(path), str(path))


def load_env(path) -> Env:
    return parse_env(read_json(path), str(path))


def load_config(path) -> dict:
    return parse_config(read_json(path), str(path))


def find_upwards(start: Path, name: str, max_levels: int = 6) -> Path | None:
    """Look for `name` in `start` and each parent (the Top-N's directory up to the run root)."""
    d = start.resolve()
    for _ in range(max_levels + 1):
        cand = d / name
        if cand.is_file():
            return cand
        if d.parent == d:
            break
        d = d.parent
    return None
