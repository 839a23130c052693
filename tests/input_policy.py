"""The input policy's field-by-field sweep (docs/input_policy.md), shared by
tests/test_input_policy.py (CI) and benchmarks/reliability_campaign.py (the long run).

For every numeric field of every input kind (Top-N entry fields and shapes, serving and the other
top-level numbers, the env report's workload and tp, config.json numbers, Nsight Compute CSV
counter values, rocprofv3 CSV values, peaks.md cells) each of ten bad values (NaN, Infinity,
-Infinity, null, a string, a boolean, an array, a negative, zero, 10^5000) is put in, and the
outcome the policy gives is checked through the CLI (`roofline analyze --out` a fresh directory)
and through the hook (over a good previous artifact):

* refuse:   CLI exit 2, one stderr line naming the file and the JSON path, nothing written;
            hook: the same line in skill_errors, the previous artifact kept byte for byte;
* degrade:  exit 0; entries[i] in degraded[] with the reason "entries[i].PATH: expected ..., got
            FOUND" (in `entries` too when its share is usable and in the head); every other entry as
            in the baseline (nothing lost); the hook writes the same;
* absent:   a zero share: the entry is below the head threshold, neither analysed nor degraded;
* ignore:   a field nothing reads (an entry below the head, tp, an unread config key): the
            entries exactly as in the baseline;
* accept:   a usable value (a zero step count, a zero config number): exit 0, a valid artifact;
* L4 / absent counter / unused counter / peaks fallback: see the counter and peaks.md tables below
  (a counter cell the record reads as if unchanged is checked through the CLI only: CLI_ONLY).

The expected outcome of each case is derived here from the policy's tables (not from the
loaders), and every case also checks the general invariants (no traceback, no "internal error",
a schema-valid artifact pair, no temporary file left).
"""
from __future__ import annotations

import contextlib
import copy
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import reliability as R

HEAD_PCT = 5.0   # the default head threshold (docs/method.md section 1)
HUGE = "1" + "0" * 5000
# (name, JSON literal, what a message says was found); "negative" is the sign-flipped original
BAD = (("NaN", "NaN", "NaN"), ("Infinity", "Infinity", "Infinity"), ("-Infinity", "-Infinity", "-Infinity"),
       ("null", "null", "null"), ("string", '"64"', "string"), ("bool", "true", "boolean"),
       ("array", "[1]", "array"), ("negative", None, None), ("zero", "0", "0"),
       ("huge", HUGE, "a 5001-digit integer"))
SENTINEL = "__policy_bad_value__"


@dataclass
class PCase:
    kind: str          # topn | env | config | ncu_csv | rocprof_csv | peaks_md
    field: str         # the JSON path (or CSV column / peaks.md cell) changed
    bad: str           # which of BAD
    outcome: str       # refuse | degrade | degrade_only | absent | ignore | accept | L4 | counter_absent | ...
    content: bytes     # the changed file
    found: str = ""    # what the message must say was found
    entry: int | None = None
    extra: dict = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"PCase({self.kind} {self.field} <- {self.bad}: {self.outcome})"


def _jpath(path) -> str:
    out = ""
    for k in path:
        out += f"[{k}]" if isinstance(k, int) else (f".{k}" if out else str(k))
    return out


def _get(doc, path):
    for k in path:
        doc = doc[k]
    return doc


def _with(doc, path, literal: str) -> bytes:
    d = copy.deepcopy(doc)
    R._set(d, path, SENTINEL)
    return json.dumps(d, indent=1).replace(f'"{SENTINEL}"', literal).encode()


def _literal(bad: str, lit: str | None, orig) -> tuple[str, str]:
    """(JSON literal, found text) of one bad value; the negative one flips the original's sign."""
    if bad != "negative":
        return lit, next(f for n, _, f in BAD if n == bad)
    v = -orig if orig else -1
    return json.dumps(v), (f"{v:g}" if isinstance(v, float) else str(v))


def numeric_paths(doc, prefix=()):
    """Every path of a number (not a bool) in a JSON document."""
    return [p for p, v in R._paths(doc, prefix) if p and isinstance(v, (int, float)) and not isinstance(v, bool)]


# ------------------------------------------------------------------------------------ Top-N
def policy_topn() -> dict:
    """The Top-N of the sweep: the hook fixture with the numeric fields it lacks added (valid)."""
    t = copy.deepcopy(R.BASE_TOPN)
    e0, e1, e2 = t["entries"][0], t["entries"][1], t["entries"][2]
    e0["launches_per_logical_op"] = 1
    e0["est_shape"] = {"M": 64}
    e1["regimes"]["prefill"] = {"base_latency_ms": 0.2, "launches_per_step": 4}
    e2["shape_launches"] = [8]
    e2["shape_base_latency_ms"] = [0.096061]
    t["entries"].append({"name": "rms_norm_kernel", "pct_gpu_time": 5.5, "classification": "norm",
                         "regimes": {"decode": {"base_latency_ms": 0.012, "launches_per_step": 64}},
                         "shapes": [{"shape": [64, 8192]}], "dtypes": {"act": "bf16", "out": "bf16"}})
    return t


TOP_LEVEL_ZERO_OK = {"total_gpu_time_ms", "serving.n_decode_steps", "serving.n_prefill_steps", "schema_version",
                     "round"}


def topn_outcome(doc, path, bad: str) -> tuple[str, int | None]:
    """The policy's outcome of `bad` at `path` of the Top-N (docs/input_policy.md tables)."""
    jp = _jpath(path)
    if path[0] != "entries":
        return ("accept" if bad == "zero" and jp in TOP_LEVEL_ZERO_OK else "refuse"), None
    i = path[1]
    pct = doc["entries"][i]["pct_gpu_time"]
    head = pct >= HEAD_PCT
    if path[2:] == ("pct_gpu_time",):
        if bad == "zero":
            return ("absent" if head else "ignore"), i
        return "degrade_only", i          # no usable share: in degraded[] only
    if path[2] == "shape_launches" and bad == "zero":
        return "accept", i                # 0 launches is a count
    return ("degrade" if head else "ignore"), i


def topn_cases() -> list[PCase]:
    doc = policy_topn()
    out = []
    for path in numeric_paths(doc):
        for bad, lit, _ in BAD:
            literal, found = _literal(bad, lit, _get(doc, path))
            outcome, i = topn_outcome(doc, path, bad)
            out.append(PCase("topn", _jpath(path), bad, outcome, _with(doc, path, literal), found, i))
    return out


# ------------------------------------------------------------------------------------ env report
def env_cases() -> list[PCase]:
    out = []
    for path in numeric_paths(R.BASE_ENV):
        for bad, lit, _ in BAD:
            literal, found = _literal(bad, lit, _get(R.BASE_ENV, path))
            # the workload and tp are read (file-level: refused, named); a null tp is no tp (absent)
            outcome = "refuse" if path[0] == "workload" or (path[0] == "tp" and bad != "null") else "ignore"
            out.append(PCase("env", _jpath(path), bad, outcome, _with(R.BASE_ENV, path, literal), found))
    return out


# ------------------------------------------------------------------------------------ config.json
def config_topn() -> dict:
    """A stage-A Top-N whose MoE and attention shapes come from config.json."""
    t = json.loads((R.EXAMPLE / "profile" / "round_1" / "profile_topN.json").read_text())
    t["entries"][0].pop("shapes")
    t["entries"][0]["est_shape"] = {"M": 64}
    t["entries"][1].pop("shapes")
    t["entries"][1]["est_shape"] = {"batch": 64, "paged": True}
    return t


# a zero the config gives: which entry degrades and the dimension it names (config.md: a 0 is
# "none"; num_key_value_heads 0 falls back to the query heads)
CONFIG_ZERO = {"hidden_size": (0, "hidden"), "num_experts": (0, "E"), "num_experts_per_tok": (0, "top_k"),
               "moe_intermediate_size": (0, "inter"), "num_attention_heads": (1, "n_q_heads"),
               "head_dim": (1, "head_dim")}


def config_cases() -> list[PCase]:
    from roofline.core.inputs import CONFIG_INT_KEYS

    out = []
    for path in numeric_paths(R.BASE_CONFIG):
        key = path[-1]
        for bad, lit, _ in BAD:
            literal, found = _literal(bad, lit, _get(R.BASE_CONFIG, path))
            if key not in CONFIG_INT_KEYS:
                outcome, i = "ignore", None
            elif bad == "null":
                outcome, i = "accept", None   # Hugging Face configs write null for a key not set: absent
            elif bad == "zero":
                # a 0 a shape would use degrades its entry; num_key_value_heads 0 falls back to the
                # query heads (config.md); a key no shape of this Top-N reads changes nothing
                outcome, i = (("degrade_config", CONFIG_ZERO[key][0]) if key in CONFIG_ZERO else
                              ("accept", None) if key == "num_key_value_heads" else ("ignore", None))
            else:
                outcome, i = "refuse", None
            out.append(PCase("config", _jpath(path), bad, outcome, _with(R.BASE_CONFIG, path, literal), found, i,
                             extra={"dim": CONFIG_ZERO.get(key, (None, None))[1]}))
    return out


# ------------------------------------------------------------------------------------ counter CSVs
CSV_BAD = {"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf", "null": "", "string": "abc", "bool": "true",
           "array": "[1]", "zero": "0", "huge": HUGE}
NON_NUMBER = ("NaN", "null", "string", "bool", "array")        # ncu: "not collected"
NOT_A_READING = ("Infinity", "-Infinity", "huge", "negative")  # a number no measurement can be

# the Nsight Compute columns the reader maps (roofline/counters/ncu.py), each with what the policy
# makes of a bad value in it: "reading" (a count or time the record uses: rule 1 judges it; a cell
# that is no number is "not collected"), "unused" (read + write give the DRAM bytes, so the total is
# not read; rates only stand in for absent counts; the measured SM clock only without the maximum),
# "extra" (corroborating metrics and the report's own tensor peaks: a peak that is no positive
# finite number is no peak, the table's is used). A zero DRAM read leaves less than the
# 64x8192x8192 GEMM's operands (L4, rule 4); a zero duration is no measurement (L4, rule 1).
def ncu_column_rule(col: str) -> tuple[str | None, str, str]:
    """-> (the record's field in the entry's `counters`, its class, what a zero does)."""
    from roofline.counters import ncu as N

    cuda_core = {m for d in N.CUDA_CORE.values() for m in d.values()}
    tensor = {n: d for d, names in N.TENSOR_OPS.items() for n in N._flat(names)}
    fixed = {N.DRAM_READ: ("dram_read_bytes", "reading", "L4"), N.DRAM_WRITE: ("dram_write_bytes", "reading", "ok"),
             N.DURATION: ("t_ms", "reading", "L4"), N.L2_BYTES: ("l2_bytes", "reading", "ok"),
             N.L1_BYTES: ("l1_bytes", "reading", "ok"), N.DRAM_PEAK_PER_CYCLE: (None, "reading", "ok"),
             N.DRAM_CLOCK: (None, "reading", "ok"), N.SM_CLOCK_MAX_KHZ: (None, "reading", "ok"),
             N.DRAM_TOTAL: (None, "unused", "ok"), N.SM_CLOCK_MEASURED: (None, "unused", "ok")}
    if col in fixed:
        return fixed[col]
    if col in tensor:
        return f"tensor_flops_by_dtype.{tensor[col]}", "reading", "ok"
    if col in cuda_core:
        return None, "cuda_core", "ok"   # summed per precision: a cell that is no number counts as 0
    if col.endswith(N.RATE):
        return None, "unused", "ok"
    if col in N.EXTRA or col in N.TENSOR_PEAKS_PER_CYCLE.values():
        return None, "extra", "ok"
    raise KeyError(f"no policy rule for the ncu column {col!r}")


def ncu_columns() -> list[str]:
    """Every column of the counter fixture that the reader maps."""
    from roofline.counters import ncu as N

    header = R._csv_rows(R.BASE_NCU_COUNTERS_CSV)[0]
    return [c for c in header if c in N.WANTED]


NCU_KERNEL = R.BASE_TOPN["entries"][0]["name"]   # a head matched by fixtures/ncu/known_raw.csv


def counter_outcome(cls: str, bad: str, zero: str) -> str:
    if cls in ("unused", "extra"):
        return "same"
    if bad in NOT_A_READING:
        return "L4"
    if bad == "zero":
        return "L4" if zero == "L4" else "not_L4"
    return "counter_absent" if cls == "reading" else "not_L4"


def _negative(orig: str) -> str:
    """The sign-flipped cell (-1 for a zero: -0 is no negative number)."""
    return "-1" if float(orig.replace(",", "") or 0) == 0 else "-" + orig


def _csv_with(rows, match, col, value) -> bytes:
    rows = [list(r) for r in rows]
    h = rows[0]
    j = h.index(col)
    for r in rows[1:]:
        if match(r, h):
            r[j] = value
    return R._csv_bytes(rows)


def ncu_cases() -> list[PCase]:
    rows = R._csv_rows(R.BASE_NCU_COUNTERS_CSV)
    kname = rows[0].index("Kernel Name")
    out = []
    for col in ncu_columns():
        fld, cls, zero = ncu_column_rule(col)
        orig = next(r for r in rows[2:] if r[kname] == NCU_KERNEL)[rows[0].index(col)]
        for bad, _, _ in BAD:
            value = _negative(orig) if bad == "negative" else CSV_BAD[bad]
            out.append(PCase("ncu_csv", col, bad, counter_outcome(cls, bad, zero),
                             _csv_with(rows, lambda r, h: r[kname] == NCU_KERNEL, col, value), entry=0,
                             extra={"field": fld}))
    return out


# rocprofv3: one reading per row (Counter_Value); a value that is no number is a bad reading of that
# kernel's record (docs/input_policy.md Counters rule 1); MfmaFlops beside MfmaFlopsBF16 is kept as an
# extra, not read; a zero FETCH_SIZE leaves the write bytes only, which the MI355X table (no l2_bytes)
# cannot judge; the timestamps give the duration (a missing one: no duration; a zero End: negative)
ROCPROF_KERNEL = "Cijk_Alik_Bljk_BBS_BH_MT256x256x64_MI16x16x16x1_SN_K1_MIWT4_4"
ROCPROF_COUNTERS = {"FETCH_SIZE": ("dram_read_bytes", True), "WRITE_SIZE": ("dram_write_bytes", True),
                    "MfmaFlopsBF16": ("tensor_flops_by_dtype.bf16", True), "MfmaFlops": (None, False)}


def rocprof_topn() -> dict:
    g = {"M": 4096, "N": 4096, "K": 4096}
    return {"schema_version": 1, "round": 1, "serving": {"n_decode_steps": 100, "n_prefill_steps": 0}, "entries": [
        {"name": ROCPROF_KERNEL, "pct_gpu_time": 40.0, "classification": "gemm",
         "regimes": {"decode": {"base_latency_ms": 0.192, "launches_per_step": 1}}, "shapes": [g],
         "dtypes": {"act": "bf16", "weight": "bf16", "out": "bf16"}},
        {"name": "Cijk_Alik_Bljk_F8BS_BH_MT256x256x128_MI16x16x32x1_SN_K1_MIWT4_4", "pct_gpu_time": 20.0,
         "classification": "gemm", "regimes": {"decode": {"base_latency_ms": 0.11, "launches_per_step": 1}},
         "shapes": [g], "dtypes": {"act": "fp8", "weight": "fp8", "out": "bf16"}}]}


ROCPROF_ENV = {"gfx": "gfx950", "gpu_name": "AMD Instinct MI355X", "model_arch_class": "dense", "model_dtype": "bf16",
               "workload": {"isl": 1024, "osl": 1024, "conc": 64}}


def rocprof_cases() -> list[PCase]:
    rows = R._csv_rows(R.BASE_ROCPROF_CSV)
    h = rows[0]
    kn, cn = h.index("Kernel_Name"), h.index("Counter_Name")
    out = []
    for counter, (fld, used) in ROCPROF_COUNTERS.items():
        orig = next(r for r in rows[1:] if r[kn] == ROCPROF_KERNEL and r[cn] == counter)[h.index("Counter_Value")]
        for bad, _, _ in BAD:
            value = _negative(orig) if bad == "negative" else CSV_BAD[bad]
            if not used:
                outcome = "same"
            elif bad in NOT_A_READING or bad in NON_NUMBER:
                outcome = "L4"
            else:
                outcome = "not_L4"
            out.append(PCase("rocprof_csv", f"Counter_Value of {counter}", bad, outcome,
                             _csv_with(rows, lambda r, hh, c=counter: r[kn] == ROCPROF_KERNEL and r[cn] == c,
                                       "Counter_Value", value), entry=0, extra={"field": fld}))
    for bad, _, _ in BAD:
        value = "-1" if bad == "negative" else CSV_BAD[bad]
        outcome = "counter_absent" if bad in NON_NUMBER else "L4"   # zero End: End - Start < 0
        out.append(PCase("rocprof_csv", "End_Timestamp", bad, outcome,
                         _csv_with(rows, lambda r, hh: r[kn] == ROCPROF_KERNEL, "End_Timestamp", value), entry=0,
                         extra={"field": "t_ms"}))
    return out


# ------------------------------------------------------------------------------------ peaks.md
PEAKS_MD_COLS = ("HBM (TB/s)", "BF16 (TFLOP/s)", "FP8 (TFLOP/s)", "FP16 (TFLOP/s)")
PEAKS_MD_ROW = ("4.8", "793.9", "1331", "764.2")   # the H200 table's roofs (peaks/h200.yaml)


def peaks_md(cells=PEAKS_MD_ROW) -> bytes:
    return ("| GPU | gfx | " + " | ".join(PEAKS_MD_COLS) + " |\n|" + "---|" * (2 + len(PEAKS_MD_COLS)) + "\n"
            + "| NVIDIA H200 | sm_90 | " + " | ".join(cells) + " |\n").encode()


def peaks_md_cases() -> list[PCase]:
    out = []
    for j, col in enumerate(PEAKS_MD_COLS):
        for bad, _, _ in BAD:
            cells = list(PEAKS_MD_ROW)
            cells[j] = _negative(cells[j]) if bad == "negative" else CSV_BAD[bad]
            # an empty cell is "no figure" (peaks/md.py); any other bad cell makes the file unusable:
            # one warning naming file, row and column, and the built-in tables are used
            out.append(PCase("peaks_md", col, bad, "accept" if bad == "null" else "peaks_fallback",
                             peaks_md(cells), extra={"col": col}))
    return out


def all_cases() -> list[PCase]:
    return topn_cases() + env_cases() + config_cases() + ncu_cases() + rocprof_cases() + peaks_md_cases()


# ------------------------------------------------------------------------------------ running
KEYS = ("name", "pct_gpu_time", "modeled", "headroom_class", "provisional_headroom_class", "confidence",
        "bound_type", "roofline_pct_raw", "bytes_est", "flops_est", "suspect", "t_ms", "route")


def _key(e: dict) -> tuple:
    return tuple(e.get(k) for k in KEYS)


@dataclass
class Setup:
    topn: bytes
    env: bytes
    config: bytes | None = None
    counters: tuple[str, bytes] | None = None   # (file name, content)
    peaks_md: bytes | None = None


def _setup(case: PCase) -> Setup:
    topn, env, cfg = R._dumps(policy_topn()), R._dumps(R.BASE_ENV), R._dumps(R.BASE_CONFIG)
    if case.kind == "topn":
        return Setup(case.content, env, cfg)
    if case.kind == "env":
        return Setup(topn, case.content, cfg)
    if case.kind == "config":
        return Setup(R._dumps(config_topn()), env, case.content)
    if case.kind == "ncu_csv":
        return Setup(R._dumps(R.BASE_TOPN), env, cfg, ("counters.csv", case.content))
    if case.kind == "rocprof_csv":
        return Setup(R._dumps(rocprof_topn()), R._dumps(ROCPROF_ENV), None, ("counters.csv", case.content))
    return Setup(R._dumps(R.BASE_TOPN), env, cfg, peaks_md=case.content)


def _baseline_setup(case: PCase) -> Setup:
    """The same run with the unchanged file (peaks.md: the built-in tables it falls back to)."""
    s = _setup(case)
    good = {"topn": ("topn", R._dumps(policy_topn())), "env": ("env", R._dumps(R.BASE_ENV)),
            "config": ("config", R._dumps(R.BASE_CONFIG))}
    if case.kind in good:
        setattr(s, *good[case.kind])
    elif case.kind == "ncu_csv":
        s.counters = ("counters.csv", R.BASE_NCU_COUNTERS_CSV)
    elif case.kind == "rocprof_csv":
        s.counters = ("counters.csv", R.BASE_ROCPROF_CSV)
    else:
        s.peaks_md = None
    return s


def _place(work: Path, s: Setup) -> dict:
    """The run root `work` holding exactly the setup's files (a directory reused from case to case:
    creating and removing directories is the slow part of a case on an overlay filesystem)."""
    rd = work / "profile" / "round_1"
    rd.mkdir(parents=True, exist_ok=True)
    p = {"rd": rd, "topn": rd / "profile_topN.json", "env": work / "env_report.json", "out": work / "out"}
    p["out"].mkdir(exist_ok=True)
    for d in (work, rd, p["out"]):
        for x in d.iterdir():
            if x.is_file():
                x.unlink()
            elif x.name.startswith("."):
                import shutil

                shutil.rmtree(x)
    p["topn"].write_bytes(s.topn)
    p["env"].write_bytes(s.env)
    if s.config is not None:
        p["config"] = work / "config.json"
        p["config"].write_bytes(s.config)
    if s.counters is not None:
        p["counters"] = work / s.counters[0]
        p["counters"].write_bytes(s.counters[1])
    if s.peaks_md is not None:
        (work / "peaks.md").write_bytes(s.peaks_md)
    return p


def _cli_args(p: dict) -> list[str]:
    args = ["analyze", str(p["topn"]), "--env", str(p["env"]), "--out", str(p["out"]), "--format", "json"]
    if "config" in p:
        args += ["--config", str(p["config"])]
    if "counters" in p:
        args += ["--counters", str(p["counters"])]
    return args


def _hook(p: dict):
    from roofline import hook

    return hook.run(p["rd"], env=str(p["env"]), config=str(p["config"]) if "config" in p else None,
                    counters=str(p["counters"]) if "counters" in p else None)


_BASE: dict = {}


def baseline(case: PCase) -> dict:
    """The artifact of the unchanged inputs (computed once per kind, through the CLI)."""
    if case.kind not in _BASE:
        with tempfile.TemporaryDirectory() as t:
            p = _place(Path(t), _baseline_setup(case))
            code, out, err = R.cli(_cli_args(p))
            assert code == 0 and not json.loads(out)["skill_errors"], err
            _BASE[case.kind] = json.loads(out)
    return _BASE[case.kind]


def run_pcase(case: PCase, work: Path) -> list[str]:
    """Every check of one case, in the run root `work` (an existing directory, reused); the
    violations found ([] when the policy's outcome holds)."""
    p = _place(work, _setup(case))
    base = baseline(case)
    prior = _seed_prior(p["rd"], case, base)
    code, out, err = R.cli(_cli_args(p))
    what = repr(case)
    v = R._cli_violations(code, out, err, what)
    art = json.loads(out) if code == 0 and out.lstrip().startswith("{") else None
    if case.outcome in CLI_ONLY:
        return v + _outcome(case, p, code, err, art, None, base, prior)
    s = _hook(p)
    # the hook's pair: schema-valid, a pair, the markdown its rendering, the prior kept when refused
    v += R._pair_violations(p["rd"], f"hook {what}", prior, refused=case.outcome == "refuse")
    return v + _outcome(case, p, code, err, art, s, base, prior)


# counter cells the record reads as if unchanged (not collected, unused, an extra): checked through the
# CLI only, to keep the sweep's time; every outcome that changes what is written (refused, degraded,
# L4, a peaks fallback) runs through the hook as well
CLI_ONLY = ("same", "not_L4", "counter_absent")


_PRIOR: dict = {}


def _seed_prior(rd: Path, case: PCase, base: dict) -> tuple[bytes, bytes]:
    """A good previous artifact pair in the round directory (the baseline's, rendered once)."""
    from roofline.report import artifact as report

    if case.kind not in _PRIOR:
        _PRIOR[case.kind] = (report.to_json(base).encode(), report.to_markdown(base).encode())
    js, md = _PRIOR[case.kind]
    (rd / report.ARTIFACT_JSON).write_bytes(js)
    (rd / report.ARTIFACT_MD).write_bytes(md)
    return js, md


@contextlib.contextmanager
def no_fsync():
    """os.fsync as a no-op while the sweep runs: it checks outcomes, not durability (the kill -9
    and full-disk tests of tests/test_reliability_faults.py keep the real fsync)."""
    saved = os.fsync
    os.fsync = lambda fd: None
    try:
        yield
    finally:
        os.fsync = saved


def run_all(cases: list[PCase]) -> list[str]:
    """Run cases in one reused temporary run root; all their violations."""
    out: list[str] = []
    with no_fsync(), tempfile.TemporaryDirectory(prefix="roofline-policy-") as t:
        for c in cases:
            out += run_pcase(c, Path(t))
    return out


def _outcome(case, p, code, err, art, s, base, prior) -> list[str]:
    what = repr(case)
    if case.outcome == "refuse":
        return _refused(case, p, code, err, s, prior)
    if code != 0 or art is None:
        return [f"wrong refuse: {what}: exit {code}: {err.strip()[:200]}"]
    from roofline.report import artifact as report

    v = []
    if not (p["out"] / report.ARTIFACT_JSON).exists():
        v.append(f"data loss: {what}: the CLI wrote no artifact")
    if s is not None:
        hook_art = json.loads((p["rd"] / report.ARTIFACT_JSON).read_text())
        if [d["reason"] for d in hook_art["degraded"]] != [d["reason"] for d in art["degraded"]]:
            v.append(f"hook: {what}: degraded[] differs from the CLI's: {hook_art['degraded']}"[:300])
    check = _CHECKS[case.outcome]
    return v + [f"{x}: {what}" for x in check(case, art, base, err, s)]


def _refused(case, p, code, err, s, prior) -> list[str]:
    from roofline.report import artifact as report

    what, v = repr(case), []
    path = case.field
    if code != 2:
        return [f"wrong accept: {what}: exit {code}"]
    line = err.strip()
    f = case.kind   # only the JSON inputs have file-level numbers
    if str(p[f]) not in line or f"{path}: expected " not in line or f", got {case.found}" not in line:
        v.append(f"message: {what}: {line[:300]!r} does not name the file, {path!r} and 'got {case.found}'")
    if any(p["out"].iterdir()):
        v.append(f"written: {what}: a refused run wrote {sorted(x.name for x in p['out'].iterdir())}")
    errs = [e["error"] for e in s["skill_errors"] if e["where"] == "analyze"]
    if not errs or path not in errs[0] or str(p[f]) not in errs[0]:
        v.append(f"hook: {what}: skill_errors {s['skill_errors']!r} do not carry the line"[:300])
    if ((p["rd"] / report.ARTIFACT_JSON).read_bytes(), (p["rd"] / report.ARTIFACT_MD).read_bytes()) != prior:
        v.append(f"data loss: {what}: the hook replaced the previous artifact")
    return v


def _others_same(art, base, skip: set) -> list[str]:
    got = {e["name"]: e for e in art["entries"]}
    return [f"lost: {e['name'][:40]!r} changed ({_key(e)} -> {_key(got[e['name']]) if e['name'] in got else None})"
            for e in base["entries"] if e["name"] not in skip and (e["name"] not in got or _key(got[e["name"]]) != _key(e))]


def _name(case) -> str:
    docs = {"topn": policy_topn, "config": config_topn, "ncu_csv": lambda: R.BASE_TOPN, "rocprof_csv": rocprof_topn}
    return docs[case.kind]()["entries"][case.entry]["name"]


def _check_degrade(case, art, base, err, s) -> list[str]:
    name, v = _name(case), []
    reasons = [d["reason"] for d in art["degraded"] if d["name"] == name]
    want = f"{case.field}: expected "
    if not reasons or not reasons[0].startswith(want) or not reasons[0].endswith(f", got {case.found}"):
        v.append(f"reason: degraded {art['degraded']} lacks {want!r}...'got {case.found}'"[:300])
    in_entries = [e for e in art["entries"] if e["name"] == name]
    if case.outcome == "degrade" and (len(in_entries) != 1 or in_entries[0]["modeled"]
                                      or in_entries[0]["headroom_class"] != "unknown"):
        v.append(f"entry: the degraded head is not an unmodelled entry: {in_entries}"[:300])
    if case.outcome == "degrade_only" and in_entries:
        v.append("entry: an entry without a usable share is in entries")
    if s["degraded"] != len(art["degraded"]):
        v.append(f"hook: summary says {s['degraded']} degraded")
    return v + _others_same(art, base, {name})


def _check_absent(case, art, base, err, s) -> list[str]:
    name = _name(case)
    v = [f"present: {name!r}"] if name in {e["name"] for e in art["entries"]} | {d["name"] for d in art["degraded"]} else []
    if art["skipped"]["below_threshold"] != base["skipped"]["below_threshold"] + 1:
        v.append(f"skipped: below_threshold {art['skipped']['below_threshold']}")
    return v + _others_same(art, base, {name})


def _check_ignore(case, art, base, err, s) -> list[str]:
    v = _others_same(art, base, set())
    if len(art["entries"]) != len(base["entries"]) or art["degraded"] != base["degraded"]:
        v.append(f"changed: degraded {art['degraded']}"[:300])
    return v


def _check_accept(case, art, base, err, s) -> list[str]:
    # a peaks.md warning (a warning about something else, e.g. the synthetic Top-N's shapes against
    # the bundled config.json, is not the peaks.md cell's doing)
    if case.kind == "peaks_md" and any("warning" in ln and "peaks" in ln for ln in err.splitlines()):
        return [f"warning: {err.strip()[:200]}"]
    return [f"degraded: {d}" for d in art["degraded"] if case.field.split(".")[-1] in d["reason"]]


def _check_degrade_config(case, art, base, err, s) -> list[str]:
    name = _name(case)
    reasons = [d["reason"] for d in art["degraded"] if d["name"] == name]
    want = f"{case.extra['dim']} = 0 from config.json is not a positive dimension"
    v = [] if reasons and want in reasons[0] else [f"reason: {art['degraded']} lacks {want!r}"[:300]]
    return v + _others_same(art, base, {name})


def _entry_counters(case, art) -> tuple[dict, dict]:
    e = next(x for x in art["entries"] if x["name"] == _name(case))
    return e, e.get("counters") or {}


def _check_l4(case, art, base, err, s) -> list[str]:
    e, c = _entry_counters(case, art)
    v = []
    if e["confidence"] == "high" or "L4: implausible counters" not in e["notes"] or not c.get("implausible"):
        v.append(f"L4: confidence {e['confidence']}, counters.implausible {c.get('implausible')}")
    return v + _others_same(art, base, {e["name"]})


def _check_counter_absent(case, art, base, err, s) -> list[str]:
    e, c = _entry_counters(case, art)
    v = [f"implausible: {c['implausible']}"] if c.get("implausible") else []
    fld = case.extra.get("field")
    if fld:
        val = (c.get("tensor_flops_by_dtype", {}).get(fld.split(".", 1)[1]) if fld.startswith("tensor")
               else c.get(fld))
        if val is not None:
            v.append(f"absent: counters.{fld} is {val}, expected null (not collected)")
    return v + _others_same(art, base, {e["name"]})


def _check_not_l4(case, art, base, err, s) -> list[str]:
    e, c = _entry_counters(case, art)
    return ([f"implausible: {c['implausible']}"] if c.get("implausible") else []) + _others_same(art, base, {e["name"]})


def _check_same(case, art, base, err, s) -> list[str]:
    return _others_same(art, base, set())


def _check_peaks_fallback(case, art, base, err, s) -> list[str]:
    lines = [ln for ln in err.splitlines() if "warning" in ln and "peaks.md" in ln]
    v = []
    if len(lines) != 1 or case.extra["col"] not in lines[0] or "built-in peak tables are used" not in lines[0]:
        v.append(f"warning: {err.strip()[:300]!r}")
    if art["peaks"]["origin"] != "built-in table":
        v.append(f"peaks: origin {art['peaks']['origin']}")
    if not any(e["where"] == "peaks" and "peaks.md" in e["error"] for e in s["skill_errors"]):
        v.append(f"hook: no peaks skill_error: {s['skill_errors']}"[:300])
    return v + _others_same(art, base, set())


_CHECKS = {"degrade": _check_degrade, "degrade_only": _check_degrade, "absent": _check_absent,
           "ignore": _check_ignore, "accept": _check_accept, "degrade_config": _check_degrade_config,
           "L4": _check_l4, "counter_absent": _check_counter_absent, "not_L4": _check_not_l4, "same": _check_same,
           "peaks_fallback": _check_peaks_fallback}
