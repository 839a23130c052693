"""The JSON Schema of profile_roofline.json, and a validator."""
from __future__ import annotations

import functools
import json
from importlib import resources


def artifact_schema() -> dict:
    return json.loads((resources.files("roofline") / "schema" / "profile_roofline.schema.json").read_text())


@functools.lru_cache(maxsize=1)
def _validator():
    """The schema is checked and compiled once (jsonschema.validate re-checks it on every call:
    ~0.1 s, which the hook would pay on every run)."""
    import jsonschema

    schema = artifact_schema()
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def validate_artifact(art: dict) -> None:
    """Raise jsonschema.ValidationError if `art` (as written, NaN-free) breaks the schema."""
    import jsonschema

    from roofline.report import _clean

    err = jsonschema.exceptions.best_match(_validator().iter_errors(_clean(art)))
    if err is not None:
        raise err
