#!/usr/bin/env bash
# compile_matrix.sh: safeverbs.h must compile cleanly, alone and with its implementation, in a
# program of two translation units, with gcc and clang as C99 and C11 and g++ as C++11, with
# SFV_DEBUG on and off, under -Wall -Wextra -Wpedantic -Wshadow -Werror.
set -uo pipefail
cd "$(dirname "$0")/.."
out=build/compile-matrix
mkdir -p "$out"
ok=0 bad=0
for cc in "gcc -std=c99" "gcc -std=c11" "clang -std=c99" "clang -std=c11" "g++ -std=c++11 -x c++"; do
    extra="-Wstrict-prototypes -Wmissing-prototypes"
    case $cc in g++*) extra="" ;; esac
    for dbg in 0 1; do
        tag=$(echo "$cc-d$dbg" | tr -c 'a-z0-9+\n-' '_')
        if $cc -DSFV_DEBUG=$dbg -I. -Wall -Wextra -Wpedantic -Wshadow -Werror $extra \
               -c tests/compile/impl.c -o "$out/$tag-impl.o" &&
           $cc -DSFV_DEBUG=$dbg -I. -Wall -Wextra -Wpedantic -Wshadow -Werror $extra \
               -c tests/compile/use.c -o "$out/$tag-use.o" &&
           g++ -o "$out/$tag" "$out/$tag-impl.o" "$out/$tag-use.o" -libverbs; then
            ok=$((ok + 1))
        else
            echo "FAIL compile: $cc SFV_DEBUG=$dbg"
            bad=$((bad + 1))
        fi
    done
done
echo "compile matrix: $ok of $((ok + bad)) configurations clean"
[ "$bad" -eq 0 ]
