"""The JSON Schema of profile_roofline.json, a validator, and the artifact as JSON holds it
(`clean`: no NaN, no lone surrogate; roofline/report/artifact.py writes what it returns). Imports nothing
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
    return json.loads((resources.files("roofline.io.schema") / "profile_roofline.schema.json").read_text())


# jsonschema imports its optional format checkers at import time, each one a package installed
# beside it or not (HolisticTraceAnalysis or Jupyter bring them): rfc3987_syntax builds a grammar
# then (1.8 s), isoduration pulls arrow (60 ms). The artifact schema uses no `format`. A command
# line process (LEAN_JSONSCHEMA, set by `roofline analyze`) keeps them out while jsonschema loads and
# lets them back in right after (a later import of one works; jsonschema's FormatChecker then lacks
# those formats, which nothing in the command uses). A library caller (the hook, the API) gets
# jsonschema as it is.
LEAN_JSONSCHEMA = False
_FORMAT_MODULES = ("rfc3987", "rfc3987_syntax", "rfc3986_validator", "rfc3339_validator", "isoduration",
                   "webcolors", "jsonpointer", "uri_template", "fqdn", "idna")


def _jsonschema():
    import sys

    if "jsonschema" in sys.modules or not LEAN_JSONSCHEMA:
        import jsonschema

        return jsonschema
    blocked = [m for m in _FORMAT_MODULES if m not in sys.modules]
    for m in blocked:
        sys.modules[m] = None          # importing it raises ImportError, which jsonschema suppresses
    try:
        import jsonschema
    finally:
        for m in blocked:
            if m in sys.modules and sys.modules[m] is None:
                del sys.modules[m]
    return jsonschema


def check_schema() -> None:
    """Raise jsonschema.SchemaError if the schema file is not a valid schema of its draft."""
    jsonschema = _jsonschema()

    schema = artifact_schema()
    jsonschema.validators.validator_for(schema).check_schema(schema)


@functools.lru_cache(maxsize=1)
def _validator():
    """The compiled validator of the schema's own draft (jsonschema.validate would re-check the
    schema on every call)."""
    jsonschema = _jsonschema()

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
        jsonschema = _jsonschema()

        raise jsonschema.exceptions.best_match(v.iter_errors(clean_art))
    _VALID_SEEN[digest] = None
    while len(_VALID_SEEN) > _SEEN_MAX:
        del _VALID_SEEN[next(iter(_VALID_SEEN))]
