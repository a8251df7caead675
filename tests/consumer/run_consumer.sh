#!/usr/bin/env bash
# Checks that other projects can use timingwheel, in the two ways the README
# documents:
#   1. as a Meson subproject: copies tests/consumer/project to a temp dir,
#      links subprojects/timingwheel to this repository, builds it with
#      --wrap-mode=nodownload and runs it (and checks that the subproject
#      built only the library, none of our tests/examples/benchmarks);
#   2. installed: `meson install --destdir` of this repository into a temp
#      dir, then compiles the same main.cc with `pkg-config timingwheel`;
#   3. with clang++ too, where installed: clang_check.cc (non-trivial key and
#      value types, the cache) against that installed copy, with
#      -Wthread-safety -Werror=thread-safety, which must pass; and
#      thread_safety_violation.cc, which the same flags must refuse (so the
#      analysis does see the library's locks);
#   4. from CMake: tests/consumer/cmake_project finds the installed copy
#      with find_package(timingwheel) and links timingwheel::timingwheel;
#      a request for a version it does not meet is refused.
# Usage: run_consumer.sh [REPO_ROOT]   (default: two levels up from here)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "${1:-$here/../..}" && pwd)
expected='timingwheel consumer: timer fired after 3 ticks (value 7)'
jobs=${CONSUMER_JOBS:-2}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/timingwheel-consumer.XXXXXX")
cleanup() { rm -rf "$tmp"; }
trap cleanup EXIT

fail() { echo "run_consumer: FAIL: $*" >&2; exit 1; }

check_output() {  # $1 = what, $2 = binary
  local out
  out=$("$2") || fail "$1: $2 exited with $?"
  echo "$out"
  [[ "$out" == *"$expected"* ]] || fail "$1: unexpected output"
}

# Part 1: Meson subproject. Runs beside parts 2-4, which build the library
# again, so that one's configure and link steps overlap the other's
# compiles; its output is printed at the end.
subproject_check() {
  # A working directory of its own: meson setup probes CMake in
  # ./__cmake_systeminformation, which two setups at once must not share.
  mkdir -p "$tmp/cwd-sub" && cd "$tmp/cwd-sub"
  echo "== consumer as a Meson subproject ($repo)"
  cp -R "$here/project" "$tmp/project"
  mkdir -p "$tmp/project/subprojects"
  ln -s "$repo" "$tmp/project/subprojects/timingwheel"
  meson setup "$tmp/build-sub" "$tmp/project" --wrap-mode=nodownload \
    >"$tmp/setup-sub.log" 2>&1 || { cat "$tmp/setup-sub.log"; fail "meson setup (subproject)"; }
  ninja -C "$tmp/build-sub" -j "$jobs" >"$tmp/ninja-sub.log" 2>&1 \
    || { cat "$tmp/ninja-sub.log"; fail "build (subproject)"; }
  # As a subproject, timingwheel must build the library and nothing else.
  extra=$(meson introspect --targets "$tmp/build-sub" | python3 -c '
import json, sys
names = [t["name"] for t in json.load(sys.stdin)]
print(" ".join(n for n in names if n not in ("consumer", "timingwheel")))')
  [[ -z "$extra" ]] || fail "the subproject built more than the library: $extra"
  if meson introspect --tests "$tmp/build-sub" | grep -q '"name"'; then
    fail "the subproject registered tests"
  fi
  check_output "subproject" "$tmp/build-sub/consumer"
}
subproject_check >"$tmp/part1.log" 2>&1 &
part1=$!

# Part 2: installed copy through pkg-config.
mkdir -p "$tmp/cwd-inst" && cd "$tmp/cwd-inst"
echo "== consumer of an installed copy (pkg-config timingwheel)"
meson setup "$tmp/build-inst" "$repo" --wrap-mode=nodownload --prefix=/usr/local \
  -Dtests=disabled -Dexamples=disabled -Dbenchmarks=disabled \
  >"$tmp/setup-inst.log" 2>&1 || { cat "$tmp/setup-inst.log"; fail "meson setup (install)"; }
ninja -C "$tmp/build-inst" -j "$jobs" >"$tmp/ninja-inst.log" 2>&1 \
  || { cat "$tmp/ninja-inst.log"; fail "build (install)"; }
destdir="$tmp/root"
meson install -C "$tmp/build-inst" --destdir "$destdir" >"$tmp/install.log" 2>&1 \
  || { cat "$tmp/install.log"; fail "meson install"; }
pc=$(find "$destdir" -name timingwheel.pc -print -quit)
[[ -n "$pc" ]] || fail "no timingwheel.pc installed"
[[ -f "$destdir/usr/local/include/timingwheel/timing_wheel.h" ]] \
  || fail "timing_wheel.h not installed under include/timingwheel/"
export PKG_CONFIG_PATH="$(dirname "$pc")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export PKG_CONFIG_SYSROOT_DIR="$destdir"
pkg-config --exists --print-errors timingwheel || fail "pkg-config timingwheel"
lib=$(find "$destdir" -name 'libtimingwheel.so*' -print -quit)
[[ -n "$lib" ]] || fail "no libtimingwheel.so installed"
read -r -a flags <<<"$(pkg-config --cflags --libs timingwheel)"
echo "pkg-config timingwheel: ${flags[*]}"
"${CXX:-c++}" -o "$tmp/consumer-pc" "$here/project/main.cc" "${flags[@]}" \
  -Wl,-rpath,"$(dirname "$lib")" || fail "compile against pkg-config timingwheel"
check_output "pkg-config" "$tmp/consumer-pc"

# Part 3: the other compiler. Debian's clang (14) builds against the same
# installed copy and libstdc++, so a header that only g++ accepts shows here.
if command -v clang++ >/dev/null; then
  echo "== clang++ against the installed copy, with -Wthread-safety"
  tsa=(-Wthread-safety -Werror=thread-safety)
  clang++ -std=c++20 "${tsa[@]}" -o "$tmp/clang-check" "$here/clang_check.cc" \
    "${flags[@]}" -Wl,-rpath,"$(dirname "$lib")" || fail "compile with clang++"
  "$tmp/clang-check" || fail "clang-check exited with $?"
  read -r -a cflags <<<"$(pkg-config --cflags timingwheel)"
  if clang++ -std=c++20 "${tsa[@]}" -fsyntax-only \
    "$here/thread_safety_violation.cc" "${cflags[@]}" >"$tmp/tsa.log" 2>&1; then
    fail "thread_safety_violation.cc compiled: -Wthread-safety sees no lock"
  fi
  grep -q "requires holding mutex 'shard.mu_'" "$tmp/tsa.log" \
    || { cat "$tmp/tsa.log"; fail "thread_safety_violation.cc failed otherwise"; }
  echo "thread_safety_violation.cc refused, as it must"
else
  echo "== no clang++: the other-compiler check is skipped"
fi

# Part 4: a CMake project, through find_package(timingwheel) and the
# imported target, against the same installed copy (./run installs cmake).
echo "== CMake consumer of the installed copy (find_package(timingwheel))"
command -v cmake >/dev/null || fail "cmake is not installed"
config=$(find "$destdir" -name timingwheelConfig.cmake -print -quit)
[[ -n "$config" ]] || fail "no timingwheelConfig.cmake installed"
[[ -f "$(dirname "$config")/timingwheelConfigVersion.cmake" ]] \
  || fail "no timingwheelConfigVersion.cmake installed"
cmake -S "$here/cmake_project" -B "$tmp/build-cmake" \
  -DCMAKE_PREFIX_PATH="$destdir/usr/local" \
  -DCMAKE_BUILD_RPATH="$(dirname "$lib")" >"$tmp/cmake.log" 2>&1 \
  || { cat "$tmp/cmake.log"; fail "cmake configure (find_package)"; }
cmake --build "$tmp/build-cmake" -j "$jobs" >"$tmp/cmake-build.log" 2>&1 \
  || { cat "$tmp/cmake-build.log"; fail "cmake build"; }
out=$("$tmp/build-cmake/cmake_consumer") || fail "cmake_consumer exited with $?"
echo "$out"
[[ "$out" == *"timer fired after 3 ticks, cache entry expired after 2"* ]] \
  || fail "cmake_consumer: unexpected output"
# A version this copy does not satisfy must be refused.
mkdir -p "$tmp/cmake-too-new"
sed 's/find_package(timingwheel 0.2 REQUIRED)/find_package(timingwheel 9.0 REQUIRED)/' \
  "$here/cmake_project/CMakeLists.txt" >"$tmp/cmake-too-new/CMakeLists.txt"
cp "$here/cmake_project/main.cc" "$tmp/cmake-too-new/"
if cmake -S "$tmp/cmake-too-new" -B "$tmp/build-too-new" \
  -DCMAKE_PREFIX_PATH="$destdir/usr/local" >"$tmp/cmake-too-new.log" 2>&1; then
  fail "find_package(timingwheel 9.0) accepted version $(cat "$tmp/cmake-too-new.log" | grep -o 'version "[^"]*"' | head -1)"
fi
echo "find_package(timingwheel 9.0) refused, as it must"

part1_status=0
wait "$part1" || part1_status=$?
cat "$tmp/part1.log"
((part1_status == 0)) || fail "the subproject check (above) exited with $part1_status"
echo "run_consumer: OK"
