"""The counters file a stage-C re-run writes (`roofline rerun`, beside its artifact:
rerun_counters.json) and `analyze --counters FILE` reads like any other counter file: one
KernelCounters per kernel, PER LAUNCH, named as its Top-N entry, in JSON:

    {"format": "roofline-counters", "version": 1,
     "records": [{"name": ..., "launches": 1, "source": ..., "t_ms": ..., "dram_bytes": ...,
                  "tensor_flops_by_dtype": {...}, "l2_bytes": ..., "rerun": {...}}, ...]}

`rerun` (optional) is the isolated timing of that re-run (ladder level beside the library
kernel, roofline/stagec/timing.py), which the analysis writes onto the entry after its own steps
(roofline/core/writeback.py). A record with no counter reading (the counter run failed or was
not asked for) carries its timing only. Pure: text in, records out, and back.
"""
from __future__ import annotations

import dataclasses
import json

from .base import KernelCounters
from .errors import CounterReadError

FORMAT = "roofline-counters"
VERSION = 1
_FIELDS = {f.name for f in dataclasses.fields(KernelCounters)}


def read_records_text(text: str, path) -> list[KernelCounters]:
    """The records of a counters file; CounterReadError (one line) when it is not one."""
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise CounterReadError(path, f"not JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("records"), list):
        raise CounterReadError(path, f"$.format: expected {FORMAT!r} with a list of records")
    if doc.get("version") != VERSION:
        raise CounterReadError(path, f"$.version: expected {VERSION}, got {doc.get('version')!r}")
    out = []
    for i, r in enumerate(doc["records"]):
        if not isinstance(r, dict) or not isinstance(r.get("name"), str) or not isinstance(r.get("launches"), int):
            raise CounterReadError(path, f"$.records[{i}]: expected an object with a name and launches")
        unknown = sorted(set(r) - _FIELDS)
        if unknown:
            raise CounterReadError(path, f"$.records[{i}]: unknown field(s) {', '.join(unknown)}")
        out.append(KernelCounters(**r))
    return out


def records_text(records: list[KernelCounters]) -> str:
    """The counters file of `records` (a field at its default is left out)."""
    defaults = KernelCounters(name="", launches=0, source="")
    rows = [{k: v for k, v in dataclasses.asdict(r).items() if k in ("name", "launches", "source")
             or v != getattr(defaults, k)} for r in records]
    return json.dumps({"format": FORMAT, "version": VERSION, "records": rows}, indent=1) + "\n"
