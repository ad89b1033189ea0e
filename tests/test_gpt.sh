#!/usr/bin/env bash
# tests/test_gpt.sh - examples/train_gpt end to end at tiny sizes: every stage at 2 and 3
# ranks gives the final line in its format, a trace that is valid JSON with events
# from every rank on the compute, comm and optimizer tracks, and a well-formed SVG;
# the loss falls; the default size's memory picture falls from stage 0 to 3; zero.h is
# found beside the executable from another directory; bad
# options (offload, a missing --data) fail with a message. One PASS/FAIL line per
# case. Run from the repository root after `make` (build/train_gpt); needs python3
# for the JSON and XML checks.
set -u
B=${BUILD:-build}
T=$(mktemp -d "${TMPDIR:-/tmp}/zero-gpt.XXXXXX")
trap 'rm -rf "$T"' EXIT
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; failed=1; }
failed=0

[ -x "$B/train_gpt" ] || { echo "FAIL setup: $B/train_gpt not built"; exit 1; }
command -v python3 >/dev/null 2>&1 || { echo "FAIL setup: python3 not found"; exit 1; }

TINY=(--layers 1 --dim 16 --heads 2 --seq 16 --batch 12 --steps 3 --quiet --seed 2)
FINAL_RE='^final loss=[0-9.]+ tokens_per_s=[0-9.]+ model_state_bytes_per_rank=[0-9]+( [a-z_0-9]+=[^ ]+)*$'

check_files() {   # check_files TRACE SVG RANKS -> "" or a complaint
    python3 - "$1" "$2" "$3" <<'PY' 2>&1
import json, sys, xml.etree.ElementTree as ET
trace, svg, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
d = json.load(open(trace))
ev = [e for e in d["traceEvents"] if e.get("ph") == "X"]
for e in ev:
    assert isinstance(e["ts"], (int, float)) and e["dur"] >= 0 and isinstance(e["name"], str), e
pids = set(e["pid"] for e in ev)
assert pids == set(range(n)), "pids %s, want 0..%d" % (sorted(pids), n - 1)
for r in range(n):
    tids = set(e["tid"] for e in ev if e["pid"] == r)
    assert {0, 1, 2} <= tids, "rank %d has tracks %s" % (r, sorted(tids))
root = ET.parse(svg).getroot()
assert root.tag.endswith("svg"), root.tag
assert len(root.findall(".//{http://www.w3.org/2000/svg}rect")) > 5, "too few bars"
PY
}

for s in 0 1 2 3; do
    for n in 2 3; do
        name=gpt_stage${s}_ranks$n
        batch=$((n * 4))
        out=$("$B/train_gpt" "${TINY[@]}" --batch $batch --stage $s --ranks $n --trace "$T/t.json" --plot "$T/p.svg" 2>&1); rc=$?
        last=$(printf '%s\n' "$out" | tail -n 1)
        if [ $rc -ne 0 ]; then fail $name "exit $rc: $out"; continue; fi
        if ! printf '%s\n' "$last" | grep -Eq "$FINAL_RE"; then fail $name "bad final line: $last"; continue; fi
        msg=$(check_files "$T/t.json" "$T/p.svg" $n)
        if [ -n "$msg" ]; then fail $name "$msg"; continue; fi
        # stage 3: the training's fetches after the first step were gathered ahead (the
        # final line counts the training only, not the forward-only passes of the sample)
        rate=$(printf '%s\n' "$last" | sed -n 's/.* prefetch_hit_rate=\([0-9.]*\).*/\1/p')
        if [ $s = 3 ] && ! awk "BEGIN { exit !(${rate:-0} >= 0.95) }"; then
            fail $name "prefetch_hit_rate=${rate:-none} < 0.95: $last"; continue
        fi
        pass $name
    done
done

# tied output layer (the default): at each world size 1-4 every stage trains bitwise the
# same params (params_hash); --untie too, and it is another model
cp zero.h "$T/data.txt" 2>/dev/null || cp "$(dirname "$B")/zero.h" "$T/data.txt"
HASH=(--layers 1 --dim 16 --heads 2 --seq 16 --batch 12 --steps 3 --quiet --seed 2 --plot none --trace none --data "$T/data.txt")
hash_of() { printf '%s\n' "$1" | tail -n 1 | sed -n 's/.* params_hash=\([0-9a-f]*\).*/\1/p'; }
for n in 1 2 3 4; do
    ref=; bad=
    for s in 0 1 2 3; do
        out=$("$B/train_gpt" "${HASH[@]}" --stage $s --ranks $n 2>&1); rc=$?
        h=$(hash_of "$out")
        if [ $rc -ne 0 ] || [ -z "$h" ] || ! printf '%s' "$out" | grep -q ' tied=1'; then bad="stage $s: exit $rc: $(printf '%s' "$out" | tail -n 2)"; break; fi
        [ -z "$ref" ] && ref=$h
        [ "$h" != "$ref" ] && { bad="stage $s params_hash=$h, stage 0 $ref"; break; }
    done
    if [ -z "$bad" ]; then pass gpt_tied_stages_ranks$n; else fail gpt_tied_stages_ranks$n "$bad"; fi
    [ $n = 2 ] && tied2=$ref
done
# accumulation and the offload tiers, tied: stage 3 with 2 micro-batches equals stage 2's
a=$(hash_of "$("$B/train_gpt" "${HASH[@]}" --stage 2 --ranks 2 --accum 2 2>&1)")
b=$(hash_of "$("$B/train_gpt" "${HASH[@]}" --stage 3 --ranks 2 --accum 2 --offload-optimizer nvme --offload-params nvme --nvme-dir "$T" 2>&1)")
c=$(hash_of "$("$B/train_gpt" "${HASH[@]}" --stage 3 --ranks 2 --accum 2 --offload-optimizer cpu 2>&1)")
if [ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" = "$c" ]; then pass gpt_tied_accum_offload
else fail gpt_tied_accum_offload "params_hash stage 2: '$a', stage 3 nvme: '$b', stage 3 cpu: '$c'"; fi
# --flat-layout (desc.flat_layout: the tied wte's gradient through the flat view, reduced
# once both its users are in) gives the same bits at stages 0-2; stage 3 refuses it
# (stages 0-1 add a step's micro-batches locally, 2-3 reduce each: other bits at accum 2)
a1=$(hash_of "$("$B/train_gpt" "${HASH[@]}" --stage 1 --ranks 2 --accum 2 2>&1)")
f0=$(hash_of "$("$B/train_gpt" "${HASH[@]}" --stage 0 --ranks 2 --accum 2 --flat-layout 2>&1)")
f1=$(hash_of "$("$B/train_gpt" "${HASH[@]}" --stage 1 --ranks 2 --accum 2 --flat-layout 2>&1)")
f2=$(hash_of "$("$B/train_gpt" "${HASH[@]}" --stage 2 --ranks 2 --accum 2 --flat-layout --offload-optimizer cpu 2>&1)")
out=$("$B/train_gpt" "${HASH[@]}" --stage 3 --ranks 2 --flat-layout 2>&1); rc=$?
if [ -n "$a" ] && [ -n "$a1" ] && [ "$f0" = "$a1" ] && [ "$f1" = "$a1" ] && [ "$f2" = "$a" ] && [ $rc -ne 0 ] &&
   printf '%s' "$out" | grep -q 'flat_layout is set at stage 3'; then pass gpt_flat_layout
else fail gpt_flat_layout "params_hash stages 0/1/2: '$f0' '$f1' '$f2', module-major stage 1 '$a1', 2 '$a'; stage 3: exit $rc: $(printf '%s' "$out" | tail -n 1)"; fi
# checkpoints: 600 steps straight (step 150 made to overflow: a skipped step) equal bitwise
# 300 steps, --save-ckpt, then --load-ckpt and 300 more, resumed at stages 3, 1 and 0 (the
# data position and seed come from the checkpoint's records); --ckpt-every saves on the way
R=(--layers 1 --dim 16 --heads 2 --seq 16 --batch 12 --quiet --seed 2 --plot none --trace none --data "$T/data.txt"
   --ranks 2 --dtype bf16)
want=$(hash_of "$("$B/train_gpt" "${R[@]}" --stage 3 --steps 600 --skip-step 150 2>&1)")
rm -rf "$T/ck"
out=$("$B/train_gpt" "${R[@]}" --stage 3 --steps 300 --skip-step 150 --save-ckpt "$T/ck" --ckpt-every 100 2>&1); rc=$?
gen=$(sed -n 's/^generation //p' "$T/ck/manifest" 2>/dev/null)
skipped=$(sed -n 's/^skipped //p' "$T/ck/manifest" 2>/dev/null)
if [ $rc -ne 0 ] || [ "$gen" != 3 ] || [ "$skipped" != 1 ]; then
    fail gpt_ckpt_save "exit $rc, generation '$gen' (want 3: after steps 100, 200 and 300, the last), skipped '$skipped' (want 1): $(printf '%s' "$out" | tail -n 2)"
else pass gpt_ckpt_save; fi
for s in 3 1 0; do
    got=$(hash_of "$("$B/train_gpt" "${R[@]}" --stage $s --steps 300 --load-ckpt "$T/ck" --seed 99 2>&1)")
    if [ -n "$want" ] && [ "$got" = "$want" ]; then pass gpt_ckpt_resume_stage$s
    else fail gpt_ckpt_resume_stage$s "params_hash '$got', straight 600 steps '$want'"; fi
done
out=$("$B/train_gpt" "${R[@]}" --batch 24 --steps 1 --load-ckpt "$T/ck" 2>&1); rc=$?
if [ $rc -ne 0 ] && printf '%s' "$out" | grep -q 'saved with --batch 12'; then pass gpt_ckpt_other_batch_refused
else fail gpt_ckpt_other_batch_refused "exit $rc: $(printf '%s' "$out" | tail -n 2)"; fi
out=$("$B/train_gpt" "${R[@]}" --steps 1 --ckpt-every 5 2>&1); rc=$?
if [ $rc -eq 2 ]; then pass gpt_ckpt_every_needs_dir; else fail gpt_ckpt_every_needs_dir "exit $rc: $out"; fi
# --deepspeed: a DeepSpeed config saying what the options say trains the same bits (the
# default lr 3e-3 is a float on the command line, a double in JSON: 2^-8 is both); the
# documented configs run, each key not honoured a line on stderr; bad JSON: exit 2, line:column
cat >"$T/ds.json" <<'JSON'
{ "zero_optimization": { "stage": 2, "overlap_comm": true, "contiguous_gradients": true },
  "bf16": { "enabled": true },
  "optimizer": { "type": "AdamW", "params": { "lr": 0.00390625, "weight_decay": 0 } },
  "gradient_clipping": 1.0 }
JSON
a=$(hash_of "$("$B/train_gpt" "${HASH[@]}" --stage 2 --ranks 2 --lr 0.00390625 2>&1)")     # (2^-8: a float, as --lr is)
out=$("$B/train_gpt" "${HASH[@]}" --ranks 2 --deepspeed "$T/ds.json" 2>&1); rc=$?
b=$(hash_of "$out")
if [ $rc -eq 0 ] && [ -n "$a" ] && [ "$a" = "$b" ] && ! printf '%s' "$out" | grep -q 'not honoured'; then pass gpt_deepspeed_same_bits
else fail gpt_deepspeed_same_bits "exit $rc, params_hash options '$a', --deepspeed '$b': $(printf '%s' "$out" | tail -n 2)"; fi
out=$("$B/train_gpt" "${HASH[@]}" --ranks 2 --deepspeed tests/data/deepspeed/zero2_cpu_offload_fp16.json 2>&1); rc=$?
if [ $rc -eq 0 ] && printf '%s' "$out" | tail -n 1 | grep -q ' stage=2 .* dtype=f16 ' &&
   printf '%s' "$out" | grep -q '^fp16.hysteresis=2: not honoured: '; then pass gpt_deepspeed_offload_fp16
else fail gpt_deepspeed_offload_fp16 "exit $rc: $(printf '%s' "$out" | tail -n 3)"; fi
printf '{ "zero_optimization": { "stage": 2, } }' >"$T/bad.json"
out=$("$B/train_gpt" "${HASH[@]}" --deepspeed "$T/bad.json" 2>&1); rc=$?
if [ $rc -eq 2 ] && printf '%s' "$out" | grep -q 'line 1, column'; then pass gpt_deepspeed_bad_json
else fail gpt_deepspeed_bad_json "exit $rc: $out"; fi
u0=$(hash_of "$("$B/train_gpt" "${HASH[@]}" --stage 0 --ranks 2 --untie 2>&1)")
u3=$(hash_of "$("$B/train_gpt" "${HASH[@]}" --stage 3 --ranks 2 --untie 2>&1)")
if [ -n "$u0" ] && [ "$u0" = "$u3" ] && [ "$u0" != "${tied2:-}" ]; then pass gpt_untie
else fail gpt_untie "params_hash stage 0 '$u0', stage 3 '$u3', tied '${tied2:-}'"; fi

# the default output: progress lines, the sample, the memory table, then the final line last
out=$("$B/train_gpt" --layers 1 --dim 16 --heads 2 --seq 16 --batch 8 --steps 4 --ranks 2 --plot none --trace none 2>&1); rc=$?
if [ $rc -ne 0 ]; then fail gpt_output "exit $rc: $out"
elif [ "$(printf '%s\n' "$out" | grep -c '^step ')" != 4 ]; then fail gpt_output "want 4 progress lines: $out"
elif ! printf '%s\n' "$out" | grep -q '^sample'; then fail gpt_output "no sample"
elif ! printf '%s\n' "$out" | grep -Eq '^ +\*3 '; then fail gpt_output "no memory table row for this run's stage 3"
elif ! printf '%s\n' "$out" | tail -n 1 | grep -Eq "$FINAL_RE"; then fail gpt_output "final line not last"
else pass gpt_output; fi

# the loss falls: 60 steps of a small model
out=$("$B/train_gpt" --layers 1 --dim 32 --heads 2 --seq 32 --batch 8 --steps 60 --ranks 2 --stage 3 --lr 1e-2 --quiet --plot none --trace none 2>&1); rc=$?
loss=$(printf '%s\n' "$out" | tail -n 1 | sed -n 's/^final loss=\([0-9.]*\).*first_loss=\([0-9.]*\).*/\1 \2/p')
if [ $rc -ne 0 ] || [ -z "$loss" ]; then fail gpt_loss_falls "exit $rc: $out"
elif awk -v l="$loss" 'BEGIN { split(l, a, " "); exit !(a[2] > 5.3 && a[1] < 3.6) }'; then pass gpt_loss_falls
else fail gpt_loss_falls "first/final loss: $loss (want first > 5.3, final < 3.6)"; fi

# zero.h is found beside the executable when run from elsewhere; a missing --data is an error
exe=$(cd "$(dirname "$B/train_gpt")" && pwd)/train_gpt
out=$(cd "$T" && "$exe" "${TINY[@]}" --ranks 1 --plot none --trace none 2>&1); rc=$?
if [ $rc -eq 0 ] && printf '%s\n' "$out" | tail -n 1 | grep -Eq "$FINAL_RE"; then pass gpt_default_data
else fail gpt_default_data "exit $rc: $out"; fi
out=$("$B/train_gpt" "${TINY[@]}" --data "$T/no-such-file" 2>&1); rc=$?
if [ $rc -ne 0 ] && printf '%s' "$out" | grep -q 'cannot read --data'; then pass gpt_missing_data
else fail gpt_missing_data "exit $rc: $out"; fi

# offload: the optimizer states on the host or NVMe tier give the same parameters as
# without offload (the trace then has the optimizer on the host); a bad tier is refused
ok=1
"$B/train_gpt" "${TINY[@]}" --stage 2 --ranks 2 --plot none --trace none >"$T/off0.log" 2>&1 || ok=0
for tier in cpu nvme; do
    out=$("$B/train_gpt" "${TINY[@]}" --stage 2 --ranks 2 --plot none --trace none --offload-optimizer $tier \
          --nvme-dir "$T" 2>&1); rc=$?
    l0=$(tail -n 1 "$T/off0.log" | sed -n 's/^final loss=\([^ ]*\).*/\1/p')
    l1=$(printf '%s\n' "$out" | tail -n 1 | sed -n 's/^final loss=\([^ ]*\).*/\1/p')
    if [ $rc -ne 0 ] || [ -z "$l1" ] || [ "$l0" != "$l1" ]; then
        fail gpt_offload_$tier "exit $rc, loss '$l1' vs '$l0' without offload: $(printf '%s' "$out" | tail -n 2)"; ok=0
    else pass gpt_offload_$tier; fi
done
# with the optimizer on NVMe the trace has the tier's reads and writes on every rank
"$B/train_gpt" "${TINY[@]}" --stage 2 --ranks 2 --plot none --trace "$T/nvme.json" --offload-optimizer nvme \
    --nvme-dir "$T" >"$T/nvme.log" 2>&1
if python3 - "$T/nvme.json" <<'PY'
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
got = {(e.get("pid"), e.get("name")) for e in ev if str(e.get("name", "")).startswith("nvme ")}
sys.exit(0 if all((r, n) in got for r in (0, 1) for n in ("nvme read", "nvme write")) else 1)
PY
then pass gpt_trace_nvme; else fail gpt_trace_nvme "no nvme read/write events from every rank: $(tail -n 2 "$T/nvme.log")"; fi
out=$("$B/train_gpt" "${TINY[@]}" --offload-optimizer disk 2>&1); rc=$?
if [ $rc -eq 2 ]; then pass gpt_offload_bad_tier; else fail gpt_offload_bad_tier "exit $rc: $out"; fi
ok=1
ok=1
for args in "--dim 10 --heads 4" "--batch 5 --ranks 2" "--stage 4" "--dtype f64" "--bogus 1"; do
    # shellcheck disable=SC2086
    out=$("$B/train_gpt" --quiet $args 2>&1); rc=$?
    if [ $rc -ne 2 ]; then fail gpt_bad_args "$args: exit $rc: $out"; ok=0; break; fi
done
[ $ok = 1 ] && pass gpt_bad_args

# the memory picture at the default size: per-rank bytes (the bars' titles, summed per
# stage) fall, not strictly, from stage 0 to 3 (the buffers scale with the model)
out=$("$B/train_gpt" --steps 2 --quiet --plot "$T/mem.svg" --trace none 2>&1); rc=$?
if [ $rc -ne 0 ]; then fail gpt_plot_memory_falls "exit $rc: $(printf '%s' "$out" | tail -n 2)"
elif msg=$(python3 - "$T/mem.svg" <<'PY' 2>&1
import re, sys
tot = [0, 0, 0, 0]
for s, v in re.findall(r"<title>stage (\d) \w+ \w+: (\d+) bytes</title>", open(sys.argv[1]).read()):
    tot[int(s)] += int(v)
assert all(tot), "a stage has no bars: %s" % tot
assert tot[0] >= tot[1] >= tot[2] >= tot[3], "per-rank bytes of stages 0-3: %s" % tot
print(" ".join(map(str, tot)))
PY
); then pass gpt_plot_memory_falls
else fail gpt_plot_memory_falls "$msg"; fi

# an unwritable trace path is an error, not a crash
out=$("$B/train_gpt" "${TINY[@]}" --ranks 2 --trace /nonexistent-dir/t.json --plot none 2>&1); rc=$?
if [ $rc -ne 0 ] && printf '%s' "$out" | grep -q 'nonexistent-dir'; then pass gpt_trace_unwritable
else fail gpt_trace_unwritable "exit $rc: $out"; fi

# activation checkpoints (the block inputs in zero.h's stash, the blocks recomputed in the
# backward pass) change no bit: every stage, each stash tier, and 2 micro-batches give the
# params_hash of the plain run; after the first step the NVMe stash's reads were ahead
ACT=(--layers 3 --checkpoint-activations)
for s in 0 1 2 3; do
    ref=$(hash_of "$("$B/train_gpt" "${HASH[@]}" --layers 3 --stage $s --ranks 2 2>&1)")
    out=$("$B/train_gpt" "${HASH[@]}" "${ACT[@]}" --offload-activations nvme --nvme-dir "$T" --stage $s --ranks 2 2>&1); rc=$?
    h=$(hash_of "$out")
    rate=$(printf '%s\n' "$out" | sed -n 's/.* act_hit_rate=\([0-9.]*\).*/\1/p')
    if [ $rc -ne 0 ] || [ -z "$ref" ] || [ "$h" != "$ref" ]; then
        fail gpt_ckpt_acts_stage$s "params_hash '$h' vs plain '$ref' (exit $rc): $(printf '%s' "$out" | tail -n 2)"
    elif ! awk "BEGIN { exit !(${rate:-0} >= 0.95) }"; then fail gpt_ckpt_acts_stage$s "act_hit_rate=${rate:-none}: $out"
    else pass gpt_ckpt_acts_stage$s; fi
done
ref=$(hash_of "$("$B/train_gpt" "${HASH[@]}" --layers 3 --stage 3 --ranks 2 --accum 2 2>&1)")
bad=
for tier in none host nvme; do
    h=$(hash_of "$("$B/train_gpt" "${HASH[@]}" "${ACT[@]}" --offload-activations $tier --nvme-dir "$T" --stage 3 --ranks 2 --accum 2 2>&1)")
    [ -n "$ref" ] && [ "$h" = "$ref" ] || bad="$bad $tier:'$h'"
done
if [ -z "$bad" ]; then pass gpt_ckpt_acts_tiers_accum; else fail gpt_ckpt_acts_tiers_accum "plain '$ref', stash$bad"; fi
# the stash's traffic is on the trace's activations track of every rank; the memory table and
# the SVG show the activations as a category of their own
out=$("$B/train_gpt" "${TINY[@]}" "${ACT[@]}" --offload-activations nvme --nvme-dir "$T" --stage 3 --ranks 2 \
      --trace "$T/acts.json" --plot "$T/acts.svg" 2>&1); rc=$?
if [ $rc -ne 0 ]; then fail gpt_trace_activations "exit $rc: $out"
elif python3 - "$T/acts.json" "$T/acts.svg" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["traceEvents"]
tracks = {(e["pid"], e["tid"]) for e in d if e.get("ph") == "M" and e["args"].get("name") == "activations"}
got = {(e["pid"], e["name"]) for e in d if e.get("ph") == "X" and (e["pid"], e["tid"]) in tracks}
ok = all((r, n) in got for r in (0, 1) for n in ("act write", "act read"))
svg = open(sys.argv[2]).read()
sys.exit(0 if ok and "nvme activations:" in svg and "host activations:" in svg else 1)
PY
then pass gpt_trace_activations; else fail gpt_trace_activations "no act read/write on the activations track of every rank, or no activations bars"; fi
out=$("$B/train_gpt" --layers 2 --dim 16 --heads 2 --seq 16 --batch 8 --steps 2 --ranks 2 --plot none --trace none \
      --checkpoint-activations 2>&1); rc=$?
if [ $rc -eq 0 ] && printf '%s\n' "$out" | grep -Eq '^ +stage .* activations +model_state' &&
   printf '%s\n' "$out" | grep -q '^activations checkpoint=1 offload=none stash_device_bytes=[1-9]' &&
   printf '%s\n' "$out" | tail -n 1 | grep -Eq "$FINAL_RE"; then pass gpt_memory_table_activations
else fail gpt_memory_table_activations "exit $rc: $out"; fi
# zero_estimate plans the stash train_gpt allocates: 3 slots of (batch/ranks) x seq x dim floats
out=$("$B/train_gpt" "${TINY[@]}" "${ACT[@]}" --offload-activations nvme --nvme-dir "$T" --stage 3 --ranks 2 \
      --plot none --trace none 2>&1)
got=$(printf '%s\n' "$out" | sed -n 's/.* stash_host_bytes=\([0-9]*\) stash_nvme_bytes=\([0-9]*\).*/\1 \2/p')
est=$("$B/zero_estimate" --params 14224 --ranks 2 --stage 3 --acts 3 --act-bytes $((6 * 16 * 16 * 4)) \
      --offload-activations nvme 2>&1 | sed -n 's/^activation_\(host\|nvme\)_bytes=//p' | tr '\n' ' ')
if [ -n "$got" ] && [ "$got " = "$est" ]; then pass gpt_estimate_activations
else fail gpt_estimate_activations "train_gpt's stash host/nvme bytes '$got', zero_estimate '$est'"; fi
out=$("$B/train_gpt" "${TINY[@]}" --offload-activations disk 2>&1); rc=$?
if [ $rc -eq 2 ]; then pass gpt_offload_activations_bad_tier; else fail gpt_offload_activations_bad_tier "exit $rc: $out"; fi

# the default batch (32) fits --ranks 3: 33, said on stderr
out=$("$B/train_gpt" --layers 1 --dim 16 --heads 2 --seq 16 --steps 2 --quiet --ranks 3 --plot none --trace none 2>&1); rc=$?
if [ $rc -eq 0 ] && printf '%s\n' "$out" | grep -q 'batch 33 (the default 32 rounded up'; then pass gpt_default_batch_ranks3
else fail gpt_default_batch_ranks3 "exit $rc: $(printf '%s\n' "$out" | tail -n 2)"; fi

exit $failed
