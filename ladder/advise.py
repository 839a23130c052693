"""`roofline ladder advise`: "my GEMM is at level N; what next?" (ladder/README.md).

Input: where the user's GEMM stands (ladder/standing.py), either a ladder bench result (`roofline
ladder bench --out`, `ladder run --json`) or an Nsight Compute report of the user's own kernel,
plus the level the user says it is at. Output: five outputs, as data
(`advise()` returns a dict; ladder/advise_text.py's `render_text` formats it; nothing prints):

1. conclusion: advance to ONE next level, or stop;
2. evidence (measured) against assumptions;
3. the contract of the next level: what changes, correctness gate, performance gate against the
   previous level, the library and the roof, resource budget from the registry;
4. minimal validation, with one falsifiable experiment;
5. risks, fallback and the stopping rule as applied.

The evidence base (ladder/evidence.py) is the project's own ladder measurements
(the recorded H200 benches shipped as roofline/data/ladder_evidence_h200.json, every bench row of a
registry level: what each level bought on the H200 per shape and shape class). The level list is read from registry.LEVELS; a level the registry does
not have yet is named from the book's nine-level route the ladder follows (ladder/route.py, SEED_ROUTE) and reported
as "not built".

Decision, in this order (BAND = roofline.ladder.dispatch.NOISE_BAND_ISOLATED, docs/method.md section 9: identical
isolated re-runs differ by up to ~3.4 %):
  a. stop if the kernel is within BAND of the practical roof: t <= (1 + BAND) x t_practical,
     t_practical = min(the library's time on the same shape, the roofline bound at the MEASURED
     ceilings) (the tighter of what is demonstrated and what is derived);
  b. stop at the end of the ladder (no registry level and no route level after N);
  c. the next level N' is not built, or built but never measured: advance to it (the route's
     order), every gate an assumption;
  d. the recorded evidence for N -> N' (the same shape if recorded, else the shape class, else
     every recorded shape; the nearest recorded shape decides when some shapes of the class gain
     and others do not): a gain
     beyond BAND in every run -> advance to N';
  e. N' brings no stable gain, but a later built level beats N beyond BAND on the same evidence
     -> advance to N' as its foundation, gated on "no loss beyond BAND";
  f. otherwise stop and keep level N (added complexity without a stable gain).
"""
from __future__ import annotations

import math

from . import registry
from .dispatch import NOISE_BAND_ISOLATED as BAND
from .dispatch import shape_class
from .evidence import AdviseError, Obs, level_pct_cublas, transition
from .route import RISKS, SEED_LAST, SEED_ROUTE, built_levels, level_name, next_level_id, resource_budget, what_changes


def _pct(a, b):
    return None if a is None or b is None else 100.0 * a / b


def _gate_texts(level: int) -> list[str]:
    from . import check

    return [
        "every level passes the correctness suite before it is timed (correct before fast)",
        f"relative error vs a float64 reference <= {check.REL_TOL:g} (bf16 operands), and every element within "
        f"2^{round(math.log2(check.ELEM_REL))} |ref| + 2^{round(math.log2(check.ELEM_ABS))} (|A| |B|^T)",
        "no output element left unwritten (NaN-poisoned output); NaN/+Inf/-Inf in A, B give exactly the reference's pattern",
        "shapes: 200 random (device_suite check --n-random 200), K = 1, a single and many K tiles, "
        "tails in M, N, K (not multiples of the tile), K % 8 != 0 and N % 8 != 0 (misaligned rows)",
        "compute-sanitizer memcheck 0 errors, racecheck 0 hazards, synccheck 0 errors on the small shapes",
    ]


def _advance_or_stop(level: int, nxt, nb, gap, t: float, t_practical, lib, obs: list[Obs], shape, assumed: list[str]):
    """Advance or stop: within the band of the practical roof, the last level, no evidence for the
    next one, its recorded gain, or a later level built on it that gains.
    Returns (action, reason, transition to the next level, lookahead transitions, foundation_of)."""
    tr = None
    later = []
    action, reason, foundation_of = None, None, None
    if gap is not None and gap <= BAND:
        action = "stop"
        reason = (f"within the {BAND:.1%} isolated band of the practical roof: {t:.4g} ms vs {t_practical:.4g} ms "
                  f"({'library' if t_practical == lib else 'roofline at measured ceilings'}), gap {gap:+.1%}")
    elif nxt is None:
        action, reason = "stop", f"level {level} is the last level of the route and of the registry"
    else:
        tr = transition(obs, level, nxt, shape)
        if nxt not in nb or tr["scope"] == "none":
            action = "advance"
            reason = (("the route's next level, not built yet: no project evidence" if nxt not in nb
                       else f"built but has no recorded measurement beside level {level}")
                      + (f"; the gap to the practical roof is {gap:+.1%}" if gap is not None else ""))
            assumed.append(f"no project evidence for level {level} -> {nxt}: its gains below are hypotheses")
        elif tr["verdict"] == "gain":
            action = "advance"
            reason = f"level {nxt} gained beyond the {BAND:.1%} band in every recorded run ({tr['scope']})"
        else:
            for later_id in sorted(i for i in nb if i > nxt):
                t2 = transition(obs, level, later_id, shape)
                later.append(t2)
                if t2["scope"] != "none" and t2["verdict"] == "gain":
                    foundation_of = later_id
                    break
            if foundation_of is not None:
                action = "advance"
                reason = (f"level {nxt} alone brings no stable gain ({tr['scope']}: {tr['verdict']}), but level "
                          f"{foundation_of}, built on it, gains beyond the band over level {level}")
            else:
                action = "stop"
                reason = (f"level {nxt} ({level_name(nxt)}) brings no stable gain beyond the {BAND:.1%} band "
                          f"({tr['scope']}: {tr['verdict']}); keep the simpler level {level}")
    return action, reason, tr, later, foundation_of


def advise(standing: dict, level: int, shape, obs: list[Obs], source: str) -> dict:
    """The five outputs for a kernel at `level` measured as `standing` on `shape`."""
    if level not in built_levels() and level not in SEED_ROUTE:
        raise AdviseError(f"--level {level}: not a ladder level (registry: {sorted(built_levels())}, route 1-{SEED_LAST})")
    m, n, k = shape
    t = standing["t_ms"]
    lib, roof = standing["library_ms"], standing["roof_ms"]
    floors = [x for x in (lib, roof) if x]
    t_practical = min(floors) if floors else None
    gap = t / t_practical - 1.0 if t_practical else None
    measured = list(standing["measured"])
    assumed = list(standing["assumed"])
    if lib:
        measured.append({"what": "% of the library", "value": _pct(lib, t), "unit": "%", "source": standing["library_source"]})
    if roof:
        measured.append({"what": "% of the roofline bound (practical: measured ceilings)", "value": _pct(roof, t),
                         "unit": "%", "source": standing["roof_source"]})
    assumed.append(f"the kernel is at level {level} ({level_name(level)}) of this ladder: as given (--level)")
    nxt = next_level_id(level)
    nb = built_levels()
    action, reason, tr, later, foundation_of = _advance_or_stop(level, nxt, nb, gap, t, t_practical, lib, obs, shape,
                                                                assumed)
    if tr is not None and tr["scope"] not in ("none", "exact shape"):
        assumed.append(f"your shape {m}x{n}x{k} behaves like the recorded {tr['scope']}")

    target = nxt if action == "advance" else None
    conclusion = {
        "action": action, "level": level, "next_level": target,
        "next_name": level_name(target) if target else None,
        "built": (target in nb) if target else None,
        "reason": reason,
        "text": (f"advance to level {target} ({level_name(target)})" + ("" if target in nb else ": NOT BUILT yet in this ladder")
                 if action == "advance" else f"stop: keep level {level} ({level_name(level)})") + f"; {reason}",
    }
    cont = _contract(level, nxt, shape, standing, tr, obs, foundation_of) if nxt is not None else None
    return {
        "source": source, "level": level, "shape": [m, n, k], "shape_class": shape_class(m, n, k),
        "band": BAND, "conclusion": conclusion,
        "evidence": {"measured": measured, "assumed": assumed,
                     "transition": tr, "lookahead": later},
        "standing": {"t_ms": t, "library_ms": lib, "roof_ms": roof, "t_practical_ms": t_practical, "gap": gap,
                     "pct_library": _pct(lib, t), "pct_roof": _pct(roof, t), "counters": standing.get("counters")},
        "contract": cont,
        "validation": _validation(level, nxt, shape, tr, action, foundation_of) if nxt is not None else None,
        "risks": _risks(level, nxt, action, gap, t_practical, tr),
    }


def _contract(level, nxt, shape, standing, tr, obs, foundation_of) -> dict:
    m, n, k = shape
    t = standing["t_ms"]
    if foundation_of is not None:
        prev = f"t(level {nxt}) <= {t * (1 + BAND):.4g} ms (no loss beyond the {BAND:.1%} band vs level {level}: it is the foundation of level {foundation_of})"
    else:
        prev = f"t(level {nxt}) <= {t * (1 - BAND):.4g} ms at {m}x{n}x{k} (a gain beyond the {BAND:.1%} band over level {level}'s {t:.4g} ms), in two runs on separate machine starts"
    rec = level_pct_cublas(obs, nxt, shape)
    lib = standing["library_ms"]
    if rec:
        libg = (f">= {min(rec) * (1 - BAND):.1f} % of cuBLAS (recorded level {nxt} here: "
                f"{', '.join(f'{x:.1f}' for x in rec)} %, less the band)")
    elif lib:
        libg = f">= {100 * lib / t * (1 + BAND):.1f} % of cuBLAS (level {level}'s {100 * lib / t:.1f} % plus the band)"
    else:
        libg = "time cuBLAS beside it in the same process (roofline ladder run); no recorded library time for this shape"
    roof = standing["roof_ms"]
    roofg = (f"report % of the roofline bound ({roof:.4g} ms at the measured ceilings); at >= {100 / (1 + BAND):.1f} % "
             "of the practical roof the ladder stops there" if roof else "no measured ceilings: measure them (roofline peaks measure)")
    return {
        "level": nxt, "name": level_name(nxt), "built": nxt in built_levels(),
        "what_changes": what_changes(nxt),
        "correctness_gate": _gate_texts(nxt),
        "performance_gate": {"vs_previous": prev, "vs_library": libg, "vs_roof": roofg},
        "resource_budget": {"next": resource_budget(nxt), "current": resource_budget(level)},
    }


def _validation(level, nxt, shape, tr, action, foundation_of) -> dict:
    m, n, k = shape
    s = f"{m}x{n}x{k}"
    tests = [
        "CPU: pytest tests/test_ladder_build.py tests/test_ladder_registry.py (ptxas vs the registry budget)",
        f"GPU: roofline ladder run --level {nxt} --shape {s} (checks, then times beside cuBLAS)",
        "GPU: python3 -m roofline.ladder.device_suite check --n-random 200 (the correctness gate's shapes)",
        "GPU: compute-sanitizer --tool memcheck|racecheck|synccheck on the small shapes (`bash ladder/device.sh`, stage san)",
        f"GPU: roofline ladder bench --level {level} --level {nxt} --shape {s} twice (separate machine starts)",
    ]
    dec = (tr or {}).get("decided_by")
    if tr and tr.get("scope") != "none" and tr["rows"]:
        rows = [dec] if dec else [r for r in tr["rows"] if tr["scope"].startswith("all") or r["shape_class"] == tr["shape_class"]]
        gains = [g for r in rows for g in r["gains"]]
        pred = (f"level {nxt} / level {level} time ratio at {s} in [{1 / (1 + max(gains)):.3f}, {1 / (1 + min(gains)):.3f}] "
                f"(recorded: {tr['scope']})")
    else:
        pred = f"level {nxt} is faster than level {level} at {s} by more than the {BAND:.1%} band"
    variants = [v for v in registry.VARIANTS.values() if v.id == nxt]
    abl = (f"; ablation: the registry variant{'s' if len(variants) > 1 else ''} "
           + ", ".join(v.name for v in variants) + f" of level {nxt} isolate{'s' if len(variants) == 1 else ''} "
           "its mechanism on the same shape") if variants else ""
    if action == "stop" and tr is None:
        exp = (f"prediction: level {level} at {s} stays within the {BAND:.1%} band of the practical roof; re-time "
               f"level {level} and cuBLAS side by side in two runs (roofline ladder run --level {level} --shape {s}). "
               f"Falsified if cuBLAS is faster than level {level} by more than the band in either run: then the gap is "
               f"real and level {nxt} is the next step")
    elif action == "stop":
        exp = (f"prediction: {pred}, i.e. no gain beyond the {BAND:.1%} band. Falsified if level {nxt} at {s} is "
               f"faster than (1 - {BAND:.3f}) x level {level}'s time in both of two runs: then reopen and advance{abl}")
    elif foundation_of is not None:
        exp = (f"prediction: level {nxt} within +-{BAND:.1%} of level {level} at {s}, and level {foundation_of} faster "
               f"than level {level} beyond the band; falsified if level {foundation_of} does not gain")
    else:
        exp = (f"prediction: {pred}. Falsified if the measured level {nxt} time at {s} is above "
               f"(1 - {BAND:.3f}) x level {level}'s in either run{abl}")
    return {"tests": tests, "experiment": exp}


def _risks(level, nxt, action, gap, t_practical, tr) -> dict:
    risks = list(RISKS.get(nxt, ())) if nxt else []
    if tr and tr.get("verdict") in ("flat", "loss"):
        risks.append(f"the recorded level {nxt} does not pay on {tr['scope']}: expect no gain there")
    fallback = (f"keep level {level} (the simpler version) as the shipped kernel; every level stays built and "
                "checked, so a level that fails its gates is dropped, not debugged in place"
                + (f"; if the hardware, toolkit or shared memory cannot host level {nxt}, stop at level {level}" if nxt else ""))
    rule = {
        "band": BAND,
        "near_roof": (gap is not None and gap <= BAND),
        "gap_to_practical_roof": gap,
        "t_practical_ms": t_practical,
        "next_level_gain_verdict": (tr or {}).get("verdict"),
        "text": ("stop when within the band of the practical roof (t <= (1 + band) x min(library, roofline at measured "
                 "ceilings)) or when the next level brings no stable gain beyond the band; keep the simpler level. "
                 + (f"Applied: gap {gap:+.1%} {'<=' if gap <= BAND else '>'} {BAND:.1%}" if gap is not None else
                    "Applied: the roof gap is unknown")
                 + ((f"; level {nxt} on {tr['scope']}: {tr['verdict']}" if tr["scope"] != "none"
                    else f"; no recorded evidence for level {nxt}") if tr else "")
                 + f" -> {action}."),
    }
    return {"risks": risks, "fallback": fallback, "stopping_rule": rule}
