"""`python3 -m roofline.commands.peaks_measure ARGS` is `roofline peaks measure ARGS` (the spelling
the device scripts use); the measurement itself is roofline.peaks.measure."""
from __future__ import annotations

import sys


def main(argv=None) -> int:
    from roofline.commands.peaks import measure_cmd

    try:
        measure_cmd.main(args=argv, prog_name="roofline peaks measure")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
