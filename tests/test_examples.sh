#!/usr/bin/env bash
# tests/test_examples.sh - the example programs end to end: train_mlp's final line,
# stages 0-3 giving bitwise-equal parameters through --save-params at several world
# sizes and dtypes, the loss really falling, bad arguments, and zero_estimate
# reproducing Table 1 of the ZeRO paper. One PASS/FAIL line per case. Run from the
# repository root after `make` (build/train_mlp, build/zero_estimate).
set -u
B=${BUILD:-build}
T=$(mktemp -d "${TMPDIR:-/tmp}/zero-examples.XXXXXX")
trap 'rm -rf "$T"' EXIT
failed=0
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; failed=1; }

for bin in "$B/train_mlp" "$B/zero_estimate"; do
    [ -x "$bin" ] || { echo "FAIL setup: $bin not built"; exit 1; }
done

SMALL=(--hidden 48 --layers 3 --batch 24 --steps 20 --quiet --seed 3)
FINAL_RE='^final loss=[-+0-9.eEinfa]+ model_state_bytes_per_rank=[0-9]+ params=[0-9]+( [a-z_]+=[^ ]+)*$'

# the final line: exactly one, in the documented format, and nothing after it
out=$("$B/train_mlp" "${SMALL[@]}" --stage 2 --ranks 2 2>&1); rc=$?
last=$(printf '%s\n' "$out" | tail -n 1)
if [ $rc -ne 0 ]; then fail final_line "exit $rc: $out"
elif ! printf '%s\n' "$last" | grep -Eq "$FINAL_RE"; then fail final_line "bad line: $last"
elif [ "$(printf '%s\n' "$out" | grep -c '^final ')" != 1 ]; then fail final_line "not exactly one final line"
else pass final_line; fi

# stages 0-3 bitwise equal at one world size, for every dtype
for dt in f32 bf16 f16; do
    for n in 1 2 3 4; do
        name=stages_bitwise_${dt}_ranks$n ok=1
        for s in 0 1 2 3; do
            if ! "$B/train_mlp" "${SMALL[@]}" --dtype $dt --ranks $n --stage $s --save-params "$T/p$s" >"$T/log$s" 2>&1; then
                fail $name "stage $s: $(tail -n 2 "$T/log$s")"; ok=0; break
            fi
        done
        [ $ok = 1 ] || continue
        for s in 1 2 3; do
            cmp -s "$T/p0" "$T/p$s" || { fail $name "stage $s differs from stage 0"; ok=0; break; }
        done
        [ $ok = 1 ] && [ -s "$T/p0" ] && pass $name
    done
done

# --save-params writes params floats (the count on the final line)
params=$(grep -o 'params=[0-9]*' "$T/log0" | head -n 1 | cut -d= -f2)
size=$(stat -c %s "$T/p0")
if [ -n "$params" ] && [ "$size" = $((params * 4)) ]; then pass save_params_size
else fail save_params_size "file has $size bytes, params=$params"; fi

# the loss falls clearly: ln(32) = 3.47 at the start
out=$("$B/train_mlp" --hidden 128 --layers 4 --steps 150 --stage 3 --ranks 2 --quiet 2>&1)
loss=$(printf '%s\n' "$out" | tail -n 1 | sed -n 's/^final loss=\([^ ]*\).*/\1/p')
if [ -n "$loss" ] && awk "BEGIN { exit !($loss < 2.0) }"; then pass loss_falls
else fail loss_falls "final loss '$loss' is not below 2.0 (from 3.47): $(printf '%s\n' "$out" | tail -n 1)"; fi

# stage 3 prefetch on train_mlp: hit rate >= 0.95 after the first step (default model and
# a deeper one), peak gathered bytes <= max_live_bytes + the module in use, same bits
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }
for shape in "default:" "deep:--layers 12 --hidden 192"; do
    name=${shape%%:*} args=${shape#*:}
    "$B/train_mlp" --stage 3 --ranks 4 --steps 8 --quiet $args --prefetch-bytes -1 --save-params "$T/np" >"$T/np.log" 2>&1
    "$B/train_mlp" --stage 3 --ranks 4 --steps 8 --quiet $args --save-params "$T/pf" >"$T/pf.log" 2>&1
    "$B/train_mlp" --stage 3 --ranks 4 --steps 8 --quiet $args --max-live-bytes 300000 --prefetch-bytes 300000 \
        --save-params "$T/pb" >"$T/pb.log" 2>&1
    rate=$(tail -n 1 "$T/pf.log" | field prefetch_hit_rate)
    module=$(tail -n 1 "$T/np.log" | field peak_gathered_bytes)     # on demand: one module at a time
    peak=$(tail -n 1 "$T/pb.log" | field peak_gathered_bytes)
    if [ -z "$rate" ] || ! awk "BEGIN { exit !($rate >= 0.95) }"; then fail prefetch_hit_rate_$name "hit rate '$rate'"
    else pass prefetch_hit_rate_$name; fi
    if [ -z "$peak" ] || [ -z "$module" ] || [ "$peak" -gt $((300032 + module)) ]; then
        fail prefetch_peak_$name "peak gathered '$peak' > max_live_bytes 300000 + module '$module'"
    else pass prefetch_peak_$name; fi
    if cmp -s "$T/np" "$T/pf" && cmp -s "$T/np" "$T/pb"; then pass prefetch_bitwise_$name
    else fail prefetch_bitwise_$name "params with prefetch differ from on-demand fetching"; fi
done

# checkpoints: 20 steps straight == 10 steps, --save-ckpt, a fresh process with --load-ckpt,
# 10 more steps, bitwise, at every stage (the data position comes back with the step count)
for s in 0 1 2 3; do
    R=(--hidden 48 --layers 3 --batch 24 --quiet --seed 9 --stage $s --ranks 3 --dtype f16)
    rm -rf "$T/ck"
    "$B/train_mlp" "${R[@]}" --steps 20 --save-params "$T/straight" >"$T/c1.log" 2>&1 &&
    "$B/train_mlp" "${R[@]}" --steps 10 --save-ckpt "$T/ck" >"$T/c2.log" 2>&1 &&
    "$B/train_mlp" "${R[@]}" --steps 10 --load-ckpt "$T/ck" --save-params "$T/resumed" >"$T/c3.log" 2>&1
    rc=$?
    if [ $rc != 0 ]; then fail resume_stage$s "exit $rc: $(tail -n 1 "$T/c3.log")"
    elif cmp -s "$T/straight" "$T/resumed"; then pass resume_stage$s
    else fail resume_stage$s "resumed params differ from 20 steps straight"; fi
done

# offload: --offload-optimizer cpu|nvme and --offload-params cpu give the params of the run
# without offload, bitwise; a checkpoint of an nvme run resumes exactly
for s in 1 3; do
    R=(--hidden 48 --layers 3 --batch 24 --quiet --seed 5 --stage $s --ranks 2 --steps 6 --dtype bf16)
    "$B/train_mlp" "${R[@]}" --save-params "$T/o_none" >"$T/o1.log" 2>&1 &&
    "$B/train_mlp" "${R[@]}" --offload-optimizer cpu --offload-params cpu --save-params "$T/o_cpu" >"$T/o2.log" 2>&1 &&
    "$B/train_mlp" "${R[@]}" --offload-optimizer nvme --nvme-dir "$T" --save-params "$T/o_nvme" >"$T/o3.log" 2>&1
    rc=$?
    if [ $rc != 0 ]; then fail offload_stage$s "exit $rc: $(tail -n 1 "$T/o3.log")"
    elif cmp -s "$T/o_none" "$T/o_cpu" && cmp -s "$T/o_none" "$T/o_nvme"; then pass offload_stage$s
    else fail offload_stage$s "offloaded params differ from the run without offload"; fi
done
# stage-3 params on NVMe too (the shard in the tier's files, gathered from them)
R=(--hidden 48 --layers 3 --batch 24 --quiet --seed 5 --stage 3 --ranks 2 --steps 6 --dtype bf16)
"$B/train_mlp" "${R[@]}" --save-params "$T/p_none" >"$T/p1.log" 2>&1 &&
"$B/train_mlp" "${R[@]}" --offload-optimizer nvme --offload-params nvme --nvme-dir "$T" --save-params "$T/p_nvme" >"$T/p2.log" 2>&1
rc=$?
if [ $rc != 0 ]; then fail offload_params_nvme_stage3 "exit $rc: $(tail -n 1 "$T/p2.log")"
elif cmp -s "$T/p_none" "$T/p_nvme"; then pass offload_params_nvme_stage3
else fail offload_params_nvme_stage3 "params on NVMe differ from the run without offload"; fi
R=(--hidden 48 --layers 3 --batch 24 --quiet --seed 9 --stage 2 --ranks 3 --dtype bf16 --offload-optimizer nvme --nvme-dir "$T")
rm -rf "$T/ck"
"$B/train_mlp" "${R[@]}" --steps 20 --save-params "$T/straight" >"$T/c1.log" 2>&1 &&
"$B/train_mlp" "${R[@]}" --steps 10 --save-ckpt "$T/ck" >"$T/c2.log" 2>&1 &&
"$B/train_mlp" "${R[@]}" --steps 10 --load-ckpt "$T/ck" --save-params "$T/resumed" >"$T/c3.log" 2>&1
rc=$?
if [ $rc != 0 ]; then fail resume_offload_nvme "exit $rc: $(tail -n 1 "$T/c3.log")"
elif cmp -s "$T/straight" "$T/resumed"; then pass resume_offload_nvme
else fail resume_offload_nvme "resumed params differ from 20 steps straight"; fi

# q8 moments (ON OPTIMIZER STATES): a checkpoint holds the codes and scales (its manifest says
# state_dtype q8); a load decodes them and encodes each block once, from all its values, which
# gives the block back: the resume is bitwise, also into another stage (the blocks are in
# module coordinates), on the NVMe tier, and on the EMU device (its moments in device memory,
# read and written a block at a time through copies)
for c in "2|1|" "1|3|--offload-optimizer nvme --nvme-dir $T" "2|1|--device emu"; do
    IFS='|' read -r s1 s2 extra <<<"$c"
    R=(--hidden 48 --layers 3 --batch 24 --quiet --seed 9 --ranks 3 --dtype bf16 --optim-state-dtype q8)
    rm -rf "$T/ck"
    # shellcheck disable=SC2086
    "$B/train_mlp" "${R[@]}" --stage "$s1" --steps 20 $extra --save-params "$T/straight" >"$T/c1.log" 2>&1 &&
    "$B/train_mlp" "${R[@]}" --stage "$s1" --steps 10 --save-ckpt "$T/ck" $extra >"$T/c2.log" 2>&1 &&
    "$B/train_mlp" "${R[@]}" --stage "$s2" --steps 10 --load-ckpt "$T/ck" $extra --save-params "$T/resumed" >"$T/c3.log" 2>&1
    rc=$?
    case $extra in *nvme*) sfx=_nvme ;; *emu*) sfx=_emu ;; *) sfx= ;; esac
    name=resume_q8_stage${s1}_to_stage$s2$sfx
    if [ $rc != 0 ]; then fail "$name" "exit $rc: $(tail -n 1 "$T/c3.log")"
    elif ! grep -qx 'state_dtype q8' "$T/ck/manifest"; then fail "$name" "the manifest has no 'state_dtype q8' line"
    elif cmp -s "$T/straight" "$T/resumed"; then pass "$name"
    else fail "$name" "resumed params differ from 20 steps straight"; fi
done

# the device path (--device emu: the code --device cuda runs, on the CPU with device memory
# the host cannot touch): stages 0-3 bitwise equal on 2 ranks, and it learns like the CPU path
E=(--hidden 48 --layers 3 --batch 24 --steps 20 --quiet --seed 3 --device emu --ranks 2)
ok=1
for s in 0 1 2 3; do
    if ! "$B/train_mlp" "${E[@]}" --stage $s --save-params "$T/e$s" >"$T/elog$s" 2>&1; then
        fail device_emu_stages "stage $s: $(tail -n 2 "$T/elog$s")"; ok=0; break
    fi
done
if [ $ok = 1 ]; then
    for s in 1 2 3; do cmp -s "$T/e0" "$T/e$s" || { fail device_emu_stages "stage $s differs from stage 0"; ok=0; break; }; done
fi
[ $ok = 1 ] && pass device_emu_stages
el=$(sed -n 's/^final loss=\([^ ]*\).*/\1/p' "$T/elog3"); "$B/train_mlp" "${E[@]}" --device cpu --stage 3 >"$T/clog" 2>&1
cl=$(sed -n 's/^final loss=\([^ ]*\).*/\1/p' "$T/clog")
if [ -n "$el" ] && [ -n "$cl" ] && awk "BEGIN { d = $el - $cl; exit !(d < 1e-3 && d > -1e-3 && $el < 3.4) }"; then
    pass device_emu_learns_like_cpu
else fail device_emu_learns_like_cpu "emu loss '$el' vs cpu '$cl'"; fi
"$B/train_mlp" --device gpu --steps 1 >"$T/bad" 2>&1; rc=$?
if [ $rc = 2 ]; then pass bad_args___device_gpu; else fail bad_args___device_gpu "exit $rc"; fi
"$B/train_mlp" --device cuda --steps 1 >"$T/bad" 2>&1; rc=$?
if [ $rc = 1 ] && grep -q 'ZERO_CUDA' "$T/bad"; then pass device_cuda_in_cpu_build_refused
else fail device_cuda_in_cpu_build_refused "exit $rc: $(head -c 300 "$T/bad")"; fi

# bad arguments: a message and exit 2, never a crash
for args in "--stage 7" "--ranks 0" "--dtype f8" "--batch 10 --ranks 4" "--bogus" "--offload-optimizer disk"; do
    name="bad_args_$(printf '%s' "$args" | tr -c 'a-z0-9' '_')"
    "$B/train_mlp" $args --steps 1 >"$T/bad" 2>&1; rc=$?
    if [ $rc = 2 ] && [ -s "$T/bad" ]; then pass "$name"; else fail "$name" "exit $rc: $(head -c 200 "$T/bad")"; fi
done

# zero_estimate: Table 1 of the ZeRO paper (7.5B params, 64 ranks, bf16 + AdamW)
want=(120000000000 31406250000 16640625000 1875000000)
for s in 0 1 2 3; do
    got=$("$B/zero_estimate" --params 7.5e9 --ranks 64 --stage $s | head -n 1)
    if [ "$got" = "model_state_bytes_per_rank=${want[$s]}" ]; then pass table1_stage$s
    else fail table1_stage$s "got '$got', want model_state_bytes_per_rank=${want[$s]}"; fi
done
"$B/zero_estimate" --params -5 --ranks 4 --stage 1 >"$T/bad" 2>&1; rc=$?
if [ $rc = 2 ]; then pass estimate_bad_args; else fail estimate_bad_args "exit $rc"; fi

# train_tiny, the middle example (#27 item 13): at most 250 lines; every stage the same bits at
# 2 ranks, and with --offload cpu; 50 steps, --save, then 50 more after --load (at another
# stage) give the bits of 100 straight, the data position from the checkpoint's record
if [ -x "$B/train_tiny" ]; then
    hash_t() { sed -n 's/.* params_hash=\([0-9a-f]*\).*/\1/p' "$1"; }
    n=$(wc -l <examples/train_tiny.c)
    if [ "$n" -le 250 ]; then pass tiny_lines; else fail tiny_lines "$n lines"; fi
    ok=1 ref=
    for s in 0 1 2 3; do
        "$B/train_tiny" --stage $s --steps 40 >"$T/tiny$s" 2>&1 || { fail tiny_stages "stage $s: $(tail -n 1 "$T/tiny$s")"; ok=0; break; }
        h=$(hash_t "$T/tiny$s"); [ -z "$ref" ] && ref=$h
        [ -n "$h" ] && [ "$h" = "$ref" ] || { fail tiny_stages "stage $s params_hash '$h', stage 0 '$ref'"; ok=0; break; }
    done
    [ $ok = 1 ] && pass tiny_stages
    "$B/train_tiny" --stage 2 --steps 40 --offload cpu >"$T/tinyo" 2>&1
    if [ "$(hash_t "$T/tinyo")" = "$ref" ]; then pass tiny_offload_cpu; else fail tiny_offload_cpu "$(tail -n 1 "$T/tinyo")"; fi
    rm -rf "$T/tck"
    "$B/train_tiny" --stage 3 --steps 20 --save "$T/tck" >"$T/tinya" 2>&1 &&
    "$B/train_tiny" --stage 1 --steps 20 --load "$T/tck" >"$T/tinyb" 2>&1
    if [ "$(hash_t "$T/tinyb")" = "$ref" ]; then pass tiny_resume
    else fail tiny_resume "resumed '$(hash_t "$T/tinyb")', straight '$ref': $(tail -n 1 "$T/tinyb")"; fi
else
    fail tiny_built "$B/train_tiny not built"
fi

# the default batch fits any --ranks (rounded up, and said); a --batch given is never changed
out=$("$B/train_mlp" --ranks 3 --steps 2 --quiet 2>&1); rc=$?
if [ $rc = 0 ] && printf '%s\n' "$out" | tail -n 1 | grep -q ' batch=66 ' && printf '%s\n' "$out" | grep -q 'rounded up'
then pass default_batch_ranks3; else fail default_batch_ranks3 "exit $rc: $(printf '%s\n' "$out" | tail -n 2)"; fi
"$B/train_mlp" --ranks 3 --batch 64 --steps 1 --quiet >"$T/bad" 2>&1; rc=$?
if [ $rc = 2 ] && grep -q 'must be a multiple' "$T/bad"; then pass given_batch_ranks3_refused
else fail given_batch_ranks3_refused "exit $rc: $(head -c 200 "$T/bad")"; fi

exit $failed
