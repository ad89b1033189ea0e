#!/usr/bin/env bash
# tests/test_cblas.sh - the tiled linear with its GEMMs through a CBLAS (ZERO_CBLAS):
# builds tests/test_tiling.c with -DZERO_CBLAS against CBLAS_LIBS (default -lblas) and
# runs it, prefixing its PASS/FAIL/SKIP lines with "cblas/". Without cblas.h it says so and
# reports one FAIL (CI installs libblas-dev, so a missing CBLAS is a broken setup).
set -u
OUT=${BUILD:-build}/cblas
mkdir -p "$OUT"
libs=${CBLAS_LIBS:--lblas}
if ! echo '#include <cblas.h>' | ${CC:-gcc} -E -x c - >/dev/null 2>&1; then
    echo "FAIL cblas/setup: cblas.h not found (apt-get install libblas-dev, or set CC/CBLAS_LIBS)"
    exit 1
fi
if ! ${CC:-gcc} -std=c99 -O2 -g -Wall -Wextra -Werror -ffp-contract=off -pthread -I. -DZERO_CBLAS \
        tests/test_tiling.c -o "$OUT/test_tiling" $libs -lm >"$OUT/build.log" 2>&1; then
    echo "FAIL cblas/build: $(grep -m1 -E 'error' "$OUT/build.log")"
    exit 1
fi
"$OUT/test_tiling" | sed 's/^\(PASS\|FAIL\|SKIP\) /\1 cblas\//'
exit "${PIPESTATUS[0]}"
