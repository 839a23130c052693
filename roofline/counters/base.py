"""The record every stage-C counter reader returns, whatever the vendor or file format.

All quantities are PER LAUNCH (averaged over the launches of one kernel name in the report),
in base units: bytes, FLOPs, milliseconds. A counter that the report does not hold is None,
never 0 (0 is a measurement; None is "not measured").
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class KernelCounters:
    name: str                                   # kernel name as the report prints it
    launches: int                               # launches of this name that were averaged
    source: str                                 # "ncu-rep" | "ncu-csv" | "rocprofv3-csv"
    t_ms: float | None = None                   # gpu__time_duration (or End-Start) per launch
    dram_bytes: float | None = None             # HBM bytes read + written per launch
    dram_read_bytes: float | None = None
    dram_write_bytes: float | None = None
    tensor_flops_by_dtype: dict[str, float] = field(default_factory=dict)  # issued, FMA = 2, padding included
    cuda_core_flops: float | None = None        # 2*fma + add + mul over h/f/d, thread level
    l2_bytes: float | None = None               # L2 <-> L1 traffic, for the hierarchical view
    l1_bytes: float | None = None
    extra: dict[str, float] = field(default_factory=dict)  # corroborating counters (occupancy, stalls, ...)
    # peaks read from the report itself (used only when the device has no table entry)
    report_peak_hbm_bw_bytes_s: float | None = None
    report_sm_clock_hz: float | None = None
    device_name: str | None = None
    unstable: bool = False                      # launches disagree by more than the noise band
    # count metrics this record has only as rate x duration (the report stored `M.per_second`,
    # e.g. `ncu --set roofline`: dram__bytes.sum.per_second, no dram__bytes.sum), by metric name
    derived_from_rate: list[str] = field(default_factory=list)
    # DRAM bytes derived from the DRAM throughput % of ncu's default set (roofline.counters.ncu.DRAM_PCT):
    # how, in words; None where the report counted them
    dram_bytes_derived: str | None = None
    # a stage-C re-run's isolated timing of this kernel (roofline/counters/records.py), written onto
    # its entry after the analysis (roofline/core/writeback.py); None for every other source
    rerun: dict | None = None

    @property
    def read_nothing(self) -> bool:
        """No counter was read: a re-run record that carries its timing only."""
        return self.t_ms is None and self.dram_bytes is None and self.flops_issued is None and self.l2_bytes is None
    # launches whose work differs (`unstable`): one row per group of like launches (aggregate.launch_groups),
    # each {"launches", "t_ms", "dram_bytes", "flops_issued"} per launch of the group; [] otherwise
    groups: list[dict] = field(default_factory=list)
    # the file's cells that held no number (row and column, e.g. "row 7, Counter_Value (FETCH_SIZE): 'n/a'"):
    # a reading built from one is NaN, and the message that rejects it names the cell
    bad_cells: list[str] = field(default_factory=list)

    @property
    def flops_issued(self) -> float | None:
        """Tensor + CUDA-core FLOPs issued per launch, or None when neither was measured."""
        parts = [v for v in self.tensor_flops_by_dtype.values() if v is not None]
        if self.cuda_core_flops is not None:
            parts.append(self.cuda_core_flops)
        return sum(parts) if parts else None
