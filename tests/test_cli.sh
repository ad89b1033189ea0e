#!/usr/bin/env bash
# tests/test_cli.sh - the examples' command-line numbers: zero_estimate's --ranks limit
# (zero.h's ZERO__MAX_RANKS, 4096) and its message, and decimal-only numbers in
# zero_estimate, train_mlp and train_gpt (0x10, 0x1p-8, inf, ' 5', ' -1' refused with a
# message naming the option and the value, exit 2, before any training; 010 is ten), and
# zero_estimate's total_bytes_per_rank falling from stage 0 to 3 (P = 1e5 and 1e9, 4 ranks), and
# --optim (adamw, lion, sgd: the moments zero_estimate counts; muon with --matrix: its buffers;
# muon refused where nothing is marked).
# Valid runs still print what they did. One PASS/FAIL line per case; a few seconds.
# Run from the repository root after `make` (build/zero_estimate, build/train_mlp,
# build/train_gpt; BUILD=dir for another build).
set -u
B=${BUILD:-build}
T=$(mktemp -d "${TMPDIR:-/tmp}/zero-cli.XXXXXX")
trap 'rm -rf "$T"' EXIT
failed=0
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; failed=1; }

for bin in "$B/zero_estimate" "$B/train_mlp" "$B/train_gpt"; do
    [ -x "$bin" ] || { echo "FAIL setup: $bin not built"; exit 1; }
done

# refused NAME WANT COMMAND...: exit 2, WANT (a fixed string) on stderr, nothing on stdout
# (so no training line either), within 20 s
refused() {
    local name=$1 want=$2; shift 2
    timeout 20 "$@" >"$T/out" 2>"$T/err"; local rc=$?
    if [ $rc != 2 ]; then fail "$name" "exit $rc, want 2: $(head -c 300 "$T/err")"
    elif ! grep -qF -- "$want" "$T/err"; then fail "$name" "stderr lacks '$want': $(head -c 300 "$T/err")"
    elif [ -s "$T/out" ]; then fail "$name" "printed on stdout: $(head -c 200 "$T/out")"
    else pass "$name"; fi
}

# ---- zero_estimate ---------------------------------------------------------------------
E=("$B/zero_estimate")
refused est_ranks_over_max "--ranks 100000: at most 4096 ranks" "${E[@]}" --params 1000 --stage 1 --ranks 100000
if grep -q 'must be positive' "$T/err"; then fail est_ranks_over_max_no_positive "says 'must be positive'"
else pass est_ranks_over_max_no_positive; fi
refused est_ranks_4097 "--ranks 4097: at most 4096 ranks" "${E[@]}" --params 1000 --stage 1 --ranks 4097
refused est_ranks_zero "--ranks 0: must be at least 1" "${E[@]}" --params 1000 --stage 1 --ranks 0
refused est_ranks_negative "--ranks -3: must be at least 1" "${E[@]}" --params 1000 --stage 1 --ranks -3
refused est_stage_over "--stage 4: at most 3" "${E[@]}" --params 1000 --ranks 2 --stage 4
refused est_params_fraction "--params expects a whole number (got '7.5')" "${E[@]}" --params 7.5 --ranks 2 --stage 1

out=$("${E[@]}" --params 1000 --stage 1 --ranks 4096 2>&1); rc=$?
if [ $rc = 0 ] && printf '%s\n' "$out" | grep -qx 'params=1000'; then pass est_ranks_max_ok
else fail est_ranks_max_ok "exit $rc: $(printf '%s' "$out" | head -c 300)"; fi

# --optim-state-dtype: bf16 moments halve optim_bytes (1e9 params, 4 ranks, stage 3: 2e9 -> 1e9)
# and take 1e9 off model_state_bytes_per_rank; q8 moments: optim_bytes and master + optim at most
# 0.55 of f32's (measured 0.254 and 0.503: a byte a moment, a scale per 256); fp8 is unknown
f32=$("${E[@]}" --params 1e9 --ranks 4 --stage 3 2>&1); bf=$("${E[@]}" --params 1e9 --ranks 4 --stage 3 --optim-state-dtype bf16 2>&1)
if printf '%s\n' "$f32" | grep -qx 'optim_bytes=2000000000' && printf '%s\n' "$bf" | grep -qx 'optim_bytes=1000000000' &&
   printf '%s\n' "$bf" | grep -qx 'model_state_bytes_per_rank=3000000000'; then pass est_optim_state_dtype_bf16
else fail est_optim_state_dtype_bf16 "f32: $(printf '%s' "$f32" | grep optim_bytes) bf16: $(printf '%s' "$bf" | tr '\n' ' ' | head -c 200)"; fi
q8=$("${E[@]}" --params 1e9 --ranks 4 --stage 3 --optim-state-dtype q8 2>&1)
ratios=$(printf '%s\n%s\n' "$f32" "$q8" | awk -F= '/^optim_bytes=/ { o[n_o++] = $2 } /^master_bytes=/ { m[n_m++] = $2 }
    END { if (n_o == 2 && n_m == 2 && o[0] > 0) printf "%.4f %.4f", o[1] / o[0], (o[1] + m[1]) / (o[0] + m[0]) }')
if [ -n "$ratios" ] && awk -v r="$ratios" 'BEGIN { split(r, a, " "); exit !(a[1] <= 0.55 && a[2] <= 0.55 && a[1] > 0.2) }'; then
    pass "est_optim_state_dtype_q8 (optim ratio, master+optim ratio: $ratios)"
else fail est_optim_state_dtype_q8 "ratios '$ratios': $(printf '%s' "$q8" | tr '\n' ' ' | head -c 300)"; fi
refused est_optim_state_dtype_fp8 "--optim-state-dtype expects f32, bf16 or q8 (got 'fp8')" "${E[@]}" --params 1e9 --ranks 4 --stage 3 --optim-state-dtype fp8
# --optim: Lion and SGD with momentum keep one moment (optim_bytes 1e9 of AdamW's 2e9; Lion in
# q8: a byte and a fp32 scale per 256 elements, on 2.5e8 elements a rank padded to whole blocks);
# Muon is named and refused by the programs that mark no matrices for it (train_gpt does)
li=$("${E[@]}" --params 1e9 --ranks 4 --stage 3 --optim lion 2>&1); sg=$("${E[@]}" --params 1e9 --ranks 4 --stage 3 --optim sgd 2>&1)
lq=$("${E[@]}" --params 1e9 --ranks 4 --stage 3 --optim lion --optim-state-dtype q8 2>&1)
if printf '%s\n' "$li" | grep -qx 'optim_bytes=1000000000' && printf '%s\n' "$sg" | grep -qx 'optim_bytes=1000000000' &&
   printf '%s\n' "$li" | grep -qx 'model_state_bytes_per_rank=3000000000' &&
   printf '%s\n' "$lq" | awk -F= '/^optim_bytes=/ { ok = $2 >= 250e6 * 1.015625 && $2 <= 251e6 * 1.015625 } END { exit !ok }'
then pass est_optim_lion_sgd
else fail est_optim_lion_sgd "lion: $(printf '%s' "$li" | tr '\n' ' ' | head -c 200) sgd: $(printf '%s' "$sg" | grep optim_bytes) lion q8: $(printf '%s' "$lq" | grep optim_bytes)"; fi
# --optim muon --matrix RxC: the modules all 100x250 matrices, rank 0's 62500 elements a module
# keep one moment (4 bytes less each than AdamW's two: 1e6 in all), Muon's buffers on top
# (tests/test_muon.c checks both against zero_build's); --matrix needs --optim muon and back
ad=$("${E[@]}" --params 1e6 --ranks 4 --stage 3 --modules 4 2>&1)
mu=$("${E[@]}" --params 1e6 --ranks 4 --stage 3 --modules 4 --optim muon --matrix 100x250 2>&1)
if printf '%s\n%s\n' "$ad" "$mu" | awk -F= '/^model_state_bytes_per_rank=/ { m[k++] = $2 } /^buffer_bytes=/ { b[n++] = $2 }
       END { exit !(k == 2 && m[0] - m[1] == 1000000 && n == 2 && b[1] > b[0] + 4 * 250000) }'
then pass est_optim_muon
else fail est_optim_muon "adamw: $(printf '%s' "$ad" | tr '\n' ' ' | head -c 200) muon: $(printf '%s' "$mu" | tr '\n' ' ' | head -c 200)"; fi
# --speculative-step: the undo area, every module's old master, moments and params (bf16: 4 + 8 + 2
# bytes each of a rank's 1.25e8 elements), in buffer_bytes too; --speculative-bytes caps it
# (tests/test_speculate.c checks the planner against zero_build's allocation)
sp=$("${E[@]}" --params 1e9 --ranks 8 --stage 2 --speculative-step 2>&1)
sc=$("${E[@]}" --params 1e9 --ranks 8 --stage 2 --speculative-step --speculative-bytes 1000000 2>&1)
if printf '%s\n' "$sp" | grep -qx 'speculative_bytes=1750000000' && printf '%s\n' "$sc" | grep -qx 'speculative_bytes=1000000' &&
   printf '%s\n%s\n' "$sp" "$sc" | awk -F= '/^buffer_bytes=/ { b[n++] = $2 } END { exit !(n == 2 && b[0] - b[1] == 1749000000) }' &&
   ! "${E[@]}" --params 1e9 --ranks 8 --stage 2 2>&1 | grep -q '^speculative_bytes='
then pass est_speculative
else fail est_speculative "$(printf '%s' "$sp" | grep -E 'spec|buffer' | tr '\n' ' ') capped: $(printf '%s' "$sc" | grep -E 'spec|buffer' | tr '\n' ' ')"; fi
refused est_speculative_bytes_alone "--speculative-bytes is for --speculative-step" "${E[@]}" --params 1e9 --ranks 8 --stage 2 --speculative-bytes 5
refused est_optim_muon_no_matrix "--matrix is required with --optim muon" "${E[@]}" --params 1e9 --ranks 4 --stage 3 --optim muon
refused est_matrix_no_muon "--matrix is for --optim muon" "${E[@]}" --params 1e9 --ranks 4 --stage 3 --matrix 8x8
refused est_matrix_bogus "--matrix expects ROWSxCOLS such as 4096x4096 (got '8by8')" "${E[@]}" --params 1e9 --ranks 4 --stage 3 --optim muon --matrix 8by8
refused est_optim_bogus "--optim expects adamw, lion, sgd or muon (got 'adam')" "${E[@]}" --params 1e9 --ranks 4 --stage 3 --optim adam
refused gpt_optim_bogus "--optim expects adamw, lion, sgd or muon (got 'Lion')" "$B/train_gpt" --optim Lion
refused mlp_optim_muon "--optim muon: this program has no matrices marked for Muon" "$B/train_mlp" --optim muon

# not decimal: refused for every numeric option, with the option and the value named
i=0
for bad in 0x10 0X10 0x1p4 inf nan " 4" "4 " "" 1e 5k; do
    for opt in --params --ranks --stage --align --modules; do
        args=(--params 1000 --ranks 2 --stage 1)
        case $opt in
            --params) args=(--params "$bad" --ranks 2 --stage 1) ;;
            --ranks) args=(--params 1000 --ranks "$bad" --stage 1) ;;
            --stage) args=(--params 1000 --ranks 2 --stage "$bad") ;;
            *) args+=("$opt" "$bad") ;;
        esac
        refused "est_not_decimal_${opt#--}_$i" "$opt expects a decimal whole number such as 64 or 7.5e9 (got '$bad')" \
            "${E[@]}" "${args[@]}"
    done
    i=$((i + 1))
done

# 010 is ten, not octal 8 (and 0x10 is not sixteen: above)
out=$("${E[@]}" --params 010 --ranks 02 --stage 01 2>&1); rc=$?
if [ $rc = 0 ] && printf '%s\n' "$out" | grep -qx 'params=10'; then pass est_leading_zero_is_decimal
else fail est_leading_zero_is_decimal "exit $rc: $(printf '%s' "$out" | tr '\n' ' ' | head -c 300)"; fi
a=$("${E[@]}" --params 010 --ranks 02 --stage 01 --align 08 --modules 03 2>&1)
b=$("${E[@]}" --params 10 --ranks 2 --stage 1 --align 8 --modules 3 2>&1)
if [ "$a" = "$b" ]; then pass est_leading_zero_all_options
else fail est_leading_zero_all_options "010-style output differs: $(printf '%s' "$a" | tr '\n' ' ')"; fi

# the decimal forms strtod took before still work: .5e2 is 50, 1.5E1 is 15, 1e+3 is 1000
for pair in .5e2:50 1.5E1:15 1e+3:1000; do
    v=${pair%%:*} want=${pair#*:}
    out=$("${E[@]}" --params "$v" --ranks 2 --stage 1 2>&1); rc=$?
    if [ $rc = 0 ] && printf '%s\n' "$out" | grep -qx "params=$want"; then pass "est_decimal_form_$want"
    else fail "est_decimal_form_$want" "--params $v: exit $rc: $(printf '%s' "$out" | head -c 200)"; fi
done

# a valid run prints as before: ZeRO Table 1, stage 1 (7.5B params, 64 ranks, bf16)
out=$("${E[@]}" --params 7.5e9 --ranks 64 --stage 1 2>&1); rc=$?
first=$(printf '%s\n' "$out" | head -n 1)
if [ $rc = 0 ] && [ "$first" = model_state_bytes_per_rank=31406250000 ] &&
   printf '%s\n' "$out" | grep -qx 'params=7500000000'; then pass est_valid_table1
else fail est_valid_table1 "exit $rc, first line '$first'"; fi

# total_bytes_per_rank (states + buffers) is printed second and equals total_bytes; with the
# default module split it falls, not strictly, from stage 0 to 3 (ON MEMORY in zero.h)
for P in 1e5 1e9; do
    prev= ok=1 msg=
    for s in 0 1 2 3; do
        out=$("${E[@]}" --params $P --ranks 4 --stage $s 2>&1); rc=$?
        v=$(printf '%s\n' "$out" | sed -n '2s/^total_bytes_per_rank=\([0-9][0-9]*\)$/\1/p')
        t=$(printf '%s\n' "$out" | sed -n 's/^total_bytes=\([0-9][0-9]*\)$/\1/p')
        if [ $rc != 0 ] || [ -z "$v" ] || [ "$v" != "$t" ]; then ok=0; msg="stage $s: exit $rc, line 2 '$v', total_bytes '$t'"; break; fi
        if [ -n "$prev" ] && [ "$v" -gt "$prev" ]; then ok=0; msg="stage $s: $v > stage $((s - 1)): $prev"; fi
        msg="$msg $v"; prev=$v
    done
    if [ $ok = 1 ]; then pass "est_total_falls_$P"; else fail "est_total_falls_$P" "$msg"; fi
done
# one module (--modules 1): the buffers hold the whole model and stage 3 needs more than stage 2
a=$("${E[@]}" --params 1e5 --ranks 4 --stage 2 --modules 1 | sed -n 's/^total_bytes_per_rank=//p')
b=$("${E[@]}" --params 1e5 --ranks 4 --stage 3 --modules 1 | sed -n 's/^total_bytes_per_rank=//p')
if [ -n "$a" ] && [ -n "$b" ] && [ "$b" -gt "$a" ]; then pass est_one_module_no_fall
else fail est_one_module_no_fall "stage 2 '$a', stage 3 '$b'"; fi

# ---- train_mlp and train_gpt -------------------------------------------------------------
MLP=("$B/train_mlp" --hidden 16 --layers 2 --batch 8 --quiet)
GPT=("$B/train_gpt" --layers 1 --dim 16 --heads 2 --seq 16 --batch 4 --ranks 1 --plot none --trace none --quiet)
for prog in mlp gpt; do
    if [ $prog = mlp ]; then P=("${MLP[@]}"); else P=("${GPT[@]}"); fi
    refused ${prog}_steps_hex "--steps expects a decimal integer in [1, " "${P[@]}" --steps 0x10
    refused ${prog}_steps_blank "(got ' 5')" "${P[@]}" --steps " 5"
    refused ${prog}_ranks_hex "--ranks expects a decimal integer in [1, 256] (got '0x2')" "${P[@]}" --steps 1 --ranks 0x2
    refused ${prog}_ranks_zero "--ranks expects a decimal integer in [1, 256] (got '0')" "${P[@]}" --steps 1 --ranks 0
    refused ${prog}_ranks_negative "--ranks expects a decimal integer in [1, 256] (got '-2')" "${P[@]}" --steps 1 --ranks -2
    refused ${prog}_lr_hexfloat "--lr expects a decimal number in [1e-12, 1000] (got '0x1p-8')" "${P[@]}" --steps 1 --lr 0x1p-8
    refused ${prog}_lr_hex "--lr expects a decimal number in [1e-12, 1000] (got '0x10')" "${P[@]}" --steps 1 --lr 0x10
    refused ${prog}_lr_inf "--lr expects a decimal number in [1e-12, 1000] (got 'inf')" "${P[@]}" --steps 1 --lr inf
    refused ${prog}_seed_hex "--seed expects a non-negative decimal integer below 2^64 (got '0x10')" "${P[@]}" --steps 1 --seed 0x10
    refused ${prog}_seed_negative "--seed expects a non-negative decimal integer below 2^64 (got ' -1')" "${P[@]}" --steps 1 --seed " -1"
    refused ${prog}_seed_overflow "--seed expects a non-negative decimal integer below 2^64 (got '18446744073709551616')" \
        "${P[@]}" --steps 1 --seed 18446744073709551616

    out=$(timeout 60 "${P[@]}" --steps 1 --lr .002 2>&1); rc=$?
    if [ $rc = 0 ] && printf '%s\n' "$out" | grep -q '^final loss='; then pass ${prog}_lr_leading_point
    else fail ${prog}_lr_leading_point "--lr .002: exit $rc: $(printf '%s' "$out" | head -c 200)"; fi

    # 010 is ten: the same run as --seed 10 (and a different one from octal 8); 03 steps are 3
    loss() { sed -n 's/^final loss=\([^ ]*\).*/\1/p' "$1"; }
    timeout 60 "${P[@]}" --steps 03 --seed 010 --lr 2e-3 >"$T/a" 2>&1; ra=$?
    timeout 60 "${P[@]}" --steps 3 --seed 10 --lr 0.002 >"$T/b" 2>&1; rb=$?
    timeout 60 "${P[@]}" --steps 3 --seed 8 --lr 0.002 >"$T/c" 2>&1; rcc=$?
    la=$(loss "$T/a") lb=$(loss "$T/b") lc=$(loss "$T/c")
    if [ $ra != 0 ] || [ $rb != 0 ] || [ $rcc != 0 ]; then
        fail ${prog}_leading_zero_is_decimal "exit $ra/$rb/$rcc: $(tail -n 1 "$T/a")"
    elif [ -z "$la" ] || [ "$la" != "$lb" ] || [ "$la" = "$lc" ]; then
        fail ${prog}_leading_zero_is_decimal "losses: seed 010 '$la', 10 '$lb', 8 '$lc'"
    elif ! grep -q ' steps=3 ' "$T/a"; then fail ${prog}_leading_zero_is_decimal "no steps=3: $(tail -n 1 "$T/a")"
    else pass ${prog}_leading_zero_is_decimal; fi
done

exit $failed
