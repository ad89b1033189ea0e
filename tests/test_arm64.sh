#!/usr/bin/env bash
# tests/test_arm64.sh - zero.h on ARM64 (Linux, AArch64), cross-built here (make's cc_arm64:
# ARM64_CC, default aarch64-linux-gnu-gcc) and run under qemu-aarch64 (user mode, the cross
# sysroot as QEMU_LD_PREFIX):
#   - arm64_test_cpuopt: tests/test_cpuopt.c, every optimizer, norm and sum kernel of the NEON
#     path (ZERO_SIMD=neon) bitwise against the scalar reference at every dtype, lengths that
#     reach every tail, the thread pool and the end-to-end runs;
#   - arm64_clang_test_cpuopt: its kernel cases (ZERO_TEST_ONLY=test_simd_knob,test_paths) built by clang for
#     AArch64 with clang's own defaults (-std=gnu11 -O2: contraction on; zero.h turns it off
#     for itself), when clang is there;
#   - arm64_test_zpp_payloads: tests/test_zpp.c's payload cases (ZERO_TEST_ONLY=test_payload):
#     ZeRO++'s int8 encoder, decoder and sums on NEON bitwise the scalar path, ties included;
#   - arm64_test_kmath: tests/test_kmath.c, and its digests of zero_expf / zero_logf /
#     zero_tanhf over a sweep of the floats equal to the x86-64 build's (libm's tanhf is not);
#   - arm64_flags_<variant>: tests/flags/flags.c (see tests/test_flags.sh) built for AArch64
#     with the Makefile's flags and with -Ofast (crtfastmath sets FPCR.FZ: zero.h's kernels
#     clear it while they run), run with ZERO_SIMD=scalar and neon: every digest line the
#     x86-64 reference build's;
#   - arm64_train_mlp_<path>_<case>: examples/train_mlp.c at stages 0-3 (2 ranks as threads),
#     with ZERO_SIMD=scalar and neon, --save-params bitwise equal to the x86-64 build's
#     (build/train_mlp, ZERO_SIMD=scalar, stage 0): bf16 AdamW, f16 (loss scaling), SGD, and q8
#     moments (the NEON block encoder and decoder: neon only, stages 0 and 3).
# What QEMU cannot say: speed (it translates instructions; no timing here is meaningful).
# A missing cross compiler or qemu-aarch64 is a SKIP. Run from the repository root after make.
set -u
BUILD=${BUILD:-build}
CC64=${ARM64_CC:-aarch64-linux-gnu-gcc}
if ! command -v "$CC64" >/dev/null 2>&1 || ! command -v qemu-aarch64 >/dev/null 2>&1; then
    echo "SKIP arm64: $CC64 or qemu-aarch64 not installed (Debian: gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)"
    exit 0
fi
export QEMU_LD_PREFIX=${QEMU_LD_PREFIX:-$("$CC64" -print-sysroot 2>/dev/null)}
[ -n "$QEMU_LD_PREFIX" ] && [ "$QEMU_LD_PREFIX" != / ] || QEMU_LD_PREFIX=/usr/aarch64-linux-gnu
LOG=$BUILD/logs/arm64_build.log
mkdir -p "$BUILD/logs"
JOBS=${ZERO_JOBS:-$(nproc 2>/dev/null || echo 2)}
if ! make --no-print-directory -j"$JOBS" BUILD="$BUILD" "$BUILD/arm64/test_cpuopt" "$BUILD/arm64/train_mlp" \
        "$BUILD/arm64/test_kmath" "$BUILD/arm64/test_zpp" "$BUILD/train_mlp" "$BUILD/test_kmath" >"$LOG" 2>&1; then
    echo "FAIL arm64_build: make of build/arm64/ failed (see $LOG)"
    tail -n 20 "$LOG"
    exit 1
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
failed=0

out=$(timeout 600 qemu-aarch64 "$BUILD/arm64/test_cpuopt" 2>&1); rc=$?
last=$(printf '%s\n' "$out" | tail -n 1)
if [ $rc -eq 0 ] && printf '%s' "$last" | grep -qE '^[0-9]+ passed, 0 failed' &&
   printf '%s\n' "$out" | grep -q '^PASS cpuopt_neon_adamw_gbf16_pbf16'; then
    echo "PASS arm64_test_cpuopt ($last; $(printf '%s\n' "$out" | grep -c '^PASS cpuopt_neon_') NEON cases)"
else
    echo "FAIL arm64_test_cpuopt: exit $rc: $(printf '%s\n' "$out" | grep -m3 '^FAIL' | tr '\n' ' ') $last"
    failed=1
fi

if command -v clang >/dev/null 2>&1; then
    if ! clang --target=aarch64-linux-gnu -std=gnu11 -O2 -Wall -Wextra -Werror -pthread -I. -o "$BUILD/arm64/test_cpuopt_clang" \
            tests/test_cpuopt.c -lm >"$BUILD/logs/arm64_clang.log" 2>&1; then
        echo "FAIL arm64_clang_test_cpuopt: clang --target=aarch64-linux-gnu does not build it: $(grep -m1 -E 'error|warning' "$BUILD/logs/arm64_clang.log")"
        failed=1
    else
        out=$(ZERO_TEST_ONLY=test_simd_knob,test_paths timeout 600 qemu-aarch64 "$BUILD/arm64/test_cpuopt_clang" 2>&1); rc=$?
        last=$(printf '%s\n' "$out" | tail -n 1)
        if [ $rc -eq 0 ] && printf '%s' "$last" | grep -qE '^[0-9]+ passed, 0 failed'; then
            echo "PASS arm64_clang_test_cpuopt ($last)"
        else
            echo "FAIL arm64_clang_test_cpuopt: exit $rc: $(printf '%s\n' "$out" | grep -m3 '^FAIL' | tr '\n' ' ') $last"
            failed=1
        fi
    fi
else
    echo "SKIP arm64_clang_test_cpuopt: clang not installed"
fi

out=$(ZERO_TEST_ONLY=test_payload timeout 300 qemu-aarch64 "$BUILD/arm64/test_zpp" 2>&1); rc=$?
last=$(printf '%s\n' "$out" | tail -n 1)
if [ $rc -eq 0 ] && printf '%s' "$last" | grep -qE '^[0-9]+ passed, 0 failed' && printf '%s\n' "$out" | grep -q '^PASS test_payload_simd_bits'; then
    echo "PASS arm64_test_zpp_payloads ($last)"
else
    echo "FAIL arm64_test_zpp_payloads: exit $rc: $(printf '%s\n' "$out" | grep -m3 '^FAIL' | tr '\n' ' ') $last"; failed=1
fi

out=$(timeout 300 qemu-aarch64 "$BUILD/arm64/test_kmath" 2>&1); rc=$?
mine=$(printf '%s\n' "$out" | grep '^digest ')
ref=$("$BUILD/test_kmath" 2>/dev/null | grep '^digest ')
if [ $rc -ne 0 ] || printf '%s\n' "$out" | grep -q '^FAIL'; then
    echo "FAIL arm64_test_kmath: exit $rc: $(printf '%s\n' "$out" | grep -m3 '^FAIL' | tr '\n' ' ')"; failed=1
elif [ -z "$mine" ] || [ "$mine" != "$ref" ]; then
    echo "FAIL arm64_test_kmath: digests differ from x86-64's: $(printf '%s' "$mine" | tr '\n' ' ') vs $(printf '%s' "$ref" | tr '\n' ' ')"; failed=1
else
    echo "PASS arm64_test_kmath (exp, log, tanh: the x86-64 build's bits over the sweep)"
fi

# flags.c: x86-64's reference, AArch64's with two flag sets, compiled side by side
F=$BUILD/arm64/flags
mkdir -p "$F"
gcc -std=c99 -O2 -ffp-contract=off -Wall -Wextra -Werror -pthread -o "$F/x86_ref" tests/flags/flags.c -lm >"$F/x86_ref.log" 2>&1 &
"$CC64" -std=c99 -O2 -ffp-contract=off -Wall -Wextra -Werror -pthread -o "$F/c99_O2" tests/flags/flags.c -lm >"$F/c99_O2.log" 2>&1 &
"$CC64" -Ofast -Wall -Wextra -Werror -pthread -o "$F/Ofast" tests/flags/flags.c -lm >"$F/Ofast.log" 2>&1 &
wait
if ! ZERO_SIMD=scalar "$F/x86_ref" 2>&1 | grep '^digest' >"$F/ref"; then
    echo "FAIL arm64_flags: the x86-64 reference did not build or run: $(head -n 1 "$F/x86_ref.log")"; failed=1
else
    for v in c99_O2 Ofast; do
        bad=
        if [ ! -x "$F/$v" ]; then bad="does not compile: $(grep -m1 -E 'error|warning' "$F/$v.log")"; fi
        for p in scalar neon; do
            [ -n "$bad" ] && break
            ZERO_SIMD=$p timeout 120 qemu-aarch64 "$F/$v" >"$F/$v.$p.full" 2>&1 || { bad="ZERO_SIMD=$p: exit $?: $(grep -m1 FAIL "$F/$v.$p.full")"; break; }
            grep '^digest' "$F/$v.$p.full" | cmp -s - "$F/ref" || bad="ZERO_SIMD=$p: not the x86-64 reference's digests"
        done
        if [ -z "$bad" ]; then echo "PASS arm64_flags_$v ($(grep -c . "$F/ref") digests as x86-64's, scalar and neon)"
        else echo "FAIL arm64_flags_$v: $bad"; failed=1; fi
    done
fi

SMALL=(--hidden 48 --layers 3 --batch 24 --steps 12 --quiet --seed 3 --ranks 2)
for c in "bf16_adamw|--dtype bf16" "f16_adamw|--dtype f16" "f32_sgd|--dtype f32 --optim sgd" \
         "q8_states|--dtype bf16 --optim-state-dtype q8"; do
    IFS='|' read -r name args <<<"$c"
    # shellcheck disable=SC2086
    if ! ZERO_SIMD=scalar "$BUILD/train_mlp" "${SMALL[@]}" $args --stage 0 --save-params "$T/x86_$name" >"$T/x86.log" 2>&1; then
        echo "FAIL arm64_train_mlp_$name: the x86-64 reference run failed: $(tail -n 1 "$T/x86.log")"; failed=1; continue
    fi
    for p in scalar neon; do
        bad=
        # q8 moments: the NEON block code's bits at stages 0 and 3 (the scalar path's are x86-64's too)
        if [ "$name" = q8_states ] && [ $p = scalar ]; then continue; fi
        for s in 0 1 2 3; do
            if [ "$name" = q8_states ] && { [ $s = 1 ] || [ $s = 2 ]; }; then continue; fi
            # shellcheck disable=SC2086
            if ! ZERO_SIMD=$p timeout 300 qemu-aarch64 "$BUILD/arm64/train_mlp" "${SMALL[@]}" $args --stage $s \
                    --save-params "$T/a_$name" >"$T/a.log" 2>&1; then
                bad="stage $s: exit: $(tail -n 1 "$T/a.log")"; break
            fi
            cmp -s "$T/x86_$name" "$T/a_$name" || { bad="stage $s: params differ from x86-64's (ZERO_SIMD=scalar, stage 0)"; break; }
        done
        if [ -z "$bad" ]; then echo "PASS arm64_train_mlp_${p}_$name (stages $([ "$name" = q8_states ] && echo '0 and 3' || echo 0-3) bitwise the x86-64 build)"
        else echo "FAIL arm64_train_mlp_${p}_$name: $bad"; failed=1; fi
    done
done
exit $failed
