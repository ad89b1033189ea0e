#!/usr/bin/env bash
# tests/run_tests.sh - runs zero.h's test binaries and test scripts, counts the results.
#
#   tests/run_tests.sh [VARIANT | PROGRAM ...]   VARIANT: plain asan tsan cuda scripts
#                                                (default: plain asan tsan scripts)
#   PROGRAM: a path with a slash in it (build/test_ckpt, tests/test_mpi.sh; relative to the
#   repository root) is run as one test program under the same protocol (a .sh through
#   bash), labelled by that path: `tests/run_tests.sh build/test_ckpt` runs just that one.
#
# Protocol: a test program prints "PASS <name>", "FAIL <name>: <detail>" or
# "SKIP <name>: <reason>" lines on stdout (other lines are allowed) and exits non-zero if
# any of its tests failed. SKIP is for a test that did not run (no compiler, no MPI build,
# no GPU, running as root): it is neither a pass nor a failure.
#   - every PASS / FAIL / SKIP line counts as one passed / failed / skipped test;
#   - a program that exits non-zero (crash, sanitizer report, timeout) without printing a
#     FAIL line counts as one failure: "<variant>/<binary> crashed (exit N)";
#   - a program that exits 0 without printing any PASS, FAIL or SKIP line counts as one
#     failure;
#   - a tests/test_*.c whose binary is missing (it failed to build) counts as one failure.
# Programs run from the repository root, one more at a time than there are cores
# (ZERO_TEST_JOBS; 1: one after another), each under `timeout $ZERO_RUN_TIMEOUT` (300 s)
# with a fresh private TMPDIR; the scripts first, the longest first (the ones that run make
# find their programs built by make test: make test-progs). Each program's lines come out
# together when it ends. ZERO_TEST_TIMEOUT (tests/test.h's watchdog,
# which names the hung case) defaults to 15 s less, so it fires before the runner's kill.
# Test scripts tests/test_*.sh follow the same protocol (tests/test_gpu.sh is left to
# `make test-gpu`), under `timeout $ZERO_RUN_SCRIPT_TIMEOUT` (900 s): a script runs many
# programs, each under a timeout of its own (test_cuda_mock.sh takes ~9 minutes idle, its
# builds included, since its programs run zero_kernels.cu's kernels on the grid emulator).
# Output: FAIL and SKIP lines, a one-line summary per program, and the tail of a failing
# program's output; VERBOSE=1 prints everything. Full logs: $BUILD/logs/. The last line is
# always "N passed, N failed, N skipped"; the exit status is 1 when anything failed.

set -u
cd "$(dirname "$0")/.." || exit 1

BUILD=${BUILD:-build}
TIMEOUT=${ZERO_RUN_TIMEOUT:-300}
SCRIPT_TIMEOUT=${ZERO_RUN_SCRIPT_TIMEOUT:-900}
export ZERO_TEST_TIMEOUT=${ZERO_TEST_TIMEOUT:-$((TIMEOUT > 30 ? TIMEOUT - 15 : TIMEOUT))}
VERBOSE=${VERBOSE:-0}
LOGS=$BUILD/logs
mkdir -p "$LOGS"

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}

# TSan needs a memory layout that some kernels' ASLR (large mmap_rnd_bits) breaks
# ("FATAL: ThreadSanitizer: unexpected memory mapping"); run it with ASLR off if we can.
TSAN_PREFIX=()
if command -v setarch >/dev/null 2>&1 && setarch "$(uname -m)" -R true 2>/dev/null; then
    TSAN_PREFIX=(setarch "$(uname -m)" -R)
fi

total_pass=0
total_fail=0
total_skip=0
# one more than the cores: many jobs spend part of their time asleep (timeouts being proved,
# the CUDA double's random delays, the modelled links)
JOBS=${ZERO_TEST_JOBS:-$(( $(nproc 2>/dev/null || echo 1) + 1 ))}
case $JOBS in ''|*[!0-9]*|0) JOBS=1 ;; esac

now() { date +%s.%N; }

# run_one LABEL COMMAND...
run_one() {
    local label=$1; shift
    local log="$LOGS/${label//\//_}.log"
    local tmp; tmp=$(mktemp -d "${TMPDIR:-/tmp}/zero_test.XXXXXX")
    local t0 t1 rc lim=$TIMEOUT
    case "$label" in *.sh) lim=$SCRIPT_TIMEOUT ;; esac
    t0=$(now)
    # (the braces' 2>/dev/null keeps bash's own "Segmentation fault" notice out of the log)
    { TMPDIR=$tmp timeout -k 10 "$lim" "$@" >"$log" 2>&1 </dev/null; rc=$?; } 2>/dev/null
    t1=$(now)
    rm -rf "$tmp"

    local npass nfail nskip
    npass=$(grep -c '^PASS ' "$log")
    nfail=$(grep -c '^FAIL ' "$log")
    nskip=$(grep -c '^SKIP ' "$log")
    if [ "$VERBOSE" = 1 ]; then
        sed "s|^|  |" "$log"
    else
        grep -E '^(FAIL|SKIP) ' "$log" | sed -E "s#^(FAIL|SKIP) #\1 $label: #"
    fi
    local note=""
    if [ "$rc" -ne 0 ] && [ "$nfail" -eq 0 ]; then
        if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then note=", timed out after ${lim}s"
        elif [ "$rc" -gt 128 ]; then note=", SIG$(kill -l $((rc - 128)) 2>/dev/null)"; fi
        echo "FAIL $label crashed (exit $rc$note)"
        nfail=1
    elif [ "$rc" -eq 0 ] && [ "$npass" -eq 0 ] && [ "$nfail" -eq 0 ] && [ "$nskip" -eq 0 ]; then
        echo "FAIL $label printed no PASS, FAIL or SKIP line"
        nfail=1
    fi
    if [ "$nfail" -gt 0 ] && [ "$VERBOSE" != 1 ] && grep -qv -E '^(PASS|FAIL|SKIP) ' "$log"; then
        echo "  --- last lines of $log (PASS/FAIL/SKIP lines left out) ---"
        grep -v -E '^(PASS|FAIL|SKIP) ' "$log" | tail -n 40 | sed 's|^|  |'
    fi
    printf '%s: %d passed, %d failed, %d skipped (%.1fs)\n' "$label" "$npass" "$nfail" "$nskip" \
        "$(echo "$t0 $t1" | awk '{ print $2 - $1 }')"
    echo "@counts $npass $nfail $nskip"
}

# ---- the queue: add LABEL GROUP COMMAND... ----------------------------------------------
# Jobs start in the order added, except that one of a GROUP waits while another of its
# group runs (GROUP "-": none); each writes its report into $LOGS/.q/N and N.done when it
# ends; the reports are printed as they end, and their counts added up.
Q=$LOGS/.q
rm -rf "$Q"
mkdir -p "$Q"
q_label=() q_group=() q_cmd=()
add() {
    local label=$1 group=$2; shift 2
    q_label+=("$label"); q_group+=("$group"); q_cmd+=("$(printf '%q ' "$@")")
}
# a job whose line is printed at once (a program that was not built): LABEL LINE...
add_fixed() {
    local label=$1; shift
    q_label+=("$label"); q_group+=("-"); q_cmd+=("$(printf 'printf "%%s\\n" %q; ' "$@")")
}
report() {   # report N: print job N's report, add its counts
    local line p f s
    while IFS= read -r line; do
        case $line in
            "@counts "*) read -r _ p f s <<<"$line"
                         total_pass=$((total_pass + p)); total_fail=$((total_fail + f)); total_skip=$((total_skip + s)) ;;
            *) printf '%s\n' "$line" ;;
        esac
    done <"$Q/$1"
}
run_queue() {
    local n=${#q_label[@]} i started=() done_=() pid=() running=0 left g
    local -A busy=()                # the groups with a job running
    left=$n
    for ((i = 0; i < n; i++)); do started[i]=0; done_[i]=0; done
    while [ "$left" -gt 0 ]; do
        for ((i = 0; i < n && running < JOBS; i++)); do
            g=${q_group[i]}
            [ "${started[i]}" = 0 ] && [ -z "${busy[$g]:-}" ] || continue
            [ "$g" = - ] || busy[$g]=1
            started[i]=1; running=$((running + 1))
            ( eval "${q_cmd[i]}" >"$Q/$i" 2>&1; : >"$Q/$i.done" ) &
            pid[i]=$!
        done
        wait -n 2>/dev/null || sleep 0.2
        for ((i = 0; i < n; i++)); do
            [ "${started[i]}" = 1 ] && [ "${done_[i]}" = 0 ] || continue
            if [ ! -e "$Q/$i.done" ] && ! kill -0 "${pid[i]}" 2>/dev/null && [ ! -e "$Q/$i.done" ]; then
                # the job itself was killed (not its program: that is run_one's to report)
                printf '%s\n' "FAIL ${q_label[i]}: the runner's job for it died" "@counts 0 1 0" >>"$Q/$i"
                : >"$Q/$i.done"
            fi
            if [ -e "$Q/$i.done" ]; then
                done_[i]=1; running=$((running - 1)); left=$((left - 1))
                unset "busy[${q_group[i]}]"
                report "$i"
            fi
        done
    done
    wait
}

run_variant() {
    local variant=$1 dir prefix=()
    case $variant in
        plain) dir=$BUILD ;;
        asan|cuda) dir=$BUILD/$variant ;;
        tsan) dir=$BUILD/tsan; prefix=("${TSAN_PREFIX[@]}") ;;
        *) echo "run_tests.sh: unknown variant '$variant'" >&2; total_fail=$((total_fail + 1)); return ;;
    esac
    local src name label
    for src in tests/test_*.c; do
        [ -e "$src" ] || continue
        name=$(basename "$src" .c)
        if [ "$variant" = plain ]; then label=$name; else label=$variant/$name; fi
        if [ ! -x "$dir/$name" ]; then
            add_fixed "$label" "FAIL $label not built ($dir/$name missing: see the compiler errors above)" \
                "$label: 0 passed, 1 failed, 0 skipped" "@counts 0 1 0"
            continue
        fi
        add "$label" - run_one "$label" ${prefix[@]+"${prefix[@]}"} "$dir/$name"
    done
}

# The scripts that run make: make test built their programs first (make test-progs), so
# their makes find them done and they run side by side, the longest first (ZERO_TEST_SERIAL_MAKE=1:
# one after another, group "make", for a runner started without that build)
LONG_SCRIPTS="test_cuda_mock test_flags test_arm64 test_compile test_cuda_mock_tsan test_kernels test_windows test_gpu_rehearsal test_fuzz test_bench_build"
MAKE_SCRIPTS="test_cuda_mock test_cuda_mock_tsan test_kernels test_gpu_rehearsal test_bench_build test_cuda_nogpu test_gpu_nogpu test_cuda_libs"
run_scripts() {
    local script name m g
    for m in $LONG_SCRIPTS; do
        g=-
        case " $MAKE_SCRIPTS " in *" $m "*) [ "${ZERO_TEST_SERIAL_MAKE:-0}" = 1 ] && g=make ;; esac
        [ -e "tests/$m.sh" ] && add "$m.sh" "$g" run_one "$m.sh" bash "tests/$m.sh"
    done
    for script in tests/test_*.sh; do
        [ -e "$script" ] || continue
        name=$(basename "$script" .sh)
        [ "$name" = test_gpu ] && continue
        case " $LONG_SCRIPTS " in *" $name "*) continue ;; esac
        g=-
        case " $MAKE_SCRIPTS " in *" $name "*) [ "${ZERO_TEST_SERIAL_MAKE:-0}" = 1 ] && g=make ;; esac
        add "$name.sh" "$g" run_one "$name.sh" bash "$script"
    done
}

# run_program PATH: one test program named on the command line (a .sh through bash)
run_program() {
    local path=$1
    if [ ! -f "$path" ]; then
        add_fixed "$path" "FAIL $path not found" "$path: 0 passed, 1 failed, 0 skipped" "@counts 0 1 0"
    elif [ "${path%.sh}" != "$path" ]; then add "$path" make run_one "$path" bash "$path"
    else add "$path" - run_one "$path" "$path"; fi
}

variants=("$@")
# (the scripts first: the longest of them start first)
[ ${#variants[@]} -gt 0 ] || variants=(scripts tsan asan plain)
for v in "${variants[@]}"; do
    case $v in
        scripts) run_scripts ;;
        */*) run_program "$v" ;;
        *) run_variant "$v" ;;
    esac
done
run_queue

echo "$total_pass passed, $total_fail failed, $total_skip skipped"
[ "$total_fail" -eq 0 ]
