#!/usr/bin/env bash
# tests/test_gpu.sh - `make test-gpu`: the one prepared command for a GPU machine. Such a
# machine is lent for minutes (15 in all with its start, 10 a command, 8 files back from
# $OUT), so this fits by construction: it downloads nothing, keeps to a deadline and leaves
# its results where they come back even when it is cut short. Not run by `make test`.
#
# The steps, GPU essentials first, each line of the summary as it goes:
#   probe        the GPUs (nvidia-smi), nvcc, the host compiler, where cudart, cuBLAS and
#                NCCL were found (make gpu-probe), compute-sanitizer. Without a GPU it
#                stops here, at once, with a FAIL line and exit 1: this run needs one.
#   build        only what it runs, with CUDA=1 and every core, without -Werror (WERROR=:
#                a toolchain we never compiled with may warn);
#   test_device  build/cuda/test_device: the CUDA device against the CPU device, bitwise
#                (stages 0-3 at worlds 1-4 as threads on one GPU, f32/bf16/f16, host
#                offload, checkpoints);
#   gpu_kernels  every kernel against its CPU reference;
#   gpu_nccl     the NCCL comm against the local one (world 1, more with more GPUs) and
#                both reduce modes' bus bandwidth (<collective>_<mode>_GBps=);
#   sanitizers   compute-sanitizer memcheck (--leak-check full), racecheck, synccheck and
#                initcheck over gpu_kernels and a short training (train_mlp --device cuda,
#                stage 3, 2 ranks; 1 rank under racecheck), in parallel. The verdict is the
#                tool's: its exit status (--error-exitcode 99) and its ERROR SUMMARY
#                (racecheck's: RACECHECK SUMMARY, its only closing line); what it counts there but
#                raised inside CUDA's own libraries (an API error or an allocation whose
#                backtrace is in libcublas, libcublasLt, libnccl, ... or in libcudart alone)
#                and racecheck's warnings are information lines, not failures.
#                sanitizer_racecheck_train2, open: racecheck over the 2-rank training hung
#                on the first GPU run (2026-12-04, CUDA 13.0, H200; rank 0 never reached
#                all-gather #11, rank 1 timed out after 120 s; one rank: 0 hazards in 3 s;
#                memcheck, synccheck, initcheck: 2 ranks, no error). It runs with each
#                collective's timeout at 2 x HANG_S s; after HANG_S s (20) every thread's
#                backtrace (gdb, else /proc wchan) goes to gpu_san_racecheck_train2_stacks.log;
#   gpu_bench_adamw  the fused AdamW's bandwidth against a device-to-device copy (ratio=),
#                then the other tests/gpu programs (gpu_bench_staging: set / gather GB/s);
#   train_mlp    train_mlp --device cuda: two runs bitwise equal (--save-params), one under
#                CUDA_LAUNCH_BLOCKING=1 and one on a non-blocking caller stream
#                (--nonblocking-stream) bitwise equal to them, the loss against the same
#                device path on the CPU (--device emu) within cuBLAS's rounding;
#   train_mlp_zpp  the same for ZeRO++ (--qwz --qgz --hpz 2, 4 ranks in nodes of 2): twice
#                bitwise, vs emu;
#   bench_zpp, bench_comm, bench_step, bench_infinity, bench_nvme  optional: issue #15's
#                CPU and disk benchmarks on this machine's cores and disk (2 cores and a
#                virtio disk cannot show them), each only when its whole limit still fits;
#   bench_overlap  optional: the step speculated under the backward pass (#30) with cores
#                to spare (speculative_nvme_speedup=, ...).
# The deadline: ZERO_GPU_DEADLINE seconds (default 540, under the 600 s a command may run)
# from the start. Before each step the time left is checked: a step that no longer fits is
# not run ("step NAME: not run: deadline ...", counted as skipped), one that runs gets
# min(its own limit, the time left) and is a FAIL if cut. Rendezvous and NCCL init wait
# ZERO_RENDEZVOUS_TIMEOUT_MS=60000 (zero.h's default is 300 s).
# Every step ends with one line "step NAME: ..." in the summary; every figure a program
# prints (a line "name=value", name in [a-z][A-Za-z0-9_]*) is copied into it. A SKIP line of
# a program is a failure here (every check must run), so is a program that prints no PASS.
# ZERO_GPU_OUT=DIR gets two files only: summary.txt, written from the first step on (each
# line appended as it comes), and logs.tgz, every log, packed again at each step's end.
# Without ZERO_GPU_OUT: build/logs/gpu_summary.txt and build/logs/gpu/. Last line:
# "N passed, N failed, N skipped" (skipped: the steps the deadline left out); the exit
# status is 1 when a check failed or a GPU check (any step before the benchmarks) did not run.
#
# ZERO_GPU_REHEARSAL=1 (make test-gpu-rehearsal; tests/test_gpu_rehearsal.sh): the same run
# without a GPU. The programs are the build/mock/ ones (the CUDA and NCCL test doubles, the
# kernels on the grid emulator) built without CUDA=1; nvidia-smi and compute-sanitizer are
# the stand-ins in tests/standin/ (ZERO_STANDIN_SANITIZER plants what the sanitizer
# reports); sizes are small; the sanitizers run over gpu_bench_adamw instead of gpu_kernels
# (the kernel suite takes 13 s a run on the emulator); bench_infinity is left out (its
# 512 MiB disk baseline has no size knob). Same steps, deadline, summary and tarball.
set -u
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
OUT=${ZERO_GPU_OUT:-}
DEADLINE=${ZERO_GPU_DEADLINE:-540}
REHEARSAL=${ZERO_GPU_REHEARSAL:-0}
[ "$REHEARSAL" = 0 ] && REHEARSAL=
RESERVE=8            # seconds kept back from each step: timeout's kill grace, the packing
t0=$(date +%s)
if [ -n "$REHEARSAL" ]; then LOGS="$BUILD/logs/gpu_rehearsal"; else LOGS="$BUILD/logs/gpu"; fi
rm -rf "$LOGS"
mkdir -p "$LOGS" || exit 1
if [ -n "$OUT" ]; then
    mkdir -p "$OUT" || exit 1
    SUMMARY="$OUT/summary.txt"
    rm -f "$OUT/logs.tgz" "$OUT/.logs.tgz.part"
else
    SUMMARY="$LOGS.summary.txt"
    [ -n "$REHEARSAL" ] || SUMMARY="$BUILD/logs/gpu_summary.txt"
fi
: >"$SUMMARY" || exit 1
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zero_gpu.XXXXXX") || exit 1
trap 'rm -rf "$WORK"' EXIT
say() { printf '%s\n' "$*" | tee -a "$SUMMARY"; }
# pack: every log into ZERO_GPU_OUT/logs.tgz (written aside, then renamed: never half a tarball)
pack() {
    [ -n "$OUT" ] || return 0
    tar -czf "$OUT/.logs.tgz.part" -C "$LOGS" . 2>/dev/null && mv -f "$OUT/.logs.tgz.part" "$OUT/logs.tgz"
}
pass=0 fail=0 skipped=0 missed=0
finish() {   # finish: the time, the counts, the tarball, exit 1 on a failure or a GPU check not run
    say "test_gpu: $(( $(date +%s) - t0 )) s in all (deadline ${DEADLINE} s)"
    [ "$missed" -gt 0 ] && say "test_gpu: $missed GPU step(s) did not run (the deadline, or no build): not a pass"
    say "$pass passed, $fail failed, $skipped skipped"
    pack
    [ "$fail" -eq 0 ] && [ "$missed" -eq 0 ] && exit 0
    exit 1
}
stopped() {
    say "test_gpu: stopped by a signal after $(( $(date +%s) - t0 )) s"
    say "$pass passed, $((fail + 1)) failed, $skipped skipped"
}
trap 'stopped; pack; exit 1' TERM INT
if ! [[ "$DEADLINE" =~ ^[1-9][0-9]*$ ]]; then
    say "FAIL test_gpu_deadline: ZERO_GPU_DEADLINE='$DEADLINE' is not a whole number of seconds"
    fail=1
    finish
fi
left() { echo $(( DEADLINE - ($(date +%s) - t0) - RESERVE )); }
# the limit of one command of the current step: min(OWN, the time left), at least 1 s
lim() { local l; l=$(left); [ "$l" -lt "$1" ] || l=$1; [ "$l" -ge 1 ] || l=1; echo "$l"; }
# begin NAME OWN NEED [optional]: whether step NAME starts (its own limit OWN s; it needs at least NEED s
# to be worth starting); sets LIM, the step's limit. A step not started (the deadline, or STOP: no
# build) is still a line, and a skip; a GPU step's skip makes the run no pass.
STOP=
begin() {
    local l
    pack
    l=$(left)
    if [ -n "$STOP" ] || [ "$l" -lt "$3" ]; then
        if [ -n "$STOP" ]; then say "step $1: not run: $STOP"
        else say "step $1: not run: deadline (ZERO_GPU_DEADLINE=$DEADLINE: $(( l + RESERVE )) s left," \
                 "$RESERVE of them kept for the end; it needs $3 s)"; fi
        skipped=$((skipped + 1)); [ -n "${4:-}" ] || missed=$((missed + 1))
        return 1
    fi
    STEP=$1 OWN=$2 LIM=$(lim "$2") S0=$(date +%s) P0=$pass F0=$fail
}
end_step() { say "step $STEP: $((pass - P0)) passed, $((fail - F0)) failed in $(( $(date +%s) - S0 )) s${1:+ ($1)}"; }
not_run() { say "step $1: not run: $2"; skipped=$((skipped + 1)); }
check() {   # check NAME OK MESSAGE
    if [ "$2" -eq 0 ]; then say "PASS $1"; pass=$((pass + 1)); else say "FAIL $1: $3"; fail=$((fail + 1)); fi
}
why() {   # why RC LIMIT: a note on an exit status
    if [ "$1" -eq 124 ] || [ "$1" -eq 137 ]; then
        echo " (timed out after $2 s$([ "$2" -lt "$OWN" ] && echo ', cut by the deadline'))"
    fi
}
# figures NAME LOG [EXTRA]: the program's FAIL, SKIP, INFO lines and figures (name=value) into the summary
FIG='^(FAIL |SKIP |INFO |[a-z][A-Za-z0-9_]*=)'
figures() { grep -E "$FIG${3:+|$3}" "$2" | sed "s|^|  $1: |" | tee -a "$SUMMARY"; }

# ---- the mode: a GPU machine, or the rehearsal on the test doubles ---------------------------
M=(--hidden 256 --layers 4 --batch 64 --steps 60 --quiet --stage 3 --ranks 2 --dtype bf16)
LOSS_MAX=2.5
TM=(--device cuda --stage 3 --ranks 2 --steps 3 --hidden 64 --layers 2 --batch 16 --quiet)
SAN_KERNELS=gpu_kernels
HANG_S=20      # sanitizer_racecheck_train2: its threads are looked at after this long
BENCHES=("bench_zpp|120||" "bench_comm|30||" "bench_step|90||" "bench_infinity|90|ZERO_BENCH_DIR=$BUILD|"
         "bench_nvme|150|ZERO_BENCH_DIR=$BUILD ZERO_BENCH_REPS=2|" "bench_overlap|120|TMPDIR=$BUILD|")
if [ -z "$REHEARSAL" ]; then
    BIN=$BUILD/cuda
    BENCH_BIN=$BUILD
    MAKE_MODE=(CUDA=1 WERROR=)
else
    BIN=$BUILD/mock
    BENCH_BIN=$BUILD/bench-check    # -O0, as make test builds them: the rehearsal times nothing
    MAKE_MODE=()
    PATH="$PWD/tests/standin:$PATH"
    export ZERO_CUDA_MOCK_DEVICES=${ZERO_CUDA_MOCK_DEVICES:-1} ZERO_CUDA_MOCK_LEAKS=1
    export ZERO_BENCH_N=100000 ZERO_BENCH_NO_VERDICT=1 ZERO_BENCH_REPS=1
    # what the stand-in sanitizer reports by default: what must be information, not a failure
    INFO_ONLY="synccheck:train_mlp:libapi memcheck:train_mlp:libleak racecheck:gpu_bench_adamw:warning"
    export ZERO_STANDIN_SANITIZER=${ZERO_STANDIN_SANITIZER-$INFO_ONLY}
    M=(--hidden 32 --layers 2 --batch 16 --steps 10 --quiet --stage 3 --ranks 2 --dtype bf16)
    LOSS_MAX=4
    SAN_KERNELS=gpu_bench_adamw
    HANG_S=${ZERO_GPU_HANG_S:-3}
    BENCHES=("bench_zpp|120||--layers 2 --dim 128" "bench_comm|30||--bytes 1048576 --iters 3"
             "bench_step|90||--n 262144 --reps 2" "bench_infinity|-|rehearsal: its 512 MiB disk baseline has no size knob|"
             "bench_nvme|150|ZERO_BENCH_DIR=$BUILD ZERO_BENCH_REPS=1 ZERO_BENCH_BYTES=4194304 ZERO_BENCH_LOAD=0|"
             "bench_overlap|60|TMPDIR=$BUILD|--d 128 --layers 2 --batch 8 --steps 2 --buffer-mb 1")
fi
export ZERO_RENDEZVOUS_TIMEOUT_MS=${ZERO_RENDEZVOUS_TIMEOUT_MS:-60000}
gpu_progs=()   # tests/gpu/*.c: gpu_kernels and gpu_nccl first, then the rest (the benchmarks)
for p in kernels nccl; do [ -e "tests/gpu/$p.c" ] && gpu_progs+=("gpu_$p"); done
for src in tests/gpu/*.c; do
    p=$(basename "$src" .c)
    [ -e "$src" ] && [ "$p" != kernels ] && [ "$p" != nccl ] && gpu_progs+=("gpu_$p")
done

# ---- probe --------------------------------------------------------------------------------
say "test_gpu: probe${REHEARSAL:+ (ZERO_GPU_REHEARSAL=1: the CUDA and NCCL test doubles, the stand-ins in tests/standin)}"
say "  deadline: ${DEADLINE} s (ZERO_GPU_DEADLINE); summary: $SUMMARY${OUT:+; logs: $OUT/logs.tgz}"
gpus=
if command -v nvidia-smi >/dev/null 2>&1; then
    gpus=$(timeout 30 nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader 2>&1) || gpus=
fi
if [ -n "$gpus" ]; then printf '%s\n' "$gpus" | sed 's/^/  gpu: /' | tee -a "$SUMMARY"; else say "  gpu: none"; fi
timeout 30 make --no-print-directory -s CUDA=1 BUILD="$BUILD" gpu-probe 2>&1 | sed 's/^/  /' | tee -a "$SUMMARY"
if [ -n "$REHEARSAL" ]; then SANITIZER=$(command -v compute-sanitizer)
else SANITIZER=$(timeout 30 make --no-print-directory -s CUDA=1 BUILD="$BUILD" gpu-sanitizer 2>/dev/null); fi
say "  compute-sanitizer: ${SANITIZER:-not found}"
if [ -z "$gpus" ]; then
    say "FAIL test_gpu_no_gpu: make test-gpu needs an NVIDIA GPU and its driver: nvidia-smi $(command -v nvidia-smi \
        >/dev/null 2>&1 && echo 'lists no GPU' || echo 'is not installed'); nothing was built or run"
    fail=1
    finish
fi
say "step probe: done in $(( $(date +%s) - t0 )) s"

# ---- build --------------------------------------------------------------------------------
if begin build 420 20; then
    targets=("$BIN/test_device" "$BIN/train_mlp" "$BUILD/train_mlp")
    [ -z "$REHEARSAL" ] && targets+=("$BUILD/cuda/zero_kernels.o")
    for p in ${gpu_progs[@]+"${gpu_progs[@]}"}; do targets+=("$BIN/$p"); done
    for spec in "${BENCHES[@]}"; do targets+=("$BENCH_BIN/${spec%%|*}"); done
    timeout -k 5 "$LIM" make -j"$(nproc)" --no-print-directory ${MAKE_MODE[@]+"${MAKE_MODE[@]}"} BUILD="$BUILD" \
        "${targets[@]}" >"$LOGS/gpu_build.log" 2>&1
    rc=$?
    if [ "$rc" -ne 0 ]; then
        tail -n 30 "$LOGS/gpu_build.log"
        check test_gpu_build 1 "make${MAKE_MODE[*]:+ ${MAKE_MODE[*]}} failed, exit $rc$(why "$rc" "$LIM") (see gpu_build.log)"
        STOP="the build failed"
    else
        check test_gpu_build 0 ""
    fi
    end_step "$(grep -c -i 'warning' "$LOGS/gpu_build.log") warning lines in gpu_build.log"
else
    STOP="nothing was built"
fi

# run NAME OWN NEED CMD...: a program step; counts its PASS/FAIL lines; a SKIP, a crash, a timeout
# or no PASS is a failure; its FAIL/SKIP/INFO lines and figures go into the summary
run() {
    local name=$1 rc np nf ns log="$LOGS/gpu_$1.log"
    begin "$1" "$2" "$3" || return 0
    shift 3
    timeout -k 5 "$LIM" "$@" >"$log" 2>&1; rc=$?
    np=$(grep -c '^PASS ' "$log"); nf=$(grep -c '^FAIL ' "$log"); ns=$(grep -c '^SKIP ' "$log")
    figures "$name" "$log" '^(adamw|copy)'
    if [ "$rc" -ne 0 ] && [ "$nf" -eq 0 ]; then
        say "FAIL $name: exit $rc$(why "$rc" "$LIM")"; tail -n 15 "$log"; nf=1
    fi
    if [ "$np" -eq 0 ] && [ "$nf" -eq 0 ]; then say "FAIL $name: no PASS line"; nf=1; fi
    pass=$((pass + np)); fail=$((fail + nf + ns))
    end_step "$([ "$ns" -gt 0 ] && echo "$ns SKIP lines counted as failed")"
}

# ---- test_device, gpu_kernels, gpu_nccl ------------------------------------------------------
run test_device 240 20 "$BIN/test_device"
if [ -f "$LOGS/gpu_test_device.log" ]; then
    grep -q '^PASS cuda_vs_cpu$' "$LOGS/gpu_test_device.log"
    check test_device_cuda_ran $? "test_device's CUDA cases did not pass (skipped or failed)"
fi
for p in ${gpu_progs[@]+"${gpu_progs[@]}"}; do
    case $p in gpu_kernels|gpu_nccl) run "$p" 180 15 "$BIN/$p" ;; esac
done

# ---- sanitizers: four tools over the kernels and a short training, in parallel ---------------
# san_verdict LOG RC: "info TEXT" lines (what the tool reported that is not the program's error),
# then "pass" or "fail REASON". The tool's ERROR SUMMARY counts every error, CUDA's libraries' too:
# an error is CUDA's own when its backtrace, past the driver (libcuda) and the runtime
# (libcudart), goes on in one of CUDA's libraries, or nowhere else; the program's otherwise.
san_verdict() {
    awk -v rc="$2" -v ecode=99 '
    function frame(s) {
        if (s ~ /libcuda\.so/) return "skip"
        if (s ~ /libcudart/) return "cudart"
        if (s ~ /lib(cublas|cublasLt|nccl|cudnn|cufft|curand|cusparse|cusolver|nvrtc|nvJitLink|nvrtc-builtins)[A-Za-z0-9_]*\.so/) return "lib"
        if (s ~ /(libc\.so|libc-|libstdc\+\+|libgcc_s|ld-linux|libpthread|libdl\.so)/) return "skip"
        return "prog"
    }
    function info(s) { if (++ninfo <= 6) print "info " s }
    function close_rec() {
        if (kind == "") return
        if ((kind == "api" || kind == "leak") && (by == "lib" || (by == "" && cudart))) {
            nlib++
            info(text " (inside " (mod != "" ? mod : "libcudart") ": CUDA'\''s own, not the program'\''s)")
        } else if (kind == "warn") info(text)
        else if (first == "") first = text
        kind = ""
    }
    /^========= / {
        s = substr($0, 11)
        if (s ~ /^[ \t]/) {
            if (kind != "" && by == "" && s ~ /Host Frame/) {
                k = frame(s)
                if (k == "cudart") cudart = 1
                else if (k != "skip") {
                    by = k
                    if (match(s, /lib[A-Za-z0-9_]+\.so[.0-9]*/)) mod = substr(s, RSTART, RLENGTH)
                }
            }
            next
        }
        close_rec()
        if (s ~ /^ERROR SUMMARY: [0-9]+ error/) { split(s, a, " "); nerr = a[3] + 0; seen = 1; next }
        if (s ~ /^RACECHECK SUMMARY/) {   # racecheck closes with this line alone (no ERROR SUMMARY)
            seen = 1
            if (match(s, /\([0-9]+ error/)) rerr = substr(s, RSTART + 1, RLENGTH - 7) + 0
            if (match(s, /[0-9]+ warning/) && substr(s, RSTART, RLENGTH - 8) + 0 > 0) info(s)
            next
        }
        if (s ~ /^(COMPUTE-SANITIZER|LEAK SUMMARY|Target application returned)/) next
        kind = "err"; text = s; by = ""; cudart = 0; mod = ""
        if (s ~ /^Program hit /) kind = "api"
        else if (s ~ /^Leaked /) kind = "leak"
        else if (s ~ /^Warning/) kind = "warn"
        next
    }
    END {
        close_rec()
        if (ninfo > 6) print "info (and " ninfo - 6 " more lines like these)"
        own = nerr - nlib
        if (own < rerr) own = rerr
        if (!seen) print "fail no ERROR SUMMARY (or RACECHECK SUMMARY) line: the tool did not finish (exit " rc ")"
        else if (own > 0) print "fail " (nerr - nlib >= rerr ? "ERROR SUMMARY: " nerr " error(s), " own " of them the program'\''s" : \
                                  "RACECHECK SUMMARY: " rerr " error(s)") (first != "" ? ": " first : "")
        else if (rc != 0 && !(rc == ecode && nerr > 0)) print "fail exit " rc
        else print "pass"
    }' "$1"
}
# stacks PID SECONDS LOG: after SECONDS, if PID (a timeout running a sanitizer running a
# program) still runs, every thread of every process under it: gdb's backtraces, else each
# thread's name and wchan from /proc
stacks() {
    sleep "$2"
    kill -0 "$1" 2>/dev/null || return 0
    local all=() p k
    p=$1
    while [ -n "$p" ]; do
        all+=("$p"); k=""
        k=$(pgrep -P "$p" 2>/dev/null || cat /proc/"$p"/task/*/children 2>/dev/null)
        p=$(echo $k | cut -d' ' -f1)   # one child a level: timeout -> sanitizer -> program
    done
    for p in "${all[@]}"; do
        echo "== pid $p: $(tr '\0' ' ' </proc/"$p"/cmdline 2>/dev/null | cut -c1-200)"
        if command -v gdb >/dev/null 2>&1; then
            timeout 60 gdb -q -batch -p "$p" -ex 'thread apply all bt 30' 2>&1 | grep -v '^\[New LWP'
        else
            for t in /proc/"$p"/task/*; do
                echo "  thread ${t##*/} $(cat "$t"/comm 2>/dev/null) wchan=$(cat "$t"/wchan 2>/dev/null)"
            done
        fi
    done >"$3" 2>&1
}
if begin sanitizers 200 30; then
    if [ -z "$SANITIZER" ]; then
        check compute_sanitizer 1 "compute-sanitizer not found (looked in \$CUDA_HOME/bin, on PATH, the Python package)"
    else
        pids=()
        for tool in memcheck racecheck synccheck initcheck; do
            extra=() tm=("${TM[@]}")
            [ "$tool" = memcheck ] && extra=(--leak-check full)
            # racecheck trains one rank: two ranks as threads hung under it (see the header)
            [ "$tool" = racecheck ] && tm+=(--ranks 1)
            timeout -k 5 "$LIM" "$SANITIZER" --tool "$tool" --error-exitcode 99 ${extra[@]+"${extra[@]}"} \
                "$BIN/$SAN_KERNELS" >"$LOGS/gpu_san_${tool}_kernels.log" 2>&1 &
            pids+=("$!:${tool}_kernels")
            timeout -k 5 "$LIM" "$SANITIZER" --tool "$tool" --error-exitcode 99 ${extra[@]+"${extra[@]}"} \
                "$BIN/train_mlp" "${tm[@]}" >"$LOGS/gpu_san_${tool}_train.log" 2>&1 &
            pids+=("$!:${tool}_train")
        done
        # the open case: racecheck over two ranks, each collective's timeout short, and a look
        # at every thread (gdb's backtraces, else /proc's wchan) once it has run HANG_S seconds
        timeout -k 5 "$LIM" "$SANITIZER" --tool racecheck --error-exitcode 99 "$BIN/train_mlp" "${TM[@]}" \
            --timeout-ms "$((HANG_S * 2000))" >"$LOGS/gpu_san_racecheck_train2.log" 2>&1 &
        rc2=$!
        pids+=("$rc2:racecheck_train2")
        stacks "$rc2" "$HANG_S" "$LOGS/gpu_san_racecheck_train2_stacks.log" &
        spid=$!
        for pn in "${pids[@]}"; do
            wait "${pn%%:*}"; rc=$?
            name="sanitizer_${pn#*:}"
            v=$(san_verdict "$LOGS/gpu_san_${pn#*:}.log" "$rc")
            printf '%s\n' "$v" | sed -n "s|^info |  $name: info: |p" | tee -a "$SUMMARY"
            last=$(printf '%s\n' "$v" | tail -n 1)
            [ "$last" != pass ] && [ "$name" = sanitizer_racecheck_train2 ] &&
                [ -s "$LOGS/gpu_san_racecheck_train2_stacks.log" ] &&
                last="$last (threads after ${HANG_S} s: gpu_san_racecheck_train2_stacks.log)"
            check "$name" "$([ "$last" = pass ] && echo 0 || echo 1)" "${last#fail }$(why "$rc" "$LIM")"
        done
        kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null
    fi
    end_step
fi

# ---- gpu_bench_adamw and the other tests/gpu programs ------------------------------------------
for p in ${gpu_progs[@]+"${gpu_progs[@]}"}; do
    case $p in gpu_kernels|gpu_nccl) ;; *) run "$p" 180 10 "$BIN/$p" ;; esac
done

# ---- train_mlp: reproducible, CUDA_LAUNCH_BLOCKING, a non-blocking stream, vs emu -------------
P="$WORK/params"
train() {   # train NAME [ENV=V ...] -- ARGS: $BIN/train_mlp --device cuda, params into $P.NAME
    local name=$1 l; shift
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
    l=$(lim 120)
    env ${envs[@]+"${envs[@]}"} timeout -k 5 "$l" "$BIN/train_mlp" "${M[@]}" --device cuda --save-params "$P.$name" \
        "$@" >"$LOGS/gpu_train_$name.log" 2>&1
}
loss() { sed -n 's/^final loss=\([^ ]*\).*/\1/p' "$1"; }
# vs_emu NAME CUDALOG ARGS...: the loss of the EMU device's run (cuBLAS GEMMs round differently from the CPU's)
vs_emu() {
    local name=$1 cudalog=$2 lc le; shift 2
    if timeout -k 5 "$(lim 120)" "$BUILD/train_mlp" "${M[@]}" "$@" --device emu >"$LOGS/gpu_train_${name}emu.log" 2>&1; then
        lc=$(loss "$cudalog"); le=$(loss "$LOGS/gpu_train_${name}emu.log")
        say "  train_mlp${name:+ ZeRO++}: cuda $(tail -n 1 "$cudalog")"
        [ -z "$name" ] && say "  train_mlp: emu  $(tail -n 1 "$LOGS/gpu_train_emu.log")"
        [ -n "$lc" ] && [ -n "$le" ] && awk "BEGIN { d = $lc - $le; exit !(d < 0.02 && d > -0.02 && $lc < $LOSS_MAX) }"
        check "train_mlp_cuda_${name}vs_emu" $? "loss cuda '$lc' vs emu '$le'"
    else
        check "train_mlp_cuda_${name}vs_emu" 1 "$BUILD/train_mlp --device emu $* failed: $(tail -n 2 "$LOGS/gpu_train_${name}emu.log")"
    fi
}
if begin train_mlp 480 20; then
    train a -- ; ra=$?
    train b -- ; rb=$?
    train blocking CUDA_LAUNCH_BLOCKING=1 -- ; rl=$?
    train nonblocking -- --nonblocking-stream; rn=$?
    check train_mlp_cuda_runs $(( ra || rb || rl || rn )) "exit codes $ra $rb $rl $rn: $(tail -n 2 "$LOGS"/gpu_train_*.log | tr '\n' ' ')"
    cmp -s "$P.a" "$P.b"; check train_mlp_cuda_twice_bitwise $? "two runs gave different params"
    cmp -s "$P.a" "$P.blocking"; check train_mlp_cuda_vs_launch_blocking $? "CUDA_LAUNCH_BLOCKING=1 gave different params"
    cmp -s "$P.a" "$P.nonblocking"; check train_mlp_cuda_nonblocking_stream $? "--nonblocking-stream gave different params"
    vs_emu "" "$LOGS/gpu_train_a.log"
    end_step
fi
# ZeRO++ (qwz + qgz + hpz, 4 ranks on the GPU in nodes of 2): twice bitwise, and the loss vs emu
Z=(--ranks 4 --qwz --qgz --hpz 2)
if begin train_mlp_zpp 360 15; then
    train zpp_a -- "${Z[@]}"; za=$?
    train zpp_b -- "${Z[@]}"; zb=$?
    check train_mlp_cuda_zpp_runs $(( za || zb )) "exit codes $za $zb: $(tail -n 2 "$LOGS"/gpu_train_zpp_*.log | tr '\n' ' ')"
    cmp -s "$P.zpp_a" "$P.zpp_b"; check train_mlp_cuda_zpp_twice_bitwise $? "two ZeRO++ runs gave different params"
    vs_emu zpp_ "$LOGS/gpu_train_zpp_a.log" "${Z[@]}"
    end_step
fi
rm -f "$P".*

# ---- the CPU and disk benchmarks (optional): on this machine's cores and disk, each only when its
# whole limit still fits; one that runs must end with its ratio= line. (bench_zpp: 8 local ranks
# on modelled links, a core each here. The disk benchmarks' files in $BUILD: /tmp may be a tmpfs,
# which has no O_DIRECT and no disk.)
for spec in "${BENCHES[@]}"; do
    IFS='|' read -r b blim benv bargs <<<"$spec"
    if [ "$blim" = - ]; then not_run "$b" "$benv"; continue; fi
    begin "$b" "$blim" "$blim" optional || continue
    # shellcheck disable=SC2086 # benv and bargs: words
    env $benv timeout -k 5 "$LIM" "$BENCH_BIN/$b" $bargs >"$LOGS/gpu_$b.log" 2>&1; rc=$?
    figures "$b" "$LOGS/gpu_$b.log" '^(memcpy|reduce_scatter|all_gather|disk|step [0-9]|write|read)|ms/step|modelled'
    [ "$rc" -eq 0 ] && grep -q '^ratio=' "$LOGS/gpu_$b.log"
    check "${b}_ran" $? "$BENCH_BIN/$b exit $rc$(why "$rc" "$LIM"): $(tail -n 2 "$LOGS/gpu_$b.log" | tr '\n' ' ')"
    end_step
done
elapsed=$(( $(date +%s) - t0 ))
[ "$elapsed" -le "$DEADLINE" ]; check test_gpu_within_deadline $? "took $elapsed s, ZERO_GPU_DEADLINE=$DEADLINE"
finish
