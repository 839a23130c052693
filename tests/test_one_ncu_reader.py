"""Issue 15, knot 5: one Nsight Compute reader and one unit table, read from the source with ast.

- only roofline/counters/ncu.py imports `ncu_report`, calls its `load_report` or names the raw-page
  CSV's "Kernel Name" column (the .ncu-rep walk and the CSV header parser live there once);
- only roofline/counters/units.py holds a table of ncu's units (a dict literal keyed by two or more
  unit spellings such as "ns", "usecond", "Kbyte");
- `roofline topn` (roofline/ingest/ncu.py) and stage C (roofline.counters.load) both go through it,
  and give the same durations for the same report.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SRC = sorted(p for d in ("roofline", "ladder", "peaks") for p in (ROOT / d).rglob("*.py"))
READER = "roofline/counters/ncu.py"
UNITS = "roofline/counters/units.py"
UNIT_WORDS = {"ns", "nsecond", "nanosecond", "us", "usecond", "microsecond", "ms", "msecond", "millisecond",
              "second", "byte", "Kbyte", "Mbyte", "Gbyte", "cycle", "hz", "Ghz"}


def reader_violations(rel: str, source: str) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import) and any(a.name == "ncu_report" for a in node.names) and rel != READER:
            out.append(f"{rel}:{node.lineno} imports ncu_report")
        elif isinstance(node, ast.Attribute) and node.attr == "load_report" and rel != READER:
            out.append(f"{rel}:{node.lineno} calls load_report")
        elif isinstance(node, ast.Constant) and node.value == "Kernel Name" and rel != READER:
            out.append(f"{rel}:{node.lineno} parses the raw-page CSV header")
        elif isinstance(node, ast.Dict) and rel != UNITS:
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
            if len(keys & UNIT_WORDS) >= 2:
                out.append(f"{rel}:{node.lineno} a unit table {sorted(keys & UNIT_WORDS)}")
    return out


def test_one_ncu_reader_and_one_unit_table():
    bad = [v for p in SRC for v in reader_violations(p.relative_to(ROOT).as_posix(), p.read_text(encoding="utf-8"))]
    assert not bad, bad


def test_the_scan_catches_a_second_reader_and_a_second_table():
    src = ('import ncu_report\nctx = ncu_report.load_report("x")\ni = hdr.index("Kernel Name")\n'
           '_T = {"ns": 1e-3, "us": 1.0}\n')
    got = reader_violations("roofline/ingest/ncu.py", src)
    assert len(got) == 4, got
    assert reader_violations(READER, src)[0].endswith("a unit table ['ns', 'us']")
    assert reader_violations(UNITS, '_T = {"ns": 1.0, "us": 1e3}\n') == []


def test_topn_imports_the_one_reader():
    from roofline.counters import ncu as stage_c
    from roofline.ingest import ncu as topn_side

    assert topn_side.rep_launches is stage_c.rep_launches and topn_side.csv_launches is stage_c.csv_launches


@pytest.mark.parametrize("name", ["fixtures/ncu/known.ncu-rep.gz", "fixtures/ncu/known_raw.csv",
                                  "fixtures/ncu/known_raw_autounits.csv", "fixtures/ncu_topn/small_raw.csv"])
def test_topn_and_stage_c_read_the_same_durations(name):
    """The Top-N's per-kernel time and stage C's per-launch t_ms of one real H200 report agree
    (count x mean = total), whichever file form it comes in."""
    from roofline.counters import load
    from roofline.ingest.ncu import read_ncu

    aggs, bad = read_ncu(str(ROOT / name), "decode")
    assert bad == 0
    kcs = {k.name: k for k in load(ROOT / name)}
    assert {a.name for a in aggs} == set(kcs) and len(kcs) >= 3
    for a in aggs:
        k = kcs[a.name]
        assert a.all_count == k.launches
        assert a.all_us == pytest.approx(k.t_ms * 1e3 * k.launches, rel=1e-12)
