"""Op classes without a byte/FLOP model: "comm" (its roof is the interconnect) and "unknown" (a
kernel no rule recognised: listed, never guessed). Registered so that every class classify.py
returns has one record, and the L2 reason is said here."""
from __future__ import annotations

from roofline.opclasses.base import OpClass, register

register(OpClass("comm", not_modelled="communication kernels are not modelled: their roof is the interconnect, "
                                      "not HBM"))
register(OpClass("unknown", not_modelled="op class 'unknown' cannot be modelled (name not recognised and no usable "
                                         "classification hint): no guess is made"))
