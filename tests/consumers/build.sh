#!/usr/bin/env bash
# tests/consumers/build.sh (make consumers): on this host, installs safeverbs into a temporary
# prefix and builds the two-file consumer of tests/consumers/ four ways against it:
#   cmake      find_package(safeverbs) and the target safeverbs::safeverbs
#   meson      dependency('safeverbs') through pkg-config
#   subproject the repository root's meson.build as a Meson subproject
#   pkgconfig  cc $(pkg-config --cflags --libs safeverbs)
# into build/consumers/<way>/consumer; tests/consumers.test.sh runs them on rxe. It also checks
# that a DESTDIR install is staged under DESTDIR and that `make uninstall` removes every file.
set -euo pipefail
cd "$(dirname "$0")/../.."
top=$PWD
out=$top/build/consumers
rm -rf "$out"
mkdir -p "$out"
prefix=$out/prefix
src=$top/tests/consumers
step() { echo "consumers: $*"; }

step "make install PREFIX=$prefix"
make --no-print-directory -s install PREFIX="$prefix" >/dev/null

# DESTDIR: staged under it, the prefix recorded as given; uninstall leaves nothing.
stage=$out/stage
make --no-print-directory -s install PREFIX=/usr/local DESTDIR="$stage" >/dev/null
test -f "$stage/usr/local/include/safeverbs.h"
grep -qx 'prefix=/usr/local' "$stage/usr/local/share/pkgconfig/safeverbs.pc"
make --no-print-directory -s uninstall PREFIX=/usr/local DESTDIR="$stage" >/dev/null
left=$(find "$stage" -type f)
[ -z "$left" ] || { echo "consumers: make uninstall left: $left" >&2; exit 1; }
step "DESTDIR install and uninstall: ok"

# The versions agree: the header, the .pc, the CMake version file and meson.build.
v=$(sed -n 's/^#define SAFEVERBS_VERSION_STRING "\(.*\)"/\1/p' safeverbs.h)
export PKG_CONFIG_PATH=$prefix/share/pkgconfig
[ "$(pkg-config --modversion safeverbs)" = "$v" ]
grep -q "version: '$v'" meson.build || { echo "consumers: meson.build's version is not $v" >&2; exit 1; }

step "cmake"
cmake -S "$src" -B "$out/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" >"$out/cmake.log" 2>&1 &&
    cmake --build "$out/cmake-build" >>"$out/cmake.log" 2>&1 ||
    { cat "$out/cmake.log"; exit 1; }
mkdir -p "$out/cmake" && cp "$out/cmake-build/consumer" "$out/cmake/"

step "meson (pkg-config)"
meson setup "$out/meson-build" "$src" -Dwerror=true --warnlevel 2 >"$out/meson.log" 2>&1 &&
    ninja -C "$out/meson-build" >>"$out/meson.log" 2>&1 || { cat "$out/meson.log"; exit 1; }
mkdir -p "$out/meson" && cp "$out/meson-build/consumer" "$out/meson/"

step "meson (subproject)"
sub=$out/subproject-src
mkdir -p "$sub/subprojects"
cp "$src"/main.c "$src"/impl.c "$src"/meson.build "$src"/meson_options.txt "$sub/"
ln -s "$top" "$sub/subprojects/safeverbs"
env -u PKG_CONFIG_PATH meson setup "$out/subproject-build" "$sub" -Dsubproject=true -Dwerror=true \
    >"$out/subproject.log" 2>&1 &&
    ninja -C "$out/subproject-build" >>"$out/subproject.log" 2>&1 || { cat "$out/subproject.log"; exit 1; }
mkdir -p "$out/subproject" && cp "$out/subproject-build/consumer" "$out/subproject/"

step "pkg-config"
mkdir -p "$out/pkgconfig"
# shellcheck disable=SC2046
cc -Wall -Wextra -Werror -O2 $(pkg-config --cflags safeverbs) -o "$out/pkgconfig/consumer" \
    "$src/main.c" "$src/impl.c" $(pkg-config --libs safeverbs)
step "built: cmake meson subproject pkgconfig"
