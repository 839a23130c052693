"""The op class without a byte/FLOP model: "unknown" (a kernel no rule recognised: listed, never
guessed). Registered so that every class classify.py returns has one record, and the L2 reason is
said here. (Collectives, "comm", have their model on the interconnect roof: comm.py.)"""
from __future__ import annotations

from roofline.core.opclasses.base import OpClass, register

# NB: the reason says what would give a verdict (roofline.core.procedure.check_modelable adds the classes a
# `classification` may name, and the op the kernel ran inside where the trace recorded one)
register(OpClass("unknown", not_modelled="op class 'unknown' cannot be modelled (name not recognised and no usable "
                                         "classification hint): no guess is made. What would give a verdict: a "
                                         "`classification` in its Top-N entry with the shapes that class reads "
                                         "(`shapes` or `est_shape`, docs/topn.md), or Nsight Compute counters of this "
                                         "kernel with DRAM bytes and duration (dram__bytes.sum and "
                                         "gpu__time_duration.sum, e.g. `ncu --set roofline`; `roofline analyze "
                                         "--counters REPORT`) for a measured verdict"))
