"""The artifact contract of docs/artifact.md, as data: the closed sets a consumer routes on and
the fields every entry carries. One source of truth for the analysis (which fills them), the JSON
Schema (which checks them) and the README block that documents them.

A reader written to docs/artifact.md must never meet a missing key or a category it has no rule for:
- `op_class` is the contract's closed set (gemm|moe|attn|elementwise|unknown): each op class says which
  value it is (roofline/core/opclasses/, `seed_class`); the class itself (norm, quant, comm, ...) is
  kept in `op_kind`.
- every seed field is present on every entry, degraded and no-verdict ones included, `null`
  where there is no value.
"""
from __future__ import annotations

from roofline.core import opclasses
from roofline.core.opclasses.base import SEED_CLASSES
from roofline.io.values import UNKNOWN

# the contract's closed op_class set (one definition: roofline.core.opclasses.base)
OP_CLASSES = SEED_CLASSES

# docs/artifact.md: every field of an entry, in the documented order.
SEED_ENTRY_FIELDS = (
    "name", "short_name", "pct_gpu_time", "regime", "op_class", "modeled", "t_ms", "launches_per_step",
    "bytes_est", "flops_est", "achieved_bw_bytes_s", "achieved_flops", "hbm_util", "compute_util",
    "arithmetic_intensity", "ridge_point", "bound_type", "roofline_pct", "target_eff", "attainable_speedup",
    "expected_e2e_gain_pct", "headroom_class", "confidence", "suspect", "byte_reduction_levers", "notes",
)
# docs/method.md section 7 L3 fields: present on every entry too (null unless the entry is suspect / modelled).
L3_FIELDS = ("roofline_pct_raw", "bytes_upper_bound")
# Ours, also on every entry (null / empty where they do not apply).
OWN_ENTRY_FIELDS = ("op_kind", "other_levers", "route", "route_reason", "model_contradicted", "bytes_necessary",
                    "avoidable_gain_pct", "levers_detail")

SEED_TOP_FIELDS = ("skill", "skill_version", "gfx", "peaks", "stage", "entries", "ranking_by_pct",
                   "ranking_by_expected_gain", "degraded", "skill_errors")
PEAK_SOURCES = ("table", "derived")       # docs/artifact.md: peaks.source
CONFIDENCES = ("low", "medium", "high")


def seed_op_class(kind: str | None) -> str:
    """An op class -> the contract's closed op_class set (the class's seed_class)."""
    return opclasses.seed_class(kind)


def complete_entry(e: dict) -> dict:
    """An entry with every contract field, in the documented order first: a missing field becomes null
    (lists: empty; model_contradicted: false; notes: ""). Returns a new dict; `e` is not changed."""
    first = SEED_ENTRY_FIELDS + L3_FIELDS + OWN_ENTRY_FIELDS
    return {**{k: _field(e, k) for k in first}, **{k: v for k, v in e.items() if k not in first}}


def _field(e: dict, k: str):
    """The value of contract field `k` in entry `e`, or the contract's value for a missing one."""
    if k == "notes":
        return "" if e.get("notes") is None else e["notes"]
    if k in e:
        return e[k]
    return [] if k in ("byte_reduction_levers", "other_levers", "levers_detail") else (False if k == "model_contradicted"
                                                                                       else None)


def gain_rank_key(e: dict) -> tuple[float, bool]:
    """What ranking_by_expected_gain sorts on: the expected e2e gain of an entry with a verdict at
    medium or high confidence (of a kernel with verdicts in both regimes, the larger of the two, each
    on its own regime's share); for every other entry its pct_gpu_time (no verdict ->
    pct_gpu_time ordering), ranked after every entry with a verdict. -> (key %, has_gain)."""
    gains = [float(v["expected_e2e_gain_pct"]) for v in (e.get("regime_verdicts") or [e])
             if v.get("headroom_class") not in (None, UNKNOWN) and v.get("confidence") in ("medium", "high")
             and v.get("expected_e2e_gain_pct") is not None]
    if gains:
        return max(gains), True
    return float(e["pct_gpu_time"]), False


def rankings(entries: list[dict]) -> tuple[list[str], list[str]]:
    """Both rankings, side by side (docs/artifact.md), so the consumer sees the disagreement instead of a
    blend. By expected gain: the entries with a verdict first, by their gain; then the others, by
    pct_gpu_time (gain_order_key); ties go to the larger pct_gpu_time."""
    by_pct = [e["name"] for e in sorted(entries, key=lambda e: -e["pct_gpu_time"])]
    return by_pct, [e["name"] for e in sorted(entries, key=gain_order_key)]


def gain_order_key(e: dict) -> tuple[bool, float, float]:
    """The sort key of ranking_by_expected_gain: verdict entries first (by gain, descending), then
    the rest (by pct_gpu_time, descending)."""
    key, has_gain = gain_rank_key(e)
    return (not has_gain, -key, -e["pct_gpu_time"])
