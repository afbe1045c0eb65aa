#!/usr/bin/env bash
# cxx.test.sh: the C++ example (examples/raii.cpp, built by make all) on rxe0 and rxe1.
set -uo pipefail
cd "$(dirname "$0")/.." || exit
source tools/lib.sh || exit
for d in rxe0 rxe1; do
    o=$(timeout 60 build/raii -d "$d" 2>&1)
    rc=$?
    [[ $rc == 0 && $o == *"looped \"hello, C++\" back"*"all right" ]]
    check "raii.cpp on $d: unique_ptr handles, a scope from a lambda" $? "$o"
done
tally
