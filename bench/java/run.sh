#!/usr/bin/env bash
# Compiles bench/java/CacheBench.java against Debian's Caffeine and Guava
# jars and runs it: the cache workloads C1-C5 on the Java peers, one JSON
# line per result (bench/cache_run.sh interleaves it with ours).
#
#   bench/java/run.sh [CacheBench flags, e.g. --impl=caffeine --only=c1,c5]
#
# Needs: apt-get install default-jdk-headless libcaffeine-java libguava-java
# Java is used by this script only: never by the library's build or tests.
# The classes go to $CACHEBENCH_OUT (default /tmp/cachebench-classes).
# JAVA_OPTS (default: a 3 GiB pre-touched heap, as ours pre-faults 1 GiB;
# the C3 child JVMs get default flags) is passed to the JVM.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${CACHEBENCH_OUT:-/tmp/cachebench-classes}"

jar() {  # the first of the candidates that exists
  for j in "$@"; do
    if [[ -f "$j" ]]; then echo "$j"; return 0; fi
  done
  echo "bench/java/run.sh: none of $* found (apt-get install libcaffeine-java libguava-java)" >&2
  exit 1
}
caffeine="$(jar /usr/share/java/caffeine.jar /usr/share/java/caffeine-*.jar)"
guava="$(jar /usr/share/java/guava.jar /usr/share/java/guava-*.jar)"
cp="$caffeine:$guava"
# Annotations the jars refer to; optional at run time.
for extra in /usr/share/java/jsr305.jar /usr/share/java/error_prone_annotations.jar; do
  [[ -f "$extra" ]] && cp="$cp:$extra"
done

if ! command -v javac >/dev/null; then
  echo "bench/java/run.sh: javac missing (apt-get install default-jdk-headless)" >&2
  exit 1
fi

mkdir -p "$out"
if [[ ! -f "$out/CacheBench.class" || "$here/CacheBench.java" -nt "$out/CacheBench.class" ]]; then
  javac -nowarn -d "$out" -cp "$cp" "$here/CacheBench.java"
fi

version() {  # Debian package version, upstream part
  dpkg-query -W -f='${Version}' "$1" 2>/dev/null | sed 's/-[^-]*$//' || echo unknown
}

# shellcheck disable=SC2086
exec java ${JAVA_OPTS:--Xms3g -Xmx3g -XX:+AlwaysPreTouch -XX:+UseG1GC} \
  -cp "$out:$cp" CacheBench \
  --caffeine_version="$(version libcaffeine-java)" \
  --guava_version="$(version libguava-java)" "$@"
