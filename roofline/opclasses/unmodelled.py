"""The op class without a byte/FLOP model: "unknown" (a kernel no rule recognised: listed, never
guessed). Registered so that every class classify.py returns has one record, and the L2 reason is
said here. (Collectives, "comm", have their model on the interconnect roof: comm.py.)"""
from __future__ import annotations

from roofline.opclasses.base import OpClass, register

register(OpClass("unknown", not_modelled="op class 'unknown' cannot be modelled (name not recognised and no usable "
                                         "classification hint): no guess is made"))
