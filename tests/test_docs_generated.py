"""The field references of docs/ are generated from roofline/io/schema/fields.json (tools/docs_fields.py):
a page edited by hand, a field added to the reference without regenerating, or a property of the
artifact's JSON Schema that the reference lacks, fails here (issue 35 item 7)."""
from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("docs_fields", ROOT / "tools" / "docs_fields.py")
df = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(df)
DOC = df.load()


def test_every_page_holds_its_generated_tables():
    for kind, page in df.PAGES.items():
        text = (ROOT / page).read_text(encoding="utf-8")
        blocks = [(m.group(2), m.group(3)) for m in df.BLOCK.finditer(text)]
        assert blocks and {k for k, _ in blocks} == {kind}, (page, blocks)
        assert df.render(text, DOC) == text, f"{page} is stale: python3 tools/docs_fields.py"


def test_a_hand_edit_or_a_new_field_is_caught():
    text = (ROOT / "docs" / "artifact.md").read_text(encoding="utf-8")
    edited = text.replace("entry names by share of GPU time", "entry names by share of GPU tme", 1)
    assert edited != text and df.render(edited, DOC) != edited
    doc = json.loads(json.dumps(DOC))
    doc["artifact"]["entry"]["a_new_field"] = {"meaning": "new"}
    assert df.render(text, doc) != text


def test_no_field_is_listed_twice_on_a_page():
    for page in df.PAGES.values():
        text = (ROOT / page).read_text(encoding="utf-8")
        for m in df.BLOCK.finditer(text):
            names = [n for row in m.group(4).splitlines()[2:] for n in re.findall(r"`([^`]+)`", row.split(" | ")[0])]
            assert len(names) == len(set(names)), (page, [n for n in names if names.count(n) > 1])


def test_every_property_of_the_artifact_schema_is_in_the_reference():
    schema = json.loads((ROOT / "roofline" / "io" / "schema" / "profile_roofline.schema.json").read_text())
    assert set(schema["properties"]) <= set(DOC["artifact"]["top"])
    assert set(schema["$defs"]["entry"]["properties"]) <= set(DOC["artifact"]["entry"])
    for part in ("top", "entry"):
        for name, spec in DOC["artifact"][part].items():     # a grouped field points at a row that names it
            if "in_row_of" in spec:
                assert name in DOC["artifact"][part][spec["in_row_of"]]["with"]
