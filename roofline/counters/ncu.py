"""THE Nsight Compute reader, for stage C (roofline.counters.load) and `roofline topn`
(roofline/ingest/ncu.py) alike: .ncu-rep (through the `ncu_report` module of the PyPI package
`ncu-report`, no GPU needed: `rep_launches`) and the CSV of `ncu --import R --csv --page raw`
(with or without `--print-units base`: `csv_table` + `csv_launches`), units through the one table
in roofline/counters/units.py (tests/test_one_ncu_reader.py keeps it one).

Both readers first turn every launch into {metric name: value in ncu's base unit} and share
`launch_counters()` for the arithmetic, so the two paths give the same KernelCounters for the
same report (names aside: ncu_report's demangler and the ncu 2025.3.1 CLI's print a few names
differently, e.g. `(int)8` vs `8`; `roofline.counters.match.canonical_name` maps both to one).

Metric names are Hopper's (`ncu --query-metrics --chip gh100`); the H200 fixtures are in fixtures/ncu/.
"""
from __future__ import annotations


import csv
import math
import io
from dataclasses import dataclass, field
from pathlib import Path

from .aggregate import group_average
from .base import KernelCounters
from .errors import CounterReadError
from .units import UnitError, parse_number, unit_factor

DURATION = "gpu__time_duration.sum"
DRAM_READ = "dram__bytes_read.sum"
DRAM_WRITE = "dram__bytes_write.sum"
DRAM_TOTAL = "dram__bytes.sum"
DRAM_PEAK_PER_CYCLE = "dram__bytes.sum.peak_sustained"
DRAM_CLOCK = "dram__cycles_elapsed.avg.per_second"
SM_CLOCK_MEASURED = "sm__cycles_elapsed.avg.per_second"
SM_CLOCK_MAX_KHZ = "device__attribute_max_gpu_frequency_khz"   # kHz, printed unitless
L2_BYTES = "lts__t_bytes.sum"
L1_BYTES = "l1tex__t_bytes.sum"
DEVICE_NAME = "device__attribute_display_name"
# the device as the report records it (device__attribute_*, printed unitless; clocks in kHz, the bus
# in bits), under the keys of a PyTorch trace's deviceProperties record, which `roofline topn`
# writes and roofline/core/devices.py reads (gfx = sm_<major><minor>; level-L1 derivation for a GPU that
# is in no table: 2 x memory clock x bus width / 8, SMs x clock x the per-SM tensor rate)
DEVICE_ATTRS = {
    "computeMajor": "device__attribute_compute_capability_major",
    "computeMinor": "device__attribute_compute_capability_minor",
    "numSms": "device__attribute_multiprocessor_count",
    "clockRate": "device__attribute_max_gpu_frequency_khz",
    "memoryClockRate": "device__attribute_max_mem_frequency_khz",
    "memoryBusWidth": "device__attribute_global_memory_bus_width",
    "totalGlobalMem": "device__attribute_total_memory",
    "l2CacheSize": "device__attribute_l2_cache_size",
}

# issued tensor-pipe ops per source dtype; an FMA counts as 2 (they are FLOPs), padding included.
# Several names per dtype: the first present wins; a list inside means "sum these" (chips that
# split fp16 by accumulator type).
TENSOR_OPS: dict[str, list] = {
    "bf16": ["sm__ops_path_tensor_src_bf16_dst_fp32.sum", "sm__ops_path_tensor_src_bf16.sum"],
    "fp16": ["sm__ops_path_tensor_src_fp16.sum",
             ["sm__ops_path_tensor_src_fp16_dst_fp16.sum", "sm__ops_path_tensor_src_fp16_dst_fp32.sum"]],
    "fp8": ["sm__ops_path_tensor_src_fp8.sum"],
    "tf32": ["sm__ops_path_tensor_src_tf32_dst_fp32.sum", "sm__ops_path_tensor_src_tf32.sum"],
    "fp64": ["sm__ops_path_tensor_src_fp64.sum"],
    "int8": ["sm__ops_path_tensor_src_int8.sum"],        # integer ops, kept apart by its key
}
# dense (sparsity off) tensor peaks per cycle: the ones to divide dense FLOPs by (H200.md:
# sm__ops_path_tensor_src_bf16_dst_fp32.sum.peak_sustained is 2x this, it includes sparsity)
TENSOR_PEAKS_PER_CYCLE = {
    "bf16": "sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32_sparsity_off.sum.peak_sustained",
    "fp16": "sm__ops_path_tensor_op_hgmma_src_fp16_sparsity_off.sum.peak_sustained",
    "fp8": "sm__ops_path_tensor_src_fp8_sparsity_off.sum.peak_sustained",
    "tf32": "sm__ops_path_tensor_op_hgmma_src_tf32_dst_fp32_sparsity_off.sum.peak_sustained",
}
# CUDA-core (thread-level SASS) FLOPs: 2*fma + add + mul per precision.
# Caveat: HFMA2/HADD2 (packed half2) count once per thread instruction, like ncu's own roofline.
CUDA_CORE = {prec: {op: f"sm__sass_thread_inst_executed_op_{letter}{op}_pred_on.sum" for op in ("add", "mul", "fma")}
             for prec, letter in (("half", "h"), ("single", "f"), ("double", "d"))}
# corroborating metrics copied into `extra` when present (value in base units)
EXTRA = {
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_throughput_pct",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": "compute_memory_throughput_pct",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_throughput_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved_occupancy_pct",
    "launch__grid_size": "grid_size",
    "launch__block_size": "block_size",
    "launch__registers_per_thread": "registers_per_thread",
    SM_CLOCK_MEASURED: "sm_clock_hz_measured",
    DRAM_CLOCK: "dram_clock_hz",
    "sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32_sparsity_off.sum": "tensor_ops_bf16_hgmma_dense",
}


def _flat(names):
    for n in names:
        if isinstance(n, list):
            yield from n
        else:
            yield n


_COUNTS: tuple[str, ...] = tuple(dict.fromkeys(
    [DURATION, DRAM_READ, DRAM_WRITE, DRAM_TOTAL, DRAM_PEAK_PER_CYCLE, DRAM_CLOCK, SM_CLOCK_MEASURED,
     SM_CLOCK_MAX_KHZ, L2_BYTES, L1_BYTES]
    + list(_flat(n for v in TENSOR_OPS.values() for n in v))
    + list(TENSOR_PEAKS_PER_CYCLE.values())
    + [m for d in CUDA_CORE.values() for m in d.values()]
    + list(EXTRA)))
# Count metrics (`.sum` over the kernel) that a report may hold only as a RATE, `M.per_second` =
# M / gpu__time_duration: Nsight Compute's `--set roofline` (and the SpeedOfLight roofline
# sections) store dram__bytes.sum.per_second and no dram__bytes.sum. Where the count is absent
# and the rate present, count = rate x gpu__time_duration.sum, and the record says so
# (`derived_from_rate`). Checked on the H200 (fixtures/ncu_roofline): rate x duration of the
# roofline report vs dram__bytes.sum of a byte-counter report of the same kernels agree within
# 2.4% (separate ncu runs and replay passes).
RATE = ".per_second"
RATE_DERIVABLE: tuple[str, ...] = tuple(m for m in _COUNTS if m.endswith(".sum") and m != DURATION)
WANTED: tuple[str, ...] = tuple(dict.fromkeys(list(_COUNTS) + [m + RATE for m in RATE_DERIVABLE]))


WITH_DEVICE: tuple[str, ...] = WANTED + tuple(DEVICE_ATTRS.values())   # what `roofline topn` reads


def counts_from_rates(m: dict[str, float | None]) -> tuple[dict[str, float | None], list[str]]:
    """{metric: base-unit value} with every absent count of RATE_DERIVABLE filled from its rate
    (per second) x gpu__time_duration.sum (ns); -> (values, [metrics derived])."""
    dur_ns = m.get(DURATION)
    if not dur_ns or dur_ns <= 0:
        return m, []
    out, derived = dict(m), []
    for metric in RATE_DERIVABLE:
        if out.get(metric) is None and out.get(metric + RATE) is not None:
            out[metric] = out[metric + RATE] * dur_ns * 1e-9
            derived.append(metric)
    return out, derived


def rate_notes(kc: KernelCounters) -> list[str]:
    """One line for an entry's notes when a counter the analysis uses came from a rate."""
    if not kc.derived_from_rate:
        return []
    names = ", ".join(kc.derived_from_rate)
    return [f"stage C: {names} derived as rate x duration ({names.split(', ')[0]}{RATE} x {DURATION}): "
            "the report stores rates, not counts (e.g. ncu --set roofline)"]


def launch_counters(name: str, m: dict[str, float | None], source: str,
                    device_name: str | None = None) -> KernelCounters:
    """One launch's KernelCounters from {metric: value in ncu base units} (absent = missing).
    A count the report holds only as a rate is rate x duration (counts_from_rates)."""
    m, derived = counts_from_rates(m)
    g = m.get
    kc = KernelCounters(name=name, launches=1, source=source, device_name=device_name)
    kc.derived_from_rate = derived
    if g(DURATION) is not None:
        kc.t_ms = g(DURATION) / 1e6                       # ns -> ms
    kc.dram_read_bytes, kc.dram_write_bytes = g(DRAM_READ), g(DRAM_WRITE)
    if kc.dram_read_bytes is not None and kc.dram_write_bytes is not None:
        kc.dram_bytes = kc.dram_read_bytes + kc.dram_write_bytes
    else:
        kc.dram_bytes = g(DRAM_TOTAL)
    for dtype, candidates in TENSOR_OPS.items():
        for c in candidates:
            parts = c if isinstance(c, list) else [c]
            vals = [g(p) for p in parts]
            if all(v is not None for v in vals):
                kc.tensor_flops_by_dtype[dtype] = float(sum(vals))
                break
    total = None
    for prec, ops in CUDA_CORE.items():
        vals = {op: g(metric) for op, metric in ops.items()}
        if all(v is None for v in vals.values()):
            continue
        f = 2 * (vals["fma"] or 0.0) + (vals["add"] or 0.0) + (vals["mul"] or 0.0)
        if any(v is not None and not 0 <= v < math.inf for v in vals.values()):
            f = math.nan   # a negative or infinite count is no reading: the record is L4 (roofline/core/plausible.py)
        kc.extra[f"cuda_core_flops_{prec}"] = f
        total = (total or 0.0) + f
    kc.cuda_core_flops = total
    kc.l2_bytes, kc.l1_bytes = g(L2_BYTES), g(L1_BYTES)
    if g(DRAM_PEAK_PER_CYCLE) is not None and g(DRAM_CLOCK) is not None:
        kc.report_peak_hbm_bw_bytes_s = g(DRAM_PEAK_PER_CYCLE) * g(DRAM_CLOCK)
    # the SM clock for a peak is the device's maximum (boost) clock; the measured average over
    # the kernel (clocks float under --clock-control none) goes to extra
    if g(SM_CLOCK_MAX_KHZ) is not None:
        kc.report_sm_clock_hz = g(SM_CLOCK_MAX_KHZ) * 1e3
    else:
        kc.report_sm_clock_hz = g(SM_CLOCK_MEASURED)
    for dtype, metric in TENSOR_PEAKS_PER_CYCLE.items():
        if g(metric) is not None:
            kc.extra[f"peak_tensor_ops_per_cycle_dense.{dtype}"] = g(metric)
    for metric, key in EXTRA.items():
        if g(metric) is not None:
            kc.extra[key] = g(metric)
    return kc


def device_records(launches) -> list[dict]:
    """One deviceProperties-style record per distinct device of the report's launches (name from
    device__attribute_display_name, integers from DEVICE_ATTRS where the launches hold them)."""
    out: dict[tuple, dict] = {}
    for ln in launches:
        rec = {"name": ln.device} if ln.device else {}
        for key, metric in DEVICE_ATTRS.items():
            v = ln.values.get(metric)
            if v is not None and v == v and abs(v) < 2 ** 63:
                rec[key] = int(v)
        if rec:
            out.setdefault(tuple(sorted(rec.items())), rec)
    return list(out.values())


def launch_records(launches, source: str) -> list[KernelCounters]:
    """The per-name KernelCounters (per-launch averages) of parsed launches: what `load` returns."""
    return group_average([(ln.name, launch_counters(ln.name, ln.values, source, ln.device)) for ln in launches],
                         source)


# ----------------------------------------------------------------------------- one launch
@dataclass
class Launch:
    """One profiled launch as the report holds it: {metric: value in ncu's base unit} for the
    metrics asked for and present, and (grid, block) where asked for and the report has them."""
    name: str
    values: dict[str, float] = field(default_factory=dict)
    device: str | None = None
    dims: tuple | None = None          # ((grid x, y, z) | (size,) | None, (block ...)) or None


def _dims(s: str):
    """'(2, 66, 1)' -> (2, 66, 1); '128' -> (128,); unparsable -> None."""
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


# ----------------------------------------------------------------------------- .ncu-rep
def _import_ncu_report():
    """The PyPI package `ncu-report`; else the copy every Nsight Compute install ships in
    <ncu>/extras/python (the device image has ncu but not the PyPI package)."""
    try:
        import ncu_report

        return ncu_report
    except ImportError:
        import importlib
        import shutil
        import sys

        ncu = shutil.which("ncu")
        if ncu:
            extras = Path(ncu).resolve().parent / "extras" / "python"
            if (extras / "ncu_report.py").exists() and str(extras) not in sys.path:
                sys.path.append(str(extras))
                return importlib.import_module("ncu_report")
        raise


def _rep_launch(path, ncu_report, act, ri: int, ai: int, metrics, dims: bool) -> Launch:
    try:
        name = act.name(ncu_report.IAction.NameBase_DEMANGLED) or act.name()
    except Exception:  # noqa: BLE001 - a demangler failure: the mangled name
        name = act.name()
    if not isinstance(name, str) or not name:  # a damaged report: a kernel without a name
        raise CounterReadError(path, f"kernel {ai} of range {ri} has no name (a damaged report)")
    vals: dict[str, float] = {}
    for metric in metrics:
        mm = act.metric_by_name(metric)
        if mm is None or not mm.has_value():
            continue
        try:
            vals[metric] = mm.as_double() * unit_factor(mm.unit())
        except UnitError as e:
            raise CounterReadError(path, f"{metric}: {e}") from e
    dn = act.metric_by_name(DEVICE_NAME)
    dev = dn.as_string() if dn is not None and dn.has_value() else None
    return Launch(name, vals, dev, (_rep_dims(act, "launch__grid"), _rep_dims(act, "launch__block")) if dims else None)


def rep_launches(path: str | Path, metrics=WANTED, *, dims: bool = False) -> list[Launch]:
    """THE .ncu-rep reader (stage C and `roofline topn` both): every launch of every range, the
    `metrics` in base units. An unloadable or damaged report raises CounterReadError; a report
    with no launches gives [] (the callers word that case)."""
    try:
        ncu_report = _import_ncu_report()
    except ImportError as e:
        raise CounterReadError(path, f"reading .ncu-rep needs the ncu-report package ({e})") from e
    from roofline.io import safeio

    try:
        with safeio.native_stderr_captured():  # its C++ log lines on a damaged file stay off the terminal
            ctx = ncu_report.load_report(str(path))
    except Exception as e:  # noqa: BLE001 - any failure of the loader is a bad file
        raise CounterReadError(path, f"not a loadable Nsight Compute report ({type(e).__name__}: {e})") from e
    try:
        out = []
        for ri in range(ctx.num_ranges()):
            rng = ctx.range_by_idx(ri)
            out += [_rep_launch(path, ncu_report, rng.action_by_idx(ai), ri, ai, metrics, dims)
                    for ai in range(rng.num_actions())]
        return out
    except CounterReadError:
        raise
    except Exception as e:  # noqa: BLE001
        raise CounterReadError(path, f"report could not be walked ({type(e).__name__}: {e})") from e


def read_ncu_rep(path: str | Path) -> list[KernelCounters]:
    from roofline.io import safeio

    with safeio.open_regular(path) as f:
        magic = f.read(4)
    if magic[:3] != b"NVR":   # every .ncu-rep seen here starts with b"NVR\0": refused before ncu_report loads it
        raise CounterReadError(path, "binary file that is not an Nsight Compute report (no NVR header)")
    launches = rep_launches(path)
    if not launches:
        raise CounterReadError(path, "the Nsight Compute report holds no kernel results (empty or truncated)")
    return launch_records(launches, "ncu-rep")


# ----------------------------------------------------------------------------- raw-page CSV
def is_ncu_csv_header(cells: list[str]) -> bool:
    return bool(cells) and cells[0].strip() == "ID" and "Kernel Name" in cells


@dataclass
class CsvTable:
    header: list[str]
    col: dict[str, int]
    units: list[str]
    body: list[list[str]]


def csv_table(text: str, path: str | Path) -> CsvTable:
    """THE raw-page CSV parser (`ncu --import R --csv --page raw [--print-units base]`): the
    header row (ncu's ==PROF==/==WARNING== log lines before it skipped), the units row where there
    is one (else base units), the launch rows. Raises CounterReadError; csv.Error passes."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"') or ln.startswith("ID,")), None)
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:])))) if start is not None else []
    if not rows or not is_ncu_csv_header(rows[0]):
        raise CounterReadError(path, "not an ncu --page raw CSV: no 'Kernel Name' column")
    header = rows[0]
    col = {h: i for i, h in enumerate(header)}
    body = rows[1:]
    units = [""] * len(header)
    first = body[0] if body else []
    if first and first[0].strip() == "" and len(first) > col["Kernel Name"] and first[col["Kernel Name"]].strip() == "":
        units = first + [""] * (len(header) - len(first))
        body = body[1:]
    return CsvTable(header, col, units, body)


def csv_launches(table: CsvTable, path, metrics=WANTED, *, strict: bool = True) -> list[Launch]:
    """The launch rows of a parsed raw-page CSV, `metrics` in base units (an unparsable cell is
    absent). A row shorter than the header raises when `strict`, else its missing cells are
    empty. (grid, block) from the "Grid Size"/"Block Size" columns where both are there."""
    col = table.col
    present = [m for m in metrics if m in col]
    factors = {}
    for m in present:
        try:
            factors[m] = unit_factor(table.units[col[m]])
        except UnitError as e:
            raise CounterReadError(path, f"column {m}: {e}") from e
    name_i, dev_i, n = col["Kernel Name"], col.get(DEVICE_NAME), len(table.header)
    grid_i, block_i = col.get("Grid Size"), col.get("Block Size")
    out = []
    for r in table.body:
        if not r or all(not c.strip() for c in r):
            continue
        if len(r) < n:
            if strict:
                raise CounterReadError(path, f"row {r[0]!r} has {len(r)} cells, the header {n}")
            r = r + [""] * (n - len(r))
        vals = {}
        for m in present:
            v = parse_number(r[col[m]])
            if v is not None:
                vals[m] = v * factors[m]
        dims = (_dims(r[grid_i]), _dims(r[block_i])) if grid_i is not None and block_i is not None else None
        out.append(Launch(r[name_i], vals, r[dev_i] if dev_i is not None and r[dev_i] else None, dims))
    return out


def read_ncu_csv_text(text: str, path: str | Path) -> list[KernelCounters]:
    launches = csv_launches(csv_table(text, path), path)
    if not launches:
        raise CounterReadError(path, "the CSV holds a header but no kernel rows")
    return launch_records(launches, "ncu-csv")
