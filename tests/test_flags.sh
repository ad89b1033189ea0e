#!/usr/bin/env bash
# tests/test_flags.sh - the same bits whatever the includer's flags.
#
# Builds tests/flags/flags.c (a 2-rank training at stages 0-3, bf16/f16/f32 params, AdamW
# and SGD, clipping, a NaN and an inf gradient; see its header) as an includer would, with
# each variant's compiler and flags plus -Wall -Wextra -Werror, runs it once per SIMD path
# this CPU has (ZERO_SIMD=scalar|avx2|avx512) and compares every digest line with the
# reference build's: our Makefile's flags (gcc -std=c99 -O2 -ffp-contract=off), scalar path.
# One PASS/FAIL line per variant (which paths ran is in the line); a compiler that is not
# installed is a SKIP. The program itself fails a variant where a non-finite gradient is not
# caught (ZERO_STEP_SKIPPED, params untouched) or, in GNU mode, M_PI is not declared.
# clang -Ofast -march=native (FMA everywhere: llm.c's flags) is a variant like the others:
# zero.h compiles its functions without FMA there (it used to refuse with an #error).
# Compiles run two at a time (each is a whole -O3 build of zero.h, ~45 s CPU here, so the
# list keeps one variant per thing that can change the bits: the dialect (ISO / GNU / C++),
# fast-math, -march=native with and without it, per compiler; -std=c11 -O3, -O2
# -ffast-math, clang++ -O3 and gcc's and clang's -std=gnu11 -O3 were dropped as covered by
# c99, -Ofast (GNU mode, -O3 and more), clang -O3 -march=native and g++ -O3; gcc's and
# clang's -Ofast without -march=native as covered by the same with it, which runs the same
# scalar path (ZERO_SIMD=scalar) with fast-math and FMA too).
# Run from the repository root.
set -u
OUT=${BUILD:-build}/flags
mkdir -p "$OUT"
SRC=tests/flags/flags.c
W=(-Wall -Wextra -Werror -pthread)
failed=0

# name | compiler | flags (the reference first)
VARIANTS=(
    "ref_c99_O2|gcc|-std=c99 -O2 -ffp-contract=off"
    "gcc_Ofast_march_native|gcc|-Ofast -march=native"
    "clang_c99_O2_pedantic|clang|-std=c99 -O2 -Wpedantic"
    "clang_O3_march_native|clang|-std=gnu11 -O3 -march=native"
    "clang_Ofast_march_native|clang|-Ofast -march=native"
    "gxx_gnu17_O3|g++|-x c++ -std=gnu++17 -O3"
    "gxx_Ofast|g++|-x c++ -std=c++11 -Ofast"
    "clangxx_ffast_math|clang++|-x c++ -std=c++11 -O2 -ffast-math"
)

build() {   # NAME CC FLAGS...: compile into $OUT/NAME, log in $OUT/NAME.log
    local name=$1 cc=$2; shift 2
    rm -f "$OUT/$name"
    # shellcheck disable=SC2068
    "$cc" $@ "${W[@]}" -o "$OUT/$name" "$SRC" -lm >"$OUT/$name.log" 2>&1
}

# compile every variant whose compiler exists, two at a time
running=0
for v in "${VARIANTS[@]}"; do
    IFS='|' read -r name cc flags <<<"$v"
    command -v "$cc" >/dev/null 2>&1 || continue
    build "$name" "$cc" "$flags" &
    running=$((running + 1))
    if [ "$running" -ge 2 ]; then wait -n 2>/dev/null || true; running=$((running - 1)); fi
done
wait

# run NAME PATH: the program's output for one path (lines but "path ...") into $OUT/NAME.PATH;
# prints the path that actually ran; the exit status is the program's
run_path() {
    local name=$1 p=$2 rc
    ZERO_SIMD=$p timeout 120 "$OUT/$name" >"$OUT/$name.$p.full" 2>&1
    rc=$?
    grep -v '^path ' "$OUT/$name.$p.full" >"$OUT/$name.$p"
    sed -n 's/^path //p' "$OUT/$name.$p.full" | head -n 1
    return $rc
}

ref=$OUT/ref_c99_O2.scalar
if [ ! -x "$OUT/ref_c99_O2" ]; then
    echo "FAIL ref_c99_O2: the reference build did not compile: $(grep -m1 -E 'error|warning' "$OUT/ref_c99_O2.log")"
    sed 's/^/    /' "$OUT/ref_c99_O2.log" | head -n 20
    exit 1
fi
if ! ran=$(run_path ref_c99_O2 scalar) || [ "$ran" != scalar ]; then
    echo "FAIL ref_c99_O2: the reference run failed (path ${ran:-?}): $(grep -m1 FAIL "$ref.full")"
    exit 1
fi

for v in "${VARIANTS[@]}"; do
    IFS='|' read -r name cc flags <<<"$v"
    if ! command -v "$cc" >/dev/null 2>&1; then echo "SKIP $name: $cc not installed"; continue; fi
    if [ ! -x "$OUT/$name" ]; then
        echo "FAIL $name: $cc $flags ${W[*]} does not compile: $(grep -m1 -E 'error|warning' "$OUT/$name.log")"
        sed 's/^/    /' "$OUT/$name.log" | head -n 20
        failed=1
        continue
    fi
    paths=() bad=""
    for p in scalar avx2 avx512; do
        ran=$(run_path "$name" "$p"); rc=$?
        if [ "$ran" != "$p" ]; then continue; fi          # this CPU has no such path
        paths+=("$p")
        if [ $rc -ne 0 ] || grep -q '^FAIL' "$OUT/$name.$p"; then
            bad="ZERO_SIMD=$p: exit $rc: $(grep -m1 '^FAIL' "$OUT/$name.$p" || tail -n 1 "$OUT/$name.$p.full")"
            break
        fi
        if ! cmp -s "$OUT/$name.$p" "$ref"; then
            bad="ZERO_SIMD=$p: not the reference's bits: $(diff "$ref" "$OUT/$name.$p" | grep -m1 '^>' | cut -c3-) (reference: $(diff "$ref" "$OUT/$name.$p" | grep -m1 '^<' | cut -c3-))"
            break
        fi
    done
    if [ -n "$bad" ]; then
        echo "FAIL $name ($cc $flags): $bad"
        failed=1
    else
        echo "PASS $name ($cc $flags; paths: ${paths[*]}; $(grep -c '^digest' "$ref") digests as the reference)"
    fi
done

exit $failed
