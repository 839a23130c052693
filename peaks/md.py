"""The pipeline's own peaks.md (the README's peaks paragraph): hardware denominators as a markdown table
keyed by `gfx` (or by GPU name), one column per roof with its unit in the header, e.g.

    | gfx    | GPU            | HBM (TB/s) | FP8 (PFLOP/s) | BF16 (TFLOP/s) |
    |--------|----------------|------------|---------------|----------------|
    | gfx950 | AMD MI355X     | 8.0        | 5.0           | 2500           |

Read tolerantly: units TB/s, GB/s, TiB/s, GiB/s, MB/s for memory and PFLOP/s, TFLOP/s, GFLOP/s
(also "TFLOPS", "TOPS") for compute, in the header or in the cell ("8.0 TB/s"); thousands
separators and a leading "~" are accepted; an empty or "-" cell means no figure. Every roof's
source is "pipeline peaks.md". A file this reader cannot use raises PeaksMdError with one line.
"""
from __future__ import annotations

import math
import re
from pathlib import Path

from roofline.io.errors import PeaksError
from roofline.peaks import Peaks, from_table, norm_dtype

SOURCE = "pipeline peaks.md"

_BYTES = {"b/s": 1.0, "kb/s": 1e3, "mb/s": 1e6, "gb/s": 1e9, "tb/s": 1e12, "pb/s": 1e15,
          "kib/s": 2.0 ** 10, "mib/s": 2.0 ** 20, "gib/s": 2.0 ** 30, "tib/s": 2.0 ** 40}
_FLOPS = {"flop/s": 1.0, "flops": 1.0, "ops": 1.0, "op/s": 1.0}
_PREFIX = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15, "e": 1e18}
_UNIT_RE = re.compile(r"([kmgtpe]?i?b/s|[kmgtpe]?(?:flop/s|flops|ops|op/s))", re.IGNORECASE)
_DTYPE_RE = re.compile(r"\b(fp8|e4m3|e5m2|bf16|fp16|tf32|fp32|fp64|int8|fp4|mxfp4|nvfp4|bfloat16|float16|"
                       r"float32|float64)\b", re.IGNORECASE)
_MEM_RE = re.compile(r"hbm|mem|bandwidth|\bbw\b", re.IGNORECASE)
_GFX_KEYS = ("gfx", "arch", "sm", "device key", "key")
_NAME_KEYS = ("gpu", "name", "device", "model", "gpu_name", "gpu name")


class PeaksMdError(PeaksError):
    """peaks.md cannot be used (one line: file and what is wrong)."""


def _unit_factor(text: str) -> tuple[str, float] | None:
    """'TB/s' -> ('bytes', 1e12); 'PFLOP/s' -> ('flops', 1e15); None when no unit is named."""
    m = _UNIT_RE.search(text.replace(" ", ""))
    if not m:
        return None
    u = m.group(1).lower()
    if u.endswith("b/s"):
        return "bytes", _BYTES.get(u, None) or 0.0
    for tail in ("flop/s", "flops", "op/s", "ops"):
        if u.endswith(tail):
            return "flops", _PREFIX.get(u[: -len(tail)], 0.0) * _FLOPS[tail]
    return None


def _cells(line: str) -> list[str]:
    s = line.strip()
    if s.startswith("|"):
        s = s[1:]
    if s.endswith("|"):
        s = s[:-1]
    return [c.strip() for c in s.split("|")]


def _tables(text: str) -> list[list[list[str]]]:
    """Every markdown table: a header row, a |---| separator, then rows."""
    out, cur, lines = [], None, text.splitlines()
    for i, line in enumerate(lines):
        if "|" not in line:
            cur = None
            continue
        cells = _cells(line)
        if cur is None:
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            if re.fullmatch(r"\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*", nxt or "x"):
                cur = [cells]
                out.append(cur)
            continue
        if all(re.fullmatch(r":?-{2,}:?", c) for c in cells if c):
            continue
        cur.append(cells)
    return out


def _number(cell: str) -> float | None:
    c = cell.strip().lstrip("~≈").replace(",", "").replace("\u202f", "").replace(" ", "")
    m = re.match(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", c)
    return float(m.group(0)) if m else None


def parse(text: str, file: str = "peaks.md") -> list[dict]:
    """peaks.md text -> rows [{gfx, name, hbm_bw_bytes_s, flops: {dtype: FLOP/s}}]. Raises
    PeaksMdError (one line) when no table with a key column and at least one roof column is found,
    or a roof cell cannot be read."""
    tables = _tables(text)
    if not tables:
        raise PeaksMdError(f"{file}: no markdown table (a header row, a |---| row, then one row per device)")
    rows: list[dict] = []
    problems: list[str] = []
    for tbl in tables:
        header = [h.lower() for h in tbl[0]]
        gfx_col = next((i for i, h in enumerate(header) if h in _GFX_KEYS or h.startswith("gfx")), None)
        name_col = next((i for i, h in enumerate(header) if i != gfx_col and
                         any(h == k or h.startswith(k + " ") for k in _NAME_KEYS)), None)
        roofs: list[tuple[int, str, str | None, float | None]] = []   # (col, kind, dtype, header factor)
        for i, h in enumerate(tbl[0]):
            if i in (gfx_col, name_col):
                continue
            uf = _unit_factor(h)
            dt = _DTYPE_RE.search(h)
            if _MEM_RE.search(h) or (uf and uf[0] == "bytes"):
                roofs.append((i, "bytes", None, uf[1] if uf and uf[0] == "bytes" else None))
            elif dt:
                roofs.append((i, "flops", norm_dtype(dt.group(1)), uf[1] if uf and uf[0] == "flops" else None))
        if (gfx_col is None and name_col is None) or not roofs:
            continue
        for r in tbl[1:]:
            if len(r) < len(tbl[0]):
                r = r + [""] * (len(tbl[0]) - len(r))
            row = {"gfx": r[gfx_col] if gfx_col is not None else None,
                   "name": r[name_col] if name_col is not None else None, "hbm_bw_bytes_s": None, "flops": {}}
            for col, kind, dtype, hf in roofs:
                cell = r[col]
                if not cell or cell in ("-", "—", "n/a", "N/A", "?"):
                    continue
                v = _number(cell)
                cu = _unit_factor(cell)
                factor = cu[1] if cu and cu[0] == kind else hf
                if v is None or not factor or not 0 < v * factor < math.inf:
                    why = ("not a positive number" if (v is None or v <= 0) else "not a finite number"
                           if v == math.inf else "no unit in the header or the cell" if not factor else "beyond any float")
                    problems.append(f"row {row['gfx'] or row['name']!s}, column {tbl[0][col]!r}: {cell!r}: {why}")
                    continue
                if kind == "bytes":
                    row["hbm_bw_bytes_s"] = v * factor
                else:
                    row["flops"][dtype] = v * factor
            rows.append(row)
    if problems:
        raise PeaksMdError(f"{file}: {problems[0]}" + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
    if not rows:
        raise PeaksMdError(f"{file}: no table with a key column (gfx or GPU name) and a roof column with its unit "
                           "(e.g. 'HBM (TB/s)', 'FP8 (TFLOP/s)')")
    return rows


def _norm(s: str | None) -> str:
    return " ".join(str(s or "").lower().replace("-", " ").replace("_", " ").split())


def lookup(path: str | Path, gpu_name: str | None, gfx: str | None) -> Peaks | None:
    """The row of `path` for this device as Peaks (source "table", each roof's source "pipeline
    peaks.md"), or None when the file has no row for it. Raises PeaksMdError on a malformed file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PeaksMdError(f"{p}: cannot be read ({exc.__class__.__name__})") from None
    rows = parse(text, str(p))
    by_name = [r for r in rows if gpu_name and r["name"] and _norm(r["name"]) == _norm(gpu_name)]
    by_gfx = [r for r in rows if gfx and r["gfx"] and r["gfx"].strip().lower() == str(gfx).strip().lower()]
    hit = (by_name or by_gfx or [None])[0]
    if hit is None:
        return None
    table = {"device": hit["name"] or gpu_name or hit["gfx"], "gfx": hit["gfx"] or gfx, "flops": {}}
    if hit["hbm_bw_bytes_s"]:
        table["hbm_bw_bytes_s"] = {"measured": {"value": hit["hbm_bw_bytes_s"], "source": SOURCE}}
    for d, v in hit["flops"].items():
        # NB: docs/method.md section 8: the pipeline's peaks are empirical microbench figures, so the bf16 =
        # fp16 cross-check applies to them ("measured")
        table["flops"][d] = {"measured": {"value": v, "source": SOURCE}}
    pk = from_table(table, str(p))
    pk.origin = SOURCE
    pk.hbm_bw_kind = "pipeline" if pk.hbm_bw_bytes_s else pk.hbm_bw_kind
    pk.notes = [n for n in pk.notes if not n.startswith("memory roof is the")]
    pk.notes.append(f"peaks from the pipeline's {p.name} ({p}), row {hit['gfx'] or hit['name']}")
    if not by_name and len(by_gfx) > 1:
        pk.confidence = "low"
        pk.notes.append(f"{gfx} has {len(by_gfx)} rows in {p.name}; took the first, confidence low")
    return pk
