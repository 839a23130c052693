"""Helpers of the stage-A fills: a field taken from config.json or the workload, recorded as an
assumption so that `notes` can say what was assumed."""
from __future__ import annotations

from roofline.errors import EntryError

_FLAG = {"isl": ("--isl N", "input tokens per request"), "osl": ("--osl N", "output tokens per request"),
         "conc": ("--conc N", "concurrent requests")}


def workload(wl: dict, key: str, what: str):
    """workload[key], or EntryError (this entry degrades alone) naming the field, what needs it and
    how to give it, when the env report leaves it out."""
    if key not in wl:
        raise EntryError(f"workload.{key} is not in the env report, and {what} needs it: give it with "
                         f"`roofline topn TRACE {_FLAG[key][0]}` ({_FLAG[key][1]}) or in the env report (docs/env_report.md)")
    return wl[key]


def cfg(config: dict | None, *keys):
    """The first of ``keys`` config.json gives, or None."""
    for k in keys:
        if config and config.get(k) is not None:
            return config[k]
    return None


def fill(shape: dict, key: str, value, why: str, assumed: list[str]) -> None:
    """Set ``shape[key]`` when it is missing and ``value`` is known, and say so in ``assumed``."""
    if key not in shape and value is not None:
        shape[key] = value
        assumed.append(f"{key}={value:g} ({why})" if isinstance(value, (int, float)) else f"{key}={value} ({why})")


def fill_m(s: dict, wl: dict, regime: str, assumed: list[str]) -> None:
    """A GEMM's M at stage A: the decode batch, or one prefill sequence."""
    if "M" in s:
        return
    if regime == "decode":
        fill(s, "M", int(workload(wl, "conc", "a decode M without a captured shape")), "decode M = workload.conc",
             assumed)
    else:
        fill(s, "M", int(workload(wl, "isl", "a prefill M without a captured shape")),
             "prefill M = one sequence of workload.isl tokens per step", assumed)
