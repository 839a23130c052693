"""The real-trace mutation campaign's engine (issue 34, item 6), shared by
tests/test_reliability_real_traces.py (the quick CI part) and benchmarks/real_trace_campaign.py (all
of it).

A case = one REAL profiler trace of the fixtures (fixtures/corpus/*.json.gz, fixtures/traces*/),
damaged the way real traces get damaged, then `roofline topn` + `roofline analyze` (the CLI, in this
process: tests/reliability.py's `cli`) on the original and on the damaged copy, and every head
kernel's numbers compared. The mutations work on the trace's bytes, item by item (Kineto writes one
event per "\\n  {"), so the damaged file keeps the profiler's own layout and goes through the same
reader as the original (the fast path), unless the damage itself changes the layout.

Mutation classes (MUTATIONS): truncated mid-event (plain and gzip), kernel events duplicated, events
out of order, External id / correlation links removed, a second device, a second stream, GPU clock
offsets (every GPU-side event shifted, or the kernels alone shifted against their step ranges), an
older profiler's field names (Kineto before torch 1.9: cat "Kernel" / "Runtime" / "Memcpy" /
"Memset", cpu ops as "Operator", a lowercase "external id").

Each case is classified:

* error: topn or analyze exited 2 with ONE line on stderr that names the file;
* identical: every head kernel's numbers equal the undamaged trace's (rel 1e-6);
* degraded: some differ, and every differing kernel says why: its entry has no confident verdict
  (headroom_class unknown / not modeled), or a note (the entry's, or the Top-N's) that the
  undamaged run did not have (notes compared with their numbers blanked);
* silent: a kernel's numbers differ and nothing says why. The campaign's figure: 0.
A refusal that is not one line naming the file, a traceback or another exit code is "bad error".
"""
from __future__ import annotations

import gzip
import json
import math
import random
import re
import tempfile
from pathlib import Path

import reliability as R

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures"
CORPUS = FIX / "corpus"
META = json.loads((CORPUS / "corpus_meta.json").read_text())["cases"]
# the numbers compared, per head entry and per regime verdict
FIELDS = ("pct_gpu_time", "regime_pct_gpu_time", "bytes_est", "roofline_pct", "headroom_class", "t_ms", "launches_per_step",
          "expected_e2e_gain_pct", "bound_type", "regime")
REL = 1e-6


# ------------------------------------------------------------------------------------ the traces
def traces() -> list[Path]:
    """Every real trace of the fixtures (the corpus, traces/, traces_real/)."""
    return (sorted(t for t in CORPUS.glob("*.json.gz") if t.name[:-len(".json.gz")] in META) + sorted((FIX / "traces").glob("*.json.gz"))
            + sorted((FIX / "traces_real").glob("*.json.gz")))


def topn_args(trace: Path) -> list[str]:
    """The topn options a user would give this trace (the corpus's workload and config)."""
    case = trace.name[:-len(".json.gz")]
    if trace.parent == CORPUS and case in META:
        m = META[case]
        d, p = m["decode"], m["prefill"]
        return ["--isl", str(p["tokens_per_seq"]), "--osl", str(max(d["steps"], 1)),
                "--conc", str(d["batch"] if d["steps"] else p["batch"]),
                "--config", str(CORPUS / "configs" / f"{case}.json")]
    if trace.parent.name == "traces_real":
        return ["--config", str(trace.parent / "config.json")]
    return []


class Items:
    """A Kineto-layout trace split into its traceEvents items (bytes, without the separators) and
    the decoded events beside them; `join` writes a list of items back in the same layout."""

    def __init__(self, text: bytes):
        starts = [m.start() + 3 for m in re.finditer(rb"\n  \{", text)]
        head_end = text.find(b"[", text.find(b'"traceEvents"')) + 1
        starts = [s for s in starts if s > head_end]
        self.head = text[:starts[0]]
        bodies = []
        for a, b in zip(starts, starts[1:]):
            chunk = text[a:b - 3].rstrip()
            assert chunk.endswith(b","), chunk[-40:]
            bodies.append(chunk[:-1])
        last_txt = text[starts[-1]:].decode()
        _, end = json.JSONDecoder().raw_decode(last_txt)
        bodies.append(last_txt[:end].encode())
        self.tail = last_txt[end:].encode()
        self.bodies = bodies
        self.events = [json.loads(b) for b in bodies]
        self.sep = b",\n  "
        assert self.join(bodies) == text, "the split does not round-trip"

    def join(self, bodies) -> bytes:
        return self.head + self.sep.join(bodies) + self.tail

    def idx(self, *cats) -> list[int]:
        return [i for i, e in enumerate(self.events) if e.get("cat") in cats]


_ITEMS: dict = {}


def items_of(trace: Path) -> Items:
    if trace not in _ITEMS:
        _ITEMS.clear()   # one trace at a time in memory
        _ITEMS[trace] = Items(gzip.decompress(trace.read_bytes()))
    return _ITEMS[trace]


# ------------------------------------------------------------------------------------- mutations
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")


def _sub_num(body: bytes, key: bytes, f) -> bytes:
    """Replace the number after `"key": ` by f(number) (first occurrence)."""
    rx = re.compile(rb'("' + key + rb'": )(-?[0-9][0-9.eE+-]*)')
    return rx.sub(lambda m: m.group(1) + f(m.group(2)), body, count=1)


def _shift(dt_us: float):
    def f(raw: bytes) -> bytes:
        return repr(round(float(raw) + dt_us, 3)).encode()
    return f


def _drop_key(body: bytes, key: bytes) -> bytes:
    body = re.sub(rb'"' + key + rb'": -?\d+,[ \t]*', b"", body)
    return re.sub(rb',[ \t\n]*"' + key + rb'": -?\d+', b"", body)


def m_truncate(it: Items, rng, frac: float, gz: bool = False):
    """Cut the file in the middle of the kernel item nearest `frac` of the way through."""
    ks = it.idx("kernel")
    k = ks[min(len(ks) - 1, int(frac * len(ks)))]
    bodies = it.bodies[:k + 1]
    text = it.join(bodies)
    text = text[:len(text) - len(bodies[-1]) // 2]
    return (gzip.compress(text, 1) if gz else text), gz


def m_truncate_gzip_stream(it: Items, rng, frac: float):
    data = gzip.compress(it.join(it.bodies), 1)
    return data[:int(len(data) * frac)], True


def m_duplicate(it: Items, rng, share: float):
    """Kernel events written twice (a merge of two exports, a profiler flushing a buffer twice)."""
    ks = set(rng.sample(it.idx("kernel"), max(1, int(share * len(it.idx("kernel"))))))
    out = []
    for i, b in enumerate(it.bodies):
        out.append(b)
        if i in ks:
            out.append(b)
    return it.join(out), False


def m_order(it: Items, rng, how: str):
    """Events out of order: all shuffled, the list reversed, or the kernels alone shuffled."""
    bodies = list(it.bodies)
    if how == "shuffle":
        rng.shuffle(bodies)
    elif how == "reverse":
        bodies.reverse()
    else:
        ks = it.idx("kernel")
        perm = list(ks)
        rng.shuffle(perm)
        for a, b in zip(ks, perm):
            bodies[a] = it.bodies[b]
    return it.join(bodies), False


def m_unlink(it: Items, rng, what: str, share: float = 1.0):
    """Links removed: the kernels' External id (the launch still links), External id on kernels AND
    launches, or the kernels' correlation; on all kernels or a share of them."""
    bodies = list(it.bodies)
    ks = it.idx("kernel")
    chosen = set(ks if share >= 1 else rng.sample(ks, int(share * len(ks))))
    corr = {it.events[i]["args"].get("correlation") for i in chosen}
    for i in ks:
        if i in chosen:
            key = b"correlation" if what == "corr" else b"External id"
            bodies[i] = _drop_key(bodies[i], key)
    if what == "ext_all":
        for i in it.idx("cuda_runtime", "cuda_driver"):
            if (it.events[i].get("args") or {}).get("correlation") in corr:
                bodies[i] = _drop_key(bodies[i], b"External id")
    return it.join(bodies), False


def m_device(it: Items, rng, how: str):
    """A second device: every kernel also ran on device 1 (a copy), or the kernels of every other
    step / every other kernel name moved to device 1."""
    bodies = list(it.bodies)
    ks = it.idx("kernel")

    def to_dev1(b: bytes) -> bytes:
        b = _sub_num(b, b"device", lambda r: b"1")
        return _sub_num(b, b"pid", lambda r: b"1")

    if how == "copy":
        extra = [to_dev1(bodies[i]) for i in ks]
        return it.join(bodies + extra), False
    names = sorted({it.events[i]["name"] for i in ks})
    moved = set(names[::2])
    for j, i in enumerate(ks):
        if (how == "half" and j % 2) or (how == "names" and it.events[i]["name"] in moved):
            bodies[i] = to_dev1(bodies[i])
    return it.join(bodies), False


def m_stream(it: Items, rng, how: str):
    """A second stream: every other kernel moved to stream 21 (same times), or one kernel name's
    launches moved there and overlapping the others."""
    bodies = list(it.bodies)
    ks = it.idx("kernel")
    for j, i in enumerate(ks):
        if j % 2:
            b = _sub_num(bodies[i], b"stream", lambda r: b"21")
            bodies[i] = _sub_num(b, b"tid", lambda r: b"21")
    return it.join(bodies), False


def m_clock(it: Items, rng, what: str, dt_us: float):
    """GPU clock offsets: every GPU-side event (kernels, memcpy/memset, GPU step ranges) shifted by
    dt against the CPU's, or the kernels alone (their GPU step ranges kept)."""
    bodies = list(it.bodies)
    cats = GPU_CATS if what == "gpu" else ("kernel",)
    if dt_us == 0:   # half the median GPU step range: kernels cross into the neighbouring step
        rs = [e["dur"] for e in it.events if e.get("cat") == "gpu_user_annotation"]
        dt_us = (sorted(rs)[len(rs) // 2] / 2) if rs else 1000.0
    for i in it.idx(*cats):
        bodies[i] = _sub_num(bodies[i], b"ts", _shift(dt_us))
    return it.join(bodies), False


OLD_CATS = {b"kernel": b"Kernel", b"cuda_runtime": b"Runtime", b"gpu_memcpy": b"Memcpy",
            b"gpu_memset": b"Memset", b"cpu_op": b"Operator"}


def m_old_names(it: Items, rng, what: str):
    """An older profiler's spellings (Kineto of torch 1.8): "all" = cat Kernel / Runtime / Memcpy /
    Memset / Operator and a lowercase "external id" on kernels and launches; "ext" = only the
    lowercase "external id"; "operator" = only cpu ops as "Operator"."""
    bodies = list(it.bodies)
    for i, e in enumerate(it.events):
        cat = (e.get("cat") or "").encode()
        b = bodies[i]
        if what in ("all", "ext") and cat in (b"kernel", b"cuda_runtime", b"gpu_memcpy", b"gpu_memset"):
            b = b.replace(b'"External id"', b'"external id"', 1)
        if (what == "all" and cat in OLD_CATS) or (what == "operator" and cat == b"cpu_op"):
            b = b.replace(b'"cat": "' + cat + b'"', b'"cat": "' + OLD_CATS[cat] + b'"', 1)
        bodies[i] = b
    return it.join(bodies), False


# class -> [(label, function, args)]
MUTATIONS = {
    "truncated": [("mid-event at 30%", m_truncate, (0.3,)), ("mid-event at 90%", m_truncate, (0.9,)),
                  ("mid-event at 99%, gzip", m_truncate, (0.99, True)),
                  ("gzip stream cut at 97%", m_truncate_gzip_stream, (0.97,))],
    "duplicated": [("one kernel event twice", m_duplicate, (0.0,)), ("10% of kernel events twice", m_duplicate, (0.1,)),
                   ("every kernel event twice", m_duplicate, (1.0,))],
    "out of order": [("all events shuffled", m_order, ("shuffle",)), ("list reversed", m_order, ("reverse",)),
                     ("kernels shuffled", m_order, ("kernels",))],
    "unlinked": [("kernels' External id removed", m_unlink, ("ext",)),
                 ("External id removed from kernels and launches", m_unlink, ("ext_all",)),
                 ("External id removed from half the kernels and their launches", m_unlink, ("ext_all", 0.5)),
                 ("kernels' correlation removed", m_unlink, ("corr",))],
    "second device": [("all kernels copied to device 1", m_device, ("copy",)),
                      ("every other kernel on device 1", m_device, ("half",)),
                      ("every other kernel name on device 1", m_device, ("names",))],
    "second stream": [("every other kernel on stream 21", m_stream, ("half",))],
    "clock offset": [("GPU events +2.5 ms", m_clock, ("gpu", 2500.0)), ("GPU events -1 s", m_clock, ("gpu", -1e6)),
                     ("kernels alone +half a step", m_clock, ("kernel", 0.0)),
                     ("kernels alone -1 s", m_clock, ("kernel", -1e6))],
    "older field names": [("torch 1.8 spellings", m_old_names, ("all",)),
                          ("lowercase external id", m_old_names, ("ext",)),
                          ("cpu ops as Operator", m_old_names, ("operator",))],
}


def all_cases(trace_list=None) -> list[tuple[Path, str, str]]:
    return [(t, cls, label) for t in (trace_list or traces()) for cls, ms in MUTATIONS.items() for label, _, _ in ms]


# ---------------------------------------------------------------------------------------- running
def _run(src: Path, trace: Path, work: Path):
    """topn + analyze through the CLI: ("error", one-line message) | ("bad error", why) | ("ok", (topn, art))."""
    o = work / "profile_topN.json"
    code, _, err = R.cli(["topn", str(src), "-o", str(o), "-q", "--force", *topn_args(trace)])
    if code != 0:
        return _refusal(code, err, src, "topn")
    code, out, err = R.cli(["analyze", str(o), "--format", "json", "--no-write"])
    if code != 0:
        return _refusal(code, err, o, "analyze")
    return "ok", (json.loads(o.read_text()), json.loads(out))


def _refusal(code: int, err: str, src: Path, what: str):
    lines = [ln for ln in err.splitlines() if ln.strip()]
    if code != 2 or len(lines) != 1 or "Traceback" in err:
        return "bad error", f"{what}: exit {code}, {len(lines)} stderr lines: {err.strip()[:300]!r}"
    if src.name not in lines[0]:
        return "bad error", f"{what}: the error does not name the file: {lines[0][:200]!r}"
    return "error", lines[0]


def _blank(s: str) -> str:
    """The note with its numbers blanked, and a list of numbers one blank (a note that only lists one
    more or one fewer number, "(4, 4, 2)" -> "(4, 4)", is the same note)."""
    return re.sub(r"#(?:[\s,x]*#)+", "#", re.sub(r"-?\d[\d.]*(?:e[+-]?\d+)?", "#", s))


def _note_set(d: dict) -> set:
    out = set()
    for k, v in d.items():
        if isinstance(v, str) and ("note" in k or k in ("shape_unknown", "reason", "degraded_reason")):
            out |= {_blank(p.strip()) for p in v.split("; ")}
        elif k == "notes" and isinstance(v, list):
            out |= {_blank(str(p)) for p in v}
    return out


def records(topn: dict, art: dict) -> dict:
    """(kernel, regime or '') -> (numbers, notes, confident) of every head entry and regime verdict."""
    tnotes = {e.get("name"): _note_set(e) for e in topn.get("entries", [])}
    out = {}
    degraded = {d.get("name") for d in art.get("degraded") or [] if isinstance(d, dict)}
    for e in art.get("entries", []):
        name = e.get("name")
        for v in [e] + [x for x in e.get("regime_verdicts") or [] if x is not e]:
            key = (name, "" if v is e else v.get("regime"))
            conf = (v.get("modeled") is not False and v.get("headroom_class") not in (None, "unknown")
                    and name not in degraded)
            out[key] = ({f: v.get(f) for f in FIELDS}, _note_set(e) | _note_set(v) | tnotes.get(name, set()), conf)
    return out


def _same(a, b) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return math.isclose(a, b, rel_tol=REL, abs_tol=1e-9)
    return a == b


_BASE: dict = {}


def baseline(trace: Path):
    if trace not in _BASE:
        with tempfile.TemporaryDirectory(prefix="roofline-mut-") as t:
            kind, res = _run(trace, trace, Path(t))
        assert kind == "ok", f"{trace}: the undamaged trace does not analyse: {res}"
        topn, art = res
        _BASE[trace] = (records(topn, art), {_blank(n) for n in topn.get("notes", [])})
    return _BASE[trace]


def run_case(trace: Path, cls: str, label: str, seed: int = 0) -> dict:
    """One case -> {"outcome": error|identical|degraded|silent|bad error, "detail": ...}."""
    fn, args = next((f, a) for lb, f, a in MUTATIONS[cls] if lb == label)
    base, base_notes = baseline(trace)
    data, gz = fn(items_of(trace), random.Random(seed), *args)
    with tempfile.TemporaryDirectory(prefix="roofline-mut-") as t:
        src = Path(t) / ("trace.json.gz" if gz else "trace.json")
        src.write_bytes(data)
        kind, res = _run(src, trace, Path(t))
    if kind != "ok":
        return {"outcome": kind, "detail": res}
    topn, art = res
    got = records(topn, art)
    new_global = {_blank(n) for n in topn.get("notes", [])} - base_notes
    diffs, silent = [], []
    for key in sorted(set(base) | set(got), key=str):
        b, g = base.get(key), got.get(key)
        if b is not None and g is not None and all(_same(b[0][f], g[0][f]) for f in FIELDS):
            continue
        why = []
        if g is None:   # it left the head (its share moved), or its entry lost a regime verdict
            line = f"{key[0][:60]!r}{'/' + key[1] if key[1] else ''}: no longer a head entry"
            main = got.get((key[0], ""))
            if key[1] and main is not None and (not main[2] or (base.get((key[0], "")) or (0, set()))[1] != main[1]):
                why.append("its entry: " + ("no confident verdict" if not main[2] else "a new note"))
            if new_global:
                why.append("Top-N note: " + sorted(new_global)[0][:120])
            (diffs if why else silent).append(line + (f" [{why[0]}]" if why else ""))
            continue
        if not g[2]:
            why.append("no confident verdict")
        if b is not None and g[1] - b[1]:
            why.append("entry note: " + sorted(g[1] - b[1])[0][:120])
        if new_global:
            why.append("Top-N note: " + sorted(new_global)[0][:120])
        fields = [f for f in FIELDS if b is None or not _same(b[0][f], g[0][f])]
        line = f"{key[0][:60]!r}{'/' + key[1] if key[1] else ''}: " + ", ".join(
            f"{f} {None if b is None else b[0][f]!r} -> {g[0][f]!r}" for f in fields[:3])
        (diffs if why else silent).append(line + (f" [{why[0]}]" if why else ""))
    if silent:
        return {"outcome": "silent", "detail": silent}
    return {"outcome": "degraded" if diffs else "identical", "detail": diffs}
