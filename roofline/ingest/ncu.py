"""Nsight Compute output -> per-kernel launches for the Top-N builder, each kernel's measured
counters and the device, so that the Top-N of a report is a complete input (docs/topn.md):

The report is read by THE ncu reader of stage C (roofline.counters.ncu: `rep_launches` for a
``.ncu-rep``, optionally gzipped, through the ``ncu-report`` package without a GPU; `csv_table` +
`csv_launches` for the CSV of ``ncu --import R --csv --page raw [--print-units base]``, units
through roofline.counters.units); this module keeps what the Top-N needs of each launch, its
duration (``gpu__time_duration.sum``) and grid/block, as :class:`~roofline.ingest.topn.KernelAgg`;
the same launches give each kernel's per-launch counters (DRAM bytes, issued FLOPs: the records
``analyze --counters`` reads, :func:`roofline.counters.ncu.launch_counters`) and the device
(``device__attribute_*``: :func:`roofline.counters.ncu.device_records`). A split-K reduce launch is
folded into the GEMM launch it completes, as for a trace: one logical op, its time and counts summed.
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
from roofline.core.classify import classify, is_splitk_reduce
from roofline.core.opclasses import of
from roofline.counters.aggregate import combine, group_average
from roofline.counters.ncu import (DURATION, WITH_DEVICE, csv_launches, csv_table, device_records, launch_counters,
                                   rep_launches)
from roofline.io.errors import RooflineError
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
    notes: list = field(default_factory=list)     # what the reading did (split-K pairs folded)


def read_ncu_csv(path: str, regime: str):
    from roofline.io import safeio

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
    kept = []
    for ln in launches:
        ns = ln.values.get(DURATION)
        if ns is None or not 0 <= ns * _NS_TO_US < float("inf"):  # a negative or infinite duration is no measurement
            continue
        kept.append(ln)
    if not kept:
        raise NcuError("no kernel rows with a duration")
    return _read_of(kept, regime, "ncu-csv", len(launches) - len(kept))


def _fold_splitk(launches) -> list[tuple]:
    """[(launch, its split-K reduce launch or None)]: as for a trace (roofline/ingest/topn.py), a
    reduce launch completes the GEMM launch just before it (ncu profiles launches in issue order),
    and the pair is one logical op."""
    out: list[tuple] = []
    for ln in launches:
        prev = out[-1] if out else None
        if (is_splitk_reduce(ln.name) and prev is not None and prev[1] is None
                and not is_splitk_reduce(prev[0].name) and of(classify(prev[0].name)).folds_splitk_reduce):
            out[-1] = (prev[0], ln)
        else:
            out.append((ln, None))
    return out


def _read_of(kept: list, regime: str, source: str, bad: int) -> NcuRead:
    """The Top-N's view of the timed launches: per-name time (a split-K pair timed as its sum,
    the reduce in `folded`), per-name counters (the pair's counts added), the devices."""
    aggs: dict[str, KernelAgg] = {}
    named = []
    pairs = _fold_splitk(kept)
    for ln, red in pairs:
        a = aggs.setdefault(ln.name, KernelAgg(ln.name))
        us = ln.values[DURATION] * _NS_TO_US
        kc = launch_counters(ln.name, ln.values, source, ln.device)
        if red is not None:
            r_us = red.values[DURATION] * _NS_TO_US
            f = a.folded.setdefault(red.name, [0, 0.0])
            f[0] += 1
            f[1] += r_us
            us += r_us
            kc = combine(kc, launch_counters(red.name, red.values, source, red.device))
        a.count[regime] += 1
        a.total_us[regime] += us
        if ln.dims is not None:
            a.launch_dims[ln.dims] += 1
        named.append((ln.name, kc))
    out = NcuRead(list(aggs.values()), bad, group_average(named, source), device_records(kept))
    n_folded = sum(1 for _, r in pairs if r is not None)
    if n_folded:
        out.notes.append(f"split-K: {n_folded} reduce launches folded into the GEMM launch each one completes "
                         "(the launch just before it): the pair is one logical op, timed and counted as their sum")
    return out


def _gunzip_to_temp(path: str, size: int) -> str:
    """A gzipped report, inflated in pieces (bounded: ROOFLINE_MAX_COUNTER_BYTES) into a temporary
    .ncu-rep the caller removes (roofline.io.safeio.gunzip_to_tempfile, as stage C's counters)."""
    from roofline.io import safeio

    try:
        return safeio.gunzip_to_tempfile(path, limit_env="ROOFLINE_MAX_COUNTER_BYTES", suffix=".ncu-rep")
    except safeio.UnsafeInput as exc:
        raise NcuError(exc.problem) from None
    except zlib.error as exc:
        raise NcuError(f"gzip data is corrupt ({exc})") from None


def read_ncu_rep(path: str, regime: str):
    from roofline.io import safeio

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
        return _read_of(_rep_timed(launches), regime, "ncu-rep", 0)
    except (OSError, EOFError) as exc:
        raise NcuError(f"cannot read: {exc}") from None
    finally:
        if tmp:
            os.unlink(tmp)


def _rep_timed(launches) -> list:
    """The report's launches that carry a duration (a damaged one raises)."""
    if not launches:
        raise NcuError("not a loadable Nsight Compute report, or one with no profiled kernels")
    kept = []
    for ln in launches:
        ns = ln.values.get(DURATION)
        if ns is None:
            continue
        us = ns * _NS_TO_US
        if not 0 <= us < float("inf"):  # a damaged duration is no measurement
            raise NcuError(f"kernel {ln.name[:60]!r}: {DURATION} is {us}, not a time")
        kept.append(ln)
    if not kept:
        raise NcuError(f"no kernel in the report has {DURATION}")
    return kept


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
    notes = list(read.notes) + [f"{n} of {len(doc['entries'])} entries carry the report's measured counters (DRAM bytes, issued "
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
