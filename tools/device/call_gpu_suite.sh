#!/usr/bin/env bash
# The GPU test suite on the device with the project installed as a user installs it on a machine
# with no package index: `pip install --no-index --find-links .whl -e .` resolves every dependency
# pyproject.toml declares from the image's site-packages and the carried wheels (.whl: ijson,
# jsonschema and its three, cxxfilt, ncu-report). Cubins prebuilt on the CPU machine
# (`python3 -m roofline.ladder.prebuild .cubins ...`) spare the device NVRTC time; a missing or
# stale one is built with NVRTC there. Carry: .whl, .cubins.  -> $OUT/gpu_suite.txt
set -u
export PYTHONUNBUFFERED=1
R=$OUT/gpu_suite.txt
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv,noheader
  python3 -m pip install -q --no-index --find-links .whl --no-build-isolation -e . 2>&1 | tail -3
  python3 -m pip show roofline 2>/dev/null | head -2
  python3 -c "import roofline, ijson, jsonschema, cxxfilt, ncu_report, cupy, torch; print('imports ok', roofline.__file__, torch.__version__)"
  roofline --version 2>/dev/null || roofline --help | head -2
  export LADDER_CUBIN_DIR=$PWD/.cubins
  timeout ${SUITE_S:-480} python3 -m pytest -q -m gpu -p no:cacheprovider -rs tests 2>&1 | tail -40
  echo "pytest rc=${PIPESTATUS[0]}"
} 2>&1 | tee $R
