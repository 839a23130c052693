"""Nsight Compute output -> per-kernel launches for the Top-N builder, each kernel's measured
counters and the device, so that the Top-N of a report is a complete input (docs/topn.md):

The report is read by THE ncu reader of stage C (roofline.counters.ncu: `rep_launches` for a
``.ncu-rep``, optionally gzipped, through the ``ncu-report`` package without a GPU; `csv_table` +
`csv_launches` for the CSV of ``ncu --import R --csv --page raw [--print-units base]``, units
through roofline.counters.units); this module keeps what the Top-N needs of each launch, its
duration (``gpu__time_duration.sum``) and grid/block, as :class:`~roofline.ingest.topn.KernelAgg`;
the same launches give each kernel's per-launch counters (DRAM bytes, issued FLOPs:
:func:`roofline.counters.ncu.launch_records`, exactly what ``analyze --counters`` reads) and the
device (``device__attribute_*``: :func:`roofline.counters.ncu.device_records`).
A CSV row without a usable duration is skipped and counted; the report's other problems raise
NcuError.

ncu usually profiles a sample (``-c N``, ``-k`` filters, replay): its percentages are shares of the
*profiled* kernels, not of the run; the builder says so in ``notes``.
"""
from __future__ import annotations

import csv
import os
import shutil
import tempfile
import zlib
from dataclasses import dataclass, field

from roofline.counters.errors import CounterReadError
from roofline.counters.ncu import DURATION, WITH_DEVICE, csv_launches, csv_table, device_records, launch_records, rep_launches
from roofline.errors import RooflineError
from roofline.ingest.topn import KernelAgg

_NS_TO_US = 1e-3


class NcuError(RooflineError):
    """The report or CSV cannot be used (message names the problem, not the file)."""


@dataclass
class NcuRead:
    aggs: list                  # KernelAgg per kernel name (durations)
    bad: int                    # CSV rows skipped (no usable duration)
    counters: list              # KernelCounters per kernel name (per-launch averages)
    devices: list = field(default_factory=list)   # deviceProperties-style records


def read_ncu_csv(path: str, regime: str):
    from roofline import safeio

    try:
        # a regular file within the counter size limit (gzip within the ratio limit too)
        raw = safeio.read_bytes(path, limit_env="ROOFLINE_MAX_COUNTER_BYTES", gunzip=True)
        text = raw.decode("utf-8", errors="replace")
        if not text.strip():
            raise NcuError("empty file")
        table = csv_table(text, path)
    except safeio.UnsafeInput as exc:
        raise NcuError(exc.problem) from None
    except OSError as exc:
        raise NcuError(f"cannot read: {exc.strerror or exc}") from None
    except (EOFError, zlib.error) as exc:
        raise NcuError(f"gzip data is corrupt ({exc})") from None
    except csv.Error as exc:
        raise NcuError(f"malformed CSV ({exc})") from None
    except CounterReadError as exc:
        raise NcuError(exc.problem) from None
    if DURATION not in table.col:
        raise NcuError(f"no '{DURATION}' column (collect it: it is in every ncu section set)")
    try:
        launches = csv_launches(table, path, WITH_DEVICE, strict=False)
    except CounterReadError as exc:
        raise NcuError(exc.problem) from None
    aggs: dict[str, KernelAgg] = {}
    bad = 0
    kept = []
    for ln in launches:
        ns = ln.values.get(DURATION)
        if ns is None or not 0 <= ns * _NS_TO_US < float("inf"):  # a negative or infinite duration is no measurement
            bad += 1
            continue
        _add(aggs, ln, ns * _NS_TO_US, regime)
        kept.append(ln)
    if not aggs:
        raise NcuError("no kernel rows with a duration")
    return NcuRead(list(aggs.values()), bad, launch_records(kept, "ncu-csv"), device_records(kept))


def _add(aggs: dict, ln, us: float, regime: str) -> None:
    a = aggs.setdefault(ln.name, KernelAgg(ln.name))
    a.count[regime] += 1
    a.total_us[regime] += us
    if ln.dims is not None:
        a.launch_dims[ln.dims] += 1


def _gunzip_to_temp(path: str, size: int) -> str:
    """A gzipped report, inflated (bounded: ROOFLINE_MAX_COUNTER_BYTES) into a temporary .ncu-rep
    the caller removes; a failure removes it here."""
    from roofline import safeio

    fd, tmp = tempfile.mkstemp(suffix=".ncu-rep")
    try:
        with os.fdopen(fd, "wb") as fo, safeio.open_regular(path) as raw:
            fi = safeio.GzipLimited(raw, path, size, limit_env="ROOFLINE_MAX_COUNTER_BYTES")
            try:
                shutil.copyfileobj(fi, fo)
            except safeio.UnsafeInput as exc:
                raise NcuError(exc.problem) from None
            except zlib.error as exc:
                raise NcuError(f"gzip data is corrupt ({exc})") from None
    except BaseException:
        os.unlink(tmp)
        raise
    return tmp


def read_ncu_rep(path: str, regime: str):
    from roofline import safeio

    tmp = None
    try:
        try:
            with safeio.open_regular(path) as f:
                gz = f.read(2) == b"\x1f\x8b"
                size = os.fstat(f.fileno()).st_size
        except safeio.UnsafeInput as exc:
            raise NcuError(exc.problem) from None
        if gz:
            tmp = _gunzip_to_temp(path, size)
        try:
            launches = rep_launches(tmp or path, WITH_DEVICE, dims=True)
        except CounterReadError as exc:
            raise NcuError(exc.problem) from None
        aggs = _rep_aggs(launches, regime)
        timed = [ln for ln in launches if ln.values.get(DURATION) is not None]
        return NcuRead(aggs, 0, launch_records(timed, "ncu-rep"), device_records(timed))
    except (OSError, EOFError) as exc:
        raise NcuError(f"cannot read: {exc}") from None
    finally:
        if tmp:
            os.unlink(tmp)


def _rep_aggs(launches, regime: str) -> list:
    if not launches:
        raise NcuError("not a loadable Nsight Compute report, or one with no profiled kernels")
    aggs: dict[str, KernelAgg] = {}
    for ln in launches:
        ns = ln.values.get(DURATION)
        if ns is None:
            continue
        us = ns * _NS_TO_US
        if not 0 <= us < float("inf"):  # a damaged duration is no measurement
            raise NcuError(f"kernel {ln.name[:60]!r}: {DURATION} is {us}, not a time")
        _add(aggs, ln, us, regime)
    if not aggs:
        raise NcuError(f"no kernel in the report has {DURATION}")
    return list(aggs.values())


def read_ncu_full(path: str, regime: str) -> NcuRead:
    """Everything `roofline topn` takes from an .ncu-rep[.gz] or a raw-page CSV, all launches in
    ``regime``: the KernelAgg list, the rows skipped, the counters per kernel name, the devices."""
    low = path.lower()
    if low.endswith(".csv") or low.endswith(".csv.gz"):
        return read_ncu_csv(path, regime)
    return read_ncu_rep(path, regime)


def read_ncu(path: str, regime: str):
    """(KernelAgg list, rows skipped) of an .ncu-rep[.gz] or a raw-page CSV (read_ncu_full)."""
    r = read_ncu_full(path, regime)
    return r.aggs, r.bad


def attach(doc: dict, read: NcuRead) -> list[str]:
    """Put each listed kernel's counters into its Top-N entry (`counters`, per launch) and the
    report's device into the Top-N (`device_properties`); returns the notes to add."""
    from roofline.counters.embedded import KEY, to_topn

    by_name = {kc.name: kc for kc in read.counters}
    n = 0
    for e in doc["entries"]:
        kc = by_name.get(e["name"])
        if kc is not None:
            e[KEY] = to_topn(kc)
            n += 1
    if read.devices:
        doc["device_properties"] = read.devices
    notes = [f"{n} of {len(doc['entries'])} entries carry the report's measured counters (DRAM bytes, issued "
             "FLOPs per launch): `roofline analyze` uses them as stage-C counters"]
    names = sorted({d["name"] for d in read.devices if d.get("name")})
    if names:
        notes.append(f"device from the report: {', '.join(names)}")
    return notes


def ncu_steps(aggs, regime: str, steps: int | None):
    notes = ["source is an Nsight Compute report: pct_gpu_time is a share of the PROFILED kernels "
             "(ncu -c/-k sampling and kernel replay), not of the whole run; durations are "
             "serialized replays"]
    if steps is None:
        steps = 1
        notes.append(f"ASSUMED: regime '{regime}' and the profiled kernels are ONE step; pass --{regime}-steps N")
    else:
        notes.append(f"all kernels in regime '{regime}'; {steps} steps from --{regime}-steps")
    return {regime: steps}, notes


__all__ = ["read_ncu", "read_ncu_full", "read_ncu_csv", "read_ncu_rep", "attach", "ncu_steps", "NcuError", "NcuRead"]
