#!/usr/bin/env bash
# tests/test_fuzz.sh - a short libFuzzer run of tests/fuzz_ckpt.c (the checkpoint and
# safetensors readers) under ASan: 2000 inputs from a seed corpus of a real manifest.
# Prints PASS/FAIL lines. Without clang's libFuzzer it prints SKIP for the libFuzzer run
# and instead replays the seeds and 2000 fixed-seed mutations through the same harness
# built with $CC -DZERO_FUZZ_MAIN under ASan (fuzz_ckpt_replay). Both builds define
# ZERO_NO_SIMD: the readers have no vector code, and the optimizer's vector paths are a
# quarter of the compile. Run from the repository root.
set -u
OUT=${BUILD:-build}/fuzz
mkdir -p "$OUT"
CLANG=${CLANG:-clang}

replay() {   # the fallback: a plain main() over seeds and deterministic mutations
    local cc=${CC:-gcc} bin=$OUT/fuzz_ckpt_replay corpus
    if ! "$cc" -std=c99 -O1 -g1 -I. -pthread -DZERO_NO_SIMD -DZERO_FUZZ_MAIN -fsanitize=address,undefined \
            -fno-sanitize-recover=undefined -o "$bin" tests/fuzz_ckpt.c -lm >"$OUT/replay_build.log" 2>&1; then
        echo "FAIL fuzz_ckpt_replay: build: $(grep -m1 error "$OUT/replay_build.log")"
        return 1
    fi
    corpus=$(mktemp -d "${TMPDIR:-/tmp}/zero_fuzz_corpus.XXXXXX")
    if ZERO_FUZZ_CORPUS=$corpus "$bin" 2000 >"$OUT/replay.log" 2>&1; then
        echo "PASS fuzz_ckpt_replay"
    else
        echo "FAIL fuzz_ckpt_replay: $(grep -m1 -E 'ERROR|SUMMARY|changed' "$OUT/replay.log") (log: $OUT/replay.log)"
        rm -rf "$corpus"
        return 1
    fi
    rm -rf "$corpus"
}

probe=$OUT/probe.c
printf '#include <stdint.h>\n#include <stddef.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' >"$probe"
if ! command -v "$CLANG" >/dev/null 2>&1 || ! "$CLANG" -fsanitize=fuzzer,address -o "$OUT/probe" "$probe" >/dev/null 2>&1; then
    echo "SKIP fuzz_ckpt: $CLANG with libFuzzer (-fsanitize=fuzzer) is not available; replaying seeds instead"
    replay
    exit $?
fi
bin=$OUT/fuzz_ckpt
rm -f "$bin"
if ! "$CLANG" -std=c99 -O1 -g1 -I. -pthread -DZERO_NO_SIMD -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
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
