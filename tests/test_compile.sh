#!/usr/bin/env bash
# tests/test_compile.sh - zero.h compiles cleanly as C99 and C++11, with gcc and clang:
# declarations only (-c), with ZERO_IMPLEMENTATION (linked, run: zero_create/zero_destroy
# must give ZERO_OK) and under ZERO_STATIC. One PASS/FAIL line per variant; a compiler
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

C99=(-std=c99 -O2 -Wall -Wextra -Werror -I. -pthread)
CXX11=(-std=c++11 -O2 -Wall -Wextra -Werror -I. -pthread)
check decl_c_gcc       decl gcc     "${C99[@]}" tests/compile/compile_c.c
check decl_c_clang     decl clang   "${C99[@]}" tests/compile/compile_c.c
check decl_cpp_gxx     decl g++     "${CXX11[@]}" tests/compile/compile_cpp.cpp
check decl_cpp_clangxx decl clang++ "${CXX11[@]}" tests/compile/compile_cpp.cpp
# the implementation as C99 (-Wpedantic: a superset of the plain build's gcc -std=c99 -Wall
# -Wextra -Werror, which every build/test_* already is) and as C++11, each compiled once
check impl_c_pedantic_gcc   run gcc   "${C99[@]}" -Wpedantic tests/compile/impl_c.c
check impl_c_pedantic_clang run clang "${C99[@]}" -Wpedantic tests/compile/impl_c.c
check static_c_gcc     run  gcc     "${C99[@]}" tests/compile/static_c.c
check static_c_clang   run  clang   "${C99[@]}" tests/compile/static_c.c
# the includer's system headers first (strict C99 then hides POSIX names: zero.h's shims)
check after_stdio_c_gcc   run gcc   "${C99[@]}" tests/compile/impl_c_after_stdio.c
check after_stdio_c_clang run clang "${C99[@]}" tests/compile/impl_c_after_stdio.c
# the backend tables: designated initializers from C++20, positional (and -Wpedantic clean) before
CXX20=(-std=c++20 -O2 -Wall -Wextra -Werror -I. -pthread)
check impl_cpp20_gxx         run g++     "${CXX20[@]}" tests/compile/impl_cpp.cpp
check impl_cpp20_clangxx     run clang++ "${CXX20[@]}" tests/compile/impl_cpp.cpp
check impl_cpp_pedantic_gxx  run g++     "${CXX11[@]}" -Wpedantic tests/compile/impl_cpp.cpp
check impl_cpp_pedantic_clangxx run clang++ "${CXX11[@]}" -Wpedantic tests/compile/impl_cpp.cpp
wait
failed=0
for n in "${names[@]}"; do
    cat "$OUT/$n.line"
    grep -q '^PASS \|^SKIP ' "$OUT/$n.line" || failed=1
done
exit $failed
