"""Hardware peaks: the tables in peaks/*.yaml (installed as the package data of
roofline.peaks) are the single source of every number.

Resolution order (docs/env_report.md): gpu_name first, then the device key (`gfx`: an AMD gfx id or an NVIDIA
sm id). An unknown device is level L1 (docs/method.md section 7): peaks derived from device properties, confidence
"low", so every entry becomes display-only.

Which figure is the roof:
- memory: the vendor's HBM pin rate (datasheet). Streaming reaches ~0.85-0.9 of it; target_eff
  prices that in. A table with only a measured figure uses it and says so.
- compute, per dtype: a validated microbenchmark figure where the table has one ("measured" or
  "validated"), otherwise the datasheet dense figure with confidence "medium".
- interconnect (collectives, op class comm): `interconnect_bw_bytes_s`, the link rate of ONE
  direction (a rank's bus bandwidth is the bytes it sends); absent: collectives degrade.
Validation (docs/method.md section 8): BF16 and FP16 tensor rates are equal on these parts, so measured
bf16 and fp16 peaks that differ by more than 5% mean the microbench is mis-calibrated and the
compute axis for those dtypes is not usable for ranking.
"""
from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roofline.io.errors import PeaksError  # noqa: F401  (re-exported)



class TableFileError(PeaksError):
    """A peak-table FILE cannot be used (unreadable, not YAML, not a table): the tool's own input
    failing, never read as "device not in the tables"."""

BF16_FP16_TOLERANCE = 0.05  # docs/method.md section 8: equal rates; >5% apart = mis-calibrated microbench
# THE dtype table: every spelling a Top-N, a trace (torch / aten type strings are mapped to these
# names in roofline/core/opclasses/aten.py), a peaks table or a flag uses, to one short name; then the
# bytes of one element of each. Integer and bool tensors are bytes too (sort keys, indices, masks).
DTYPE_ALIASES = {
    "bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32",
    "float64": "fp64", "double": "fp64", "tf32": "tf32",
    # 8-bit floats: every OCP / fnuz variant and the e8m0 scale format are one byte
    "e4m3": "fp8", "e5m2": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "fp8_e4m3fn": "fp8",
    "float8_e4m3fn": "fp8", "float8_e5m2": "fp8", "float8_e4m3fnuz": "fp8", "float8_e5m2fnuz": "fp8",
    "float8_e8m0fnu": "fp8", "fp8_e8m0": "fp8", "e8m0": "fp8", "fp8_e4m3fnuz": "fp8", "fp8_e5m2fnuz": "fp8",
    # 4-bit floats, one element = half a byte. NB: torch's float4_e2m1fn_x2 packs TWO per element
    # (itemsize 1): a shape counted in x2 elements is 1 byte each, hence its own name
    "fp4": "fp4", "mxfp4": "fp4", "nvfp4": "fp4", "e2m1": "fp4", "fp4_e2m1": "fp4",
    "float4_e2m1fn_x2": "fp4x2", "fp4x2": "fp4x2",
    # integers and bool
    "int64": "int64", "long": "int64", "int32": "int32", "int": "int32", "int16": "int16", "short": "int16",
    "int8": "int8", "uint8": "uint8", "byte": "uint8", "char": "int8", "uint16": "uint16", "uint32": "uint32",
    "uint64": "uint64", "bool": "bool", "boolean": "bool",
}
DTYPE_BYTES = {"fp64": 8, "fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "fp4": 0.5, "fp4x2": 1,
               "int64": 8, "uint64": 8, "int32": 4, "uint32": 4, "int16": 2, "uint16": 2, "int8": 1, "uint8": 1,
               "bool": 1}


def bf16_fp16_gap(bf16: float, fp16: float) -> float:
    """How far apart a bf16 and an fp16 tensor rate are: |a - b| / max(a, b)."""
    return abs(bf16 - fp16) / max(bf16, fp16)


def bf16_fp16_agree(bf16: float, fp16: float) -> bool:
    """The one bf16/fp16 rule (docs/method.md section 8): the two rates are equal on these parts, so
    figures more than BF16_FP16_TOLERANCE apart mean the microbench is mis-calibrated."""
    return bf16_fp16_gap(bf16, fp16) <= BF16_FP16_TOLERANCE


def norm_dtype(dtype: str | None) -> str | None:
    if dtype is None:
        return None
    d = str(dtype).strip().lower().replace("torch.", "")
    return DTYPE_ALIASES.get(d, d)


@dataclass
class Peaks:
    device: str
    gfx: str | None
    vendor: str | None
    hbm_bw_bytes_s: float | None
    hbm_bw_kind: str                          # "datasheet" | "measured" | "derived"
    flops: dict[str, float]                   # dtype -> FLOP/s roof actually used
    flops_kind: dict[str, str]                # dtype -> "measured" | "validated" | "datasheet" | "derived"
    source: str                               # "table" | "derived" (docs/artifact.md)
    confidence: str                           # "high" | "medium" | "low"
    compute_unusable_dtypes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)  # what -> citation
    table_file: str | None = None
    raw: dict[str, Any] = field(default_factory=dict)
    origin: str = "built-in table"            # finer than source: built-in table | peaks file |
    #                                           pipeline peaks.md | datasheet catalogue | device properties
    interconnect_bw_bytes_s: float | None = None   # one direction of the GPU's links (NVLink): collectives' roof
    interconnect_bw_kind: str | None = None

    def compute_peak(self, dtype: str) -> float | None:
        return self.flops.get(norm_dtype(dtype) or "")

    def l2_bytes(self) -> float | None:
        """The device's L2 size from its table (bytes), or None."""
        v = self.raw.get("l2_bytes") if isinstance(self.raw, dict) else None
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else None

    def compute_confidence(self, dtype: str) -> str:
        d = norm_dtype(dtype) or ""
        if d in self.compute_unusable_dtypes or d not in self.flops:
            return "low"
        kind = self.flops_kind.get(d)
        if self.confidence == "low" or kind == "derived":
            return "low"
        return "high" if kind in ("measured", "validated") else "medium"

    def compute_roof_spread(self, dtype: str) -> float:
        """How far apart the recorded runs of a measured compute roof are: 1 - (the lowest run's
        best median) / (the envelope). 0 without at least two recorded runs. A measured rate above
        the roof by less than this is inside the roof's own uncertainty."""
        d = norm_dtype(dtype) or ""
        if self.flops_kind.get(d) not in ("measured", "validated") or not self.flops.get(d):
            return 0.0
        fig = ((self.raw.get("flops") or {}).get(d) or {}).get(self.flops_kind[d]) or {}
        bests = []
        runs = fig.get("runs") if isinstance(fig, dict) else None
        for r in runs if isinstance(runs, list) else []:
            shapes = r.get("shapes") if isinstance(r, dict) else None
            meds = [v.get("median") for v in (shapes.values() if isinstance(shapes, dict) else ()) if isinstance(v, dict)]
            meds = [x for x in meds if isinstance(x, (int, float)) and x > 0]
            if meds:
                bests.append(max(meds))
        if len(bests) < 2:
            return 0.0
        return max(0.0, min(0.25, 1.0 - min(bests) / self.flops[d]))

    def to_artifact(self) -> dict:
        """The `peaks` block of profile_roofline.json (docs/artifact.md), plus provenance."""
        return {
            "device": self.device,
            "hbm_bw_bytes_s": self.hbm_bw_bytes_s,
            "flops": dict(self.flops),
            "flops_kind": dict(self.flops_kind),
            "hbm_bw_kind": self.hbm_bw_kind,
            "interconnect_bw_bytes_s": self.interconnect_bw_bytes_s,
            "source": self.source,
            "confidence": self.confidence,
            "compute_unusable_dtypes": list(self.compute_unusable_dtypes),
            "l2_bytes": self.l2_bytes(),
            "table_file": self.table_file,
            "origin": self.origin,
            "sources": dict(self.sources),
            "notes": list(self.notes),
        }


def peaks_dir() -> Path:
    env = os.environ.get("ROOFLINE_PEAKS_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parent  # the tables are this package's data


# Speed: a run needs ONE table, so resolving a device reads only each table's identity lines
# (device, gfx, names, gfx_default: top-level one-line keys) and parses the matching table whole;
# tests/test_schema_speed.py checks the identities equal those of the full parse for every table.
_IDENTITY_KEYS = ("device", "gfx", "names", "gfx_default")
_IDENTITY_LINE = re.compile(r"^(device|gfx|names|gfx_default):[ \t]*(\S.*)$", re.M)


@functools.lru_cache(maxsize=64)
def _load_table(path: str) -> dict:
    data = _load_yaml(path)
    if not isinstance(data, dict) or "device" not in data:
        raise TableFileError(f"{path}: not a peak table (needs a 'device' key)")
    return data


def _identity(path: str) -> dict:
    """The table's identity keys, from its top-level one-line keys (the whole table where a key
    is not written on one line)."""
    import yaml

    from roofline.io import safeio

    try:
        text = safeio.read_bytes(path).decode("utf-8-sig")
    except OSError as exc:
        raise TableFileError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise TableFileError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    lines = {m.group(1): m.group(0) for m in _IDENTITY_LINE.finditer(text)}
    written = {k for k in _IDENTITY_KEYS if re.search(rf"^{k}:", text, re.M)}
    head = None
    if "device" in lines and written <= set(lines):
        try:
            head = yaml.load("\n".join(lines.values()), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506
        except yaml.YAMLError:
            head = None
    if not isinstance(head, dict) or not isinstance(head.get("device"), str):
        head = _load_table(path)   # not one-line keys: the full parse decides (and says its errors)
    return {k: head[k] for k in _IDENTITY_KEYS if k in head}


@functools.lru_cache(maxsize=8)
def _table_ids(directory: str) -> tuple[tuple[str, dict], ...]:
    return tuple((str(p), _identity(str(p))) for p in sorted(Path(directory).glob("*.yaml")))


@functools.lru_cache(maxsize=8)
def _load_tables(directory: str) -> tuple[tuple[str, dict], ...]:
    return tuple((p, _load_table(p)) for p, _ in _table_ids(directory))


_clear_all_tables = _load_tables.cache_clear


def _clear_caches() -> None:
    """`_load_tables.cache_clear()` forgets every table cache (identities and single tables too)."""
    _clear_all_tables()
    _table_ids.cache_clear()
    _load_table.cache_clear()


_load_tables.cache_clear = _clear_caches  # type: ignore[method-assign]


def load_tables(directory: str | Path | None = None) -> list[tuple[str, dict]]:
    """Every table, parsed (`peaks show`, the calculator, validation)."""
    return list(_load_tables(str(directory or peaks_dir())))


def table_ids(directory: str | Path | None = None) -> list[tuple[str, dict]]:
    """(path, identity keys) of every table, without parsing the tables whole."""
    return list(_table_ids(str(directory or peaks_dir())))


def _norm_name(s: str) -> str:
    return " ".join(str(s).lower().replace("-", " ").replace("_", " ").split())


def _by_name(tables, name: str) -> tuple[str, dict] | None:
    """The table whose device name or one of whose aliases is `name` (case, '-', '_' and spacing aside)."""
    key = _norm_name(name)
    for path, data in tables:
        if key in [_norm_name(n) for n in [data.get("device", "")] + list(data.get("names", []))]:
            return path, data
    return None


def _by_gfx(tables, gfx: str) -> list[tuple[str, dict]]:
    g = str(gfx).strip().lower()
    return [(p, d) for p, d in tables if str(d.get("gfx", "")).lower() == g]


def find_table(device: str, directory: str | Path | None = None) -> tuple[str, dict] | None:
    """The one lookup of a peak table by what a user types (`roofline peaks show`, the calculator,
    `peaks measure` / `peaks envelope` for the GPU in hand): a table by file stem (`h200`), device
    name or alias (`NVIDIA H200`), or gfx when unique. `resolve` uses the same name and gfx matching."""
    ids = table_ids(directory)
    hit = next(((p, d) for p, d in ids if Path(p).stem.lower() == device.lower().strip()), None)
    hit = hit or _by_name(ids, device)
    if hit is None:
        hits = _by_gfx(ids, device)
        hit = hits[0] if len(hits) == 1 else None
    return (hit[0], _load_table(hit[0])) if hit is not None else None


def _value(v: Any, where: str) -> float:
    """A peak figure: a positive finite number (a bool or a string is refused, never coerced)."""
    import math

    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise PeaksError(f"{where}: expected a positive number, got {type(v).__name__} {v!r}"[:200])
    try:
        x = float(v)
    except OverflowError:
        raise PeaksError(f"{where}: number too large") from None
    if not math.isfinite(x) or x <= 0:
        raise PeaksError(f"{where}: expected a positive number, got {v!r}")
    return x


FIGURE_KINDS = ("measured", "validated", "datasheet", "derived")


def _pick(fig: Any, where: str = "figure") -> tuple[float | None, str | None, str | None]:
    """A figure block {measured|validated|datasheet: {value, source}} -> (value, kind, source), the
    most trusted kind first. Every kind present is checked (a mistyped datasheet figure beside a
    measured one is an error, not silently skipped)."""
    if fig is None:
        return None, None, None
    if not isinstance(fig, dict):
        return _value(fig, where), "datasheet", None
    unknown = [k for k in fig if k not in FIGURE_KINDS]
    if unknown and not any(k in fig for k in FIGURE_KINDS):
        raise PeaksError(f"{where}: unknown figure kind {unknown[0]!r} (expected one of {', '.join(FIGURE_KINDS)})")
    found = []
    for kind in FIGURE_KINDS:
        if kind not in fig or fig[kind] is None:
            continue
        blk = fig[kind]
        if isinstance(blk, dict):
            if blk.get("value") is None:
                raise PeaksError(f"{where}.{kind}: no value")
            src = blk.get("source")
            found.append((_value(blk["value"], f"{where}.{kind}.value"), kind, src if isinstance(src, str) else None))
        else:
            found.append((_value(blk, f"{where}.{kind}"), kind, None))
    return found[0] if found else (None, None, None)


def _load_yaml(path) -> Any:
    """A peak table file: a regular file within the size limit, YAML without custom tags."""
    import yaml

    from roofline.io import safeio

    try:
        raw = safeio.read_bytes(path)
    except OSError as exc:
        raise TableFileError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if not safeio.json_depth_ok(raw):
        raise TableFileError(f"{path}: nested deeper than {safeio.MAX_JSON_DEPTH} levels: not a peak table")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(raw.decode("utf-8-sig"), Loader=loader)  # noqa: S506 - a safe loader
    except UnicodeDecodeError as exc:
        raise TableFileError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except (yaml.YAMLError, RecursionError) as exc:
        first = " ".join(str(exc).split())[:160]
        raise TableFileError(f"{path}: not valid YAML ({type(exc).__name__}: {first})") from None


def _has_pin_rate(block: Any) -> bool:
    return isinstance(block, dict) and isinstance(block.get("datasheet"), dict)


def memory_roof(block: Any, where: str = "hbm_bw_bytes_s") -> tuple[float | None, str | None, str | None]:
    """The memory roof of a table's hbm_bw_bytes_s block -> (value, kind, source): the vendor's pin
    rate (datasheet) by convention (docs/method.md section 8); a table with no datasheet figure uses the most
    trusted one it has (`_pick`)."""
    if _has_pin_rate(block):
        src = block["datasheet"].get("source", "")
        return (_value(block["datasheet"].get("value"), f"{where}.datasheet.value"), "datasheet",
                src if isinstance(src, str) else "")
    return _pick(block, where)


def from_table(data: dict, table_file: str | None = None, confidence: str = "high",
               source: str = "table") -> Peaks:
    """A peak table (parsed YAML) -> Peaks. A bad figure raises PeaksError naming the table's
    file (when known) and the path in it."""
    try:
        return _from_table(data, table_file, confidence, source)
    except PeaksError as exc:
        if table_file and not str(exc).startswith(f"{table_file}:"):
            raise PeaksError(f"{table_file}: {exc}") from None
        raise


def _from_table(data: dict, table_file: str | None, confidence: str, source: str) -> Peaks:
    notes: list[str] = []
    sources: dict[str, str] = {}
    for key in ("device", "gfx", "vendor"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise PeaksError(f"{table_file or 'peak table'}: {key}: expected a string, got {type(data[key]).__name__}")
    if not data.get("device"):
        raise PeaksError(f"{table_file or 'peak table'}: device: required (a name)")
    bw_block = data.get("hbm_bw_bytes_s")
    pin = _has_pin_rate(bw_block)
    if pin:
        _pick(bw_block, "hbm_bw_bytes_s")  # every figure present is checked
    hbm, hbm_kind, src = memory_roof(bw_block)
    if pin or src:
        sources["hbm_bw_bytes_s"] = src
    hbm_kind = hbm_kind or "unknown"
    if hbm is not None and hbm_kind != "datasheet":
        notes.append(f"memory roof is the {hbm_kind} figure (no datasheet pin rate in the table)")
    flops: dict[str, float] = {}
    kinds: dict[str, str] = {}
    raw_measured: dict[str, float] = {}
    fl = data.get("flops")
    if fl is not None and not isinstance(fl, dict):
        raise PeaksError(f"{table_file or 'peak table'}: flops: expected a mapping of dtype -> figure")
    for dtype, fig in (fl or {}).items():
        if not isinstance(dtype, str):
            raise PeaksError(f"{table_file or 'peak table'}: flops: dtype key {dtype!r} is not a name")
        val, kind, src = _pick(fig, f"flops.{dtype}")
        if val is None:
            continue
        d = norm_dtype(dtype)
        flops[d], kinds[d] = val, kind
        if src:
            sources[f"flops.{d}"] = src
        if kind == "measured":
            raw_measured[d] = val
    unusable: list[str] = []
    if "bf16" in raw_measured and "fp16" in raw_measured:
        a, b = raw_measured["bf16"], raw_measured["fp16"]
        rel = bf16_fp16_gap(a, b)
        if not bf16_fp16_agree(a, b):
            unusable = ["bf16", "fp16"]
            notes.append(
                f"measured bf16 ({a:.4g}) and fp16 ({b:.4g}) peaks differ by {rel:.1%} > "
                f"{BF16_FP16_TOLERANCE:.0%}: the microbench is mis-calibrated, the compute axis for "
                "bf16/fp16 is not usable for ranking (docs/method.md section 8)")
    link, link_kind, link_src = _pick(data.get("interconnect_bw_bytes_s"), "interconnect_bw_bytes_s")
    if link_src:
        sources["interconnect_bw_bytes_s"] = link_src
    return Peaks(
        device=str(data.get("device")), gfx=data.get("gfx"), vendor=data.get("vendor"),
        hbm_bw_bytes_s=hbm, hbm_bw_kind=hbm_kind, flops=flops, flops_kind=kinds, source=source,
        confidence=confidence, compute_unusable_dtypes=unusable, notes=notes, sources=sources,
        table_file=table_file, raw=data, interconnect_bw_bytes_s=link, interconnect_bw_kind=link_kind,
    )


def resolve(gpu_name: str | None = None, gfx: str | None = None, *, device_props: dict | None = None,
            peaks_file: str | Path | None = None, directory: str | Path | None = None) -> Peaks:
    """Resolve the peaks for a device: explicit file, then gpu_name, then gfx, then L1 (derived).

    Raises PeaksError only when nothing at all can be derived (no table, no device properties).
    """
    if peaks_file:
        data = _load_yaml(peaks_file)
        if not isinstance(data, dict):
            raise PeaksError(f"{peaks_file}: not a peak table")
        pk = from_table(data, str(peaks_file))
        pk.origin = "peaks file"
        return pk
    ids = table_ids(directory)   # identities only: the one table that matches is parsed whole
    hit = _by_name(ids, gpu_name) if gpu_name else None
    if hit is not None:
        return from_table(_load_table(hit[0]), hit[0])
    if gfx:
        hits = _by_gfx(ids, gfx)
        if len(hits) == 1:
            pk = from_table(_load_table(hits[0][0]), hits[0][0])
            if gpu_name:
                pk.notes.append(f"gpu_name {gpu_name!r} is not in the tables; resolved by gfx {gfx}")
            return pk
        if len(hits) > 1:
            default = [h for h in hits if h[1].get("gfx_default")] or hits[:1]
            pk = from_table(_load_table(default[0][0]), default[0][0], confidence="low")
            others = ", ".join(d["device"] for _, d in hits)
            pk.notes.append(f"{gfx} is shared by {others}; took {pk.device} with confidence low: "
                            "pass gpu_name to pick the right one")
            return pk
    return derive(gpu_name, gfx, device_props)


def derive(gpu_name: str | None, gfx: str | None, props: dict | None) -> Peaks:
    """Level L1: peaks from device properties (confidence low). `props` keys (any subset):
    hbm_bw_bytes_s, memory_clock_hz + memory_bus_width_bits, flops: {dtype: FLOP/s}."""
    props = dict(props or {})
    hbm = props.get("hbm_bw_bytes_s")
    if hbm is None and props.get("memory_clock_hz") and props.get("memory_bus_width_bits"):
        # NB: DDR: two transfers per clock; bus width in bits -> bytes.
        hbm = 2.0 * float(props["memory_clock_hz"]) * float(props["memory_bus_width_bits"]) / 8.0
    flops = {norm_dtype(k): float(v) for k, v in (props.get("flops") or {}).items()}
    if hbm is None and not flops:
        raise PeaksError(
            f"no peak table for device {gpu_name or '?'} ({gfx or '?'}) and no device properties to "
            "derive peaks from: pass --peaks FILE (see `roofline peaks show h200` for the format)")
    pk = Peaks(device=gpu_name or gfx or "unknown", gfx=gfx, vendor=None, hbm_bw_bytes_s=hbm,
               hbm_bw_kind="derived", flops=flops, flops_kind={d: "derived" for d in flops},
               source="derived", confidence="low", origin="device properties")
    pk.notes.append("level L1: device not in the peak tables; peaks derived from device properties, "
                    "every entry is display-only (confidence low)")
    return pk
