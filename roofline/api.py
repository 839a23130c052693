"""Python API: `roofline.analyze(...)`."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from roofline.core import inputs as _in
from roofline.core.defaults import HEAD_CAP, HEAD_THRESHOLD_PCT
from roofline.io.errors import InputError

STAGES = ("A", "B", "C")


def locate_inputs(topn_path: Path, env=None, config=None) -> tuple[Any, Any]:
    """env_report.json / config.json: explicit, else the Top-N's directory and its parents."""
    if env is None:
        env = _in.find_upwards(topn_path.parent, "env_report.json")
        if env is None:
            raise InputError(str(topn_path), "", "no env_report.json beside it or in any parent "
                             "directory: pass --env FILE, or let `roofline topn TRACE -o THIS_FILE --isl N --osl N "
                             "--conc N` write a starter one (docs/env_report.md)")
    if config is None:
        config = _in.find_upwards(topn_path.parent, "config.json")  # optional
    return env, config


def load_all(topn, env=None, config=None):
    """Paths or already-parsed dicts -> (TopN, Env, config dict|None, meta)."""
    meta: dict[str, Any] = {}
    if isinstance(topn, dict):
        t = _in.parse_topn(topn, "<topn dict>")
        base = Path.cwd()
    else:
        topn = Path(topn)
        t = _in.load_topn(topn)
        base = topn
        env, config = locate_inputs(topn, env, config)
    meta["topn"] = t.path
    if isinstance(env, dict):
        e = _in.parse_env(env, "<env dict>")
    elif env is None:
        raise InputError("env_report.json", "", "required: pass env=")
    else:
        e = _in.load_env(env)
    meta["env"] = e.path
    if e.missing:
        meta["env_missing"] = list(e.missing)   # left out: only what needs them degrades
    if config is None and isinstance(e.raw.get("config_path"), str) and e.path and not isinstance(env, dict):
        # the starter env report of `roofline topn --config FILE` records the model config's path
        cp = Path(e.raw["config_path"])
        config = cp if cp.is_absolute() else Path(e.path).parent / cp
        if not config.is_file():
            raise InputError(e.path, "config_path", f"points at {config}, which does not exist")
    cfg = None
    if isinstance(config, dict):
        cfg = _in.parse_config(config, "<config dict>")
        meta["config"] = "<config dict>"
    elif config is not None:
        cfg = _in.load_config(config)
        meta["config"] = str(config)
    else:
        meta["config"] = None
    from roofline.io.config_check import mismatch

    cm = mismatch(cfg, t)
    if cm:
        meta["config_mismatch"] = cm     # said once by the CLI; the analysis runs on
    return t, e, cfg, meta, base


_LAST_TOPN: list = []


def loaded_topn(topn):
    """The Top-N `analyze` just parsed from the path `topn` (its TopN record), else a fresh parse."""
    last, _LAST_TOPN[:] = list(_LAST_TOPN), []   # handed out once: nothing large stays referenced here
    if last and not isinstance(topn, dict) and last[0] == topn:
        return last[1]
    return _in.load_topn(topn)


def analyze(topn, env=None, config=None, *, stage: str | None = None, counters=None,
            head_threshold_pct: float = HEAD_THRESHOLD_PCT, head_cap: int = HEAD_CAP, peaks_file=None, device_props=None,
            workload: dict | None = None, as_dataframe: bool = False):
    """Analyse a Top-N and return the artifact of docs/artifact.md as a dict (or, with
    as_dataframe=True, one row per analysed entry as a pandas DataFrame).

    topn: path to profile_topN.json or its parsed dict. env/config: paths or dicts; without them,
    env_report.json and config.json are looked for beside the Top-N and in its parents.
    counters: a path to an .ncu-rep / ncu raw CSV / rocprofv3 CSV, or a list of KernelCounters;
    without it, the counters a Top-N built from an Nsight Compute report carries in its entries.
    peaks_file: the pipeline's peaks.md (markdown) or a YAML peak table; without it a peaks.md
    beside the env report is used, then the built-in tables, then level L1 (roofline.core.devices).
    workload: {isl, osl, conc} to project the gains onto (roofline.core.workload); default: the env
    report's workload, if it gives all three.
    Raises InputError on a malformed file; everything inside one entry degrades instead.
    """
    from roofline.core import analysis

    if stage is not None and stage not in STAGES:
        raise InputError("--stage", "", f"expected one of A, B, C, got {stage!r}")
    t, e, cfg, meta, _ = load_all(topn, env, config)
    _LAST_TOPN[:] = [topn, t]   # the CLI's warnings read the same parse (a 100k-entry Top-N is parsed once)
    kcs = None
    if counters is not None:
        if isinstance(counters, (str, Path)):
            from roofline.counters import load as load_counters

            meta["counters"] = str(counters)
            kcs = load_counters(counters)
        else:
            kcs = list(counters)
    else:
        # the Top-N of an Nsight Compute report carries each kernel's counters (roofline.counters.embedded)
        from roofline.counters.embedded import from_topn_entries

        kcs = from_topn_entries(t) or None
        if kcs:
            meta["counters"] = "embedded in the Top-N (its entries' counters)"
    # peaks: explicit file / the pipeline's peaks.md / our tables / L1 (roofline.core.devices); a device
    # problem never stops the run: it lowers confidence or degrades the entries
    from roofline.core import devices

    pk, peak_problems = devices.resolve_run_peaks(
        e.gpu_name, e.gfx, peaks_file=peaks_file, env_path=e.path, raws=(e.raw, t.raw),
        device_props=device_props, report_props=report_peaks(kcs or []))
    art = analysis.analyze(t, e, cfg, pk, stage=stage, counters=kcs, head_threshold_pct=head_threshold_pct,
                           head_cap=head_cap, inputs_meta=meta)
    art["skill_errors"].extend({"where": "peaks", "error": p} for p in peak_problems)
    from roofline.core import workload as _wl

    _wl.project(art, t, workload or e.workload, "given" if workload else f"the env report's workload")
    if as_dataframe:
        return to_dataframe(art)
    return art


def to_dataframe(art: dict):
    import pandas as pd

    cols = ["name", "short_name", "pct_gpu_time", "regime", "op_class", "op_kind", "modeled", "t_ms", "bytes_est",
            "flops_est", "hbm_util", "compute_util", "arithmetic_intensity", "ridge_point", "bound_type",
            "roofline_pct", "target_eff", "attainable_speedup", "expected_e2e_gain_pct", "headroom_class",
            "confidence", "suspect", "route"]
    return pd.DataFrame([{c: e.get(c) for c in cols} for e in art["entries"]], columns=cols)


def report_peaks(kcs) -> dict | None:
    """Device properties for level L1 from an Nsight Compute report's own peak metrics (medians over
    the kernels that carry them), or None when the report has none."""
    import math
    import statistics

    def ok(x):  # a reading that is no finite positive number is no peak (docs/input_policy.md)
        return isinstance(x, (int, float)) and math.isfinite(x) and x > 0

    bws = [k.report_peak_hbm_bw_bytes_s for k in kcs if ok(k.report_peak_hbm_bw_bytes_s)]
    if not bws:
        return None
    props: dict = {"hbm_bw_bytes_s": statistics.median(bws), "flops": {}}
    for k in kcs:
        if not ok(k.report_sm_clock_hz):
            continue
        for key, per_cycle in k.extra.items():
            if key.startswith("peak_tensor_ops_per_cycle_dense.") and ok(per_cycle):
                props["flops"].setdefault(key.rsplit(".", 1)[1], per_cycle * k.report_sm_clock_hz)
    return props
