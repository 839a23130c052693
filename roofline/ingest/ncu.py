"""Nsight Compute output -> per-kernel launches for the Top-N builder.

Two readers, one result (a list of :class:`~roofline.ingest.topn.KernelAgg`):

* ``.ncu-rep`` (optionally gzipped) through the ``ncu-report`` package (module ``ncu_report``),
  which reads reports without a GPU: ``load_report -> range_by_idx -> action_by_idx``;
  duration = ``gpu__time_duration.sum`` (ns).
* the CSV of ``ncu --import R --csv --page raw [--print-units base]``: columns found by header
  name; the second row holds units; numbers may carry thousands separators ("12,896") and, without
  ``--print-units base``, auto-scaled units (us, ms) that are converted here.

ncu usually profiles a sample (``-c N``, ``-k`` filters, replay): its percentages are shares of the
*profiled* kernels, not of the run; the builder says so in ``notes``.
"""
from __future__ import annotations

import csv
import io
import os
import shutil
import tempfile
import zlib

from roofline.ingest.topn import KernelAgg

DURATION = "gpu__time_duration.sum"
_TIME_TO_US = {"ns": 1e-3, "nsecond": 1e-3, "nanosecond": 1e-3, "us": 1.0, "usecond": 1.0, "microsecond": 1.0,
               "ms": 1e3, "msecond": 1e3, "millisecond": 1e3, "s": 1e6, "second": 1e6}


class NcuError(Exception):
    """The report or CSV cannot be used (message names the problem, not the file)."""


def _num(s: str) -> float:
    s = (s or "").strip().replace(",", "").replace('"', "")
    if not s or s.lower() in ("n/a", "nan"):
        raise ValueError("empty")
    return float(s)


def read_ncu_csv(path: str, regime: str):
    from roofline import safeio

    try:
        # a regular file within the counter size limit (gzip within the ratio limit too)
        raw = safeio.read_bytes(path, limit_env="ROOFLINE_MAX_COUNTER_BYTES", gunzip=True)
        rows = list(csv.reader(io.StringIO(raw.decode("utf-8", errors="replace"), newline="")))
    except safeio.UnsafeInput as exc:
        raise NcuError(exc.problem) from None
    except OSError as exc:
        raise NcuError(f"cannot read: {exc.strerror or exc}") from None
    except (EOFError, zlib.error) as exc:
        raise NcuError(f"gzip data is corrupt ({exc})") from None
    except csv.Error as exc:
        raise NcuError(f"malformed CSV ({exc})") from None
    if not rows:
        raise NcuError("empty file")
    hdr = [h.strip() for h in rows[0]]
    if "Kernel Name" not in hdr:
        raise NcuError("not an ncu --page raw CSV: no 'Kernel Name' column")
    if DURATION not in hdr:
        raise NcuError(f"no '{DURATION}' column (collect it: it is in every ncu section set)")
    i_name, i_dur = hdr.index("Kernel Name"), hdr.index(DURATION)
    i_id = hdr.index("ID") if "ID" in hdr else None
    i_grid = hdr.index("Grid Size") if "Grid Size" in hdr else None
    i_block = hdr.index("Block Size") if "Block Size" in hdr else None
    body = rows[1:]
    unit = "ns"
    if body and (i_id is not None and len(body[0]) > max(i_id, i_dur) and not body[0][i_id].strip()):
        unit = body[0][i_dur].strip() or "ns"
        body = body[1:]
    scale = _TIME_TO_US.get(unit)
    if scale is None:
        raise NcuError(f"unknown time unit {unit!r} in the units row")
    aggs: dict[str, KernelAgg] = {}
    bad = 0
    for row in body:
        if len(row) <= max(i_name, i_dur):
            bad += 1
            continue
        try:
            us = _num(row[i_dur]) * scale
        except ValueError:
            bad += 1
            continue
        if not 0 <= us < float("inf"):  # a negative or infinite duration is no measurement
            bad += 1
            continue
        name = row[i_name]
        a = aggs.setdefault(name, KernelAgg(name))
        a.count[regime] += 1
        a.total_us[regime] += us
        if i_grid is not None and i_block is not None:
            a.launch_dims[(_dims(row[i_grid]), _dims(row[i_block]))] += 1
    if not aggs:
        raise NcuError("no kernel rows with a duration")
    return list(aggs.values()), bad


def _dims(s: str):
    s = (s or "").strip().strip("()")
    try:
        return tuple(int(x.replace(",", "")) for x in s.split(",") if x.strip()) if "," in s else (int(s),)
    except ValueError:
        return None


def _rep_dims(act, prefix: str):
    """(x, y, z) from launch__{grid,block}_dim_{x,y,z}, else (size,) from launch__*_size."""
    ms = [act.metric_by_name(f"{prefix}_dim_{c}") for c in "xyz"]
    if all(m is not None for m in ms):
        return tuple(int(m.as_uint64()) for m in ms)
    m = act.metric_by_name(f"{prefix}_size")
    return (int(m.as_uint64()),) if m is not None else None


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
    try:
        import ncu_report
    except ImportError:  # pragma: no cover - declared dependency
        raise NcuError("the 'ncu-report' package (module ncu_report) is not installed") from None
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
            with safeio.native_stderr_captured():  # its C++ log lines stay off the terminal
                ctx = ncu_report.load_report(tmp or path)
        except Exception as exc:  # the package raises plain Exceptions on bad files
            raise NcuError(f"ncu_report cannot load it ({str(exc).strip()[:120] or type(exc).__name__})") from None
        aggs: dict[str, KernelAgg] = {}
        n_act = 0
        for ri in range(ctx.num_ranges()):
            rng = ctx.range_by_idx(ri)
            for ai in range(rng.num_actions()):
                act = rng.action_by_idx(ai)
                n_act += 1
                try:
                    name = act.name(ncu_report.IAction.NameBase_DEMANGLED)
                except Exception:
                    name = act.name()
                if not isinstance(name, str) or not name:
                    raise NcuError(f"kernel {ai} of range {ri} has no name (a damaged report)")
                m = act.metric_by_name(DURATION)
                if m is None:
                    continue
                us = m.as_double() * _TIME_TO_US.get(m.unit() or "ns", 1e-3)
                if not 0 <= us < float("inf"):  # a damaged duration is no measurement
                    raise NcuError(f"kernel {name[:60]!r}: {DURATION} is {us}, not a time")
                a = aggs.setdefault(name, KernelAgg(name))
                a.count[regime] += 1
                a.total_us[regime] += us
                a.launch_dims[(_rep_dims(act, "launch__grid"), _rep_dims(act, "launch__block"))] += 1
        if n_act == 0:
            raise NcuError("not a loadable Nsight Compute report, or one with no profiled kernels")
        if not aggs:
            raise NcuError(f"no kernel in the report has {DURATION}")
        return list(aggs.values()), 0
    except (OSError, EOFError) as exc:
        raise NcuError(f"cannot read: {exc}") from None
    finally:
        if tmp:
            os.unlink(tmp)


def read_ncu(path: str, regime: str):
    """KernelAgg list from an .ncu-rep[.gz] or a raw-page CSV, all launches in ``regime``."""
    low = path.lower()
    if low.endswith(".csv") or low.endswith(".csv.gz"):
        return read_ncu_csv(path, regime)
    return read_ncu_rep(path, regime)


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


__all__ = ["read_ncu", "read_ncu_csv", "read_ncu_rep", "ncu_steps", "NcuError"]
