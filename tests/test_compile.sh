#!/usr/bin/env bash
# tests/test_compile.sh - zero.h compiles cleanly as C99 and C++11, with gcc and clang:
# declarations only (-c), with ZERO_IMPLEMENTATION (linked, run: zero_create/zero_destroy
# must give ZERO_OK), with the optional backends' code, and under ZERO_STATIC; the
# declarations and the implementation under the warning sets of large codebases (WC, WCXX). One PASS/FAIL line per variant; a compiler
# that is not installed is reported as SKIP (counted as skipped, not passed). The variants
# build and run as many at a time as there are cores (ZERO_JOBS); their lines come out in
# the order below. Run from the repository root.
set -u
OUT=${BUILD:-build}/compile
mkdir -p "$OUT"
JOBS=${ZERO_JOBS:-$(nproc 2>/dev/null || echo 2)}
names=()

# check NAME KIND(decl|run) COMPILER FLAGS... SOURCE: its line on stdout
check1() {
    local name=$1 kind=$2 cc=$3; shift 3
    if ! command -v "$cc" >/dev/null 2>&1; then echo "SKIP $name: $cc not installed"; return; fi
    local log="$OUT/$name.log" bin="$OUT/$name"
    rm -f "$bin" "$bin.o"
    local ok=1
    if [ "$kind" = decl ]; then
        "$cc" "$@" -c -o "$bin.o" >"$log" 2>&1 || ok=0
    else
        "$cc" "$@" -o "$bin" -lm >"$log" 2>&1 || ok=0
    fi
    if [ "$ok" = 0 ]; then
        echo "FAIL $name: $cc $*: $(grep -m1 -E 'error|warning' "$log")"
        sed 's/^/    /' "$log" | head -n 30
        return
    fi
    if [ "$kind" = run ]; then
        if ! timeout 60 "$bin" >"$log.run" 2>&1; then
            echo "FAIL $name: $bin exited non-zero: $(head -c 300 "$log.run")"
            return
        fi
    fi
    echo "PASS $name"
}
# check ...: check1 in the background, its line kept in $OUT/NAME.line (JOBS at a time)
check() {
    names+=("$1")
    check1 "$@" >"$OUT/$1.line" 2>&1 &
    while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n 2>/dev/null || true; done
}

# -O1: the sets below are the front end's warnings; -O2's own (the inliner's) are the plain
# builds' (every build/test_* is -O2 -Wall -Wextra -Werror), and -O1 halves these builds
C99=(-std=c99 -O1 -Wall -Wextra -Werror -I. -pthread)
CXX11=(-std=c++11 -O1 -Wall -Wextra -Werror -I. -pthread)
# the warning sets large C and C++ codebases build with, on top of -Wall -Wextra (the
# declarations are clean under all of them as they are; the implementation turns off two
# C++-only ones inside itself, where it is C: -Wold-style-cast, -Wzero-as-null-pointer-constant)
WC=(-Wpedantic -Wshadow -Wundef -Wcast-qual -Wconversion -Wsign-conversion -Wdouble-promotion
    -Wstrict-prototypes -Wmissing-prototypes)
WCXX=(-Wpedantic -Wshadow -Wundef -Wcast-qual -Wconversion -Wsign-conversion -Wdouble-promotion
      -Wold-style-cast -Wzero-as-null-pointer-constant -Wmissing-declarations)
check decl_c_gcc       decl gcc     "${C99[@]}" "${WC[@]}" tests/compile/compile_c.c
check decl_c_clang     decl clang   "${C99[@]}" "${WC[@]}" tests/compile/compile_c.c
check decl_cpp_gxx     decl g++     "${CXX11[@]}" "${WCXX[@]}" tests/compile/compile_cpp.cpp
check decl_cpp_clangxx decl clang++ "${CXX11[@]}" "${WCXX[@]}" tests/compile/compile_cpp.cpp
# the implementation as C99 and as C++11 under those sets (a superset of the plain build's
# gcc -std=c99 -Wall -Wextra -Werror, which every build/test_* already is), each compiled once
check impl_c_strict_gcc     run gcc     "${C99[@]}" "${WC[@]}" tests/compile/impl_c.c
check impl_c_strict_clang   run clang   "${C99[@]}" "${WC[@]}" tests/compile/impl_c.c
check impl_cpp_strict_gxx   run g++     "${CXX11[@]}" "${WCXX[@]}" tests/compile/impl_cpp.cpp
check impl_cpp_strict_clangxx run clang++ "${CXX11[@]}" "${WCXX[@]}" tests/compile/impl_cpp.cpp
# the optional backends' code under the same sets (compiled, not run: no GPU here). Their
# headers are the system's (-isystem), as an includer's build would have them; a backend
# whose headers are not installed is left out (and named)
BK=(-DZERO_CUDA)
[ -f "${CUDA_HOME:-/usr/local/cuda}/include/cuda_runtime.h" ] || BK=()
[ ${#BK[@]} -gt 0 ] && BK+=(-isystem "${CUDA_HOME:-/usr/local/cuda}/include")
echo '#include <liburing.h>' | gcc -E -x c - >/dev/null 2>&1 && BK+=(-DZERO_IO_URING)
echo '#include <cblas.h>' | gcc -E -x c - >/dev/null 2>&1 && BK+=(-DZERO_CBLAS)
if command -v mpicc >/dev/null 2>&1; then BK+=(-DZERO_MPI $(mpicc --showme:compile 2>/dev/null | sed 's/-I/-isystem /g')); fi
echo "backends compiled strictly: ${BK[*]:-none}" >"$OUT/backends.txt"
if [ ${#BK[@]} -gt 0 ]; then
    check backends_c_strict_gcc      decl gcc     "${C99[@]}" "${WC[@]}" "${BK[@]}" tests/compile/impl_c.c
    check backends_cpp_strict_clangxx decl clang++ "${CXX11[@]}" "${WCXX[@]}" "${BK[@]}" tests/compile/impl_cpp.cpp
fi
# what follows is about linkage, header order and dialect, which the front end decides: -O0
# (6 s a build here against 20 s at -O2; the optimizer's warnings are the plain -O2 builds' job)
C99O0=(-std=c99 -O0 -Wall -Wextra -Werror -I. -pthread)
check static_c_gcc     run  gcc     "${C99O0[@]}" tests/compile/static_c.c
check static_c_clang   run  clang   "${C99O0[@]}" tests/compile/static_c.c
# the includer's system headers first (strict C99 then hides POSIX names: zero.h's shims)
check after_stdio_c_gcc   run gcc   "${C99O0[@]}" tests/compile/impl_c_after_stdio.c
check after_stdio_c_clang run clang "${C99O0[@]}" tests/compile/impl_c_after_stdio.c
# the backend tables: designated initializers from C++20, positional (and -Wpedantic clean) before
CXX20=(-std=c++20 -O0 -Wall -Wextra -Werror -I. -pthread)
check impl_cpp20_gxx         run g++     "${CXX20[@]}" tests/compile/impl_cpp.cpp
check impl_cpp20_clangxx     run clang++ "${CXX20[@]}" tests/compile/impl_cpp.cpp
wait
failed=0
for n in "${names[@]}"; do
    cat "$OUT/$n.line"
    grep -q '^PASS \|^SKIP ' "$OUT/$n.line" || failed=1
done
exit $failed
