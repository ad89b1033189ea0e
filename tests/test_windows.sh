#!/usr/bin/env bash
# tests/test_windows.sh - zero.h on Windows (x86-64), cross-built here with MinGW-w64's Win32
# thread model (make's cc_win: WIN_CC, default x86_64-w64-mingw32-gcc-win32; no winpthreads,
# so the native API is what runs) and run under Wine:
#   - win_imports: every program imports no pthread symbol and no libwinpthread; the native
#     calls zero.h's >>platform makes are there (SRW locks, condition variables, _beginthreadex,
#     CreateFileW, MoveFileExW, Winsock's WSAPoll);
#   - win_<case>: the cases of a subset of the test programs, each line as the program printed
#     it with "win_" before the name: test_platform (threads, timed waits, UTF-8 files, a
#     checkpoint in a UTF-8 directory, the TCP rendezvous over Winsock, the NVMe tier's missing
#     directory), test_cpuopt (every CPU kernel, scalar, AVX2 and AVX-512 where the CPU has them,
#     bitwise the scalar reference; the thread pool), test_kmath, test_errors (the error paths);
#     the stages against each other are train_mlp's below, and the other test programs that
#     build for Windows (test_offload, test_equiv, ...: make build/win/NAME.exe) are left to
#     a run by hand, for time;
#   - win_kmath_digests, win_flags_digests: test_kmath's and tests/flags/flags.c's digests
#     equal to the x86-64 Linux build's (ZERO_SIMD=scalar and the CPU's best path);
#   - win_train_mlp_<case>: examples/train_mlp.c at stages 0-3 (2 ranks as threads) --save-params
#     bitwise equal to the Linux build's (build/train_mlp, stage 0): bf16 AdamW, f16, SGD;
#   - win_train_mlp_nvme: stage 3 with the optimizer and the params on the NVMe tier in a
#     directory on Wine's C: drive, bitwise the same;
#   - win_train_mlp_resume: 6 steps saved at stage 2, loaded at stage 1 for 6 more: the
#     12-step run's bits;
#   - win_train_mlp_missing_dir: the NVMe tier in a directory that does not exist: exit 1 and
#     ZERO_ERR_IO's message naming the file;
#   - win_clang_train_mlp: train_mlp built by clang for the same target (MinGW's headers and
#     libraries), stage 3: the Linux build's bits.
# Wine is not an emulator: timings are the host's, but no Windows kernel is involved (files
# and sockets are Wine's). What it cannot say: MSVC (not installed; see the README's platform
# table). A missing cross compiler or wine is a SKIP. Run from the repository root after make.
set -u
BUILD=${BUILD:-build}
WCC=${WIN_CC:-x86_64-w64-mingw32-gcc-win32}
OBJDUMP=${WIN_OBJDUMP:-x86_64-w64-mingw32-objdump}
if ! command -v "$WCC" >/dev/null 2>&1 || ! command -v wine >/dev/null 2>&1 || ! command -v "$OBJDUMP" >/dev/null 2>&1; then
    echo "SKIP windows: $WCC, $OBJDUMP or wine not installed (Debian: gcc-mingw-w64-x86-64-win32 wine wine64)"
    exit 0
fi
LOG=$BUILD/logs/windows_build.log
mkdir -p "$BUILD/logs"
JOBS=${ZERO_JOBS:-$(nproc 2>/dev/null || echo 2)}
PROGS=(test_platform test_cpuopt test_kmath test_errors)
TARGETS=()
for p in "${PROGS[@]}" train_mlp flags; do TARGETS+=("$BUILD/win/$p.exe"); done
if ! make --no-print-directory -j"$JOBS" BUILD="$BUILD" "${TARGETS[@]}" "$BUILD/train_mlp" "$BUILD/test_kmath" \
        >"$LOG" 2>&1; then
    echo "FAIL windows_build: make of build/win/ failed (see $LOG)"
    tail -n 20 "$LOG"
    exit 1
fi
T=$(mktemp -d)
# Wine's own prefix (C: drive, registry), made on the first run; no Mono or Gecko prompts.
# Every wine call reads /dev/null and writes files: the wineserver and its helpers outlive
# a call and would hold a pipe open; the last step stops them.
export WINEPREFIX=$PWD/$BUILD/wine WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
trap 'wineserver -k >/dev/null 2>&1; rm -rf "$T"' EXIT
wineserver -p 30 </dev/null >/dev/null 2>&1
# runs a Windows program (wine, 300 s at most): its stdout (CRLF made LF) in $T/out, stderr in $T/err.
# When Wine itself fails ("wine client error": its connection to the wineserver broke, seen once
# in CI with the program's output empty), the program runs once more on a fresh wineserver, with
# an INFO line; its own failures are not retried.
wrun() {
    local rc try
    for try in 1 2; do
        timeout 300 wine "$@" </dev/null >"$T/out.raw" 2>"$T/err"; rc=$?
        if [ "$try" = 1 ] && grep -q '^wine client error' "$T/err"; then
            echo "INFO win: $(basename "$1"): $(grep -m 1 '^wine client error' "$T/err"): run again on a fresh wineserver"
            wineserver -k >/dev/null 2>&1
            wineserver -p 30 </dev/null >/dev/null 2>&1
            continue
        fi
        break
    done
    tr -d '\r' <"$T/out.raw" >"$T/out"
    return $rc
}
failed=0

bad=
for p in "${PROGS[@]}" train_mlp flags; do
    imp=$("$OBJDUMP" -p "$BUILD/win/$p.exe" 2>/dev/null)
    if printf '%s\n' "$imp" | grep -qi 'pthread'; then bad="$bad $p imports pthreads;"; fi
done
imp=$("$OBJDUMP" -p "$BUILD/win/test_platform.exe" 2>/dev/null)
for f in AcquireSRWLockExclusive SleepConditionVariableSRW _beginthreadex CreateFileW MoveFileExW WSAPoll; do
    printf '%s\n' "$imp" | grep -qw "$f" || bad="$bad test_platform does not import $f;"
done
if [ -z "$bad" ]; then echo "PASS win_imports (no pthread import in ${#PROGS[@]}+2 programs; the native API in test_platform)"
else echo "FAIL win_imports:$bad"; failed=1; fi

for p in "${PROGS[@]}"; do
    wrun "$BUILD/win/$p.exe"; rc=$?
    grep -E '^(PASS|FAIL|SKIP) ' "$T/out" | sed -E 's/^(PASS|FAIL|SKIP) /\1 win_/'
    if [ $rc -ne 0 ] && ! grep -q '^FAIL ' "$T/out"; then
        echo "FAIL win_$p: exit $rc with no FAIL line: $(tail -n 2 "$T/err" | tr '\n' ' ')"; failed=1
    fi
    [ $rc -eq 0 ] || failed=1
    [ "$p" = test_kmath ] && grep '^digest ' "$T/out" >"$T/kmath"
done

ref=$("$BUILD/test_kmath" 2>/dev/null | grep '^digest ')
if [ -n "$ref" ] && [ "$(cat "$T/kmath")" = "$ref" ]; then echo "PASS win_kmath_digests (exp, log, tanh: the Linux build's bits)"
else echo "FAIL win_kmath_digests: $(tr '\n' ' ' <"$T/kmath") vs $(printf '%s' "$ref" | tr '\n' ' ')"; failed=1; fi

gcc -std=c99 -O2 -ffp-contract=off -Wall -Wextra -Werror -pthread -o "$T/flags_ref" tests/flags/flags.c -lm 2>"$T/err" &&
    ZERO_SIMD=scalar "$T/flags_ref" 2>/dev/null | grep '^digest ' >"$T/flags_ref.txt"
bad=
for p in scalar best; do
    if [ $p = scalar ]; then ZERO_SIMD=scalar wrun "$BUILD/win/flags.exe"; else wrun "$BUILD/win/flags.exe"; fi || bad="$bad $p: exit $?;"
    grep '^digest ' "$T/out" | cmp -s - "$T/flags_ref.txt" || bad="$bad $p ($(grep -m1 '^path' "$T/out")): not the Linux digests;"
done
if [ -z "$bad" ] && [ -s "$T/flags_ref.txt" ]; then echo "PASS win_flags_digests ($(grep -c . "$T/flags_ref.txt") digests as Linux's, scalar and the best path)"
else echo "FAIL win_flags_digests:$bad"; failed=1; fi

SMALL=(--hidden 48 --layers 3 --batch 24 --quiet --seed 3 --ranks 2)
for c in "bf16_adamw|--dtype bf16" "f16_adamw|--dtype f16" "f32_sgd|--dtype f32 --optim sgd"; do
    IFS='|' read -r name args <<<"$c"
    # shellcheck disable=SC2086
    if ! "$BUILD/train_mlp" "${SMALL[@]}" $args --steps 12 --stage 0 --save-params "$T/lin_$name" >"$T/lin.log" 2>&1; then
        echo "FAIL win_train_mlp_$name: the Linux reference run failed: $(tail -n 1 "$T/lin.log")"; failed=1; continue
    fi
    bad=
    for s in 0 1 2 3; do
        # shellcheck disable=SC2086
        wrun "$BUILD/win/train_mlp.exe" "${SMALL[@]}" $args --steps 12 --stage $s --save-params "$T/w_$name" ||
            { bad="stage $s: exit: $(tail -n 1 "$T/err")"; break; }
        cmp -s "$T/lin_$name" "$T/w_$name" || { bad="stage $s: not the Linux build's params"; break; }
    done
    if [ -z "$bad" ]; then echo "PASS win_train_mlp_$name (stages 0-3 bitwise the Linux build)"
    else echo "FAIL win_train_mlp_$name: $bad"; failed=1; fi
done

nv='C:\zero_nvme'
mkdir -p "$WINEPREFIX/drive_c/zero_nvme"
if wrun "$BUILD/win/train_mlp.exe" "${SMALL[@]}" --dtype bf16 --steps 12 --stage 3 --offload-optimizer nvme \
        --offload-params nvme --nvme-dir "$nv" --save-params "$T/w_nvme" && cmp -s "$T/lin_bf16_adamw" "$T/w_nvme" &&
        [ -z "$(ls -A "$WINEPREFIX/drive_c/zero_nvme")" ]; then
    echo "PASS win_train_mlp_nvme (stage 3, optimizer and params in $nv: the Linux build's bits; the files removed)"
else
    echo "FAIL win_train_mlp_nvme: $(tail -n 1 "$T/err"); left: $(ls "$WINEPREFIX/drive_c/zero_nvme" | head -3 | tr '\n' ' ')"; failed=1
fi
rm -rf "$WINEPREFIX/drive_c/zero_nvme"

ck='C:\zero_ckpt'
rm -rf "$WINEPREFIX/drive_c/zero_ckpt"
if wrun "$BUILD/win/train_mlp.exe" "${SMALL[@]}" --dtype bf16 --steps 6 --stage 2 --save-ckpt "$ck" &&
   wrun "$BUILD/win/train_mlp.exe" "${SMALL[@]}" --dtype bf16 --steps 6 --stage 1 --load-ckpt "$ck" --save-params "$T/w_res" &&
   cmp -s "$T/lin_bf16_adamw" "$T/w_res"; then
    echo "PASS win_train_mlp_resume (6 steps at stage 2 saved in $ck, 6 more at stage 1: the 12-step bits)"
else
    echo "FAIL win_train_mlp_resume: $(tail -n 1 "$T/err")"; failed=1
fi
rm -rf "$WINEPREFIX/drive_c/zero_ckpt"

wrun "$BUILD/win/train_mlp.exe" "${SMALL[@]}" --dtype bf16 --steps 2 --stage 3 --offload-optimizer nvme \
    --nvme-dir 'C:\no\such\dir'; rc=$?
if [ $rc -eq 1 ] && grep -q 'ZERO_ERR_IO.*cannot create the offload file C:\\no\\such\\dir/zero_optim' "$T/err"; then
    echo "PASS win_train_mlp_missing_dir (exit 1: $(grep -m1 -o 'ZERO_ERR_IO.*' "$T/err" | cut -c1-90)...)"
else
    echo "FAIL win_train_mlp_missing_dir: exit $rc: $(tail -n 1 "$T/err")"; failed=1
fi
# clang for the same target (what clang-cl users get: clang's float_control pins, not gcc's)
if command -v clang >/dev/null 2>&1; then
    libgcc=$(dirname "$("$WCC" -print-libgcc-file-name 2>/dev/null)")
    if ! clang --target=x86_64-w64-mingw32 -std=c11 -O2 -Wall -Wextra -Werror -I. -L"$libgcc" \
            -o "$BUILD/win/train_mlp_clang.exe" examples/train_mlp.c >"$BUILD/logs/windows_clang.log" 2>&1; then
        echo "FAIL win_clang_train_mlp: clang --target=x86_64-w64-mingw32 does not build it: $(grep -m1 -E 'error|warning' "$BUILD/logs/windows_clang.log")"
        failed=1
    elif wrun "$BUILD/win/train_mlp_clang.exe" "${SMALL[@]}" --dtype bf16 --steps 12 --stage 3 --save-params "$T/w_clang" &&
         cmp -s "$T/lin_bf16_adamw" "$T/w_clang"; then
        echo "PASS win_clang_train_mlp (clang -std=c11 -O2 for Windows, stage 3: the Linux gcc build's bits)"
    else
        echo "FAIL win_clang_train_mlp: $(tail -n 1 "$T/err")"; failed=1
    fi
else
    echo "SKIP win_clang_train_mlp: clang not installed"
fi
exit $failed
