#!/usr/bin/env bash
# tests/test_fuzz.sh - a short libFuzzer run of tests/fuzz_ckpt.c (the checkpoint and
# safetensors readers) under ASan: 2000 inputs from a seed corpus of a real manifest.
# Prints PASS/FAIL lines; if clang's libFuzzer is not available it prints SKIP and
# exits 0 without a PASS/FAIL line. Run from the repository root.
set -u
OUT=${BUILD:-build}/fuzz
mkdir -p "$OUT"
CLANG=${CLANG:-clang}
if ! command -v "$CLANG" >/dev/null 2>&1; then echo "SKIP fuzz_ckpt: $CLANG not installed"; exit 0; fi
probe=$OUT/probe.c
printf '#include <stdint.h>\n#include <stddef.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' >"$probe"
if ! "$CLANG" -fsanitize=fuzzer,address -o "$OUT/probe" "$probe" >/dev/null 2>&1; then
    echo "SKIP fuzz_ckpt: $CLANG has no libFuzzer (-fsanitize=fuzzer)"; exit 0
fi
bin=$OUT/fuzz_ckpt
rm -f "$bin"
if ! "$CLANG" -std=c99 -O1 -g -I. -pthread -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
        -o "$bin" tests/fuzz_ckpt.c -lm >"$OUT/build.log" 2>&1; then
    echo "FAIL fuzz_ckpt_build: $(grep -m1 error "$OUT/build.log")"
    exit 1
fi
echo "PASS fuzz_ckpt_build"
corpus=$(mktemp -d "${TMPDIR:-/tmp}/zero_fuzz_corpus.XXXXXX")
if ZERO_FUZZ_CORPUS=$corpus ASAN_OPTIONS=detect_leaks=1 "$bin" -runs=2000 -seed=1 -max_len=4096 "$corpus" \
        >"$OUT/run.log" 2>&1; then
    echo "PASS fuzz_ckpt_2000_runs"
    rc=0
else
    echo "FAIL fuzz_ckpt_2000_runs: $(grep -m1 -E 'ERROR|SUMMARY|changed' "$OUT/run.log") (log: $OUT/run.log)"
    rc=1
fi
rm -rf "$corpus"
exit $rc
