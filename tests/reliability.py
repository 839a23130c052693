"""The reliability campaign's engine (issue 17), shared by tests/test_reliability_campaign.py (the
CI-sized run) and benchmarks/reliability_campaign.py (the long run).

A case = one input file of the tool, mutated (type, value, structure, size, encoding), or replaced
by a special file (FIFO, /dev/zero, a directory, ...) or a gzip bomb, put where the tool reads it;
then the entry points that read that file run, and every invariant is checked:

* crash: `hook.run` raised or returned something else than None/dict; the CLI printed a
  traceback, an "internal error" (the CLI's last net caught a bug), more than one line on stderr
  when it failed, or exited with a code other than 0 / 2;
* hang: a case ran past its time limit (SIGALRM);
* wrong accept: a mutation that must be refused (a wrong type where a number belongs, a kernel
  event with a string duration, ...) was accepted (exit 0 / an artifact with entries), an entry
  with an impossible value got a verdict, or an infeasible ratio (roofline_pct_raw outside
  [SUSPECT_LOW, 1]) got a headroom class;
* data loss: the hook's artifact pair is not schema-valid, not a pair (the markdown is not the
  rendering of the JSON beside it), a temporary file stayed behind, or a good previous artifact
  was replaced by a refused run.
Memory is bounded by the limits in roofline/io/safeio.py; the long run reports the peak RSS.

Generation is hypothesis strategies (one per input kind); `run_case` returns the violations (an
empty list when every invariant holds) so that the long run can count them instead of stopping.
"""
from __future__ import annotations

import contextlib
import copy
import csv
import gzip
import io
import json
import math
import os
import re
import shutil
import signal
import socket
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures"
EXAMPLE = ROOT / "roofline" / "data" / "example"

BASE_TOPN = json.loads((FIX / "hook" / "round_b_topN.json").read_text())
BASE_ENV = json.loads((FIX / "hook" / "env_report.json").read_text())
BASE_CONFIG = json.loads((EXAMPLE / "config.json").read_text())
BASE_PEAKS_TEXT = (ROOT / "peaks" / "h200.yaml").read_text()
BASE_TRACE_TEXT = gzip.decompress((FIX / "traces" / "prefill.json.gz").read_bytes())   # Kineto layout
BASE_TRACE_COMPACT = json.dumps(json.loads(BASE_TRACE_TEXT)).encode()                  # one line: ijson
BASE_NCU_TOPN_CSV = (FIX / "ncu_topn" / "small_raw.csv").read_bytes()
BASE_NCU_COUNTERS_CSV = (FIX / "ncu" / "known_raw.csv").read_bytes()
BASE_ROCPROF_CSV = (FIX / "rocprof" / "gemm_synthesized.csv").read_bytes()
BASE_NCU_REP_GZ = (FIX / "ncu_topn" / "small.ncu-rep.gz").read_bytes()

SPECIALS = ("fifo", "dev_zero", "dev_urandom", "directory", "socket", "broken_symlink", "missing", "empty")


# ------------------------------------------------------------------------------------------ cases
@dataclass
class Case:
    kind: str                   # which input: topn env config peaks trace_fast trace_compact ncu_csv ...
    label: str                  # what was done to it (for the report)
    content: bytes | None       # the file's bytes, or None for a special file
    special: str | None = None  # one of SPECIALS
    expect: str = "any"         # "any" | "refuse" | "no_verdict"
    entry: str | None = None    # for "no_verdict": the entry that must get no verdict
    prior_artifact: bool = False  # seed a good artifact first (checks that nothing good is lost)
    extra: dict = field(default_factory=dict)

    def __repr__(self) -> str:  # hypothesis prints this for a failing case
        return f"Case({self.kind}, {self.label!r}, expect={self.expect}, {len(self.content or b'')} bytes)"


def _paths(doc, prefix=()):
    """Every (path, value) of a JSON document, containers included."""
    out = [(prefix, doc)]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, prefix + (i,))
    return out


def _set(doc, path, value):
    d = doc
    for k in path[:-1]:
        d = d[k]
    d[path[-1]] = value


def _delete(doc, path):
    d = doc
    for k in path[:-1]:
        d = d[k]
    del d[path[-1]]


def _dumps(doc) -> bytes:
    return json.dumps(doc, indent=1, allow_nan=True).encode()


NONFINITE = (float("nan"), float("inf"), float("-inf"))


def _wrong_types(v):
    """Values of another JSON type than v (a number's string, a bool, null, a list, an object)."""
    out = [str(v), True, False, None, [v], {"value": v}, ""]
    if isinstance(v, str):
        out = [1, 64.0, True, None, [v], {"value": v}]
    if isinstance(v, bool):
        out = ["true", 1, 0, None, [v]]
    return out


# Top-N: which fields are numbers / strings / bools, and whether null means "absent"
# (docs/input_policy.md: a problem of the file refuses it; any bad value inside one entry degrades
# that entry, so it must get no verdict; a field nothing reads is ignored)
_TOPN_TOP_NUM = {"total_gpu_time_ms": False, "schema_version": False, "round": False}
_DIMS = {"M", "N", "K", "E", "top_k", "hidden", "inter", "batch", "seq_len", "n_q_heads", "n_kv_heads",
         "head_dim", "elems_in", "elems_out"}
_ENTRY_OPTIONAL = ("short_name", "classification", "editable", "dtypes", "est_shape", "shapes")


def _topn_type_expect(path, new) -> str:
    """'refuse' / 'no_verdict' / 'any' when `new` (of a wrong type) is put at `path`."""
    p = [k for k in path if not isinstance(k, int)]
    if not p:
        return "refuse"                            # the top level is not an object
    if tuple(path) == ("entries",):
        # no entries array; an array of other things is one (each element that is no object degrades)
        return "any" if isinstance(new, list) else "refuse"
    if len(p) == 1 and p[0] in _TOPN_TOP_NUM:
        return "refuse"
    if p[:1] == ["serving"] and len(p) == 1:
        return "any" if new is None or isinstance(new, dict) else "refuse"
    if p[:1] == ["serving"] and len(p) == 2 and p[1] in ("n_decode_steps", "n_prefill_steps"):
        return "refuse"
    if p[:1] != ["entries"] or len(path) < 2:
        return "any"
    rest = p[1:]
    if not rest:
        return "no_verdict"                        # an entry that is not an object
    f = rest[0]
    if f in ("name", "pct_gpu_time", "regimes", "launches_per_logical_op") and len(rest) == 1:
        return "no_verdict"
    if f == "regimes" and len(rest) >= 2 and rest[1] in ("decode", "prefill"):
        return "no_verdict" if len(rest) == 2 or rest[2] in ("base_latency_ms", "launches_per_step") else "any"
    if f in ("est_shape", "shapes") and len(rest) == 1 and (isinstance(new, dict) and f == "est_shape"):
        return "any"                               # an object is the right type
    if f == "shapes" and len(rest) == 1 and isinstance(path[-1], int):
        return "any" if isinstance(new, dict) else "no_verdict"  # shapes[j] must be an object
    if f in _ENTRY_OPTIONAL and len(rest) == 1:
        return "any" if new is None else "no_verdict"
    if f in ("shapes", "est_shape") and len(rest) == 2 and rest[1] in _DIMS:
        return "no_verdict"                        # a number is never null, never a string
    if f in ("shapes", "est_shape") and len(rest) == 2 and rest[1] in ("paged", "causal"):
        return "any" if new is None else "no_verdict"
    if f == "dtypes" and len(rest) == 2:
        return "any" if new is None else "no_verdict"
    return "any"


@st.composite
def json_mutation(draw, base, type_expect, numeric_expect=None, sizes=(100, 2000, 20000)):
    """(label, bytes, expect, entry) from mutating the JSON document `base`."""
    doc = copy.deepcopy(base)
    op = draw(st.sampled_from(["type", "type", "value", "delete", "add_key", "truncate", "encoding",
                               "size", "nest", "top_type", "bytes"]))
    paths = [p for p, _ in _paths(doc) if p]
    if op in ("type", "value", "delete") and not paths:
        op = "truncate"
    if op == "type":
        path = draw(st.sampled_from(paths))
        d = doc
        for k in path:
            d = d[k]
        new = draw(st.sampled_from(_wrong_types(d)))
        _set(doc, path, new)
        exp = type_expect(path, new) if type_expect else "any"
        return f"type {'.'.join(map(str, path))} -> {new!r}"[:160], _dumps(doc), exp, _entry_of(base, path)
    if op == "value":
        nums = [p for p, v in _paths(doc) if p and isinstance(v, (int, float)) and not isinstance(v, bool)]
        if not nums:
            return "value (none)", _dumps(doc), "any", None
        path = draw(st.sampled_from(nums))
        new = draw(st.sampled_from([0, -1, -0.5, 1e-300, 1e308, 10 ** 30, 2 ** 63, 101, 1e-9, *NONFINITE]))
        _set(doc, path, new)
        # NaN / Infinity are not JSON, but Python writes them: judged by the rule of their field
        exp = numeric_expect(path, new) if numeric_expect else "any"
        return f"value {'.'.join(map(str, path))} -> {new!r}", _dumps(doc), exp, _entry_of(base, path)
    if op == "delete":
        path = draw(st.sampled_from(paths))
        _delete(doc, path)
        return f"delete {'.'.join(map(str, path))}", _dumps(doc), "any", None
    if op == "add_key":
        objs = [p for p, v in _paths(doc) if isinstance(v, dict)]
        path = draw(st.sampled_from(objs))
        d = doc
        for k in path:
            d = d[k]
        d[draw(st.sampled_from(["zzz_unknown", "", "\u00e9\u4e2d", "a" * 300]))] = draw(
            st.sampled_from([1, "x", None, [], {}, True]))
        return f"add key under {'.'.join(map(str, path)) or '(top)'}", _dumps(doc), "any", None
    text = _dumps(doc)
    if op == "truncate":
        n = draw(st.integers(0, max(len(text) - 1, 0)))
        return f"truncate at {n}", text[:n], "refuse", None
    if op == "encoding":
        enc = draw(st.sampled_from(["utf-16", "utf-32", "latin-1-bytes", "bom", "nul", "invalid-utf8", "cr"]))
        if enc in ("utf-16", "utf-32"):
            return f"encoding {enc}", text.decode().encode(enc), "refuse", None
        if enc == "bom":
            return "encoding utf-8 BOM", b"\xef\xbb\xbf" + text, "any", None
        if enc == "cr":
            return "encoding CRLF", text.replace(b"\n", b"\r\n"), "any", None
        at = draw(st.integers(0, max(len(text) - 1, 0)))
        junk = {"latin-1-bytes": b"\xe9\xe8", "nul": b"\x00", "invalid-utf8": b"\xff\xfe\xc3"}[enc]
        return f"encoding {enc} at {at}", text[:at] + junk + text[at:], "any", None
    if op == "size":
        n = draw(st.sampled_from(list(sizes)))
        if isinstance(doc, dict) and isinstance(doc.get("entries"), list) and doc["entries"]:
            e = doc["entries"][-1]
            extra = []
            for i in range(n):
                x = copy.deepcopy(e)
                x["name"] = f"{x.get('name')}_{i}"
                if isinstance(x.get("pct_gpu_time"), (int, float)):
                    x["pct_gpu_time"] = 1e-4
                extra.append(x)
            doc["entries"] += extra
            return f"size +{n} entries", _dumps(doc), "any", None
        doc["zzz_padding"] = ["x" * 100] * n
        return f"size +{n} padding strings", _dumps(doc), "any", None
    if op == "nest":
        depth = draw(st.sampled_from([50, 1000, 100000, 2000000]))
        obj = draw(st.sampled_from([b"[", b'{"a":']))
        close = b"]" if obj == b"[" else b"}"
        inner = obj * depth + b"1" + close * depth
        if isinstance(doc, dict):
            body = text.rstrip()[:-1] + b', "zzz_deep": ' + inner + b"}"
        else:
            body = inner
        return f"nest {obj.decode()} x{depth}", body, ("refuse" if depth > 1000 else "any"), None
    if op == "top_type":
        new = draw(st.sampled_from([[], [doc], "x", 1, None, True]))
        return f"top level -> {type(new).__name__}", _dumps(new), "refuse", None
    # random bytes spliced in
    at = draw(st.integers(0, max(len(text) - 1, 0)))
    junk = draw(st.binary(min_size=1, max_size=16))
    return f"bytes {junk!r} at {at}", text[:at] + junk + text[at + len(junk):], "any", None


def _entry_of(base, path):
    if len(path) >= 2 and path[0] == "entries" and isinstance(path[1], int) and isinstance(base, dict):
        try:
            return base["entries"][path[1]].get("name")
        except (IndexError, AttributeError, KeyError):
            return None
    return None


def _fin(x) -> bool:
    return math.isfinite(x)


def _topn_value_expect(path, new) -> str:
    p = [k for k in path if not isinstance(k, int)]
    if p[:1] == ["entries"] and len(p) >= 2:
        f = p[1]
        bad_pct = f == "pct_gpu_time" and not (_fin(new) and 0 <= new <= 100)
        bad_lat = f == "regimes" and p[-1] == "base_latency_ms" and not (_fin(new) and 1e-6 <= new <= 1e9)
        bad_lps = f == "regimes" and p[-1] == "launches_per_step" and not (_fin(new) and 0 < new <= 2 ** 48)
        bad_dim = f in ("shapes", "est_shape") and (p[-1] in _DIMS or p[-1] == "shape") and not (
            _fin(new) and 0 < new <= 2 ** 48)
        bad_lpl = f == "launches_per_logical_op" and not (_fin(new) and 1 <= new <= 2 ** 48 and new == int(new))
        if bad_pct or bad_lat or bad_lps or bad_dim or bad_lpl:
            return "no_verdict"
        if f == "pct_gpu_time":
            return "any"  # may push the sum over 100 (refused) or not
    if p in (["serving", "n_decode_steps"], ["serving", "n_prefill_steps"]):
        return "any" if _fin(new) and 0 <= new <= 2 ** 48 else "refuse"
    if p == ["total_gpu_time_ms"]:
        return "any" if _fin(new) and new >= 0 else "refuse"
    if p in (["schema_version"], ["round"]):
        return "any" if _fin(new) and new == int(new) and 0 <= new <= 2 ** 48 else "refuse"
    return "any"


def _env_type_expect(path, new) -> str:
    p = [k for k in path if not isinstance(k, int)]
    if not p:
        return "refuse"
    if p == ["workload"] and isinstance(new, dict):
        return "any"   # an object without isl/osl/conc: the fields are left out (docs/env_report.md), not wrong
    if p in (["gfx"], ["model_dtype"], ["model_arch_class"], ["workload"], ["workload", "isl"],
             ["workload", "osl"], ["workload", "conc"]):
        return "refuse"
    if p in (["gpu_name"], ["kv_cache_dtype"], ["tp"]):
        return "any" if new is None else "refuse"
    return "any"


def _env_value_expect(path, new) -> str:
    p = [k for k in path if not isinstance(k, int)]
    if p[:1] == ["workload"] and len(p) == 2 and p[1] in ("isl", "osl", "conc") and not (
            _fin(new) and 0 < new <= 2 ** 48):
        return "refuse"
    if p == ["tp"] and not (_fin(new) and float(new).is_integer() and 1 <= new <= 2 ** 48):
        return "refuse"         # the tensor-parallel degree: an integer >= 1
    return "any"


CONFIG_INT_KEYS = {"num_experts", "num_local_experts", "n_routed_experts", "num_experts_per_tok", "moe_topk",
                   "top_k", "hidden_size", "d_model", "moe_intermediate_size", "expert_intermediate_size",
                   "num_attention_heads", "n_head", "num_key_value_heads", "num_kv_heads", "head_dim"}


def _config_type_expect(path, new) -> str:
    p = [k for k in path if not isinstance(k, int)]
    if not p:
        return "refuse"
    key = p[-1]
    in_tc = p[:1] == ["text_config"] and len(p) == 2
    top = len(p) == 1
    if key in CONFIG_INT_KEYS and (in_tc or (top and key not in BASE_CONFIG.get("text_config", {}))):
        return "any" if new is None else "refuse"
    return "any"


def _config_value_expect(path, new) -> str:
    p = [k for k in path if not isinstance(k, int)]
    key = p[-1] if p else None
    in_tc = p[:1] == ["text_config"] and len(p) == 2
    if key in CONFIG_INT_KEYS and in_tc and (not _fin(new) or not 0 <= new <= 2 ** 48 or
                                             (isinstance(new, float) and not new.is_integer())):
        return "refuse"
    return "any"


def _special_or(draw, kind, base_bytes_strategy):
    if draw(st.integers(0, 9)) == 0:
        sp = draw(st.sampled_from(SPECIALS))
        exp = "refuse"
        return Case(kind, f"special {sp}", None, special=sp, expect=exp)
    return None


@st.composite
def topn_cases(draw):
    c = _special_or(draw, "topn", None)
    if c is None:
        label, data, exp, ent = draw(json_mutation(BASE_TOPN, _topn_type_expect, _topn_value_expect))
        c = Case("topn", label, data, expect=exp, entry=ent)
    c.prior_artifact = draw(st.booleans())
    return c


@st.composite
def env_cases(draw):
    c = _special_or(draw, "env", None)
    if c is None:
        label, data, exp, _ = draw(json_mutation(BASE_ENV, _env_type_expect, _env_value_expect))
        c = Case("env", label, data, expect=exp)
    c.prior_artifact = draw(st.booleans())
    return c


@st.composite
def config_cases(draw):
    c = _special_or(draw, "config", None)
    if c is None:
        label, data, exp, _ = draw(json_mutation(BASE_CONFIG, _config_type_expect, _config_value_expect))
        c = Case("config", label, data, expect=exp)
    return c


# ------------------------------------------------------------------------------------------ peaks
def _peaks_doc():
    import yaml

    return yaml.safe_load(BASE_PEAKS_TEXT)


def _peaks_type_expect(path, new) -> str:
    p = [k for k in path if not isinstance(k, int)]
    if not p:
        return "refuse"
    if p[0] == "hbm_bw_bytes_s" and len(p) == 3 and p[1] == "datasheet" and p[2] == "value":
        return "refuse"
    if p[0] == "hbm_bw_bytes_s" and len(p) == 2 and p[1] == "datasheet":
        return "refuse" if new is not None else "any"
    if p[0] == "flops" and len(p) == 4 and p[3] == "value" and p[1] in ("bf16", "fp8", "fp16"):
        return "refuse"
    if p[0] == "flops" and len(p) == 1:
        return "any" if new is None else "refuse"
    return "any"


def _peaks_value_expect(path, new) -> str:
    p = [k for k in path if not isinstance(k, int)]
    if p[:1] in (["hbm_bw_bytes_s"], ["flops"]) and p[-1] == "value" and (new <= 0 or not math.isfinite(new)):
        return "refuse"  # (YAML reads the NaN/Infinity this writes as strings: refused too)
    return "any"


@st.composite
def peaks_cases(draw):
    c = _special_or(draw, "peaks", None)
    if c is not None:
        return c
    op = draw(st.sampled_from(["json", "json", "tag", "alias_bomb", "text"]))
    if op == "json":
        label, data, exp, _ = draw(json_mutation(_peaks_doc(), _peaks_type_expect, _peaks_value_expect))
        # YAML is a superset of JSON: the mutated document is a valid YAML text (or a broken one)
        return Case("peaks", "yaml/" + label, data, expect="any" if exp == "any" else exp)
    if op == "tag":
        tag = draw(st.sampled_from(["!!python/object/apply:os.system ['true']", "!foo bar", "!!binary AAAA",
                                    "!!set {a, b}", "!!timestamp 2026-01-01"]))
        return Case("peaks", f"tag {tag.split()[0]}", (BASE_PEAKS_TEXT + f"\nzzz: {tag}\n").encode(), expect="any")
    if op == "alias_bomb":
        lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
        for i in range(1, 9):
            lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
        return Case("peaks", "alias bomb", (BASE_PEAKS_TEXT + "\n" + "\n".join(lines) + "\n").encode(),
                    expect="any")
    n = draw(st.integers(0, len(BASE_PEAKS_TEXT)))
    return Case("peaks", f"truncate at {n}", BASE_PEAKS_TEXT.encode()[:n], expect="any")


# ------------------------------------------------------------------------------------------ traces
_FIELD_RX = {f: re.compile(rb'("' + f.encode() + rb'": )(-?[0-9][0-9.eE+-]*|"[^"\n]*"|\[[^\]\n]*\])')
             for f in ("ts", "dur", "name", "External id", "correlation", "grid", "block", "Input Dims", "cat")}


def _items(text: bytes) -> list[tuple[int, int]]:
    """(start, end) of each traceEvents item of a Kineto-layout text."""
    marker = b"\n  {"
    st_ = text.find(b'"traceEvents"')
    pos = [m.start() + 3 for m in re.finditer(re.escape(marker), text[st_:])]
    pos = [p + st_ for p in pos]
    return [(a, b) for a, b in zip(pos, pos[1:] + [len(text)])]


_TRACE_ITEMS = _items(BASE_TRACE_TEXT)
_KERNEL_ITEMS = [(a, b) for a, b in _TRACE_ITEMS if b'"cat": "kernel"' in BASE_TRACE_TEXT[a:b]]


@st.composite
def trace_cases(draw, layout: str):
    kind = f"trace_{layout}"
    c = _special_or(draw, kind, None)
    if c is not None:
        return c
    op = draw(st.sampled_from(["kernel_field", "kernel_field", "field", "truncate", "delete_item", "dup_items",
                               "nest", "bomb", "bytes", "gzip", "encoding", "huge_item"]))
    text = BASE_TRACE_TEXT
    if op in ("kernel_field", "field"):
        items = _KERNEL_ITEMS if op == "kernel_field" else _TRACE_ITEMS
        a, b = draw(st.sampled_from(items))
        item = text[a:b]
        fname = draw(st.sampled_from(["ts", "dur"] if op == "kernel_field" else list(_FIELD_RX)))
        rx = _FIELD_RX[fname]
        m = rx.search(item)
        if m is None:
            return Case(kind, f"{op} {fname} (absent)", _layout(text, layout))
        new = draw(st.sampled_from([b'"5"', b"true", b"null", b"[1]", b'{"a": 1}', b"-5", b"NaN", b"1e999",
                                    b"-1e999", b'""', b"0", b"1e308"]))
        item2 = item[:m.start(2)] + new + item[m.end(2):]
        data = text[:a] + item2 + text[b:]
        exp = "any"
        if op == "kernel_field":
            if new in (b'"5"', b"true", b"null", b"[1]", b'{"a": 1}', b'""', b"NaN", b"1e999", b"-1e999"):
                exp = "refuse"                      # a wrong type / a non-finite number
            elif fname == "dur" and new == b"-5":
                exp = "refuse"                      # a negative duration
        return Case(kind, f"{op} {fname} -> {new.decode()}", _layout(data, layout), expect=exp)
    if op == "truncate":
        laid = _layout(text, layout)
        n = draw(st.integers(0, len(laid) - 1))
        return Case(kind, f"truncate at {n}", laid[:n], expect="refuse")
    if op == "delete_item":
        a, b = draw(st.sampled_from(_TRACE_ITEMS[:-1]))
        return Case(kind, "delete an item", _layout(text[:a] + text[b:], layout))
    if op == "dup_items":
        a, b = draw(st.sampled_from(_KERNEL_ITEMS[:-1]))
        n = draw(st.sampled_from([10, 1000, 20000]))
        return Case(kind, f"duplicate a kernel x{n}", _layout(text[:b] + text[a:b] * n + text[b:], layout))
    if op == "nest":
        depth = draw(st.sampled_from([100, 5000, 1000000]))
        a, b = draw(st.sampled_from(_KERNEL_ITEMS))
        item = text[a:b]
        i = item.find(b'"args": {') + len(b'"args": {')
        item2 = item[:i] + b'"zzz": ' + b"[" * depth + b"]" * depth + b", " + item[i:]
        # an unknown arg: the fast path never decodes it (accepting is fine), ijson's guard refuses
        # the depth; both must stay within memory and time
        return Case(kind, f"nest x{depth} in a kernel's args", _layout(text[:a] + item2 + text[b:], layout))
    if op == "bomb":
        shape = draw(st.sampled_from(["zeros", "spaces", "events", "one_string"]))
        mb = draw(st.sampled_from([256, 1024]))
        return Case(kind, f"gzip bomb {shape} {mb} MiB", gzip_bomb(shape, mb), expect="refuse",
                    extra={"gz": True})
    if op == "gzip":
        data = gzip.compress(_layout(text, layout), 1)
        cut = draw(st.sampled_from([None, 10, len(data) // 2, len(data) - 4]))
        return Case(kind, f"gzip{'' if cut is None else f' cut at {cut}'}", data if cut is None else data[:cut],
                    expect="any" if cut is None else "refuse", extra={"gz": True})
    if op == "encoding":
        enc = draw(st.sampled_from(["utf-16", "latin-1 name", "invalid utf-8 in name"]))
        if enc == "utf-16":
            return Case(kind, "encoding utf-16", _layout(text, layout).decode().encode("utf-16"), expect="refuse")
        a, b = draw(st.sampled_from(_KERNEL_ITEMS))
        item = text[a:b]
        m = _FIELD_RX["name"].search(item)
        junk = b"\xe9" if enc.startswith("latin") else b"\xff\xfe"
        item2 = item[:m.start(2) + 1] + junk + item[m.start(2) + 1:]
        return Case(kind, f"encoding {enc}", _layout(text[:a] + item2 + text[b:], layout))
    if op == "huge_item":
        a, b = draw(st.sampled_from(_KERNEL_ITEMS))
        item = text[a:b]
        i = item.find(b'"args": {') + len(b'"args": {')
        n = draw(st.sampled_from([1 << 20, 20 << 20]))
        item2 = item[:i] + b'"zzz": "' + b"x" * n + b'", ' + item[i:]
        return Case(kind, f"a {n >> 20} MiB string in a kernel", _layout(text[:a] + item2 + text[b:], layout),
                    # ijson (compact) refuses an event over 16 MiB; the fast path reads the kernel's
                    # fields in place without decoding the string, within bounded memory: either is fine
                    expect="refuse" if n > (16 << 20) and layout == "compact" else "any")
    at = draw(st.integers(0, len(text) - 1))
    junk = draw(st.binary(min_size=1, max_size=8))
    return Case(kind, f"bytes {junk!r} at {at}", _layout(text[:at] + junk + text[at + len(junk):], layout))


def _layout(text: bytes, layout: str) -> bytes:
    if layout == "fast":
        return text
    try:
        return json.dumps(json.loads(text), allow_nan=True).encode()
    except (ValueError, RecursionError, UnicodeDecodeError):
        # a broken text stays broken: collapse the pretty-printing instead
        return re.sub(rb"\n\s*", b"", text)


_BOMBS: dict = {}


def gzip_bomb(shape: str, mib: int) -> bytes:
    """A gzip file that expands to `mib` MiB (cached: building one takes a second or two)."""
    key = (shape, mib)
    if key not in _BOMBS:
        co = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        parts = []
        if shape == "zeros":
            head, unit, tail = b"", b"\x00" * (1 << 20), b""
        elif shape == "spaces":
            head, unit, tail = b'{"traceEvents": [', b" " * (1 << 20), b"]}"
        elif shape == "events":
            ev = b'\n  {"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1, "args": {}},'
            head, unit, tail = b'{"traceEvents": [', ev * ((1 << 20) // len(ev)), b'\n  {}\n]}'
        else:
            head, unit, tail = b'{"traceEvents": [\n  {"cat": "kernel", "name": "', b"a" * (1 << 20), b'"}\n]}'
        parts.append(co.compress(head))
        for _ in range(mib):
            parts.append(co.compress(unit))
        parts.append(co.compress(tail))
        parts.append(co.flush())
        _BOMBS[key] = b"".join(parts)
    return _BOMBS[key]


# ------------------------------------------------------------------------------------------ CSVs
def write_expanding_gzip(path: Path, size: int, ratio: int = 100) -> None:
    """A gzip file that expands to `size` bytes at about `ratio`x (below the 200x guard): each MiB is
    1/ratio random bytes (incompressible) and zeros. Written in pieces (never `size` in memory)."""
    mib = 1 << 20
    with gzip.open(path, "wb", compresslevel=9) as f:
        for _ in range(size // mib):
            noise = os.urandom(mib // ratio)
            f.write(noise + bytes(mib - len(noise)))


def peak_rss_kb() -> int:
    """This process's peak RSS, KiB: /proc/self/status VmHWM (the high-water mark of this address
    space, new at exec), else getrusage's ru_maxrss (which Linux keeps across exec: a child started
    by a large parent would report the parent's size)."""
    import resource

    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def write_big_topn(path: Path, n: int) -> None:
    """A Top-N of `n` entries: the baseline's entries repeated under distinct names, shares summing
    to 99%."""
    doc = copy.deepcopy(BASE_TOPN)
    base = doc["entries"]
    doc["entries"] = []
    for i in range(n):
        e = copy.deepcopy(base[i % len(base)])
        e["name"], e["pct_gpu_time"] = f"{e['name']}_{i}", 99.0 / n
        doc["entries"].append(e)
    path.write_text(json.dumps(doc))


def _csv_rows(data: bytes):
    return list(csv.reader(io.StringIO(data.decode("utf-8"))))


def _csv_bytes(rows) -> bytes:
    out = io.StringIO()
    w = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    w.writerows(rows)
    return out.getvalue().encode()


_NCU_TOPN_ROWS = _csv_rows(BASE_NCU_TOPN_CSV)
_DUR = "gpu__time_duration.sum"


@st.composite
def csv_cases(draw, kind: str):
    base = {"ncu_csv": BASE_NCU_TOPN_CSV, "counters_ncu_csv": BASE_NCU_COUNTERS_CSV,
            "rocprof_csv": BASE_ROCPROF_CSV}[kind]
    c = _special_or(draw, kind, None)
    if c is not None:
        return c
    rows = _csv_rows(base)
    op = draw(st.sampled_from(["cell", "cell", "duration", "drop_col", "truncate", "quote", "nul", "huge_field",
                               "dup_rows", "gzip", "bomb", "header"]))
    if op == "duration" and kind == "ncu_csv":
        hdr = rows[0]
        j = hdr.index(_DUR)
        i = draw(st.integers(2, len(rows) - 1))
        new = draw(st.sampled_from(["-5", "inf", "nan", "abc", "", "1e999", "true", "-1e999"]))
        orig = rows[i][j]
        rows[i][j] = new
        return Case(kind, f"duration row {i} -> {new!r}", _csv_bytes(rows), expect="skip_row",
                    extra={"row": i, "orig": orig})
    if op in ("cell", "duration"):
        i = draw(st.integers(0, len(rows) - 1))
        if not rows[i]:
            return Case(kind, "cell (empty row)", base)
        j = draw(st.integers(0, len(rows[i]) - 1))
        rows[i][j] = draw(st.sampled_from(["-5", "inf", "nan", "abc", "", "1e999", "1,2,3", "\u00e9", "0", "(1, 2)"]))
        return Case(kind, f"cell {i},{j} -> {rows[i][j]!r}", _csv_bytes(rows))
    if op == "drop_col":
        j = draw(st.integers(0, len(rows[0]) - 1))
        rows = [r[:j] + r[j + 1:] for r in rows]
        return Case(kind, f"drop column {j}", _csv_bytes(rows))
    if op == "truncate":
        n = draw(st.integers(0, len(base) - 1))
        return Case(kind, f"truncate at {n}", base[:n])
    if op == "quote":
        at = draw(st.integers(0, len(base) - 1))
        return Case(kind, f"stray quote at {at}", base[:at] + b'"' + base[at:])
    if op == "nul":
        at = draw(st.integers(0, len(base) - 1))
        return Case(kind, f"NUL at {at}", base[:at] + b"\x00" + base[at:])
    if op == "huge_field":
        i = draw(st.integers(1, len(rows) - 1))
        rows[i][0] = "x" * draw(st.sampled_from([200000, 5 << 20]))
        return Case(kind, f"huge field in row {i}", _csv_bytes(rows))
    if op == "dup_rows":
        n = draw(st.sampled_from([10, 300]))
        body = rows[2:] if kind != "rocprof_csv" else rows[1:]
        return Case(kind, f"rows x{n}", _csv_bytes(rows + body * n))
    if op == "gzip":
        return Case(kind, "gzip", gzip.compress(base, 1), extra={"gz": True})
    if op == "bomb":
        return Case(kind, "gzip bomb zeros 256 MiB", gzip_bomb("zeros", 256), expect="refuse", extra={"gz": True})
    rows[0] = list(reversed(rows[0]))
    return Case(kind, "header reversed", _csv_bytes(rows))


@st.composite
def ncu_rep_cases(draw):
    c = _special_or(draw, "ncu_rep", None)
    if c is not None:
        return c
    raw = gzip.decompress(BASE_NCU_REP_GZ)
    op = draw(st.sampled_from(["truncate", "flip", "gzip_cut", "text", "bomb"]))
    if op == "truncate":
        n = draw(st.integers(0, len(raw) - 1))
        return Case("ncu_rep", f"truncate at {n}", raw[:n])
    if op == "flip":
        b = bytearray(raw)
        for _ in range(draw(st.sampled_from([1, 10, 100]))):
            j = draw(st.integers(0, len(b) - 1))
            b[j] = draw(st.integers(0, 255))
        return Case("ncu_rep", "byte flips", bytes(b))
    if op == "gzip_cut":
        return Case("ncu_rep", "gzip cut", BASE_NCU_REP_GZ[: len(BASE_NCU_REP_GZ) // 2], expect="refuse")
    if op == "text":
        return Case("ncu_rep", "a JSON text named .ncu-rep", _dumps(BASE_TOPN), expect="refuse")
    return Case("ncu_rep", "gzip bomb zeros 1024 MiB", gzip_bomb("zeros", 1024), expect="refuse")


BASE_ARTIFACT = json.loads((FIX / "rerun" / "profile" / "round_1" / "profile_roofline.json").read_text())


@st.composite
def artifact_cases(draw):
    """profile_roofline.json as `roofline plot` reads it."""
    c = _special_or(draw, "artifact", None)
    if c is None:
        # a 20,000-entry artifact takes plot ~10 s: the long run only (the CI suite has it once, in
        # tests/test_reliability_regressions.py)
        sizes = (100, 2000, 20000) if os.environ.get("ROOFLINE_CAMPAIGN_LONG") else (100, 2000)
        label, data, exp, _ = draw(json_mutation(BASE_ARTIFACT, None, None, sizes=sizes))
        c = Case("artifact", label, data, expect=exp)
    return c


def all_cases():
    """Every kind, as one strategy."""
    return st.one_of(topn_cases(), env_cases(), config_cases(), peaks_cases(), trace_cases("fast"),
                     trace_cases("compact"), csv_cases("ncu_csv"), csv_cases("counters_ncu_csv"),
                     csv_cases("rocprof_csv"), ncu_rep_cases(), artifact_cases())


# ------------------------------------------------------------------------------------------ running
class Hang(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds: float):
    def on_alarm(signum, frame):
        raise Hang(f"over {seconds} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _place(path: Path, case: Case) -> None:
    """Put the case's file (or special file) at `path`."""
    if path.exists() or path.is_symlink():
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    sp = case.special
    if sp is None:
        path.write_bytes(case.content)
    elif sp == "fifo":
        os.mkfifo(path)
    elif sp == "dev_zero":
        path.symlink_to("/dev/zero")
    elif sp == "dev_urandom":
        path.symlink_to("/dev/urandom")
    elif sp == "directory":
        path.mkdir()
    elif sp == "socket":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.bind(str(path))
        except OSError:  # path too long for a socket: a FIFO instead
            os.mkfifo(path)
        finally:
            s.close()
    elif sp == "broken_symlink":
        path.symlink_to(path.parent / "does-not-exist")
    elif sp == "empty":
        path.write_bytes(b"")
    # "missing": nothing


def cli(args: list[str]) -> tuple[int, str, str]:
    """Run the CLI in this process: (exit code, stdout, stderr)."""
    from roofline.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    # what native code writes to fd 2 reaches a user's terminal too: capture it with the rest
    with tempfile.TemporaryFile() as fd2:
        saved = os.dup(2)
        os.dup2(fd2.fileno(), 2)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    main.main(args, prog_name="roofline")
                except SystemExit as exc:
                    code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        fd2.seek(0)
        native = fd2.read().decode("utf-8", "replace")
    return code, out.getvalue(), native + err.getvalue()


def _cli_violations(code, out, err, what, ok_codes=(0, 2)) -> list[str]:
    v = []
    if "Traceback (most recent call last)" in err or (
            "Traceback (most recent call last)" in out and not out.lstrip().startswith("{")):
        v.append(f"crash: {what}: traceback")
    if "internal error" in err:
        v.append(f"crash: {what}: {err.strip()[:300]}")
    if code not in ok_codes:
        v.append(f"crash: {what}: exit {code}: {err.strip()[:200]}")
    if code == 2:
        lines = [ln for ln in err.splitlines() if ln.strip()]
        if len(lines) != 1:
            v.append(f"crash: {what}: {len(lines)} lines on stderr: {err.strip()[:200]!r}")
    return v


SUSPECT_LOW = None


def artifact_violations(art: dict, what: str) -> list[str]:
    """Schema validity and the never-saturate-an-infeasible-ratio rule."""
    global SUSPECT_LOW
    from roofline.io.schema import validate_artifact

    if SUSPECT_LOW is None:
        from roofline.core.analysis import SUSPECT_LOW as s

        SUSPECT_LOW = s
    v = []
    for d in art.get("degraded", []) or []:
        if isinstance(d, dict) and "internal error" in str(d.get("reason", "")):
            v.append(f"crash: {what}: {d.get('reason')}"[:300])
    for e in art.get("skill_errors", []) or []:
        if isinstance(e, dict) and "internal error" in str(e.get("error", "")):
            v.append(f"crash: {what}: {e.get('error')}"[:300])
    try:
        validate_artifact(art)
    except Exception as exc:  # noqa: BLE001
        v.append(f"data loss: {what}: artifact breaks the schema: {str(exc).splitlines()[0][:200]}")
    for e in art.get("entries", []):
        r = e.get("roofline_pct_raw")
        if isinstance(r, (int, float)) and not (SUSPECT_LOW <= r <= 1.0) and e.get("headroom_class") != "unknown":
            v.append(f"wrong accept: {what}: {e.get('name')!r} roofline_pct_raw {r:.3g} is infeasible but has "
                     f"headroom_class {e.get('headroom_class')}")
        if r is not None and not (SUSPECT_LOW <= r <= 1.0) and e.get("provisional_headroom_class"):
            v.append(f"wrong accept: {what}: infeasible {e.get('name')!r} has a provisional class")
        if len(e.get("byte_reduction_levers", [])) > 20:
            v.append(f"wrong accept: {what}: {len(e['byte_reduction_levers'])} levers on one entry")
    return v


def _verdicts(art: dict) -> set:
    return {e.get("name") for e in art.get("entries", []) if e.get("headroom_class") not in (None, "unknown")
            or e.get("provisional_headroom_class")}


def _leftovers(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.startswith(".profile_roofline") or p.name.endswith(".tmp"))


def _pair_violations(rd: Path, what: str, prior: tuple | None, refused: bool) -> list[str]:
    from roofline.report import artifact as report

    v = []
    pj, pm = rd / report.ARTIFACT_JSON, rd / report.ARTIFACT_MD
    if pj.exists() != pm.exists():
        v.append(f"data loss: {what}: only one of the pair exists")
        return v
    left = _leftovers(rd)
    if left:
        v.append(f"data loss: {what}: temporary files left: {left}")
    if not pj.exists():
        return v
    if prior is not None and refused and (pj.read_bytes(), pm.read_bytes()) != prior:
        v.append(f"data loss: {what}: a refused run replaced the previous good artifact")
    try:
        art = json.loads(pj.read_text())
    except ValueError:
        return v + [f"data loss: {what}: the artifact JSON does not parse"]
    v += artifact_violations(art, what)
    try:
        if report.to_markdown(art) != pm.read_text():
            v.append(f"data loss: {what}: the markdown is not the rendering of the JSON beside it")
    except Exception as exc:  # noqa: BLE001
        v.append(f"crash: {what}: the markdown of the written JSON cannot be rendered: {exc!r}"[:300])
    return v


_PRIOR: dict = {}


def _round(work: Path, case: Case) -> tuple[Path, dict]:
    """A run root with the baseline inputs: env_report.json, config.json at the root, the Top-N in
    profile/round_1. Returns (round dir, paths)."""
    rd = work / "profile" / "round_1"
    rd.mkdir(parents=True)
    paths = {"topn": rd / "profile_topN.json", "env": work / "env_report.json", "config": work / "config.json"}
    paths["topn"].write_bytes(_dumps(BASE_TOPN))
    paths["env"].write_bytes(_dumps(BASE_ENV))
    paths["config"].write_bytes(_dumps(BASE_CONFIG))
    return rd, paths


def _seed_prior(rd: Path) -> tuple[bytes, bytes]:
    """A good artifact pair in `rd` from the baseline inputs (computed once, copied)."""
    from roofline import hook
    from roofline.report import artifact as report

    if "pair" not in _PRIOR:
        with tempfile.TemporaryDirectory() as t:
            r2, _ = _round(Path(t), None)
            s = hook.run(r2)
            assert s["json"] and not s["skill_errors"], s
            _PRIOR["pair"] = ((r2 / report.ARTIFACT_JSON).read_bytes(), (r2 / report.ARTIFACT_MD).read_bytes())
    pj, pm = _PRIOR["pair"]
    (rd / report.ARTIFACT_JSON).write_bytes(pj)
    (rd / report.ARTIFACT_MD).write_bytes(pm)
    return pj, pm


def _baseline_total_ms(source: bytes, name: str) -> float:
    key = ("total", name)
    if key not in _PRIOR:
        with tempfile.TemporaryDirectory() as t:
            src = Path(t) / name
            src.write_bytes(source)
            code, _, err = cli(["topn", str(src), "-o", str(Path(t) / "o.json"), "-q"])
            assert code == 0, err
            _PRIOR[key] = json.loads((Path(t) / "o.json").read_text())["total_gpu_time_ms"]
    return _PRIOR[key]


def _scale_ms(rows, j) -> float:
    unit = rows[1][j].strip() if len(rows) > 1 else "nsecond"
    return {"nsecond": 1e-6, "ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0, "ms": 1.0,
            "second": 1e3, "s": 1e3}.get(unit, 1e-6)


def run_case(case: Case, limit_s: float = 30.0) -> list[str]:
    """Run every entry point that reads the case's file; return the violations (none = all hold)."""
    from roofline import hook

    v: list[str] = []
    with tempfile.TemporaryDirectory(prefix="roofline-campaign-") as t:
        work = Path(t) / "run"
        work.mkdir()
        try:
            with time_limit(limit_s):
                v += _run(case, work, hook)
        except Hang as exc:
            v.append(f"hang: {case.kind} {case.label}: {exc}")
        except MemoryError:
            v.append(f"memory: {case.kind} {case.label}: MemoryError")
        except Exception as exc:  # noqa: BLE001 - the harness itself must not stop the campaign
            v.append(f"crash: {case.kind} {case.label}: uncaught {type(exc).__name__}: {str(exc)[:200]}")
    return v


def _run(case: Case, work: Path, hook) -> list[str]:
    v: list[str] = []
    what = f"{case.kind} [{case.label}]"
    if case.kind in ("topn", "env", "config"):
        rd, paths = _round(work, case)
        _place(paths[case.kind], case)
        prior = _seed_prior(rd) if case.prior_artifact else None
        s = hook.run(rd)
        if s is not None and not isinstance(s, dict):
            return [f"crash: {what}: hook.run returned {type(s).__name__}"]
        v += _pair_violations(rd, f"hook {what}", prior, refused=any(e["where"] == "analyze" for e in s["skill_errors"]))
        code, out, err = cli(["analyze", str(paths["topn"]), "--env", str(paths["env"]), "--config",
                              str(paths["config"]), "--format", "json", "--no-write"])
        v += _cli_violations(code, out, err, f"analyze {what}")
        art = None
        if code == 0:
            try:
                art = json.loads(out)
            except ValueError:
                v.append(f"crash: analyze {what}: stdout is not the artifact JSON")
        if art is not None:
            v += artifact_violations(art, f"analyze {what}")
        if case.expect == "refuse":
            if code == 0:
                v.append(f"wrong accept: analyze {what}: accepted (exit 0)")
            # (config.json is optional for the hook: one that is not a regular file is not found)
            if case.kind != "config" and not any(e["where"] in ("analyze", "hook") for e in s["skill_errors"]):
                v.append(f"wrong accept: hook {what}: analysed without an error")
        if case.expect == "no_verdict" and art is not None and case.entry in _verdicts(art):
            v.append(f"wrong accept: analyze {what}: {case.entry!r} got a verdict")
        return v
    if case.kind == "peaks":
        rd, paths = _round(work, case)
        pf = work / "peaks.yaml"
        _place(pf, case)
        code, out, err = cli(["analyze", str(paths["topn"]), "--env", str(paths["env"]), "--peaks", str(pf),
                              "--format", "json", "--no-write"])
        v += _cli_violations(code, out, err, f"analyze --peaks {what}")
        if code == 0:
            v += artifact_violations(json.loads(out), f"analyze --peaks {what}")
            if case.expect == "refuse":
                v.append(f"wrong accept: analyze --peaks {what}: accepted (exit 0)")
        code, out, err = cli(["peaks", "validate", str(pf)])
        # validate is a linter: exit 1 = "bad tables", each problem on stdout, a one-line total
        v += _cli_violations(code, out, err, f"peaks validate {what}", ok_codes=(0, 1, 2))
        return v
    if case.kind.startswith("trace_"):
        src = work / ("trace.json.gz" if case.extra.get("gz") else "trace.json")
        _place(src, case)
        o = work / "out" / "profile_topN.json"
        code, out, err = cli(["topn", str(src), "-o", str(o), "-q"])
        v += _cli_violations(code, out, err, f"topn {what}")
        if code == 0:
            from roofline.core.inputs import load_topn

            if case.expect == "refuse":
                v.append(f"wrong accept: topn {what}: accepted (exit 0)")
            try:
                load_topn(o)  # the tool's own output is a valid input
            except Exception as exc:  # noqa: BLE001
                v.append(f"wrong accept: topn {what}: wrote a Top-N the tool refuses: {exc}"[:300])
        return v
    if case.kind == "ncu_csv":
        src = work / ("ncu.csv.gz" if case.extra.get("gz") else "ncu.csv")
        _place(src, case)
        o = work / "out" / "profile_topN.json"
        code, out, err = cli(["topn", str(src), "-o", str(o), "-q"])
        v += _cli_violations(code, out, err, f"topn {what}")
        if code == 0 and case.expect == "skip_row":
            # the bad duration is skipped, never counted: total = baseline - that row's old value
            rows = _NCU_TOPN_ROWS
            j = rows[0].index(_DUR)
            expect_ms = _baseline_total_ms(BASE_NCU_TOPN_CSV, "base.csv") - float(
                case.extra["orig"].replace(",", "")) * _scale_ms(rows, j)
            got = json.loads(o.read_text())["total_gpu_time_ms"]
            if not math.isclose(got, expect_ms, rel_tol=1e-9, abs_tol=1e-12):
                v.append(f"wrong accept: topn {what}: total {got} ms, expected {expect_ms} ms without the bad row")
        if code == 0 and case.expect == "refuse":
            v.append(f"wrong accept: topn {what}: accepted (exit 0)")
        if case.expect != "refuse" or case.special is None:
            v += _counters_run(case, work, src, what)
        return v
    if case.kind in ("counters_ncu_csv", "rocprof_csv"):
        src = work / ("counters.csv.gz" if case.extra.get("gz") else "counters.csv")
        _place(src, case)
        return _counters_run(case, work, src, what)
    if case.kind == "ncu_rep":
        src = work / "report.ncu-rep"
        _place(src, case)
        o = work / "out" / "profile_topN.json"
        code, out, err = cli(["topn", str(src), "-o", str(o), "-q"])
        v += _cli_violations(code, out, err, f"topn {what}")
        if code == 0 and case.expect == "refuse":
            v.append(f"wrong accept: topn {what}: accepted (exit 0)")
        return v + _counters_run(case, work, src, what)
    if case.kind == "artifact":
        src = work / "profile_roofline.json"
        _place(src, case)
        png = work / "out.png"
        code, out, err = cli(["plot", str(src), "-o", str(png)])
        v += _cli_violations(code, out, err, f"plot {what}")
        if code == 0 and case.expect == "refuse":
            v.append(f"wrong accept: plot {what}: accepted (exit 0)")
        if code == 0 and not (png.exists() and png.stat().st_size > 1000):
            v.append(f"crash: plot {what}: exit 0 without a picture")
        return v
    raise ValueError(case.kind)


def _hook_entries(rd: Path, prior) -> bool:
    from roofline.report import artifact as report

    pj = rd / report.ARTIFACT_JSON
    if not pj.exists():
        return False
    try:
        return bool(json.loads(pj.read_text()).get("entries")) and (prior is None or pj.read_bytes() != prior[0])
    except ValueError:
        return False


def _counters_run(case: Case, work: Path, src: Path, what: str) -> list[str]:
    """Stage C with the case's file as the counters: CLI and hook."""
    from roofline import hook

    v = []
    rd = work / "c" / "profile" / "round_1"
    if not rd.exists():
        rd.mkdir(parents=True)
        (rd / "profile_topN.json").write_bytes(_dumps(BASE_TOPN))
        (work / "c" / "env_report.json").write_bytes(_dumps(BASE_ENV))
    code, out, err = cli(["analyze", str(rd / "profile_topN.json"), "--counters", str(src), "--format", "json",
                          "--no-write"])
    v += _cli_violations(code, out, err, f"analyze --counters {what}")
    if code == 0:
        v += artifact_violations(json.loads(out), f"analyze --counters {what}")
        if case.expect == "refuse":
            v.append(f"wrong accept: analyze --counters {what}: accepted (exit 0)")
    s = hook.run(rd, counters=str(src))
    if not isinstance(s, dict):
        v.append(f"crash: hook --counters {what}: returned {type(s).__name__}")
    else:
        v += _pair_violations(rd, f"hook --counters {what}", None, refused=False)
    return v


def sweep_cases():
    """Deterministic, exhaustive: every field of the Top-N, env report and config x every wrong type,
    and every number x every boundary value (the random campaign samples these; this covers all)."""
    out = []
    for base, kind, te, ve in ((BASE_TOPN, "topn", _topn_type_expect, _topn_value_expect),
                               (BASE_ENV, "env", _env_type_expect, _env_value_expect),
                               (BASE_CONFIG, "config", _config_type_expect, _config_value_expect)):
        for p, v0 in _paths(base):
            if not p:
                continue
            for new in _wrong_types(v0):
                d = copy.deepcopy(base)
                _set(d, p, new)
                out.append(Case(kind, f"sweep type {'.'.join(map(str, p))} -> {new!r}"[:160], _dumps(d),
                                expect=te(p, new), entry=_entry_of(base, p)))
            if isinstance(v0, (int, float)) and not isinstance(v0, bool):
                for new in (0, -1, -0.5, 1e-300, 1e308, 10 ** 30, 2 ** 63, 101, 1e-9, *NONFINITE):
                    d = copy.deepcopy(base)
                    _set(d, p, new)
                    out.append(Case(kind, f"sweep value {'.'.join(map(str, p))} -> {new!r}", _dumps(d),
                                    expect=ve(p, new), entry=_entry_of(base, p)))
    return out


def one_line_2(args, *needles) -> str:
    """The documented outcome of unusable input: exit 2 and one stderr line naming it (each needle in it),
    never an internal error or a traceback."""
    code, out, err = cli([str(a) for a in args])
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1, (code, err[-2000:])
    assert "internal error" not in err and "Traceback" not in err, err
    for n in needles:
        assert n in err, err
    return err
