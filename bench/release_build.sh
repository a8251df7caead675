# Sourced by the bench/*_run.sh scripts: the release builds their programs
# come from, and where their lines go. Expects $root (the repository).
#
#   release_build bench|examples TARGET...
#       Unless $builddir is already set (--use-build=DIR), sets it to
#       build-release (the benchmarks) or build-examples-release (the
#       example programs), sets that up as a release build (NDEBUG) the
#       first time, and builds TARGET... in it.
#   results_file NAME
#       Prints bench/results/<UTC time>-NAME.jsonl, making the directory.

release_build() {
  local kind=$1
  shift
  [[ -n "${builddir:-}" ]] && return 0
  local options
  case "$kind" in
    bench)
      builddir="$root/build-release"
      options=(-Dtests=disabled -Dexamples=disabled)
      ;;
    examples)
      builddir="$root/build-examples-release"
      options=(-Dtests=disabled -Dbenchmarks=disabled -Dexamples=enabled)
      ;;
    *) echo "release_build: bench or examples, not $kind" >&2; return 2 ;;
  esac
  if [[ ! -f "$builddir/build.ninja" ]]; then
    meson setup "$builddir" "$root" --buildtype=release -Db_ndebug=true \
      "${options[@]}" >/dev/null
  fi
  ninja -C "$builddir" "$@" >/dev/null
}

results_file() {
  mkdir -p "$root/bench/results"
  echo "$root/bench/results/$(date -u +%Y-%m-%dT%H%M%SZ)-$1.jsonl"
}
