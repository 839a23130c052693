"""What the analysis ignores in a Top-N, said once per thing: shape keys no model reads,
classifications that are not an op class, CUDA-graph replays without shapes, entries that share one
kernel name (kept apart). A bad value is not said here: it degrades its entry (degraded[]).

Pure: returns lines; the CLI prints them on stderr (the analysis never prints).
"""
from __future__ import annotations

from roofline.core.classify import OP_CLASSES, OP_HINT_RULES, _HINT_ALIASES, classify
from roofline.core.inputs import TopN
from roofline.core.opclasses import FALLBACK, REGISTRY

# keys each op class's byte/FLOP model reads, plus what `roofline topn` writes for provenance
# (q_len, regime): registered with the op class (roofline/core/opclasses/)
SHAPE_KEYS = {name: set(oc.shape_keys) for name, oc in REGISTRY.items() if oc.shape_keys}
_ANY_KEYS = set().union(*SHAPE_KEYS.values())


def _known_hint(h: str) -> bool:
    import re

    hl = h.strip().lower()
    if hl in _HINT_ALIASES or hl in OP_CLASSES:
        return True
    return any(re.search(p, h, re.IGNORECASE) for p, _ in OP_HINT_RULES)


def topn_warnings(t: TopN) -> list[str]:
    out: list[str] = []
    replayed: list[str] = []
    for e in t.entries:
        where = f"entries[{e.index}] ({(e.short_name or e.name)[:60]})"
        cls = classify(e.name, e.classification)
        if e.classification and not _known_hint(e.classification):
            out.append(f"{where}: classification {e.classification!r} is not an op class "
                       f"({'|'.join(c for c in OP_CLASSES if c != FALLBACK)}) nor an op name: ignored; "
                       f"classified by its name as {cls!r}")
        known = SHAPE_KEYS.get(cls, _ANY_KEYS)
        for label, shapes in (("est_shape", [e.est_shape] if e.est_shape else []), ("shapes", e.shapes or [])):
            unknown = sorted({k for s in shapes for k in s if k not in known})
            if unknown:
                out.append(f"{where}: {label} key(s) {', '.join(unknown)} are not read by the {cls} model "
                           f"(it reads {', '.join(sorted(SHAPE_KEYS.get(cls, _ANY_KEYS)))}): ignored")
        if e.raw.get("cuda_graph_replayed") and not e.shapes:
            replayed.append(f"entries[{e.index}]")
    out += _same_names(t)
    if replayed:
        from roofline.core.hints import GRAPH_HOWTO

        out.append(f"{len(replayed)} entries ({', '.join(replayed[:8])}{', ...' if len(replayed) > 8 else ''}) were "
                   f"replayed from a CUDA graph in the profiled window and have no shapes: {GRAPH_HOWTO}")
    return out


def _same_names(t: TopN) -> list[str]:
    """Entries that share one kernel name: kept apart, each with its share (docs/input_policy.md)."""
    groups: dict[str, list] = {}
    for e in t.entries:
        if e.name != f"entries[{e.index}]":
            groups.setdefault(e.name, []).append(e)
    return [f"{' and '.join(f'entries[{e.index}]' for e in g)} share the kernel name {g[0].name[:60]!r}: kept "
            f"apart, each with its own pct_gpu_time ({', '.join(f'{e.pct_gpu_time:g}%' for e in g)}), not merged"
            for g in groups.values() if len(g) > 1]
