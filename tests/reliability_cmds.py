"""The reliability campaign's engine for the commands added in round four (issue 43): the workload
and number flags, `compare` and `rerun --dispatch` without a GPU. Property-based (hypothesis), as
tests/reliability.py is for the input files; used by tests/test_reliability_cmds.py (the CI run,
derandomized) and benchmarks/reliability_campaign.py (the long run).

A case is one command line (and, for compare, one mutation of round B's Top-N or artifact); every
case checks:

* crash: a traceback, an "internal error", an exit other than 0 / 2, or more than one stderr line
  when it failed (R._cli_violations);
* hang: past the time limit (SIGALRM);
* wrong accept: a flag value outside the bounds a file's value has (a count in 1..2^48, a finite
  number) accepted; a dispatch table that is no table accepted;
* contract: a refused run that wrote something (a Top-N, an env report, a playbook record, a changed
  artifact); a playbook record from compare whose measured speedup is not a finite number > 0, or
  of a kernel without a usable time in both rounds.
"""
from __future__ import annotations

import copy
import json
import math
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import strategies as st

import reliability as R

MAX = 2 ** 48
TRACE = R.FIX / "traces" / "prefill.json.gz"


@dataclass
class CmdCase:
    kind: str                # "flags" | "compare" | "dispatch"
    label: str
    args: dict = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"CmdCase({self.kind}, {self.label!r})"


# ------------------------------------------------------------------------------------ strategies
_BAD_NUM_TEXT = ["nan", "inf", "-inf", "1e400", "-1", "0", "1.5", "", " ", "0x10", "1_000", "٣", str(MAX + 1),
                 str(10 ** 20), "9" * 400, "9" * 5000, "-" + "9" * 400]


def _count_text():
    return st.one_of(st.sampled_from(_BAD_NUM_TEXT), st.integers(-10, MAX + 10).map(str),
                     st.integers(1, 2 ** 70).map(str), st.text(max_size=8))


def _count_ok(text: str) -> bool:
    """The oracle: a count a file may hold (an integer literal in 1..2^48)."""
    s = text.strip()
    if not s.lstrip("+-").isdigit() or not s.isascii() or len(s) > 30:
        return False
    return 1 <= int(s) <= MAX


@st.composite
def flag_cases(draw):
    """`analyze ROUND --isl/--osl/--conc` and `topn TRACE --isl/--osl/--conc`: accepted iff every
    value is a count in 1..2^48 (the env report's rule), and then analyze accepts what topn wrote."""
    cmd = draw(st.sampled_from(["analyze", "topn"]))
    vals = {f: draw(st.one_of(st.just("8"), _count_text())) for f in ("isl", "osl", "conc")}
    return CmdCase("flags", f"{cmd} " + " ".join(f"--{k} {v[:12]!r}" for k, v in vals.items()),
                   {"cmd": cmd, "vals": vals})


_BAD_VALUES = [float("nan"), float("inf"), -1.0, 0.0, 1e-300, 1e308, "x", None, [], {}, True, -0.5, 10 ** 400]
_TOPN_PATHS = [("entries", "i", "regimes", "decode", "base_latency_ms"), ("entries", "i", "regimes", "decode",
               "launches_per_step"), ("entries", "i", "regimes", "prefill", "base_latency_ms"),
               ("entries", "i", "regimes"), ("entries", "i", "pct_gpu_time"), ("entries", "i", "name"),
               ("entries", "i", "shapes"), ("entries", "i"), ("serving", "n_decode_steps"), ("total_gpu_time_ms",),
               ("serving",), ("entries",)]
_ART_PATHS = [("entries", "i", "t_ms"), ("entries", "i", "launches_per_step"), ("entries", "i", "regime"),
              ("entries", "i", "attainable_speedup"), ("gpu_name",), ("inputs",), ("entries", "i")]


@st.composite
def compare_cases(draw):
    """Round B of a real two-round run (its kernels 1.5x faster), one value of its Top-N or artifact
    replaced by a bad one (or a random time), then `compare A B` with a playbook."""
    which = draw(st.sampled_from(["topn", "artifact"]))
    path = draw(st.sampled_from(_TOPN_PATHS if which == "topn" else _ART_PATHS))
    i = draw(st.integers(0, len(R.BASE_TOPN["entries"]) - 1))
    value = draw(st.one_of(st.sampled_from(_BAD_VALUES), st.floats(allow_nan=True, allow_infinity=True),
                           st.integers(-5, 5)))
    e2e = draw(st.one_of(st.none(), st.sampled_from(["nan", "inf", "-3.5", "1e400", "x"])))
    path = tuple(i if p == "i" else p for p in path)
    return CmdCase("compare", f"{which} {'.'.join(map(str, path))} = {value!r:.20}" + (f" --e2e {e2e}" if e2e else ""),
                   {"which": which, "path": path, "value": value, "e2e": e2e})


_json = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=6)),
                     lambda ch: st.one_of(st.lists(ch, max_size=3), st.dictionaries(st.sampled_from(
                         ["classes", "contract", "dtype", "arch", "rows", "x"]), ch, max_size=4)), max_leaves=12)


@st.composite
def dispatch_cases(draw):
    """`rerun ROUND --dispatch FILE` without a GPU: FILE is random JSON, random bytes or a special file."""
    how = draw(st.sampled_from(["json", "json", "bytes", "deep", "fifo", "dev_zero", "directory"]))
    content = None
    if how == "json":
        content = json.dumps(draw(_json)).encode()
    elif how == "bytes":
        content = draw(st.binary(max_size=64))
    elif how == "deep":
        n = draw(st.integers(201, 50_000))
        content = b"[" * n + b"]" * n
    return CmdCase("dispatch", f"{how} {content[:24] if content else ''!r}", {"how": how, "content": content})


# ---------------------------------------------------------------------------------------- running
def run_cmd_case(case: CmdCase, limit_s: float = 60.0) -> list[str]:
    with tempfile.TemporaryDirectory(prefix="roofline-rel4-") as t:
        try:
            with R.time_limit(limit_s):
                return {"flags": _flags, "compare": _compare, "dispatch": _dispatch}[case.kind](case, Path(t))
        except R.Hang as exc:
            return [f"hang: {case.kind} [{case.label}]: {exc}"]
        except Exception as exc:  # noqa: BLE001 - the engine itself must count, not stop
            return [f"crash: {case.kind} [{case.label}]: {exc.__class__.__name__}: {exc}"[:400]]


def _flags(case: CmdCase, work: Path) -> list[str]:
    vals, what = case.args["vals"], f"flags [{case.label}]"
    ok = all(_count_ok(v) for v in vals.values())
    flags = [x for k, v in vals.items() for x in (f"--{k}", v)]
    if case.args["cmd"] == "analyze":
        rd, paths = R._round(work, None)
        code, out, err = R.cli(["analyze", str(rd), "-q", *flags])
        wrote = (rd / "profile_roofline.json").exists()
    else:
        out_dir = work / "o"
        code, out, err = R.cli(["topn", str(TRACE), "-o", str(out_dir / "profile_topN.json"), "-q", *flags])
        wrote = out_dir.exists()
        if code == 0:   # what topn wrote, analyze accepts (never a starter env report it then refuses)
            c2, _, e2 = R.cli(["analyze", str(out_dir), "-q", "--no-write"])
            if c2 != 0:
                return [f"contract: {what}: analyze refuses the env report topn wrote: {e2.strip()[:200]}"]
    v = R._cli_violations(code, out, err, what)
    if code == 0 and not ok:
        v.append(f"wrong accept: {what}: accepted")
    if code == 2 and ok:
        v.append(f"contract: {what}: refused a value in bounds: {err.strip()[:200]}")
    if code == 2 and wrote:
        v.append(f"contract: {what}: a refused run wrote files")
    return v


_TWO: dict = {}


def _two_rounds(work: Path) -> tuple[Path, Path]:
    """Two analysed rounds of one run (the baseline; round 2's kernels 1.5x faster), copied from a
    cache made once."""
    import shutil

    if "root" not in _TWO:
        base = Path(tempfile.mkdtemp(prefix="roofline-rel4-two-"))
        rd, _ = R._round(base, None)
        rd2 = rd.parent / "round_2"
        rd2.mkdir()
        doc = copy.deepcopy(R.BASE_TOPN)
        for e in doc["entries"]:
            for r in e["regimes"].values():
                r["base_latency_ms"] /= 1.5
        (rd2 / "profile_topN.json").write_text(json.dumps(doc))
        for d in (rd, rd2):
            code, _, err = R.cli(["analyze", str(d), "-q"])
            assert code == 0, err
        _TWO["root"] = base
    shutil.copytree(_TWO["root"], work / "run")
    # the artifacts name their inputs by absolute path: point them at this copy
    for d in ("round_1", "round_2"):
        p = work / "run" / "profile" / d / "profile_roofline.json"
        p.write_text(p.read_text().replace(str(_TWO["root"]), str(work / "run")))
    return work / "run" / "profile" / "round_1", work / "run" / "profile" / "round_2"


def _set(doc, path, value) -> bool:
    cur = doc
    for k in path[:-1]:
        if isinstance(cur, dict) and k in cur or isinstance(cur, list) and isinstance(k, int) and k < len(cur):
            cur = cur[k]
        else:
            return False
    if isinstance(cur, dict) or isinstance(cur, list) and isinstance(path[-1], int) and path[-1] < len(cur):
        cur[path[-1]] = value
        return True
    return False


def _compare(case: CmdCase, work: Path) -> list[str]:
    a, b = _two_rounds(work)
    what = f"compare [{case.label}]"
    f = b / ("profile_topN.json" if case.args["which"] == "topn" else "profile_roofline.json")
    doc = json.loads(f.read_text())
    _set(doc, case.args["path"], case.args["value"])
    f.write_bytes(R._dumps(doc))
    kb = work / "kb"
    args = ["compare", str(a), str(b), "--playbook-dir", str(kb), "--format", "json"]
    if case.args["e2e"]:
        args += ["--e2e-delta-pct", case.args["e2e"]]
    code, out, err = R.cli(args)
    v = R._cli_violations(code, out, err, what)
    recs = [json.loads(x) for x in (kb / "backend_playbook.jsonl").read_text().splitlines()] \
        if (kb / "backend_playbook.jsonl").exists() else []
    if code == 2 and recs:
        v.append(f"contract: {what}: refused, yet {len(recs)} playbook record(s) written")
    if case.args["e2e"] and not _finite_text(case.args["e2e"]) and code == 0:
        v.append(f"wrong accept: {what}: --e2e-delta-pct {case.args['e2e']} accepted")
    rows = {r["kernel"]: r for r in json.loads(out)["kernels"]} if code == 0 and out.lstrip().startswith("{") else {}
    for r in recs:
        s = r.get("measured_inrun_speedup")
        if not (isinstance(s, (int, float)) and math.isfinite(s) and s > 0):
            v.append(f"contract: {what}: a playbook record with measured_inrun_speedup {s!r}")
        row = rows.get(r.get("kernel"))
        if row is None or row.get("status") != "both" or not row.get("step_ms_a") or not row.get("step_ms_b"):
            v.append(f"contract: {what}: a record of {str(r.get('kernel'))[:40]} without a usable time in both rounds")
    return v


def _finite_text(text: str) -> bool:
    """The oracle of a number flag: an ASCII decimal literal of a finite number."""
    try:
        return text.isascii() and "_" not in text and math.isfinite(float(text))
    except ValueError:
        return False


def _dispatch(case: CmdCase, work: Path) -> list[str]:
    a, _ = _two_rounds(work)
    what = f"dispatch [{case.label}]"
    f = work / "dispatch.json"
    how = case.args["how"]
    if how == "fifo":
        os.mkfifo(f)
    elif how == "dev_zero":
        f.symlink_to("/dev/zero")
    elif how == "directory":
        f.mkdir()
    else:
        f.write_bytes(case.args["content"])
    before = (a / "profile_roofline.json").read_bytes()
    code, out, err = R.cli(["rerun", str(a), "--dispatch", str(f)])
    v = R._cli_violations(code, out, err, what)
    if code == 0:
        v.append(f"wrong accept: {what}: rerun without a GPU exited 0")
    if (a / "profile_roofline.json").read_bytes() != before:
        v.append(f"contract: {what}: the artifact changed")
    return v
