#!/usr/bin/env bash
# consumers.test.sh: runs on rxe the consumer that tests/consumers/build.sh (make consumers, part
# of make check) built with CMake, Meson through pkg-config, Meson as a subproject and plain
# pkg-config against a temporary install. Each must loop "hello" back on rxe0.
set -uo pipefail
cd "$(dirname "$0")/.." || exit
source tools/lib.sh || exit
for way in cmake meson subproject pkgconfig; do
    bin=build/consumers/$way/consumer
    if [ ! -x "$bin" ]; then
        check "consumer built with $way" 1 "$bin is missing: run make consumers (make check does) first"
        continue
    fi
    o=$(timeout 60 "$bin" rxe0 2>&1)
    rc=$?
    [[ $rc == 0 && $o == "consumer ok"* ]]
    check "consumer built with $way runs on rxe0" $? "$o"
done
tally
