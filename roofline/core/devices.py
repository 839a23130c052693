"""Peaks for the device of a run, whatever the device (docs/method.md sections 7 L1 and 8).

Resolution order:
1. an explicit peaks file (`--peaks`, `hook.run(peaks=...)`): the pipeline's peaks.md (markdown)
   or one of our YAML tables;
2. the pipeline's `peaks.md` found beside the env report (the README's peaks paragraph);
3. our measured tables (peaks/*.yaml) by gpu_name, the datasheet catalogue by
   gpu_name (confidence low), our tables by gfx: the default, and the fallback when peaks.md is
   malformed or has no row for the device;
4. level L1 (confidence low, every entry display-only): the Nsight Compute report's own peak
   metrics (stage C), then the datasheet catalogue (peaks/catalogue/datasheet_catalogue.yaml) by
   GPU name, then derivation from device properties (the env report's or the Top-N's
   `device_properties` / a PyTorch trace's `deviceProperties`: SM count, clocks, memory bus);
5. nothing usable: peaks with no roof. That is not unusable input: every entry degrades with the
   reason, the run exits 0.

`resolve_run_peaks` never raises for a device problem; it returns (Peaks, problems) where each
problem is one line for `skill_errors[]`.
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import roofline.peaks as _peaks
from roofline.peaks import Peaks, PeaksError, from_table, norm_dtype

CATALOGUE_FILE = "datasheet_catalogue.yaml"


def _catalogue_path():
    """The datasheet catalogue lives with the peak tables (peaks/catalogue/), not among them."""
    import roofline.peaks

    return Path(roofline.peaks.__file__).resolve().parent / "catalogue" / CATALOGUE_FILE


DEVICE_PROP_KEYS = ("device_properties", "deviceProperties", "device_props")


@functools.lru_cache(maxsize=2)
def catalogue() -> dict:
    import yaml

    p = _catalogue_path()
    return yaml.safe_load(p.read_text(encoding="utf-8"))


def _norm(s: str | None) -> str:
    s = " ".join(str(s or "").lower().replace("-", " ").replace("_", " ").split())
    return s


def _bare(s: str) -> str:
    for pre in ("nvidia ", "amd ", "geforce ", "instinct ", "tesla "):
        if s.startswith(pre):
            s = s[len(pre):]
    return s


def catalogue_lookup(name: str | None) -> Peaks | None:
    """Datasheet peaks of a named GPU from the catalogue (confidence low, source derived)."""
    if not name:
        return None
    key = _norm(name)
    for d in catalogue()["devices"]:
        names = [_norm(n) for n in d.get("names", [])] + [_norm(d["device"])]
        if key in names or _bare(key) in {_bare(n) for n in names}:
            pk = from_table(d, str(_catalogue_path()), confidence="low",
                            source="derived")
            pk.origin = "datasheet catalogue"
            pk.notes.append(f"level L1: {name} is not in the measured peak tables; datasheet peaks of {d['device']} "
                            f"from the catalogue ({CATALOGUE_FILE}): vendor figures, not measured ceilings, "
                            "confidence low, every entry display-only")
            return pk
    return None


def props_from(*raws: Any, gpu_name: str | None = None) -> dict | None:
    """The device-properties record carried by an env report or a Top-N (a PyTorch trace writes a
    list `deviceProperties`; the record whose name matches gpu_name, else the first)."""
    for raw in raws:
        if not isinstance(raw, dict):
            continue
        for k in DEVICE_PROP_KEYS:
            v = raw.get(k)
            if isinstance(v, dict):
                return v
            if isinstance(v, list):
                recs = [x for x in v if isinstance(x, dict)]
                if recs:
                    match = [x for x in recs if gpu_name and _norm(x.get("name")) == _norm(gpu_name)]
                    return (match or recs)[0]
    return None


def _first(props: dict, *keys) -> Any:
    for k in keys:
        v = props.get(k)
        if v is not None and not isinstance(v, bool):
            return v
    return None


def _pos(x) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if v > 0 and v == v and v != float("inf") else None


def _cc(props: dict, gfx: str | None) -> str | None:
    try:
        return _cc_raw(props, gfx)
    except (TypeError, ValueError):
        return None   # an unreadable compute capability is just not known


def _cc_raw(props: dict, gfx: str | None) -> str | None:
    maj, mnr = _first(props, "computeMajor", "major", "compute_major"), _first(props, "computeMinor", "minor",
                                                                                  "compute_minor")
    if maj is not None:
        return f"{int(maj)}.{int(mnr or 0)}"
    cc = _first(props, "compute_capability", "computeCapability")
    if isinstance(cc, (list, tuple)) and len(cc) == 2:
        return f"{int(cc[0])}.{int(cc[1])}"
    if isinstance(cc, (str, int, float)) and str(cc):
        s = str(cc)
        return s if "." in s else (f"{s[:-1]}.{s[-1]}" if len(s) >= 2 else None)
    g = str(gfx or "").lower()
    if g.startswith("sm_") and g[3:].rstrip("a").isdigit():
        n = g[3:].rstrip("a")
        return f"{n[:-1]}.{n[-1]}"
    return None


def derive_from_props(props: dict, gpu_name: str | None, gfx: str | None) -> tuple[Peaks | None, list[str]]:
    """L1 from device properties. Memory: 2 x memory clock x bus width / 8 (CUDA reports the DDR
    clock; GDDR and HBM alike). Compute: SM count x SM clock x dense tensor FLOPs per SM per clock
    of the compute capability (catalogue table). -> (Peaks or None, what was missing)."""
    missing: list[str] = []
    out: dict[str, Any] = {"flops": {}}
    how: list[str] = []
    bw = _pos(_first(props, "hbm_bw_bytes_s", "memory_bandwidth_bytes_s"))
    if bw is None:
        mclk_khz = _pos(_first(props, "memoryClockRate", "memory_clock_rate_khz"))
        mclk_hz = mclk_khz * 1e3 if mclk_khz else None
        if mclk_hz is None:
            m = _pos(_first(props, "memory_clock_mhz"))
            mclk_hz = m * 1e6 if m else _pos(_first(props, "memory_clock_hz"))
        bus = _pos(_first(props, "memoryBusWidth", "memory_bus_width_bits", "memory_bus_width"))
        if mclk_hz and bus:
            bw = 2.0 * mclk_hz * bus / 8.0
            how.append(f"memory = 2 x {mclk_hz / 1e6:.0f} MHz x {bus:.0f} bit / 8")
        else:
            missing.append("memory clock and bus width")
    else:
        how.append("memory bandwidth as given")
    if bw:
        out["hbm_bw_bytes_s"] = bw
    sms = _pos(_first(props, "numSms", "multiProcessorCount", "multi_processor_count", "sm_count", "sms"))
    clk_khz = _pos(_first(props, "clockRate", "clock_rate_khz"))
    clk_hz = clk_khz * 1e3 if clk_khz else None
    if clk_hz is None:
        m = _pos(_first(props, "max_sm_clock_mhz", "sm_clock_mhz", "clock_mhz"))
        clk_hz = m * 1e6 if m else _pos(_first(props, "sm_clock_hz"))
    cc = _cc(props, gfx)
    rates = {k: v for k, v in (catalogue().get("per_sm_flops_per_clock") or {}).items() if k != "source"}
    rate = rates.get(cc) if cc else None
    if sms and clk_hz and rate:
        for d, per in rate.items():
            out["flops"][norm_dtype(d)] = sms * clk_hz * float(per)
        how.append(f"compute = {sms:.0f} SMs x {clk_hz / 1e6:.0f} MHz x the dense tensor rate of cc {cc}")
    else:
        missing.append(", ".join(x for x, ok in (("SM count", sms), ("SM clock", clk_hz),
                                                 (f"a known compute capability (got {cc})", rate)) if not ok))
    if not out.get("hbm_bw_bytes_s") and not out["flops"]:
        return None, missing
    pk = _peaks.derive(gpu_name or props.get("name"), gfx, out)
    pk.origin = "device properties"
    pk.sources = {"hbm_bw_bytes_s" if "memory" in h else "flops": f"device properties: {h}" for h in how}
    pk.notes.append("derived from device properties: " + "; ".join(how)
                    + (f"; not derivable: {'; '.join(m for m in missing if m)}" if any(missing) else ""))
    return pk, missing


def no_roof(gpu_name: str | None, gfx: str | None, why: str) -> Peaks:
    """Peaks with no roof at all: every entry degrades (L1 + L2), the run still succeeds."""
    return Peaks(device=gpu_name or gfx or "unknown", gfx=gfx, vendor=None, hbm_bw_bytes_s=None, hbm_bw_kind="none",
                 flops={}, flops_kind={}, source="derived", confidence="low", origin="none",
                 notes=[f"level L1: no peaks for {gpu_name or '?'} ({gfx or '?'}): {why}; every entry degrades "
                        "(display only). Pass the pipeline's peaks.md with --peaks, or device properties in "
                        "env_report.json (device_properties: SM count, clocks, memory bus)"])


def resolve_run_peaks(gpu_name: str | None, gfx: str | None, *, peaks_file=None, env_path=None,
                      raws: tuple = (), device_props: dict | None = None, report_props: dict | None = None
                      ) -> tuple[Peaks, list[str]]:
    """Peaks for the run (see the module docstring for the order) and the problems met (one line
    each, for skill_errors[]). Never raises for a device or peaks.md problem."""
    problems: list[str] = []
    pk = _from_pipeline_file(gpu_name, gfx, peaks_file, env_path, problems)
    if pk is None:
        pk = _from_tables(gpu_name, gfx)
    if pk is None:
        pk = _from_props(gpu_name, gfx, raws, device_props, report_props)
    return pk, problems


def _from_pipeline_file(gpu_name, gfx, peaks_file, env_path, problems: list[str]) -> Peaks | None:
    """An explicit peak file (a YAML table: its errors are input errors), else the pipeline's
    peaks.md beside the env report; a problem with a peaks.md is noted and the tables are used."""
    from roofline.peaks import md as peaks_md

    md_files: list[Path] = []
    if peaks_file is not None:
        pf = Path(peaks_file)
        if pf.suffix.lower() in (".md", ".markdown"):
            md_files.append(pf)
        else:
            return _peaks.resolve(gpu_name, gfx, peaks_file=pf)   # our YAML format: errors are input errors
    elif env_path and Path(str(env_path)).is_file():
        cand = Path(str(env_path)).parent / "peaks.md"
        if cand.is_file():
            md_files.append(cand)
    for f in md_files:
        try:
            pk = peaks_md.lookup(f, gpu_name, gfx)
        except peaks_md.PeaksMdError as exc:
            problems.append(f"{exc}; the built-in peak tables are used instead")
            continue
        if pk is not None:
            return pk
        problems.append(f"{f}: no row for {gpu_name or '?'} ({gfx or '?'}); the built-in peak tables are used")
    return None


def _from_tables(gpu_name, gfx) -> Peaks | None:
    """The measured tables by GPU name, the datasheet catalogue by name, then the tables by gfx."""
    # an unreadable table directory (a FIFO, a malformed table) is the tool's own input failing:
    # let its PeaksError through (one line, exit 2) instead of reading it as "device not found"
    _peaks.table_ids()
    if gpu_name:
        # a GPU named in the measured tables, then one named in the datasheet catalogue: both beat
        # a gfx match (an H20 is sm_90 like the H100 and H200, with a quarter of their compute)
        try:
            return _peaks.resolve(gpu_name, None)
        except _peaks.TableFileError:
            raise
        except PeaksError:
            pass
        pk = catalogue_lookup(gpu_name)
        if pk is not None:
            return pk
    try:
        return _peaks.resolve(gpu_name, gfx)
    except _peaks.TableFileError:
        raise
    except PeaksError:
        pass
    return None


def _from_props(gpu_name, gfx, raws, device_props, report_props) -> Peaks:
    """Device properties: the counter report's, the caller's, the trace's / env report's record
    (naming a known GPU, else derived), else no roof (L1)."""
    if report_props:
        pk = _peaks.resolve(gpu_name, gfx, device_props=report_props)
        pk.origin = "counter report"
        pk.notes.append("peaks read from the counter report: memory = dram__bytes.sum.peak_sustained x "
                        "dram__cycles_elapsed.avg.per_second; compute = dense tensor ops per cycle x the "
                        "maximum SM clock (hardware peaks, not measured ceilings)")
        return pk
    if device_props:
        pk = _peaks.resolve(gpu_name, gfx, device_props=device_props)
        return pk
    props = props_from(*raws, gpu_name=gpu_name)
    pname = props.get("name") if props and isinstance(props.get("name"), str) else None
    if pname and _norm(pname) != _norm(gpu_name):
        # the env report did not name a known GPU, the trace's device record does
        try:
            pk = _peaks.resolve(pname, None)
            pk.notes.append(f"device identified by its device-properties record ({pname!r}), not by the env report")
            return pk
        except PeaksError:
            pass
    pk = catalogue_lookup(gpu_name) or catalogue_lookup(pname)
    if pk is not None:
        return pk
    if props:
        pk, missing = derive_from_props(props, gpu_name, gfx)
        if pk is not None:
            return pk
        return no_roof(gpu_name or pname, gfx, "the device properties lack " + "; ".join(m for m in missing if m))
    return no_roof(gpu_name, gfx, "not in the measured tables, not in the datasheet catalogue, and no device "
                   "properties in the env report or the Top-N")
