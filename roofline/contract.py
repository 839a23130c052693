"""The artifact contract of docs/artifact.md, as data: the closed sets a consumer routes on and
the fields every entry carries. One source of truth for the analysis (which fills them), the JSON
Schema (which checks them) and the README block that documents them.

A reader written to docs/artifact.md must never meet a missing key or a category it has no rule for:
- `op_class` is the contract's closed set (gemm|moe|attn|elementwise|unknown): each op class says which
  value it is (roofline/opclasses/, `seed_class`); the class itself (norm, quant, comm, ...) is
  kept in `op_kind`.
- every seed field is present on every entry, degraded and no-verdict ones included, `null`
  where there is no value.
"""
from __future__ import annotations

from roofline import opclasses
from roofline.opclasses.base import SEED_CLASSES

# the contract's closed op_class set (one definition: roofline.opclasses.base)
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
OWN_ENTRY_FIELDS = ("op_kind", "other_levers", "route", "route_reason", "model_contradicted")

SEED_TOP_FIELDS = ("skill", "skill_version", "gfx", "peaks", "stage", "entries", "ranking_by_pct",
                   "ranking_by_expected_gain", "degraded", "skill_errors")
PEAK_SOURCES = ("table", "derived")       # docs/artifact.md: peaks.source
CONFIDENCES = ("low", "medium", "high")


def seed_op_class(kind: str | None) -> str:
    """An op class -> the contract's closed op_class set (the class's seed_class)."""
    return opclasses.seed_class(kind)


def complete_entry(e: dict) -> dict:
    """An entry with every contract field, in the documented order first: a missing field becomes null
    (lists: empty; model_contradicted: false). Returns a new dict."""
    for k in SEED_ENTRY_FIELDS + L3_FIELDS + OWN_ENTRY_FIELDS:
        if k not in e:
            e[k] = [] if k in ("byte_reduction_levers", "other_levers") else (False if k == "model_contradicted"
                                                                                else None)
    if e.get("notes") is None:
        e["notes"] = ""
    first = SEED_ENTRY_FIELDS + L3_FIELDS + OWN_ENTRY_FIELDS
    return {**{k: e[k] for k in first}, **{k: v for k, v in e.items() if k not in first}}
