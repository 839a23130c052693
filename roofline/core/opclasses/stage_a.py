"""Helpers of the stage-A fills: a field taken from config.json or the workload, recorded as an
assumption so that `notes` can say what was assumed."""
from __future__ import annotations

from roofline.io.errors import EntryError

_FLAG = {"isl": ("--isl N", "input tokens per request"), "osl": ("--osl N", "output tokens per request"),
         "conc": ("--conc N", "concurrent requests")}


def require(wl: dict, keys, what: str) -> None:
    """EntryError (this entry degrades alone) naming EVERY workload field in ``keys`` the env report
    leaves out, what needs them and how to give them; nothing when all are there."""
    miss = [k for k in keys if k not in wl]
    if not miss:
        return
    names = ", ".join(f"workload.{k}" for k in miss)
    flags = " ".join(_FLAG[k][0] for k in miss)
    meaning = ", ".join(_FLAG[k][1] for k in miss)
    verb = ("is", "needs it", "give it") if len(miss) == 1 else ("are", "needs them", "give them")
    raise EntryError(f"{names} {verb[0]} not in the env report, and {what} {verb[1]}: {verb[2]} with "
                     f"`roofline topn TRACE {flags}` ({meaning}) or in the env report (docs/env_report.md)")


def workload(wl: dict, key: str, what: str):
    """workload[key], or EntryError (this entry degrades alone) naming the field, what needs it and
    how to give it, when the env report leaves it out."""
    require(wl, (key,), what)
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
