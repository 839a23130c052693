"""Who writes the artifact entry (issue #39: the entry is written from the steps' values in one place,
roofline/core/entry.py). Read from the source with ast: a module "writes an entry" where it stores an
artifact-entry field (roofline/io/schema/fields.json, artifact.entry) by its string key into a dict
named as the package names entries (out, entry, ent, e, v, head): `out["key"] = ...`, `out["key"] += ...`,
`out.update(key=...)`, `out.setdefault("key", ...)`. At most four modules of the analysis may
(roofline/ingest/ builds Top-N entries, another record, docs/topn.md: not counted)."""
from __future__ import annotations

import ast
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "roofline"
ENTRY_FIELDS = frozenset(json.loads((PKG / "io" / "schema" / "fields.json").read_text())["artifact"]["entry"])
ENTRY_NAMES = frozenset({"out", "entry", "ent", "e", "v", "head"})
CAP = 4


def writes(src: str) -> list[tuple[int, str]]:
    """(line, field) of every store of an entry field by string key into an entry-named dict."""
    found = []
    for n in ast.walk(ast.parse(src)):
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id in ENTRY_NAMES \
                        and isinstance(t.slice, ast.Constant) and t.slice.value in ENTRY_FIELDS:
                    found.append((n.lineno, t.slice.value))
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) \
                and n.func.value.id in ENTRY_NAMES:
            if n.func.attr == "update":
                found += [(n.lineno, k.arg) for k in n.keywords if k.arg in ENTRY_FIELDS]
                found += [(n.lineno, k.value) for a in n.args if isinstance(a, ast.Dict) for k in a.keys
                          if isinstance(k, ast.Constant) and k.value in ENTRY_FIELDS]
            elif n.func.attr == "setdefault" and n.args and isinstance(n.args[0], ast.Constant) \
                    and n.args[0].value in ENTRY_FIELDS:
                found.append((n.lineno, n.args[0].value))
    return found


def analysis_sources() -> dict[str, str]:
    return {p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8") for p in sorted(PKG.rglob("*.py"))
            if (PKG / "ingest") not in p.parents}


def writers(sources: dict[str, str]) -> dict[str, list]:
    return {rel: w for rel, src in sources.items() if (w := writes(src))}


def over_cap(sources: dict[str, str]) -> str | None:
    """Why the analysis breaks the rule, or None."""
    w = writers(sources)
    if len(w) > CAP:
        return f"{len(w)} modules write entry fields by string key (at most {CAP}): " + "; ".join(
            f"{rel} {[k for _, k in v][:4]}" for rel, v in sorted(w.items()))
    return None


def test_at_most_four_modules_write_the_entry_and_entry_py_is_one():
    w = writers(analysis_sources())
    assert "roofline/core/entry.py" in w          # the one place the steps' values become the entry
    assert over_cap(analysis_sources()) is None, over_cap(analysis_sources())
    # the procedure and stage C's merge hand values over: they write no entry field
    assert not {"roofline/core/procedure.py", "roofline/core/merge.py", "roofline/core/necessary.py",
                "roofline/core/levers.py"} & set(w)


def test_a_planted_writer_breaks_the_cap():
    sources = analysis_sources()
    n = len(writers(sources))
    planted = dict(sources)
    for i in range(CAP - n + 1):    # enough modules writing an entry field to pass the cap by one
        planted[f"roofline/core/planted_{i}.py"] = "def put(out, b):\n    out['bytes_necessary'] = b\n"
    assert over_cap(planted) is not None and "planted_0.py" in over_cap(planted)


def test_the_scan_reads_each_way_of_writing_and_only_entry_fields_of_entry_dicts():
    src = ("def f(out, e, ent, row, rec):\n"
           "    out['route'] = 1\n"
           "    e.update(route_reason='x', not_a_field=2)\n"
           "    ent.setdefault('feedback', [])\n"
           "    out['notes'] += 'more'\n"
           "    row['t_ms'] = 3\n"                   # a compare row, not an entry
           "    rec.update(target_eff=0.9)\n"        # a playbook record, not an entry
           "    out['not_a_field'] = 4\n")
    assert [k for _, k in sorted(writes(src))] == ["route", "route_reason", "feedback", "notes"]
