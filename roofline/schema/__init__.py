"""The JSON Schema of profile_roofline.json, a validator, and the artifact as JSON holds it
(`clean`: no NaN, no lone surrogate; roofline/report.py writes what it returns). Imports nothing
of the package (report imports it, not the reverse).

Speed (a cold `roofline analyze` pays all of it): jsonschema is imported only when an artifact is
validated; the validator is built once per process WITHOUT re-checking the schema itself (that
check, ~30 ms, is tests/test_schema_speed.py's job, where a broken schema must fail); and an
artifact whose content was already found valid in this process (the CLI checks before it writes,
and the write path checks again) is not walked twice.
"""
from __future__ import annotations

import functools
import hashlib
import json
import math
from importlib import resources

_VALID_SEEN: dict[str, None] = {}   # digests of artifact texts found valid (insertion-ordered, bounded)
_SEEN_MAX = 16


def clean(o):
    """JSON has no NaN/inf: write them as null (the schema allows null where a value can be absent).
    A string that is no text (a lone surrogate an input carried) is written escaped (\\ud800)."""
    if isinstance(o, float) and not math.isfinite(o):
        return None
    if isinstance(o, str):
        return _text(o)
    if isinstance(o, dict):
        return {_text(k) if isinstance(k, str) else k: clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [clean(v) for v in o]
    return o


def _text(s: str) -> str:
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "backslashreplace").decode("utf-8")


def artifact_schema() -> dict:
    return json.loads((resources.files("roofline") / "schema" / "profile_roofline.schema.json").read_text())


def check_schema() -> None:
    """Raise jsonschema.SchemaError if the schema file is not a valid schema of its draft."""
    import jsonschema

    schema = artifact_schema()
    jsonschema.validators.validator_for(schema).check_schema(schema)


@functools.lru_cache(maxsize=1)
def _validator():
    """The compiled validator of the schema's own draft (jsonschema.validate would re-check the
    schema on every call)."""
    import jsonschema

    schema = artifact_schema()
    return jsonschema.validators.validator_for(schema)(schema)


def validate_artifact(art: dict) -> None:
    """Raise jsonschema.ValidationError if `art` (as written, NaN-free) breaks the schema."""
    # the digest of the content as given (NaN spelled NaN: deterministic), before any cleaning
    digest = hashlib.blake2b(json.dumps(art, sort_keys=True, default=repr).encode(), digest_size=16).hexdigest()
    if digest in _VALID_SEEN:
        return
    clean_art = clean(art)
    v = _validator()
    if not v.is_valid(clean_art):
        import jsonschema

        raise jsonschema.exceptions.best_match(v.iter_errors(clean_art))
    _VALID_SEEN[digest] = None
    while len(_VALID_SEEN) > _SEEN_MAX:
        del _VALID_SEEN[next(iter(_VALID_SEEN))]
