#!/bin/sh
# tests/kemu/rewrite.sh IN.cu OUT.cc - the CUDA source IN as C++ for the CPU grid emulator
# (tests/kemu/kemu.h), changing only what the host compiler cannot parse, line for line
# (a #line directive keeps IN's name and line numbers in every report):
#   K<<<grid, block[, shmem[, stream]]>>>(args)  ->  K << kemu::cfg(__func__, __FILE__, __LINE__, grid, ...) << kemu::args(args)
#   __shared__ T name[N];                         ->  static char kemu_key_name; kemu::sarr<T> name(&kemu_key_name, (N), ...);
#   __shared__ T name;                            ->  static char kemu_key_name; kemu::svar<T> name(&kemu_key_name, ...);
#   extern __shared__ T name[];                   ->  kemu::sarr<T> name(kemu::sarr<T>::dynamic_tag(), ...);
# A __shared__ declaration of another shape (two names, an initializer, two dimensions) is
# left as it is, and kemu.h makes it a compile error. Fails if IN is missing or a launch
# or declaration is left.
set -eu
in=$1 out=$2
[ -f "$in" ] || { echo "rewrite.sh: $in: no such file" >&2; exit 1; }
id='[A-Za-z_][A-Za-z0-9_]*'
{
    printf '#line 1 "%s"\n' "$in"
    sed -E \
        -e 's/<<</ << kemu::cfg(__func__, __FILE__, __LINE__, /g' \
        -e 's/>>>[[:space:]]*\(/) << kemu::args(/g' \
        -e "s/extern[[:space:]]+__shared__[[:space:]]+([^;]*[^;[:space:]])[[:space:]]+($id)[[:space:]]*\\[[[:space:]]*\\][[:space:]]*;/kemu::sarr<\\1> \\2(kemu::sarr<\\1>::dynamic_tag(), \"\\2\", __FILE__, __LINE__);/" \
        -e "s/__shared__[[:space:]]+([^;]*[^;[:space:]])[[:space:]]+($id)[[:space:]]*\\[([^];]+)\\][[:space:]]*;/static char kemu_key_\\2; kemu::sarr<\\1> \\2(\\&kemu_key_\\2, (\\3), \"\\2\", __FILE__, __LINE__);/" \
        -e "s/__shared__[[:space:]]+([^;=]*[^;=[:space:]])[[:space:]]+($id)[[:space:]]*;/static char kemu_key_\\2; kemu::svar<\\1> \\2(\\&kemu_key_\\2, \"\\2\", __FILE__, __LINE__);/" \
        "$in"
} >"$out.tmp"
if grep -n -E '<<<|>>>' "$out.tmp" >&2; then
    echo "rewrite.sh: $in: a launch above was not rewritten" >&2
    rm -f "$out.tmp"; exit 1
fi
mv "$out.tmp" "$out"
