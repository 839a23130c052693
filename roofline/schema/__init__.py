"""The JSON Schema of profile_roofline.json, and a validator."""
from __future__ import annotations

import json
from importlib import resources


def artifact_schema() -> dict:
    return json.loads((resources.files("roofline") / "schema" / "profile_roofline.schema.json").read_text())


def validate_artifact(art: dict) -> None:
    """Raise jsonschema.ValidationError if `art` (as written, NaN-free) breaks the schema."""
    import jsonschema

    from roofline.report import _clean

    jsonschema.validate(_clean(art), artifact_schema())
