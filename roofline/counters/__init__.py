"""Stage-C counter readers: Nsight Compute (.ncu-rep, raw-page CSV) and rocprofv3 CSV.

    from roofline.counters import load, match, CounterReadError
    records = load("known.ncu-rep")            # -> list[KernelCounters], one per kernel name
    by_entry, unmatched = match(topn_entries, records)

`load` decides the format from the file's CONTENT, not its name:
- gzip                                   -> decompressed, then as below
- binary (NUL bytes or not UTF-8)        -> Nsight Compute report, through `ncu_report`
- text whose header row is "ID",...,"Kernel Name",...   -> `ncu --import R --csv --page raw`
- text with Kernel_Name, Counter_Name, Counter_Value    -> rocprofv3 counter collection
- JSON {"format": "roofline-counters", ...}             -> the counters a stage-C re-run wrote (records.py)
Anything else, or a file that fails to parse, raises CounterReadError (a RooflineError and a ValueError) whose
message is one line naming the file and the problem.
"""
from __future__ import annotations

import csv
import io
import zlib
from pathlib import Path

from .base import KernelCounters
from .errors import CounterReadError
from .match import canonical_name, demangle, match, short_name

__all__ = ["KernelCounters", "CounterReadError", "load", "match", "canonical_name", "demangle", "short_name"]

_SNIFF = 1 << 16


def load(path, *, mops_f8_factor: float | None = None) -> list[KernelCounters]:
    """Read a counter file into one KernelCounters per kernel name (per-launch averages)."""
    from roofline.io import safeio

    p = Path(path)
    try:
        # opened once: a regular file only (never blocks on a FIFO or reads /dev/zero), within the size limit
        with safeio.open_regular(p) as f:
            if f.read(2) == b"\x1f\x8b":   # inflated in pieces to a file, never whole in memory
                return _load_gzipped(p, mops_f8_factor, f)
            f.seek(0)
            raw = safeio.read_open(f, p, limit_env="ROOFLINE_MAX_COUNTER_BYTES")
    except FileNotFoundError:
        raise CounterReadError(p, "no such file") from None
    except safeio.UnsafeInput as e:
        raise CounterReadError(p, e.problem) from None
    except (EOFError, zlib.error) as e:
        raise CounterReadError(p, f"gzip data is corrupt ({e})") from e
    except OSError as e:
        raise CounterReadError(p, safeio.os_problem(e)) from e
    return _load_raw(p, raw, mops_f8_factor)


def _load_gzipped(p: Path, mops_f8_factor, f) -> list[KernelCounters]:
    """A gzipped counter file of any format (`f`: it, open): inflated in pieces (size and ratio
    limits) into a temporary file, read from there; messages name `p`."""
    from roofline.io import safeio

    tmp = safeio.gunzip_to_tempfile(p, limit_env="ROOFLINE_MAX_COUNTER_BYTES", suffix=".ncu-rep", fileobj=f)
    try:
        with open(tmp, "rb") as f:
            head = f.read(_SNIFF)
        if b"\x00" in head or not _is_utf8(head, partial=True):
            from .ncu import read_ncu_rep

            try:
                return read_ncu_rep(tmp)
            except CounterReadError as e:
                raise CounterReadError(p, e.problem) from e
        raw = safeio.read_bytes(tmp, limit_env="ROOFLINE_MAX_COUNTER_BYTES")
    finally:
        Path(tmp).unlink(missing_ok=True)
    return _load_raw(p, raw, mops_f8_factor)


def _load_raw(p: Path, raw, mops_f8_factor) -> list[KernelCounters]:
    """The counters of a file's (uncompressed) content `raw`."""
    if not raw.strip():
        raise CounterReadError(p, "the file is empty")
    text = raw.decode("utf-8-sig") if b"\x00" not in raw[:_SNIFF] and _is_utf8(raw) else None
    if text is None:
        from .ncu import read_ncu_rep

        return read_ncu_rep(p)

    if text.lstrip().startswith("{"):   # JSON: the counters file of a stage-C re-run
        from .records import read_records_text

        return read_records_text(text, p)
    first = _first_table_row(text)
    from .ncu import is_ncu_csv_header, read_ncu_csv_text
    from .rocprof import MOPS_F8_FLOPS_PER_UNIT, is_rocprof_header, read_rocprof_csv_text

    try:
        if first is not None and is_ncu_csv_header(first):
            return read_ncu_csv_text(text, p)
        if first is not None and is_rocprof_header(first):
            return read_rocprof_csv_text(text, p, mops_f8_factor or MOPS_F8_FLOPS_PER_UNIT)
    except CounterReadError:
        raise
    except (csv.Error, IndexError, KeyError, TypeError, ValueError, OverflowError) as e:
        # a malformed table (a short units row, an oversized field, a stray quote): one clean line
        raise CounterReadError(p, f"malformed CSV ({type(e).__name__}: {e})") from None
    raise CounterReadError(p, "not a counter file this reader knows (expected an .ncu-rep, the CSV of `ncu --import "
                              "R --csv --page raw`, a rocprofv3 counter-collection CSV, or a rerun_counters.json)")


def _is_utf8(raw: bytes, partial: bool = False) -> bool:
    """Whether `raw` is UTF-8 text (partial: the first piece of a file, which may end mid-character)."""
    import codecs

    try:
        codecs.getincrementaldecoder("utf-8-sig")().decode(raw, final=not partial)
    except UnicodeDecodeError:
        return False
    return True


def _first_table_row(text: str) -> list[str] | None:
    """The first CSV row that is not an ncu log line (==PROF==, ==WARNING==, ...)."""
    for line in text.splitlines()[:200]:
        if not line.strip() or line.startswith("=="):
            continue
        try:
            return next(csv.reader(io.StringIO(line)))
        except (csv.Error, StopIteration):
            return None
    return None
