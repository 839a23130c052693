"""What kind of file is this? A cheap sniff (the first 64 KiB, or the whole file when small) so
that a command given the wrong kind of file says what the file is and which command takes it,
instead of a JSON error deep inside the loader. Pure except for reading the file's head.
"""
from __future__ import annotations

import json
import os
import zlib
from pathlib import Path

_HEAD = 64 << 10
_SMALL = 8 << 20

# kind -> (what it is, which command takes it)
KINDS = {
    "torch_trace": ("a PyTorch profiler trace", "run `roofline topn {path} -o profile_topN.json` first, then "
                    "`roofline analyze profile_topN.json`"),
    "ncu_report": ("an Nsight Compute report", "run `roofline topn {path} -o profile_topN.json` first (or give it "
                   "to `roofline analyze TOPN --counters {path}`)"),
    "topn": ("a Top-N (profile_topN.json)", "`roofline analyze {path}` reads it"),
    "artifact": ("an analysis artifact (profile_roofline.json)", "`roofline plot {path}` draws it; "
                 "`roofline analyze` reads a Top-N"),
    "env_report": ("an env report (env_report.json)", "give it to `roofline analyze TOPN --env {path}`"),
    "config": ("a model config.json", "give it to `roofline analyze TOPN --config {path}`"),
    "ladder_bench": ("a GEMM ladder bench result", "`roofline ladder render {path}` / `roofline ladder plot {path}` "
                     "read it"),
    "csv": ("a CSV file", "counter CSVs go to `roofline analyze TOPN --counters {path}`; an ncu raw CSV can also "
            "be read by `roofline topn {path}`"),
    "gzip": ("a gzip file that is not a PyTorch trace", "decompress it first (the loaders read plain JSON)"),
    "json": ("a JSON file of no known kind", ""),
    "not_json": ("not a JSON file", ""),
}


def _head_bytes(path: Path) -> tuple[bytes, bool, bool]:
    """(head bytes, was gzipped, whole file read). A FIFO, device or socket is never opened (a
    read could block forever): it sniffs as empty, and the reader that follows refuses it."""
    from roofline.io.safeio import NotRegularFile, open_regular

    try:
        f = open_regular(path)   # O_NONBLOCK + fstat: a FIFO swapped in after a check never blocks
    except NotRegularFile:
        return b"", False, False
    with f:
        raw = f.read(_HEAD if os.fstat(f.fileno()).st_size > _SMALL else _SMALL + 1)
    if raw[:2] == b"\x1f\x8b":
        try:
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            return d.decompress(raw, _HEAD), True, False
        except zlib.error:
            return b"", True, False
    return raw, False, len(raw) <= _SMALL


def kind_of_doc(doc) -> str:
    """The kind of an already-parsed JSON document."""
    if not isinstance(doc, dict):
        return "json"
    if "traceEvents" in doc:
        return "torch_trace"
    if doc.get("skill") == "roofline" or "ranking_by_pct" in doc or "peaks" in doc:
        return "artifact"
    if isinstance(doc.get("entries"), list):
        return "topn"
    if "meta" in doc and isinstance(doc.get("rows"), list):
        return "ladder_bench"
    if "gfx" in doc or ("workload" in doc and "model_dtype" in doc):
        return "env_report"
    if "architectures" in doc or "model_type" in doc or "hidden_size" in doc or "text_config" in doc:
        return "config"
    return "json"


def sniff(path) -> str:
    """One of KINDS, or "missing" / "directory"."""
    p = Path(path)
    try:
        if not p.exists():
            return "missing"
        if p.is_dir():
            return "directory"
    except (OSError, ValueError):   # a name over the system's limit, an unreadable folder: the reader says
        return "missing"
    low = p.name.lower()
    if low.endswith(".ncu-rep") or low.endswith(".ncu-rep.gz"):
        return "ncu_report"
    try:
        head, gz, whole = _head_bytes(p)
    except OSError:
        return "not_json"
    s = head.lstrip()
    if s[:1] not in (b"{", b"["):
        if low.endswith(".csv") or low.endswith(".csv.gz") or (b"," in s.split(b"\n", 1)[0] and s[:1] == b'"'):
            return "csv"
        return "gzip" if gz else "not_json"
    if whole:
        try:
            return kind_of_doc(json.loads(head.decode("utf-8")))
        except (ValueError, UnicodeDecodeError, RecursionError):   # the real reader bounds nesting
            pass
    if b'"traceEvents"' in head or b'"deviceProperties"' in head:
        return "torch_trace"
    if b'"ranking_by_pct"' in head or b'"skill": "roofline"' in head:
        return "artifact"
    if b'"entries"' in head:
        return "topn"
    return "gzip" if gz else "json"


_MAGIC = ((b"\x89PNG", "a PNG image"), (b"\xff\xd8\xff", "a JPEG image"), (b"%PDF", "a PDF document"),
          (b"GIF8", "a GIF image"), (b"PK\x03\x04", "a zip archive"), (b"\x7fELF", "an executable (ELF)"),
          (b"<svg", "an SVG image"), (b"<?xml", "an XML file"), (b"SQLite format", "an SQLite database"))


def what_is(path) -> str | None:
    """'a PNG image', ... for a file of a well-known binary kind (its first bytes), else None."""
    from roofline.io.safeio import open_regular

    try:
        with open_regular(path) as f:
            head = f.read(16)
    except (OSError, ValueError):
        return None
    return next((what for magic, what in _MAGIC if head.startswith(magic)), None)


def wrong_kind(path, kind: str, wanted: str) -> str:
    """'<path>: this is <kind>, not <wanted>: <what to do>' (one line)."""
    what, todo = KINDS.get(kind, (kind, ""))
    msg = f"{path}: this is {what}, not {wanted}"
    return msg + (f": {todo.format(path=path)}" if todo else "")


def check(path, expected: tuple[str, ...], wanted: str) -> str | None:
    """None when the file may be of an expected kind (or cannot be told apart: the loader then speaks),
    else the one-line message."""
    k = sniff(path)
    if k in expected or k in ("missing", "directory", "json", "not_json"):
        return None
    return wrong_kind(path, k, wanted)

