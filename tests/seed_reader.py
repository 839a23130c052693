"""A strict reader of profile_roofline.json, written from seed 002 sections 2, 3, 6 and 7 alone.

It imports nothing from the project (not its schema, not its constants): it is what a pipeline
stage written against the contract would assume before routing on the artifact. `check(art, topn)`
returns the list of broken promises (empty = a seed reader can consume it).
"""
from __future__ import annotations

import math

# --- seed section 2, verbatim
TOP = ("skill", "skill_version", "gfx", "peaks", "stage", "entries", "ranking_by_pct",
       "ranking_by_expected_gain", "degraded", "skill_errors")
ENTRY = ("name", "short_name", "pct_gpu_time", "regime", "op_class", "modeled", "t_ms", "launches_per_step",
         "bytes_est", "flops_est", "achieved_bw_bytes_s", "achieved_flops", "hbm_util", "compute_util",
         "arithmetic_intensity", "ridge_point", "bound_type", "roofline_pct", "target_eff", "attainable_speedup",
         "expected_e2e_gain_pct", "headroom_class", "confidence", "suspect", "byte_reduction_levers", "notes")
OP_CLASS = {"gemm", "moe", "attn", "elementwise", "unknown"}   # the contract's closed set, strictly (issue 34: comm is op_kind)
BOUND = {"memory", "compute", "latency", "unknown"}
HEADROOM = {"underperforming", "moderate", "saturated", "unknown"}
CONF = {"low", "medium", "high"}
NUMERIC = ("t_ms", "launches_per_step", "bytes_est", "flops_est", "achieved_bw_bytes_s", "achieved_flops",
           "hbm_util", "compute_util", "arithmetic_intensity", "ridge_point", "roofline_pct", "target_eff",
           "attainable_speedup", "expected_e2e_gain_pct")
# --- seed section 3 constants
LATENCY_BOTH_BELOW = 0.60
DISPATCH_FLOOR_MS = 0.005
SAT, MOD = 0.9, 0.6
# issue 42: a transfer of at least STREAMING_L2 x the L2 (the artifact's peaks.l2_bytes) per logical op that
# takes at least STREAMING_FLOOR dispatch floors holds far more work in flight than HBM latency needs: under
# both utilization limits it is bandwidth-starved (memory), not latency-bound
STREAMING_L2, STREAMING_FLOOR = 2.0, 20.0


def _num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _close(a, b, rel=1e-6) -> bool:
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-300)


def check(art: dict, topn: dict | None = None) -> list[str]:
    bad: list[str] = []
    err = bad.append
    for k in TOP:
        if k not in art:
            err(f"top level: missing {k}")
    if bad:
        return bad
    if art["skill"] != "roofline":
        err("skill is not 'roofline'")
    if not isinstance(art["skill_version"], str):
        err("skill_version is not a string")
    if art["gfx"] is not None and not isinstance(art["gfx"], str):
        err("gfx is neither a string nor null")
    if art["stage"] not in ("A", "B", "C"):
        err(f"stage {art['stage']!r} is not A|B|C")
    pk = art["peaks"]
    if not isinstance(pk, dict):
        err("peaks is not an object")
        pk = {}
    for k in ("hbm_bw_bytes_s", "flops", "source", "confidence"):
        if k not in pk:
            err(f"peaks: missing {k}")
    if pk.get("hbm_bw_bytes_s") is not None and not (_num(pk["hbm_bw_bytes_s"]) and pk["hbm_bw_bytes_s"] > 0):
        err("peaks.hbm_bw_bytes_s is not a positive number or null")
    if not isinstance(pk.get("flops", {}), dict) or not all(_num(v) and v > 0 for v in pk.get("flops", {}).values()):
        err("peaks.flops is not {dtype: positive number}")
    if pk.get("source") not in ("table", "derived"):
        err(f"peaks.source {pk.get('source')!r} is not table|derived")
    if pk.get("confidence") not in ("high", "low"):
        err(f"peaks.confidence {pk.get('confidence')!r} is not high|low")
    ents = art["entries"]
    if not isinstance(ents, list):
        return bad + ["entries is not an array"]
    degraded = art["degraded"]
    if not isinstance(degraded, list) or not all(
            isinstance(d, dict) and isinstance(d.get("name"), str) and isinstance(d.get("reason"), str)
            and d["reason"].strip() for d in degraded):
        err("degraded is not [{name, reason}] with a reason")
        degraded = []
    if not isinstance(art["skill_errors"], list):
        err("skill_errors is not an array")
    deg_names = {d["name"] for d in degraded}
    names = []
    for i, e in enumerate(ents):
        where = f"entries[{i}] ({e.get('name')!r})"
        missing = [k for k in ENTRY if k not in e]
        if missing:
            err(f"{where}: missing {', '.join(missing)}")
            continue
        names.append(e["name"])
        if not isinstance(e["name"], str) or not isinstance(e["short_name"], str):
            err(f"{where}: name/short_name not strings")
        if not _num(e["pct_gpu_time"]):
            err(f"{where}: pct_gpu_time is not a number")
        if e["regime"] not in ("decode", "prefill", None):
            err(f"{where}: regime {e['regime']!r}")
        if e["op_class"] not in OP_CLASS:
            err(f"{where}: op_class {e['op_class']!r} is not in the closed set")
        if e["bound_type"] not in BOUND:
            err(f"{where}: bound_type {e['bound_type']!r} is not in the closed set")
        if e["headroom_class"] not in HEADROOM:
            err(f"{where}: headroom_class {e['headroom_class']!r}")
        if e["confidence"] not in CONF:
            err(f"{where}: confidence {e['confidence']!r}")
        if not isinstance(e["modeled"], bool) or not isinstance(e["suspect"], bool):
            err(f"{where}: modeled/suspect are not booleans")
        if not isinstance(e["notes"], str):
            err(f"{where}: notes is not a string")
        for k in NUMERIC:
            if e[k] is not None and not _num(e[k]):
                err(f"{where}: {k} is neither a number nor null")
        levers = e["byte_reduction_levers"]
        if not isinstance(levers, list) or not all(isinstance(x, str) for x in levers):
            err(f"{where}: byte_reduction_levers is not a list of strings")
        elif levers and e["headroom_class"] != "saturated":
            err(f"{where}: byte_reduction_levers on a {e['headroom_class']} head (saturated only)")
        hc = e["headroom_class"]
        # section 6 L2 / L3 and section 3 step 6: no verdict in these cases
        if not e["modeled"]:
            if hc != "unknown":
                err(f"{where}: unmodelled entry has a verdict")
            if e["name"] not in deg_names:
                err(f"{where}: unmodelled entry is not in degraded[]")
        if e["suspect"]:
            if hc != "unknown":
                err(f"{where}: suspect entry has a verdict")
            if not _num(e.get("roofline_pct_raw")) or not _num(e.get("bytes_upper_bound")):
                err(f"{where}: suspect entry lacks roofline_pct_raw / bytes_upper_bound")
        if e["confidence"] == "low" and hc != "unknown":
            err(f"{where}: low-confidence entry has a verdict")
        if e["roofline_pct"] is not None and not (0.0 <= e["roofline_pct"] <= 1.0):
            err(f"{where}: roofline_pct {e['roofline_pct']} outside [0, 1] (clamp for display)")
        if e["modeled"]:
            _check_modeled(e, where, err, pk.get("l2_bytes"))
        if hc != "unknown":
            _check_verdict(e, where, err)
        if art["stage"] == "A" and e["confidence"] != "low":
            err(f"{where}: stage A entry is not confidence low (section 5)")
        if pk.get("confidence") == "low" and e["confidence"] != "low":
            err(f"{where}: peaks are low-confidence but the entry is not (section 6 L1)")
    # both rankings: permutations of the entries
    for key in ("ranking_by_pct", "ranking_by_expected_gain"):
        r = art[key]
        if not isinstance(r, list) or sorted(r) != sorted(names):
            err(f"{key} is not a permutation of the entry names")
    if not bad:
        # entries that share a kernel name are kept apart (docs/input_policy.md): a name that appears
        # k times in a ranking stands for its k entries, matched in that ranking's order
        def in_order(ranking, key):
            pools = {}
            for e in sorted(ents, key=key, reverse=True):
                pools.setdefault(e["name"], []).append(e)
            return [pools[n].pop(0) for n in ranking]
        pcts = [e["pct_gpu_time"] for e in in_order(art["ranking_by_pct"], lambda e: e["pct_gpu_time"])]
        if any(a < b for a, b in zip(pcts, pcts[1:])):
            err("ranking_by_pct is not in pct_gpu_time order")
        # an entry with a verdict ranks by its expected gain; the others come after them, by
        # pct_gpu_time (section 7: no verdict -> fall back to pct_gpu_time; docs/artifact.md)
        keys = [_gain_key(e) for e in in_order(art["ranking_by_expected_gain"], _gain_key)]
        if any(a < b for a, b in zip(keys, keys[1:])):
            err("ranking_by_expected_gain buries an entry below a smaller expected gain, or a verdict "
                "below an entry without one")
    if topn is not None:
        _check_verbatim(art, topn, err)
        # section 3 step 0: entries skipped for being small are absent, NOT degraded (a share that is
        # no share, negative or not a number, is a bad value: that entry is degraded, docs/input_policy.md)
        src = {t.get("name"): t for t in topn.get("entries") or [] if isinstance(t, dict)}
        for d in degraded:
            t = src.get(d["name"])
            if d["name"] not in names and t is not None and _num(t.get("pct_gpu_time")) and t["pct_gpu_time"] >= 0:
                err(f"degraded[] lists {d['name']!r}, a Top-N entry absent from entries (skipped is not degraded)")
    return bad


def _gain_key(e: dict) -> tuple[bool, float]:
    # a kernel with a verdict per regime (regime_verdicts) ranks by the larger of its regimes' gains;
    # an entry without a verdict ranks after every one with, by pct_gpu_time
    gains = [v["expected_e2e_gain_pct"] for v in (e.get("regime_verdicts") or [e])
             if v.get("headroom_class", "unknown") != "unknown" and v.get("confidence") in ("medium", "high")
             and v.get("expected_e2e_gain_pct") is not None]
    return (True, max(gains)) if gains else (False, e["pct_gpu_time"])


def _check_modeled(e, where, err, l2=None):
    for k in ("bytes_est", "flops_est", "achieved_bw_bytes_s", "hbm_util", "compute_util", "t_ms"):
        if e[k] is None:
            err(f"{where}: modelled entry has {k} null")
            return
    if e["hbm_util"] < 0 or e["compute_util"] < 0:
        err(f"{where}: negative utilization")
    ai, ridge = e["arithmetic_intensity"], e["ridge_point"]
    if e["bytes_est"] > 0 and e["flops_est"] >= 0 and ai is not None and not _close(ai, e["flops_est"] / e["bytes_est"]):
        err(f"{where}: arithmetic_intensity != flops_est / bytes_est")
    if e["t_ms"] <= DISPATCH_FLOOR_MS:
        if e["bound_type"] != "latency" or e["headroom_class"] != "unknown":
            err(f"{where}: dispatch-bound launch ({e['t_ms']} ms) must be latency with no verdict")
        return
    both_low = e["hbm_util"] < LATENCY_BOTH_BELOW and e["compute_util"] < LATENCY_BOTH_BELOW
    axis = "compute" if (ai is not None and ridge is not None and ai > ridge) else "memory"
    expect = "latency" if both_low else axis
    streams = l2 and e["bytes_est"] >= STREAMING_L2 * l2 and e.get("t_logical_op_ms", e["t_ms"]) >= \
        STREAMING_FLOOR * DISPATCH_FLOOR_MS
    if expect == "latency" and axis == "memory" and streams:
        expect = "memory"
    if (e.get("counters") or {}).get("dram_bytes_derived") and not e["flops_est"] \
            and e["compute_util"] >= LATENCY_BOTH_BELOW and e["compute_util"] > e["hbm_util"]:
        expect = "compute"      # ncu's default set: its SM throughput is the compute side (no FLOP count)
    if e["bound_type"] != expect:
        err(f"{where}: bound_type {e['bound_type']} but the utilizations say {expect}")


def _check_verdict(e, where, err):
    pct, tgt, att, gain = e["roofline_pct"], e["target_eff"], e["attainable_speedup"], e["expected_e2e_gain_pct"]
    if not all(_num(x) for x in (pct, tgt, att, gain)):
        err(f"{where}: a verdict needs roofline_pct, target_eff, attainable_speedup and expected_e2e_gain_pct")
        return
    # section 3: attainable = max(1, target_eff / roofline_pct); a further cap (e.g. the dispatch
    # floor: a launch cannot get shorter than its dispatch) may only lower it, never raise it
    if not (1.0 <= att <= max(1.0, tgt / pct) * (1 + 1e-9)):
        err(f"{where}: attainable_speedup {att} outside [1, max(1, target_eff / roofline_pct)]")
    # the gain is on the analysed regime's share of the GPU time (the whole pct_gpu_time for a kernel
    # of one regime: checked against the Top-N in _check_verbatim), never more than that share
    share = e.get("regime_pct_gpu_time", e["pct_gpu_time"])
    if not (_num(share) and 0 <= share <= e["pct_gpu_time"] * (1 + 1e-9)):
        err(f"{where}: regime_pct_gpu_time {share} outside [0, pct_gpu_time]")
    elif not _close(gain, share * (1 - 1 / att), 1e-9) and abs(gain) > 1e-12:
        err(f"{where}: expected_e2e_gain_pct != regime_pct_gpu_time x (1 - 1/attainable_speedup)")
    elif gain > share:
        err(f"{where}: expected_e2e_gain_pct {gain} exceeds its regime's share {share}")
    band = "saturated" if pct >= SAT * tgt else ("moderate" if pct >= MOD * tgt else "underperforming")
    if e["headroom_class"] != band:
        err(f"{where}: headroom_class {e['headroom_class']} but roofline_pct/target_eff say {band}")


def _check_verbatim(art, topn, err):
    """pct_gpu_time COPIED verbatim from the Top-N (same value, same JSON type); counts integers."""
    src: dict[str, list] = {}
    for i, t in enumerate(topn.get("entries") or []):
        if isinstance(t, dict):
            # an entry is named by its kernel name (a lone surrogate written escaped) or, without a
            # usable one, by its place (docs/input_policy.md)
            src.setdefault(f"entries[{i}]", []).append(t)
            if isinstance(t.get("name"), str):
                src.setdefault(t["name"].encode("utf-8", "backslashreplace").decode(), []).append(t)
    for e in art["entries"]:
        cands = src.get(e["name"]) or []
        if not cands:
            err(f"entry {e['name']!r} is not in the Top-N")
            continue
        if not any(type(c.get("pct_gpu_time")) is type(e["pct_gpu_time"]) and c.get("pct_gpu_time") == e["pct_gpu_time"]
                   for c in cands):
            err(f"entry {e['name']!r}: pct_gpu_time {e['pct_gpu_time']!r} is not the Top-N's verbatim value")
        # pct_gpu_time is the measured primary key: a kernel that ran in one regime keeps all of it
        # for its gain (the regimes' derived times only split it between two regimes)
        one = [c for c in cands if isinstance(c.get("regimes"), dict) and len(c["regimes"]) == 1]
        if one and len(one) == len(cands) and e.get("regime_pct_gpu_time") not in (None, e["pct_gpu_time"]):
            err(f"entry {e['name']!r}: one regime, but regime_pct_gpu_time {e['regime_pct_gpu_time']!r} is not its "
                f"pct_gpu_time {e['pct_gpu_time']!r}")
        lps = e["launches_per_step"]
        if lps is not None and e["regime"]:
            raws = [((c.get("regimes") or {}).get(e["regime"]) or {}).get("launches_per_step") for c in cands]
            if not any(type(r) is type(lps) and r == lps for r in raws):
                err(f"entry {e['name']!r}: launches_per_step {lps!r} is not the Top-N's count")
