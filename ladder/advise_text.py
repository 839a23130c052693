"""`roofline ladder advise` as text: the five outputs of an `advise()` result, one section each."""
from __future__ import annotations

from .route import level_name


def fmt_value(v, unit) -> str:
    if isinstance(v, float):
        v = f"{v:.4g}"
    return f"{v} {unit}".strip()


def render_text(adv: dict) -> str:
    c = adv["conclusion"]
    s = adv["standing"]
    m, n, k = adv["shape"]
    out = [f"roofline ladder advise: level {adv['level']} ({level_name(adv['level'])}) at {m}x{n}x{k} "
           f"({adv['shape_class']}), from {adv['source']}", "",
           "1. Conclusion", f"   {c['text']}", "",
           "2. Evidence (measured)"]
    out += _text_evidence(adv["evidence"])
    out.append("")
    out += _text_contract(adv["contract"], adv["level"], c["action"])
    out.append("")
    v = adv["validation"]
    out.append("4. Minimal validation")
    if v:
        out += [f"   - {t}" for t in v["tests"]]
        out.append(f"   - falsifiable experiment: {v['experiment']}")
    else:
        out.append("   - keep the current level's gates (nothing to add)")
    out.append("")
    r = adv["risks"]
    out.append("5. Risks, fallback, stopping rule")
    out += [f"   - risk: {x}" for x in r["risks"]]
    out.append(f"   - fallback: {r['fallback']}")
    out.append(f"   - stopping rule: {r['stopping_rule']['text']}")
    if s["pct_library"] is not None or s["pct_roof"] is not None:
        out.append(f"   - standing: {fmt_value(s['t_ms'], 'ms')}; "
                   + (f"{s['pct_library']:.1f} % of the library; " if s["pct_library"] is not None else "")
                   + (f"{s['pct_roof']:.1f} % of the roofline bound" if s["pct_roof"] is not None else ""))
    return "\n".join(out)


def _text_evidence(ev: dict) -> list[str]:
    """Section 2 lines: measured figures, the recorded transition, lookahead, assumptions."""
    out = []
    for e in ev["measured"]:
        out.append(f"   - {e['what']}: {fmt_value(e['value'], e['unit'])}  [{e['source']}]")
    tr = ev["transition"]
    if tr and tr["rows"]:
        out.append(f"   - what level {tr['to']} bought over level {tr['from']} in the recorded runs "
                   f"(t_{tr['from']}/t_{tr['to']} - 1), per shape class: "
                   + "; ".join(f"{k} median {v['median_gain']:+.1%} over {v['shapes']} shapes "
                               f"({v['min_gain']:+.1%} .. {v['max_gain']:+.1%})" for k, v in tr["by_class"].items()))
        out.append(f"     per shape and run; decided by {tr['scope']}: {tr['verdict']}")
        for r in tr["rows"]:
            mark = " <-" if tr.get("decided_by") and r["shape"] == tr["decided_by"]["shape"] else ""
            out.append(f"       {'x'.join(map(str, r['shape'])):>16s} {r['shape_class']:>13s}  "
                       + ", ".join(f"{g:+.1%}" for g in r["gains"]) + f"  {r['verdict']}{mark}")
    for t2 in ev["lookahead"]:
        out.append(f"   - level {t2['to']} over level {t2['from']}: {t2['scope']}: {t2['verdict']}")
    out.append("   Assumptions (to verify)")
    for a in ev["assumed"]:
        out.append(f"   - {a}")
    return out


def _text_contract(ct: dict | None, level: int, action: str) -> list[str]:
    """Section 3 lines: the next level's contract table (or none)."""
    out = []
    out.append("3. Contract for the next level")
    if ct is None:
        out.append("   none: no level after this one")
    else:
        b = ct["resource_budget"]
        out += [f"   level {ct['level']} ({ct['name']}){'' if ct['built'] else ', NOT BUILT'}"
                + (" -- not recommended now (see 1); the gates to meet if it is reopened" if action == "stop" else ""),
                "   | item | contract |", "   |---|---|",
                f"   | what changes | {ct['what_changes']} |"]
        out += [f"   | correctness | {g} |" for g in ct["correctness_gate"]]
        out += [f"   | performance vs level {level} | {ct['performance_gate']['vs_previous']} |",
                f"   | performance vs library | {ct['performance_gate']['vs_library']} |",
                f"   | performance vs roof | {ct['performance_gate']['vs_roof']} |",
                f"   | resource budget (level {ct['level']}) | {b['next']['text']} |",
                f"   | resource budget (level {level}, now) | {b['current']['text']} |"]
    return out
