"""The JSON Schema of profile_roofline.json, and a validator."""
from __future__ import annotations

import functools
import json
from importlib import resources


def artifact_schema() -> dict:
    return json.loads((resources.files("roofline") / "schema" / "profile_roofline.schema.json").read_text())


@functools.lru_cache(maxsize=1)
def _validator():
    import jsonschema

    schema = artifact_schema()
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def validate_artifact(art: dict) -> None:
    """Raise jsonschema.ValidationError if `art` (as written, NaN-free) breaks the schema."""
    from roofline.report import _clean

    _validator().validate(_clean(art))   # the schema is checked and compiled once, not per call
