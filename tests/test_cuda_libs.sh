#!/usr/bin/env bash
# tests/test_cuda_libs.sh - where `make CUDA=1` finds cudart, cuBLAS and NCCL, and that what it
# found links (make test; a few seconds, no GPU, no CUDA needed). Fake installs in a temp dir:
# stub shared libraries (gcc -shared, one function each, their soname the versioned name),
# a stand-in nvcc, and the Makefile's search beyond them turned off (SYS_LIBDIRS= LDCONFIG=false,
# PYTHONPATH pointing at a fake site-packages):
#   - CUDA 12's wheels: site-packages/nvidia/{cuda_runtime,cublas,nccl}/lib with only
#     libcudart.so.13, libcublas.so.13, libnccl.so.2, and a CUDA_HOME without libraries:
#     each from its Python package, linked as -l:lib<name>.so.N with -L and an rpath;
#   - CUDA 13's wheels: site-packages/nvidia/cu13/{bin/nvcc,lib/libcudart.so.13,...} (a pip
#     nvcc's CUDA_HOME): cudart and cuBLAS from CUDA_HOME's lib, versioned; and the same
#     nvidia/cu13 found through Python when CUDA_HOME is elsewhere;
#   - a toolkit with the unversioned names in CUDA_HOME/lib64: -lcudart, -lcublas.
# Each: the one line make CUDA=1 prints and gpu-probe's line say where each library came from,
# the link flags name it, and a tiny program linked with those flags runs (the rpath finds
# the stubs). Where python3 is missing, the Python packages' cases are a SKIP.
set -u
cd "$(dirname "$0")/.." || exit 1
CC=${CC:-gcc}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zero_cuda_libs.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL $1"; fails=$((fails + 1)); }

# stub DIR NAME VERSION [unversioned]: DIR/libNAME.so.VERSION (its soname), and libNAME.so with "unversioned"
stub() {
    mkdir -p "$1"
    printf 'int zero_stub_%s(void) { return 7; }\n' "$2" >"$tmp/stub_$2.c"
    "$CC" -shared -fPIC -Wl,-soname,"lib$2.so.$3" -o "$1/lib$2.so.$3" "$tmp/stub_$2.c" || return 1
    [ -z "${4:-}" ] || ln -sf "lib$2.so.$3" "$1/lib$2.so"
}
# a stand-in nvcc, in DIR/bin
fake_nvcc() {
    mkdir -p "$1/bin" "$1/include"
    printf '#!/bin/sh\necho "nvcc: NVIDIA (R) Cuda compiler driver (stand-in)"\necho "Cuda compilation tools, release 13.0, V13.0.0"\necho "Build stand-in"\n' \
        >"$1/bin/nvcc"
    chmod +x "$1/bin/nvcc"
}
nccl_pkg() { stub "$1/nvidia/nccl/lib" nccl 2 && mkdir -p "$1/nvidia/nccl/include" && : >"$1/nvidia/nccl/include/nccl.h"; }
printf 'int zero_stub_cudart(void); int zero_stub_cublas(void); int zero_stub_nccl(void);\n%s\n' \
    'int main(void) { return zero_stub_cudart() + zero_stub_cublas() + zero_stub_nccl() == 21 ? 0 : 1; }' >"$tmp/main.c"

# the layouts
A=$tmp/a/site-packages B=$tmp/b/site-packages C=$tmp/c/cuda
if ! { fake_nvcc "$tmp/a/cuda" && stub "$A/nvidia/cuda_runtime/lib" cudart 13 && stub "$A/nvidia/cublas/lib" cublas 13 &&
       nccl_pkg "$A" && fake_nvcc "$B/nvidia/cu13" && stub "$B/nvidia/cu13/lib" cudart 13 &&
       stub "$B/nvidia/cu13/lib" cublas 13 && nccl_pkg "$B" && fake_nvcc "$C" && stub "$C/lib64" cudart 13 u &&
       stub "$C/lib64" cublas 13 u && nccl_pkg "$tmp/c/site-packages"; } >"$tmp/stubs.log" 2>&1; then
    echo "FAIL cuda_libs_stubs: could not build the stub libraries with $CC: $(tail -n 3 "$tmp/stubs.log" | tr '\n' ' ')"
    exit 1
fi

# case NAME CUDA_HOME SITE_PACKAGES WANT_CUDART WANT_CUBLAS WANT_NCCL: WANT_X "FROM|FILE|FLAG"
case_() {
    local name=$1 home=$2 sp=$3 out ldlibs probe w from file flag dir ok=1
    shift 3
    out=$(PYTHONPATH="$sp" make --no-print-directory -s CUDA=1 CUDA_HOME="$home" SYS_LIBDIRS= LDCONFIG=false URING=0 \
          BUILD="$tmp/build" --eval 'zero-print-ldlibs: ; @echo "LDLIBS $(CUDA_LDLIBS)"' gpu-probe zero-print-ldlibs 2>&1)
    ldlibs=$(printf '%s\n' "$out" | sed -n 's/^LDLIBS //p')
    info=$(printf '%s\n' "$out" | grep '^make CUDA=1: ')
    probe=$(printf '%s\n' "$out" | grep -v -e '^make CUDA=1: ' -e '^LDLIBS ')
    for w in "$@"; do
        IFS='|' read -r lib from file flag <<<"$w"
        dir=${file%/*}
        if ! printf '%s\n' "$info" | grep -qF "$lib from $from: $file" || ! printf '%s\n' "$probe" | grep -qF "$lib from $from: $file"; then
            fail "cuda_libs_${name}_found_$lib: want \"$lib from $from: $file\" in make CUDA=1's line and gpu-probe's; got: ${info:-$(printf '%s\n' "$out" | tail -n 2)}"
            ok=0
        elif ! [[ " $ldlibs " == *" $flag "* && " $ldlibs " == *" -L$dir "* && " $ldlibs " == *" -Wl,-rpath,$dir "* ]]; then
            fail "cuda_libs_${name}_flags_$lib: want $flag, -L$dir and its rpath in CUDA_LDLIBS: $ldlibs"
            ok=0
        fi
    done
    [ "$ok" = 1 ] && echo "PASS cuda_libs_${name}_found"
    # shellcheck disable=SC2086 # the flags: words
    if "$CC" -o "$tmp/prog_$name" "$tmp/main.c" $ldlibs >"$tmp/link_$name.log" 2>&1 && "$tmp/prog_$name"; then
        echo "PASS cuda_libs_${name}_links_and_runs"
    else
        fail "cuda_libs_${name}_links_and_runs: $CC main.c $ldlibs: $(tail -n 3 "$tmp/link_$name.log" | tr '\n' ' ')"
    fi
}

# a toolkit with the unversioned names (NCCL from its Python package: CUDA_HOME has no nccl.h)
case_ toolkit "$C" "$tmp/c/site-packages" "cudart|CUDA_HOME=$C|$C/lib64/libcudart.so|-lcudart" \
    "cuBLAS|CUDA_HOME=$C|$C/lib64/libcublas.so|-lcublas" \
    "NCCL|the Python package nvidia-nccl ($tmp/c/site-packages/nvidia/nccl)|$tmp/c/site-packages/nvidia/nccl/lib/libnccl.so.2|-l:libnccl.so.2"
if ! command -v python3 >/dev/null 2>&1; then
    echo "SKIP cuda_libs_wheels: no python3 here, the Makefile looks for the nvidia-* Python packages with it"
    [ "$fails" -eq 0 ]; exit
fi
# CUDA 12's wheels: every library from its own package, only the versioned names
case_ cu12_wheels "$tmp/a/cuda" "$A" \
    "cudart|the Python package at $A/nvidia/cuda_runtime|$A/nvidia/cuda_runtime/lib/libcudart.so.13|-l:libcudart.so.13" \
    "cuBLAS|the Python package at $A/nvidia/cublas|$A/nvidia/cublas/lib/libcublas.so.13|-l:libcublas.so.13" \
    "NCCL|the Python package nvidia-nccl ($A/nvidia/nccl)|$A/nvidia/nccl/lib/libnccl.so.2|-l:libnccl.so.2"
# CUDA 13's wheels, CUDA_HOME the pip nvcc's prefix (site-packages/nvidia/cu13)
case_ cu13_wheels "$B/nvidia/cu13" "$B" \
    "cudart|CUDA_HOME=$B/nvidia/cu13|$B/nvidia/cu13/lib/libcudart.so.13|-l:libcudart.so.13" \
    "cuBLAS|CUDA_HOME=$B/nvidia/cu13|$B/nvidia/cu13/lib/libcublas.so.13|-l:libcublas.so.13" \
    "NCCL|the Python package nvidia-nccl ($B/nvidia/nccl)|$B/nvidia/nccl/lib/libnccl.so.2|-l:libnccl.so.2"
# CUDA 13's wheels found through Python, CUDA_HOME elsewhere (a toolkit without its libraries)
case_ cu13_python "$tmp/a/cuda" "$B" \
    "cudart|the Python package at $B/nvidia/cu13|$B/nvidia/cu13/lib/libcudart.so.13|-l:libcudart.so.13" \
    "cuBLAS|the Python package at $B/nvidia/cu13|$B/nvidia/cu13/lib/libcublas.so.13|-l:libcublas.so.13" \
    "NCCL|the Python package nvidia-nccl ($B/nvidia/nccl)|$B/nvidia/nccl/lib/libnccl.so.2|-l:libnccl.so.2"
# nothing anywhere: make CUDA=1 stops with a sentence naming what it looked for
out=$(PYTHONPATH="$tmp/none" make --no-print-directory -s CUDA=1 CUDA_HOME="$tmp/a/cuda" SYS_LIBDIRS= LDCONFIG=false URING=0 \
      NCCL_HOME="$A/nvidia/nccl" BUILD="$tmp/build" "$tmp/build/cuda/train_mlp" 2>&1); rc=$?
if [ "$rc" -ne 0 ] && printf '%s\n' "$out" | grep -q 'libcudart not found (looked in .*Python package); set CUDA_HOME= or CUDART_LIB='; then
    echo "PASS cuda_libs_missing_says_so"
else
    fail "cuda_libs_missing_says_so: exit $rc: $(printf '%s\n' "$out" | tail -n 2)"
fi
[ "$fails" -eq 0 ]
