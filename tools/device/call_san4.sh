#!/usr/bin/env bash
# A short device call (the fourth machine start): compute-sanitizer memcheck, synccheck, racecheck
# of the builds no sanitizer run had covered yet (target sets san-round4-dense, san-round4-x;
# LADDER_LEVELS=99 selects no level: the variants alone).
# -> $OUT/x.tgz (logs), a summary line per tool and driver.
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site LADDER_CUBIN_DIR=$PWD/.cubins
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . 2>&1 | tail -1
R=$OUT/r; mkdir -p $R
S="python3 -m roofline.ladder.device_suite"   # the one driver, for every contract
DV=$($S levels --set san-round4-dense); XV=$($S levels --set san-round4-x)
for tool in memcheck synccheck racecheck; do
  T=$([ $tool = racecheck ] && echo ${RACE_S:-55} || echo 22)
  LADDER_LEVELS=99 LADDER_SAN_VARIANTS=$DV timeout $T compute-sanitizer --tool $tool --report-api-errors no \
    --error-exitcode 9 $S sanitize > $R/d_$tool.log 2>&1
  echo "dense $tool rc=$?: $(grep -cE 'sanitize-mode.*: ok' $R/d_$tool.log) ok, $(grep -c FAIL $R/d_$tool.log) FAIL; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/d_$tool.log | tail -1)"
  timeout $T compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 $S sanitize --targets $XV > $R/x_$tool.log 2>&1
  echo "x $tool rc=$?: $(grep -c ': ok' $R/x_$tool.log) ok, $(grep -c FAIL $R/x_$tool.log) FAIL; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/x_$tool.log | tail -1)"
  tar -czf $OUT/x.tgz -C $OUT r
done
