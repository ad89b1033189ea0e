#!/usr/bin/env bash
# tests/test_mpi.sh - the MPI communicator (ZERO_MPI) under mpirun: build/mpi/train_mlp and
# build/mpi/mpi_ranks (tests/mpi/mpi_ranks.c), which the Makefile builds with mpicc when
# mpicc is on PATH. One PASS/FAIL line per case:
#   ops_bitwise_vs_local_nN  every collective of the MPI comm equals the local comm's bit for bit
#   train_mpi_eq_local_*     mpirun -np N build/mpi/train_mlp --comm mpi gives the same parameters
#                            as build/train_mlp --ranks N (cmp: bitwise; the MPI comm sums in the
#                            local comm's rank order, so no tolerance is needed)
#   kill_*, stall_*          a rank killed (SIGKILL) or stalled at step 3 of a stage-3 run with
#                            timeout_ms $MS: the others name it and exit within the timeout
#   mismatch_named           ranks that issue different collectives all get ZERO_ERR_MISMATCH
#   env_*                    --comm mpi outside a launcher, torchrun-style variables, --ranks != -np
#   nodes_npN                build/mpi/mpi_nodes (tests/mpi/mpi_nodes.c): ZeRO++'s node topology on
#                            MPI: split into nodes of 1, 2, 4, 8 ranks, the node and cross-node
#                            endpoints' collectives and all_to_all, the bytes counted within/across
#   nodes_*_mismatch, nodes_*_timeout  a different all_to_all or split on one rank is
#                            ZERO_ERR_MISMATCH on every rank; a rank missing from an all_to_all
#                            across nodes, or from a split, is named by its world rank within the timeout
# What Open MPI (4.1) does when a rank dies: by default mpirun tears the whole job down at
# once (its notice names the dead rank; the survivors are killed before they can time out).
# With --mca orte_abort_on_non_zero_status 0 the survivors live on: each one's collective
# times out and it reports "rank(s) 2 never arrived"; mpirun itself then does not exit after
# a SIGKILLed rank, so that case runs under `timeout`.
# Without mpicc the tests were not built: one line says so (a FAIL when ZERO_REQUIRE_MPI=1,
# as in CI, which installs Open MPI; otherwise "SKIP mpi_not_built", counted as skipped).
set -u
B=${BUILD:-build}
T=$(mktemp -d "${TMPDIR:-/tmp}/zero-mpi.XXXXXX")
trap 'rm -rf "$T"' EXIT
failed=0
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; failed=1; }

if ! command -v "${MPIRUN:-mpirun}" >/dev/null 2>&1 || [ ! -x "$B/mpi/train_mlp" ] || [ ! -x "$B/mpi/mpi_ranks" ] ||
        [ ! -x "$B/mpi/mpi_nodes" ]; then
    why="mpicc/mpirun not found or $B/mpi/{train_mlp,mpi_ranks,mpi_nodes} not built: the MPI tests were NOT run"
    why="$why (apt-get install openmpi-bin libopenmpi-dev, then make)"
    if [ "${ZERO_REQUIRE_MPI:-0}" = 1 ]; then echo "FAIL mpi_not_built: $why"; exit 1; fi
    echo "SKIP mpi_not_built: $why"
    exit 0
fi

# as root mpirun wants these; --oversubscribe: more ranks than cores is fine here
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN=(${MPIRUN:-mpirun} --allow-run-as-root --oversubscribe)
NOABORT=(--mca orte_abort_on_non_zero_status 0)
ms_now() { date +%s%3N; }

# ---- the implementation compiles warning-free with ZERO_MPI as C++ too (mpicxx)
if command -v "${MPICXX:-mpicxx}" >/dev/null 2>&1; then
    printf '#define ZERO_IMPLEMENTATION\n#include "zero.h"\nint main(void) { zero_comm *c = 0; return zero_comm_from_env(&c, "local") != ZERO_OK; }\n' >"$T/impl.cpp"
    if "${MPICXX:-mpicxx}" -std=c++11 -O1 -Wall -Wextra -Werror -pthread -I. -DZERO_MPI "$T/impl.cpp" -o "$T/impl" >"$T/cxx.log" 2>&1; then
        pass compile_impl_cpp_zero_mpi
    else fail compile_impl_cpp_zero_mpi "$(grep -m1 -E 'error|warning' "$T/cxx.log")"; fi
fi

# ---- the collectives, bit for bit against the local comm
for n in 1 2 3 4; do
    out=$(timeout 60 "${MPIRUN[@]}" -np $n "$B/mpi/mpi_ranks" ops 2>&1); rc=$?
    line=$(printf '%s\n' "$out" | grep -E "^(PASS|FAIL) ops_bitwise_vs_local_n$n")
    if [ $rc -eq 0 ] && [ "${line%% *}" = PASS ]; then pass ops_bitwise_vs_local_n$n
    else fail ops_bitwise_vs_local_n$n "exit $rc: $(printf '%s\n' "$out" | tail -n 3)"; fi
done

# ---- train_mlp under mpirun == train_mlp --ranks N (threads), every stage
SMALL=(--hidden 48 --layers 3 --batch 24 --steps 10 --quiet --seed 5)
for cfg in "4:0:" "4:1:" "4:2:" "4:3:" "3:3:--dtype f32" "2:2:--dtype f16 --accum 2" "4:1:--accum 3 --accum-dtype f32" \
           "4:3:--qwz --qgz --hpz 2" "4:2:--qgz --qgz-bits 4 --ranks-per-node 2"; do
    n=${cfg%%:*} rest=${cfg#*:} s=${rest%%:*} extra=${rest#*:}
    name=train_mpi_eq_local_stage${s}_np$n$(echo "$extra" | tr -d ' -' | sed 's/^\(.\)/_\1/')
    if ! "$B/train_mlp" "${SMALL[@]}" --stage $s --ranks $n $extra --save-params "$T/local" >"$T/local.log" 2>&1; then
        fail $name "local run: $(tail -n 2 "$T/local.log")"; continue
    fi
    if ! timeout 120 "${MPIRUN[@]}" -np $n "$B/mpi/train_mlp" --comm mpi "${SMALL[@]}" --stage $s $extra \
            --save-params "$T/mpi" >"$T/mpi.log" 2>&1; then
        fail $name "mpirun: $(tail -n 3 "$T/mpi.log")"; continue
    fi
    lf=$(tail -n 1 "$T/local.log" | cut -d' ' -f2) mf=$(tail -n 1 "$T/mpi.log" | cut -d' ' -f2)
    if [ "$(grep -c '^final ' "$T/mpi.log")" != 1 ]; then fail $name "expected one final line (rank 0 prints): $(cat "$T/mpi.log")"
    elif ! cmp -s "$T/local" "$T/mpi"; then fail $name "parameters differ from the local comm's ($lf vs $mf)"
    elif [ "$lf" != "$mf" ]; then fail $name "final loss differs: $lf vs $mf"
    else pass $name; fi
done

# ---- a rank dies or stalls at step 3 (stage 3, timeout_ms $MS)
MS=2000
SLACK=1500     # ms beyond the timeout that a survivor may take to give up
# survivors_named LOG VICTIM NP: every other rank printed a TIMEOUT/COMM line naming VICTIM in time
survivors_named() {
    local log=$1 victim=$2 np=$3 r line ms bad=""
    for ((r = 0; r < np; r++)); do
        [ $r = "$victim" ] && continue
        line=$(grep -E "^rank $r: ZERO_ERR_(TIMEOUT|COMM): " "$log" | head -n 1)
        if [ -z "$line" ]; then bad="$bad rank $r did not report;"; continue; fi
        printf '%s\n' "$line" | grep -q "rank(s) $victim " || bad="$bad rank $r did not name rank $victim ($line);"
        ms=$(printf '%s\n' "$line" | sed -n 's/.*(\([0-9]*\) ms)$/\1/p')
        { [ -n "$ms" ] && [ "$ms" -le $((MS + SLACK)) ]; } || bad="$bad rank $r gave up after '$ms' ms (timeout $MS);"
    done
    echo "$bad"
}

# default mpirun: the job is torn down at once, mpirun names the killed rank
t0=$(ms_now)
timeout 60 "${MPIRUN[@]}" -np 4 "$B/mpi/mpi_ranks" kill 2 $MS >"$T/kill.log" 2>&1; rc=$?
dt=$(( $(ms_now) - t0 ))
if [ $rc -eq 0 ] || [ $rc -eq 124 ]; then fail kill_rank2_job_ends "exit $rc after $dt ms: $(tail -n 5 "$T/kill.log")"
elif ! grep -q "rank 2 .*signal 9" "$T/kill.log"; then fail kill_rank2_job_ends "mpirun did not name rank 2: $(tail -n 5 "$T/kill.log")"
elif [ $dt -gt $((MS + 5000)) ]; then fail kill_rank2_job_ends "the job took $dt ms to end (timeout $MS)"
else pass kill_rank2_job_ends; fi

# abort-on-error off: the survivors time out and name rank 2 (mpirun lingers: `timeout`)
timeout $((3 * MS / 1000 + 4)) "${MPIRUN[@]}" "${NOABORT[@]}" -np 4 "$B/mpi/mpi_ranks" kill 2 $MS >"$T/kills.log" 2>&1
bad=$(survivors_named "$T/kills.log" 2 4)
if [ -z "$bad" ]; then pass kill_rank2_survivors_name_it
else fail kill_rank2_survivors_name_it "$bad $(grep -v '^rank' "$T/kills.log" | head -n 3)"; fi

# a stalled rank (asleep for 2*MS): the others name it; the sleeper then fails too; the job ends
t0=$(ms_now)
timeout 60 "${MPIRUN[@]}" "${NOABORT[@]}" -np 4 "$B/mpi/mpi_ranks" stall 2 $MS >"$T/stall.log" 2>&1; rc=$?
dt=$(( $(ms_now) - t0 ))
bad=$(survivors_named "$T/stall.log" 2 4)
if [ -n "$bad" ]; then fail stall_rank2_survivors_name_it "$bad"
elif ! grep -qE '^rank 2: ZERO_ERR_(TIMEOUT|COMM)' "$T/stall.log"; then fail stall_rank2_survivors_name_it "the stalled rank did not fail after waking: $(tail -n 3 "$T/stall.log")"
elif [ $rc -eq 124 ]; then fail stall_rank2_survivors_name_it "the job hung ($dt ms)"
else pass stall_rank2_survivors_name_it; fi

# ---- different collectives on different ranks: every rank says which
timeout 60 "${MPIRUN[@]}" "${NOABORT[@]}" -np 4 "$B/mpi/mpi_ranks" mismatch >"$T/mm.log" 2>&1
if [ "$(grep -c '^rank [0-3]: ZERO_ERR_MISMATCH: .*rank 1 called all_reduce(count=2' "$T/mm.log")" = 4 ]; then pass mismatch_named
else fail mismatch_named "$(head -n 4 "$T/mm.log")"; fi

# ---- the node topology (ZeRO++): split, the sub-communicators' collectives, bytes within/across
for n in 1 3 4 8; do
    out=$(timeout 60 "${MPIRUN[@]}" -np $n "$B/mpi/mpi_nodes" nodes 2>&1); rc=$?
    line=$(printf '%s\n' "$out" | grep -E "^(PASS|FAIL) nodes_np$n")
    if [ $rc -eq 0 ] && [ "${line%% *}" = PASS ]; then pass nodes_np$n
    else fail nodes_np$n "exit $rc: $(printf '%s\n' "$out" | grep -E '^(rank|FAIL)' | head -n 4)"; fi
done
timeout 60 "${MPIRUN[@]}" "${NOABORT[@]}" -np 4 "$B/mpi/mpi_nodes" mismatch >"$T/nmm.log" 2>&1
a=$(grep -cE '^rank [0-3]: node: ZERO_ERR_MISMATCH: .* within the node: rank (1|3) called all_to_all\(count=9, tag=-1\) but rank (0|2) called all_to_all\(count=8' "$T/nmm.log")
b=$(grep -c '^rank [0-3]: world: ZERO_ERR_MISMATCH: .*: rank 1 called all_to_all(count=9, tag=-1) but rank 0 called all_to_all(count=8' "$T/nmm.log")
if [ "$a" = 4 ] && [ "$b" = 4 ]; then pass nodes_a2a_mismatch
else fail nodes_a2a_mismatch "$a of 4 node lines, $b of 4 world lines: $(grep '^rank' "$T/nmm.log" | head -n 4)"; fi
timeout 60 "${MPIRUN[@]}" "${NOABORT[@]}" -np 4 "$B/mpi/mpi_nodes" split_mismatch >"$T/nsm.log" 2>&1
if [ "$(grep -c '^rank [0-3]: split: ZERO_ERR_MISMATCH: .*rank 1 called split(ranks_per_node=1) but rank 0 called split(ranks_per_node=2)' "$T/nsm.log")" = 4 ]; then
    pass nodes_split_mismatch
else fail nodes_split_mismatch "$(grep '^rank' "$T/nsm.log" | head -n 4)"; fi
# world rank 3 stalls before an all_to_all across nodes of 2 (its cross-node peer: world rank 1)
timeout 60 "${MPIRUN[@]}" "${NOABORT[@]}" -np 4 "$B/mpi/mpi_nodes" timeout 3 $MS >"$T/nto.log" 2>&1
bad=""
for r in 0 2; do
    grep -q "^rank $r: cross: ZERO_OK" "$T/nto.log" || bad="$bad rank $r (another node pair) did not finish;"
done
line=$(grep '^rank 1: cross: ' "$T/nto.log")
ms=$(printf '%s\n' "$line" | sed -n 's/.*(\([0-9]*\) ms)$/\1/p')
printf '%s\n' "$line" | grep -q "ZERO_ERR_TIMEOUT: all_to_all #1 across nodes timed out after $MS ms on rank 1: rank(s) 3 never arrived" ||
    bad="$bad rank 1 did not name world rank 3 ($line);"
{ [ -n "$ms" ] && [ "$ms" -le $((MS + SLACK)) ]; } || bad="$bad rank 1 gave up after '$ms' ms (timeout $MS);"
grep -q '^rank 3: cross: ZERO_ERR_TIMEOUT' "$T/nto.log" || bad="$bad the stalled rank did not fail after waking;"
[ "$(grep -cE '^rank (1|3): world broken after destroying the cross endpoint: 1' "$T/nto.log")" = 2 ] &&
[ "$(grep -cE '^rank (0|2): world broken after destroying the cross endpoint: 0' "$T/nto.log")" = 2 ] ||
    bad="$bad a broken cross-node endpoint did not mark the world's broken (or a sound one did);"
[ "$(grep -c '^rank [0-3]: world barrier after: ZERO_OK' "$T/nto.log")" = 4 ] || bad="$bad the world endpoint did not stay usable;"
if [ -z "$bad" ]; then pass nodes_a2a_timeout
else fail nodes_a2a_timeout "$bad"; fi
# world rank 2 comes late to the split itself: it has a timeout too, and the others name rank 2
timeout 60 "${MPIRUN[@]}" "${NOABORT[@]}" -np 4 "$B/mpi/mpi_nodes" split_timeout 2 $MS >"$T/nst.log" 2>&1
bad=$(survivors_named "$T/nst.log" 2 4)
[ "$(grep -cE '^rank [013]: ZERO_ERR_TIMEOUT: split #1 timed out' "$T/nst.log")" = 3 ] ||
    bad="$bad not every survivor said the split timed out: $(grep '^rank' "$T/nst.log" | head -n 2);"
grep -qE '^rank 2: (ZERO_OK|ZERO_ERR_[A-Z_]+): ' "$T/nst.log" || bad="$bad the late rank did not come back from its split;"
if [ -z "$bad" ]; then pass nodes_split_timeout
else fail nodes_split_timeout "$bad"; fi

# ---- bad environments
env -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE -u PMI_RANK -u PMI_SIZE -u SLURM_PROCID -u SLURM_NTASKS \
    -u RANK -u WORLD_SIZE "$B/mpi/train_mlp" --comm mpi "${SMALL[@]}" >"$T/env.log" 2>&1; rc=$?
if [ $rc -ne 0 ] && grep -q 'OMPI_COMM_WORLD_RANK.*PMI_RANK.*SLURM_PROCID.*MASTER_PORT' "$T/env.log"; then pass env_no_launcher_lists_variables
else fail env_no_launcher_lists_variables "exit $rc: $(cat "$T/env.log")"; fi
env RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 "$B/mpi/train_mlp" --comm mpi "${SMALL[@]}" >"$T/env.log" 2>&1; rc=$?
if [ $rc -ne 0 ] && grep -q 'torchrun-style' "$T/env.log"; then pass env_torchrun_unsupported
else fail env_torchrun_unsupported "exit $rc: $(cat "$T/env.log")"; fi
env OMPI_COMM_WORLD_RANK=0 "$B/mpi/train_mlp" --comm mpi "${SMALL[@]}" >"$T/env.log" 2>&1; rc=$?
if [ $rc -ne 0 ] && grep -q 'OMPI_COMM_WORLD_SIZE is not' "$T/env.log"; then pass env_half_set_names_missing
else fail env_half_set_names_missing "exit $rc: $(cat "$T/env.log")"; fi
timeout 60 "${MPIRUN[@]}" -np 2 "$B/mpi/train_mlp" --comm mpi --ranks 4 "${SMALL[@]}" >"$T/env.log" 2>&1; rc=$?
if [ $rc -ne 0 ] && grep -q 'mpirun started 2 processes' "$T/env.log"; then pass env_ranks_disagree_with_np
else fail env_ranks_disagree_with_np "exit $rc: $(tail -n 3 "$T/env.log")"; fi

exit $failed
