#!/usr/bin/env bash
# Checks the build dependencies; installs the missing Debian packages when run as root,
# otherwise prints one line saying what to run. Exit 0 when everything is there.
set -u
cuda_home=${CUDA_HOME:-/usr/local/cuda}
if [ ! -f "$cuda_home/include/cuda.h" ]; then
  echo "gpool: CUDA headers not found at $cuda_home/include/cuda.h; install the CUDA toolkit or set CUDA_HOME" >&2
  exit 1
fi
missing=()
have_header() { echo "#include <$1>" | ${CC:-cc} -E -x c - >/dev/null 2>&1; }
have_header jemalloc/jemalloc.h || missing+=(libjemalloc-dev)
have_header hwloc.h || missing+=(libhwloc-dev)
have_header criterion/criterion.h || missing+=(libcriterion-dev)
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
command -v gnuplot >/dev/null 2>&1 || missing+=(gnuplot-nox) # gpool-bench --plot and view
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "gpool: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  { apt-get update -qq && apt-get install -y -qq "${missing[@]}"; } >/dev/null 2>&1 && exit 0
  echo "gpool: apt-get install ${missing[*]} failed" >&2
  exit 1
fi
echo "gpool: missing ${missing[*]}; run: sudo apt-get install ${missing[*]}" >&2
exit 1
