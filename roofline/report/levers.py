"""The markdown of necessary work and levers (docs/artifact.md): per entry, the bytes it must move
beside the bytes it moves, the avoidable gain beside the tuning gain, and every lever with its
evidence; the third ordering (by the larger gain). Pure: returns lines."""
from __future__ import annotations


def entry_lines(e: dict) -> list[str]:
    L: list[str] = []
    nec, est = e.get("bytes_necessary"), e.get("bytes_est")
    if e.get("modeled") and est:
        if nec is None:
            L.append("- necessary bytes: unknown (the notes say what evidence is missing)")
        else:
            a = e.get("avoidable_gain_pct")
            L.append(f"- necessary bytes: {nec / 1e6:.3f} MB of the {est / 1e6:.3f} MB moved per logical op; "
                     f"avoidable gain {'-' if a is None else f'+{a:.2f}%'} beside the tuning gain "
                     + ("-" if e.get("expected_e2e_gain_pct") is None else f"+{e['expected_e2e_gain_pct']:.2f}%"))
        for ev in e.get("necessary_evidence") or []:
            L.append(f"  - evidence: {ev}")
    for d in e.get("levers_detail") or []:
        s = d.get("saves_pct")
        L.append(f"  - lever ({d['kind']}{'' if s is None else f', saves up to {s:.2f}% GPU'}): {d['text']}  \n"
                 f"    evidence: {d['evidence']}")
    return L


def ranking_lines(art: dict) -> list[str]:
    order = art.get("ranking_by_larger_gain") or []
    if not order:
        return []
    short = {e["name"]: e.get("short_name") or e["name"] for e in art.get("entries", [])}
    return ["", "By the larger of the tuning and the avoidable gain (`ranking_by_larger_gain`): "
            + ", ".join(f"{i}. {short.get(n, n)[:48]}" for i, n in enumerate(order, 1)) + "."]
