#!/usr/bin/env bash
# tests/test_zero_ckpt.sh - the checkpoint tool build/zero_ckpt (examples/zero_ckpt.c) on a
# good checkpoint and on damaged ones. Good: `info` prints exactly the documented lines,
# `verify` its OK line, `export` (f32, --bf16) the bytes zero_export_safetensors wrote.
# Damaged (made by build/test_ckpt_inspect --fixtures, which lists them with the param
# and element range each refusal must name): `verify` and `export` exit 1 with a
# ZERO_ERR_CORRUPT message naming them, print no OK/wrote line, and leave no output file;
# `info` refuses the ones whose manifest is refused. Empty paths and bad arguments too.
# One PASS/FAIL line per case. Run from the repository root after `make`.
set -u
B=${BUILD:-build}
T=$(mktemp -d "${TMPDIR:-/tmp}/zero-ckpt-cli.XXXXXX")
trap 'rm -rf "$T"' EXIT
failed=0
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; failed=1; }

for bin in "$B/zero_ckpt" "$B/test_ckpt_inspect"; do
    [ -x "$bin" ] || { echo "FAIL setup: $bin not built"; exit 1; }
done
Z=$(cd "$B" && pwd)/zero_ckpt
if ! "$B/test_ckpt_inspect" --fixtures "$T/fx" >"$T/cases" 2>"$T/fx.log"; then
    echo "FAIL setup: build/test_ckpt_inspect --fixtures: $(tail -n 3 "$T/fx.log")"
    exit 1
fi
G=$T/fx/good
cd "$T" || exit 1       # a stray relative output (".tmp") would land here

# run NAME ARGS...: stdout in $T/out, stderr in $T/err, exit status in $rc
run() { "$Z" "$@" >"$T/out" 2>"$T/err"; rc=$?; }

# ---- info: the documented lines, values from the manifest and the files --------------
gen=$(sed -n 's/^generation \([0-9a-f]*\)$/\1/p' "$G/manifest")
gen=$((16#$gen))
{
    echo "format 3, generation $gen"
    echo "stage 3, world 3, param_dtype bf16, optimizer adamw (2 moments)"
    echo "state_dtype f32"
    echo "steps 3, skipped 0, loss_scale $(sed -n 's/^loss_scale //p' "$G/manifest"), good_steps $(sed -n 's/^good_steps //p' "$G/manifest")"
    echo "micro_batches 9"
    # the trainer's records (test_ckpt_inspect's put_records): key, size, the first 16 bytes
    echo "record data_pos 8 bytes d204000000000000"
    echo "record trainer.cfg 23 bytes $(printf 'stage=3 world=3 seed=7' | od -An -tx1 | tr -d ' \n' | cut -c1-32)..."
    echo "record empty 0 bytes"
    echo "record big-1.x_y 65536 bytes 030a11181f262d343b424950575e656c..."
    printf 'module emb\nmodule mid (frozen)\nmodule head\n'
    printf 'param emb.w [5, 7] 35 elements\nparam emb.b [3] 3 elements\nparam mid.w [13] 13 elements\n'
    printf 'param head.w [4, 6] 24 elements\nparam head.b [5] 5 elements\n'
    for k in 0 1 2; do echo "file rank$k.g$gen $(stat -c %s "$G/rank$k.g$gen") bytes"; done
    echo "$(grep -c '^range ' "$G/manifest") ranges"
} >"$T/info.want"
run info "$G"
if [ $rc -ne 0 ]; then fail info_good "exit $rc: $(head -c 300 "$T/err")"
elif ! diff "$T/info.want" "$T/out" >"$T/diff"; then fail info_good "output differs: $(head -n 6 "$T/diff" | tr '\n' '|')"
elif [ -s "$T/err" ]; then fail info_good "stderr: $(head -c 200 "$T/err")"
else pass info_good; fi

# ---- verify and export: good ---------------------------------------------------------
run verify "$G"
if [ $rc = 0 ] && [ "$(cat "$T/out")" = "OK: $G: $(grep -c '^range ' "$G/manifest") ranges in 3 files, every checksum matches" ]
then pass verify_good; else fail verify_good "exit $rc: $(head -c 300 "$T/out" "$T/err")"; fi
for dt in f32 bf16; do
    flag=; [ $dt = bf16 ] && flag=--bf16
    name=$(echo $dt | tr a-z A-Z)
    run export "$G" "$T/good_$dt.safetensors" $flag
    if [ $rc != 0 ]; then fail export_good_$dt "exit $rc: $(head -c 300 "$T/err")"
    elif [ "$(cat "$T/out")" != "wrote $T/good_$dt.safetensors: 5 tensors, $name" ]; then fail export_good_$dt "printed '$(cat "$T/out")'"
    elif ! cmp -s "$T/good_$dt.safetensors" "$T/fx/ref_$dt.safetensors"; then
        fail export_good_$dt "differs from zero_export_safetensors's file"
    elif [ -e "$T/good_$dt.safetensors.tmp" ]; then fail export_good_$dt "left a .tmp file"
    else pass export_good_$dt; fi
done

# ---- damaged checkpoints: every command refuses, naming the param and range ------------
n=0
while read -r case code param range; do
    n=$((n + 1))
    out=$T/$case.safetensors
    for cmd in verify export info; do
        [ $cmd = info ] && [ "$code" = OK ] && continue     # the manifest is fine: info prints it
        if [ $cmd = export ]; then run export "$T/fx/$case" "$out"; else run $cmd "$T/fx/$case"; fi
        if [ $rc != 1 ]; then fail ${case}_$cmd "exit $rc, want 1: $(head -c 300 "$T/out" "$T/err")"
        elif [ -s "$T/out" ]; then fail ${case}_$cmd "printed on stdout: $(head -c 200 "$T/out")"
        elif ! grep -q '^zero_ckpt: ZERO_ERR_CORRUPT: ' "$T/err"; then fail ${case}_$cmd "message: $(head -c 300 "$T/err")"
        elif ! grep -qF -- "$param" "$T/err" || ! grep -qF -- "$range" "$T/err"; then
            fail ${case}_$cmd "message does not name $param $range: $(head -c 400 "$T/err")"
        elif [ -e "$out" ] || [ -e "$out.tmp" ]; then fail ${case}_$cmd "left an output file"
        else pass ${case}_$cmd; fi
    done
    if [ "$code" = OK ]; then       # a damaged shard: info still reads the manifest
        run info "$T/fx/$case"
        if [ $rc = 0 ] && diff -q "$T/info.want" "$T/out" >/dev/null; then pass ${case}_info
        else fail ${case}_info "exit $rc: $(head -c 300 "$T/err")"; fi
    fi
done <"$T/cases"
if [ $n -ge 4 ]; then pass fixtures_listed; else fail fixtures_listed "only $n damaged checkpoints"; fi

# ---- empty paths, a missing directory, bad arguments ------------------------------------
for args in "verify|" "info|" "export||$T/e.safetensors" "export|$G|"; do
    IFS='|' read -r cmd a b <<<"$args"
    name=empty_path_${cmd}_$([ -z "$a" ] && echo dir || echo out)
    if [ "$cmd" = export ]; then run export "$a" "$b"; else run $cmd "$a"; fi
    if [ $rc = 1 ] && grep -q 'ZERO_ERR_INVALID_ARG.*empty' "$T/err" && [ ! -s "$T/out" ] && [ ! -e "$T/.tmp" ] &&
       [ ! -e "$T/manifest" ] && [ ! -e "$T/e.safetensors" ]; then pass $name
    else fail $name "exit $rc: $(head -c 300 "$T/out" "$T/err")"; fi
done
run verify "$T/nothing"
if [ $rc = 1 ] && grep -q 'ZERO_ERR_IO.*nothing/manifest.*cannot open' "$T/err"; then pass missing_dir
else fail missing_dir "exit $rc: $(head -c 300 "$T/err")"; fi
for args in "" "info" "verify $G extra" "export $G" "export $G $T/x.safetensors --f16" "convert $G"; do
    name="bad_args_$(printf '%s' "$args" | sed "s|$T|T|g" | tr -c 'a-zA-Z0-9' '_')"
    run $args
    if [ $rc = 2 ] && grep -q '^usage: zero_ckpt' "$T/err"; then pass "$name"; else fail "$name" "exit $rc"; fi
done

exit $failed
