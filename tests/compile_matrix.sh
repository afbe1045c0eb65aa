#!/usr/bin/env bash
# compile_matrix.sh: safeverbs.h must compile cleanly, alone and with its implementation, in a
# program of two translation units, with gcc and clang as C99 and C11 and g++ as C++11, with
# SFV_DEBUG on and off, SAFEVERBS_RDMACM off and on, and SAFEVERBS_STATIC, under -Wall -Wextra -Wpedantic -Wshadow -Werror
# and the stricter warnings a user may add (-Wundef -Wconversion -Wsign-conversion -Wcast-qual ...); the
# implementation once more with gcc -Og (its own maybe-uninitialized analysis), and, with a
# _POSIX_C_SOURCE too old, stopped by the header's own #error.
set -uo pipefail
cd "$(dirname "$0")/.." || exit
source tools/lib.sh || exit
out=build/compile-matrix
mkdir -p "$out" || exit
CHECK_QUIET=1  # a failure only is printed
for cc in "gcc -std=c99" "gcc -std=c11" "clang -std=c99" "clang -std=c11" "g++ -std=c++11 -x c++"; do
    extra="-Wundef -Wconversion -Wsign-conversion -Wcast-qual -Wdouble-promotion"
    case $cc in g++*) ;; *) extra="$extra -Wstrict-prototypes -Wmissing-prototypes -Wold-style-definition" ;; esac
    # without SAFEVERBS_RDMACM the program links with -libverbs alone; with it, -lrdmacm too
    for cm in "" "-DSAFEVERBS_RDMACM"; do
    for dbg in 0 1; do
        tag=$(echo "$cc-d$dbg$cm" | tr -c 'a-z0-9+\n-' '_')
        libs=-libverbs
        [ -n "$cm" ] && libs="-lrdmacm -libverbs"
        $cc $cm -DSFV_DEBUG=$dbg -I. -Wall -Wextra -Wpedantic -Wshadow -Werror $extra \
               -c tests/compile/impl.c -o "$out/$tag-impl.o" &&
           $cc $cm -DSFV_DEBUG=$dbg -I. -Wall -Wextra -Wpedantic -Wshadow -Werror $extra \
               -c tests/compile/use.c -o "$out/$tag-use.o" &&
           g++ -o "$out/$tag" "$out/$tag-impl.o" "$out/$tag-use.o" $libs
        check "compile: $cc SFV_DEBUG=$dbg $cm" $?
    done
    done
    # SAFEVERBS_STATIC: one file, nothing exported (an exported sfv_ symbol is a failure); plain,
    # and in a debug build with the RDMA-CM part
    $cc -DSFV_DEBUG=0 -I. -Wall -Wextra -Wpedantic -Wshadow -Werror $extra -c tests/compile/static.c -o "$out/static.o" &&
        g++ -o "$out/static" "$out/static.o" -libverbs && "$out/static" &&
        ! nm -g --defined-only "$out/static.o" | grep -q ' sfv_' &&
        $cc -DSFV_DEBUG=1 -DSAFEVERBS_RDMACM -I. -Wall -Wextra -Wpedantic -Wshadow -Werror $extra -c tests/compile/static.c \
            -o "$out/static-cm.o" && ! nm -g --defined-only "$out/static-cm.o" | grep -q ' sfv_'
    check "compile: $cc SAFEVERBS_STATIC" $?
done
# gcc -Og: a debug build's optimisation, whose maybe-uninitialized warnings -O2 does not give
gcc -std=c11 -Og -I. -Wall -Wextra -Wpedantic -Wshadow -Werror -c tests/compile/impl.c -o "$out/og.o"
check "compile: gcc -Og" $?
# A _POSIX_C_SOURCE older than 200809L (clock_gettime, but no O_CLOEXEC): the header's #error first
# (it was O_CLOEXEC undeclared, deep in the implementation)
gcc -std=c99 -D_POSIX_C_SOURCE=200112L -I. -c tests/compile/impl.c -o /dev/null 2>"$out/oldposix.err"
! [ $? -eq 0 ] && grep -m1 'error' "$out/oldposix.err" | grep -q '#error "safeverbs: the implementation needs POSIX'
check "compile: _POSIX_C_SOURCE 200112L stops at the header's #error" $?
# Direction safety: each misuse in wrong_direction.c must be a compile error (and WRONG=0, the
# same file used rightly, must compile, so the failures are the misuse and nothing else).
for cc in "gcc -std=c11" "clang -std=c11" "g++ -std=c++11 -x c++"; do
    $cc -I. -Wall -Wextra -Werror -DWRONG=0 -c tests/compile/wrong_direction.c -o /dev/null ||
        { echo "FAIL compile: wrong_direction.c WRONG=0 with $cc"; failed=$((failed + 1)); continue; }
    for w in 1 2 3 4; do
        ! $cc -I. -Wall -Wextra -Werror -DWRONG=$w -c tests/compile/wrong_direction.c -o /dev/null 2>/dev/null
        check "compile: misuse WRONG=$w compiled with $cc" $?
    done
done
echo "compile matrix: $passed of $((passed + failed)) checks passed (26 clean builds: 10 without and 10 with SAFEVERBS_RDMACM, 5 SAFEVERBS_STATIC, gcc -Og; an old _POSIX_C_SOURCE; 12 rejected misuses)"
((failed == 0))
