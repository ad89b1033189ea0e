#!/usr/bin/env bash
# tests/test_runner.sh - tests/run_tests.sh's counting, on tiny fake programs in a temp dir
# (run_tests.sh PROGRAM... runs just the programs it is given). One PASS/FAIL line per case:
#   counts_*        a PASS line is one pass, a SKIP-only program one skip and no failure,
#                   a crash without a FAIL line one failure, a silent exit 0 one failure,
#                   a FAIL line one failure, a .sh through bash
#   summary_*       the last line is "N passed, N failed, N skipped"; exit 0 without failures
#   skip_shown      a SKIP line is shown with its program's label
# The inner runner's output is kept in a variable and shown indented, so its PASS/FAIL/SKIP
# lines are never counted by the runner that runs this script.
set -u
cd "$(dirname "$0")/.." || exit 1
T=$(mktemp -d "${TMPDIR:-/tmp}/zero_runner.XXXXXX")
trap 'rm -rf "$T"' EXIT
failed=0
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; failed=1; }

# fake NAME BODY: an executable shell program $T/NAME
fake() { printf '#!/bin/sh\n%s\n' "$2" >"$T/$1"; chmod +x "$T/$1"; }
fake pass       'echo "PASS one"; echo "noise"; echo "PASS two"'
fake skip_only  'echo "SKIP no_gpu: no GPU here"; exit 0'
fake crash      'echo "PASS before_crash"; ulimit -c 0; kill -SEGV $$'     # no core file in the repository
fake crash_exit 'echo "some output"; exit 3'
fake silent     'echo "nothing to count"; exit 0'
fake fails      'echo "PASS a"; echo "FAIL b: broken"; echo "SKIP c: not here"; exit 1'
printf 'echo "SKIP script_skip: no mpicc"\n' >"$T/script.sh"     # not executable: run by bash

# inner PROGRAM...: runs the runner on them; sets out and rc
inner() { out=$(BUILD="$T/build" VERBOSE=0 ZERO_RUN_TIMEOUT=30 bash tests/run_tests.sh "$@" 2>&1); rc=$?; }
show() { printf '%s\n' "$out" | sed 's/^/    | /'; }
# per_program LABEL P F S: the program's own summary line says P passed, F failed, S skipped
per_program() { printf '%s\n' "$out" | grep -qE "^$1: $2 passed, $3 failed, $4 skipped \\("; }
last() { printf '%s\n' "$out" | tail -n 1; }

# case1 NAME PROGRAM P F S RC: one program alone
case1() {
    local name=$1 prog=$2 p=$3 f=$4 s=$5 want_rc=$6
    inner "$T/$prog"
    if ! per_program "$T/$prog" "$p" "$f" "$s"; then fail "$name" "want $p passed, $f failed, $s skipped for $prog:"; show
    elif [ "$(last)" != "$p passed, $f failed, $s skipped" ]; then fail "$name" "last line '$(last)'"; show
    elif [ "$rc" -ne "$want_rc" ]; then fail "$name" "runner exit $rc, want $want_rc"; show
    else pass "$name"; fi
}
case1 counts_pass_lines      pass       2 0 0 0
case1 counts_skip_only       skip_only  0 0 1 0
case1 counts_crash_signal    crash      1 1 0 1
case1 counts_crash_exit      crash_exit 0 1 0 1
case1 counts_silent_exit0    silent     0 1 0 1
case1 counts_fail_line       fails      1 1 1 1
case1 counts_script_sh       script.sh  0 0 1 0

inner "$T/crash"
if printf '%s\n' "$out" | grep -qE "^FAIL $T/crash crashed \\(exit 139, SIGSEGV\\)$"; then pass crash_named
else fail crash_named "no 'FAIL <label> crashed (exit 139, SIGSEGV)' line:"; show; fi
inner "$T/silent"
if printf '%s\n' "$out" | grep -q "^FAIL $T/silent printed no PASS, FAIL or SKIP line$"; then pass silent_named
else fail silent_named "no 'printed no PASS, FAIL or SKIP line':"; show; fi

inner "$T/skip_only"
if printf '%s\n' "$out" | grep -qx "SKIP $T/skip_only: no_gpu: no GPU here"; then pass skip_shown
else fail skip_shown "the SKIP line is not shown with its label:"; show; fi

# several programs: the totals add up; the last line alone matches .ci/run's pattern
inner "$T/pass" "$T/skip_only" "$T/script.sh"
if [ "$(last)" != "2 passed, 0 failed, 2 skipped" ]; then fail summary_totals "last line '$(last)'"; show
elif [ "$rc" -ne 0 ]; then fail summary_totals "runner exit $rc without failures"; show
else pass summary_totals; fi
inner "$T/pass" "$T/silent" "$T/fails"
if [ "$(last)" != "3 passed, 2 failed, 1 skipped" ] || [ "$rc" -ne 1 ]; then fail summary_totals_failed "last line '$(last)', exit $rc"; show
else pass summary_totals_failed; fi
re=$(sed -n "s/^summary=.*grep -E '\\([^']*\\)'.*/\\1/p" .ci/run)
if [ -z "$re" ]; then fail summary_ci_pattern "no summary pattern found in .ci/run"
elif [ "$(printf '%s\n' "$out" | grep -cE "$re")" != 1 ] || ! printf '%s\n' "$out" | tail -n 1 | grep -qE "$re"; then
    fail summary_ci_pattern ".ci/run's '$re' must match the last line and only it:"; show
else pass summary_ci_pattern; fi

# a missing program is a failure, not a silent pass
inner "$T/no_such_program"
if [ "$(last)" = "0 passed, 1 failed, 0 skipped" ] && [ "$rc" -eq 1 ]; then pass counts_missing_program
else fail counts_missing_program "last line '$(last)', exit $rc"; show; fi
exit $failed
