#!/usr/bin/env python3
"""Write the op_class / op_kind enums of roofline/io/schema/profile_roofline.schema.json from the op-class
registry (roofline/core/opclasses/): op_class = the contract's closed set, op_kind = every registered class.
tests/test_opclasses.py::test_the_schema_enums_are_the_registry fails until this is run after a
class is added."""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from roofline.core import opclasses  # noqa: E402
from roofline.core.opclasses.base import SEED_CLASSES  # noqa: E402

PATH = ROOT / "roofline" / "io" / "schema" / "profile_roofline.schema.json"


def _enum(values) -> str:
    return "[" + ", ".join(f'"{v}"' for v in values) + "]"


def main() -> int:
    text = PATH.read_text(encoding="utf-8")
    new = re.sub(r'("op_class": \{"enum": )\[[^\]]*\]', lambda m: m.group(1) + _enum(SEED_CLASSES), text, count=1)
    new = re.sub(r'("op_kind": \{"enum": )\[[^\]]*\]', lambda m: m.group(1) + _enum(opclasses.REGISTRY), new, count=1)
    if new != text:
        PATH.write_text(new, encoding="utf-8")
        print(f"wrote {PATH.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
