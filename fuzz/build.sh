#!/bin/sh
# Builds fuzz/wheel_fuzzer (libFuzzer + ASan + UBSan) with clang.
# Usage: fuzz/build.sh [output path]   (default: fuzz/wheel_fuzzer)
# Needs clang 14 and libFuzzer's runtime (Debian: libclang-rt-14-dev).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
out=${1:-$here/wheel_fuzzer}
cxx=${CXX_FUZZ:-clang++}
# shellcheck disable=SC2046  # pkg-config output is a list of flags
exec "$cxx" -std=c++20 -g -O1 -fno-omit-frame-pointer \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I "$root/lib/include" -I "$root/tests/wheel" \
  $(pkg-config --cflags absl_hash absl_flat_hash_set absl_status absl_strings) \
  "$here/wheel_fuzzer.cc" "$root/lib/src/base/large_alloc.cc" -o "$out" \
  $(pkg-config --libs absl_hash absl_flat_hash_set absl_status absl_strings)
