"""rocprofv3 counter-collection CSV reader (AMD).

Format (rocprofv3's documentation, ROCm/rocprofiler-sdk source/docs/data/counter_collection.csv;
copy in fixtures/rocprof/): LONG format, one row per (dispatch, counter), timestamps in ns.
Columns are found by header NAME, since their order changed across versions; needed:
Kernel_Name, Counter_Name, Counter_Value; a dispatch key (Dispatch_Id, else Correlation_Id);
Start_Timestamp/End_Timestamp optional.

Conversions (per rocprofiler's counter definitions):
- FETCH_SIZE, WRITE_SIZE are KiB: bytes = value * 1024.
- MfmaFlopsBF16/F16/F32/F64 are FLOPs per dtype; MfmaFlops is their total and is used only
  when no per-dtype counter is present (stored as dtype "unspecified"), else kept in extra.
- fp8 has no MfmaFlopsF8: SQ_INSTS_VALU_MFMA_MOPS_F8 counts MFMA ops in units of 512 FLOPs
  (the factor rocprofiler-compute's own "F8 OPs" metric uses: 512 * SQ_INSTS_VALU_MFMA_MOPS_F8);
  `mops_f8_factor` overrides it for an instruction shape that counts differently.
- MemUnitStalled, MfmaUtil, OccupancyPercent (and every other counter) go to extra by name.
- duration per dispatch: End_Timestamp - Start_Timestamp (ns).
"""
from __future__ import annotations

import csv
import io
import math
from pathlib import Path

from .aggregate import group_average
from .base import KernelCounters
from .errors import CounterReadError
from .units import parse_number

KIB = 1024.0
MOPS_F8_FLOPS_PER_UNIT = 512.0
MFMA_DTYPE = {"MfmaFlopsBF16": "bf16", "MfmaFlopsF16": "fp16", "MfmaFlopsF32": "fp32",
              "MfmaFlopsF64": "fp64"}
REQUIRED = ("Kernel_Name", "Counter_Name", "Counter_Value")


def is_rocprof_header(cells: list[str]) -> bool:
    names = {c.strip() for c in cells}
    return all(r in names for r in REQUIRED)


def _dispatch_counters(name: str, ctr: dict[str, float], t_ns: float | None,
                       mops_f8_factor: float) -> KernelCounters:
    kc = KernelCounters(name=name, launches=1, source="rocprofv3-csv")
    if t_ns is not None:
        kc.t_ms = t_ns / 1e6
    fetch, write = ctr.get("FETCH_SIZE"), ctr.get("WRITE_SIZE")
    kc.dram_read_bytes = fetch * KIB if fetch is not None else None
    kc.dram_write_bytes = write * KIB if write is not None else None
    if fetch is not None and write is not None:
        kc.dram_bytes = (fetch + write) * KIB
    for counter, dtype in MFMA_DTYPE.items():
        if counter in ctr:
            kc.tensor_flops_by_dtype[dtype] = ctr[counter]
    if "SQ_INSTS_VALU_MFMA_MOPS_F8" in ctr:
        kc.tensor_flops_by_dtype["fp8"] = ctr["SQ_INSTS_VALU_MFMA_MOPS_F8"] * mops_f8_factor
        kc.extra["mops_f8_flops_per_unit"] = mops_f8_factor
    if "MfmaFlops" in ctr and not any(c in ctr for c in MFMA_DTYPE):
        kc.tensor_flops_by_dtype["unspecified"] = ctr["MfmaFlops"]
    for counter, v in ctr.items():
        if counter not in ("FETCH_SIZE", "WRITE_SIZE") and counter not in MFMA_DTYPE:
            kc.extra[counter] = v
    if fetch is not None:
        kc.extra["FETCH_SIZE_KiB"] = fetch
    if write is not None:
        kc.extra["WRITE_SIZE_KiB"] = write
    return kc


def read_rocprof_csv_text(text: str, path: str | Path,
                          mops_f8_factor: float = MOPS_F8_FLOPS_PER_UNIT) -> list[KernelCounters]:
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip() for h in (reader.fieldnames or [])]
    if not is_rocprof_header(header):
        raise CounterReadError(path, f"not a rocprofv3 counter-collection CSV (needs columns {', '.join(REQUIRED)})")
    reader.fieldnames = header
    id_col = "Dispatch_Id" if "Dispatch_Id" in header else ("Correlation_Id" if "Correlation_Id" in header else None)
    # a dispatch is (process, agent, dispatch id): ids restart in another process
    key_cols = [c for c in ("Process_Id", "Agent_Id") if c in header] + ([id_col] if id_col else [])
    dispatches: dict[object, dict] = {}
    for lineno, row in enumerate(reader, start=2):
        if not row.get("Counter_Name"):
            continue
        value = parse_number(row.get("Counter_Value"))
        key = tuple(row.get(c) for c in key_cols) if id_col else lineno
        d = dispatches.get(key)
        if d is None:
            start, end = parse_number(row.get("Start_Timestamp")), parse_number(row.get("End_Timestamp"))
            d = dispatches[key] = dict(name=row["Kernel_Name"], ctr={}, bad=[],
                                       t_ns=(end - start) if start is not None and end is not None else None)
        name = row["Counter_Name"].strip()
        if value is None:
            # a bad value of one kernel's record is that record's problem, not the file's: kept as NaN,
            # it makes the record L4 (roofline.core.plausible) where the analysis would read it; the
            # cell is kept so that the message names the row and the column
            value = math.nan
            d["bad"].append(f"row {lineno}, Counter_Value ({name}): {str(row.get('Counter_Value'))[:40]!r}")
        d["ctr"][name] = d["ctr"].get(name, 0.0) + value   # instances of one counter add up
    if not dispatches:
        raise CounterReadError(path, "the CSV holds a header but no counter rows")
    named = [(d["name"], _dispatch_counters(d["name"], d["ctr"], d["t_ns"], mops_f8_factor))
             for d in dispatches.values()]
    out = group_average(named, "rocprofv3-csv")
    bad: dict[str, list[str]] = {}
    for d in dispatches.values():
        bad.setdefault(d["name"], []).extend(d["bad"])
    for kc in out:
        kc.bad_cells = bad.get(kc.name, [])
    return out
