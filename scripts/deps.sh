#!/usr/bin/env bash
# Checks what `make`, `make test` and `make bench` need; installs the missing Debian packages
# when run as root, otherwise prints one line saying what to run. Exit 0 when everything is
# there. The build runs it once per build tree (the $(DEPS_OK) stamp, remade when this file
# changes); .ci/run installs only what CI alone needs (clang, valgrind, the libFuzzer runtime),
# so a step missing here fails CI as it fails a fresh machine.
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
# make test-python (part of make test): the interpreter python.mk uses, pytest, pip and venv
# (python/tests/test_wheel.py installs the package into a fresh venv)
# (only make test-python needs them: when they cannot be installed, the build goes on, the C
# suite runs, and test-python fails with one line saying what to run)
for_python=()
python=$(test -x /usr/bin/python3 && echo /usr/bin/python3 || command -v python3)
if [ -z "$python" ]; then
  for_python+=(python3 python3-pytest python3-pip python3-venv)
else
  "$python" -c 'import pytest' 2>/dev/null || for_python+=(python3-pytest)
  "$python" -c 'import pip' 2>/dev/null || for_python+=(python3-pip)
  "$python" -c 'import ensurepip, venv' 2>/dev/null || for_python+=(python3-venv)
fi
all=("${missing[@]}" "${for_python[@]}")
[ ${#all[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "gpool: installing ${all[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  { apt-get update -qq && apt-get install -y -qq "${all[@]}"; } >/dev/null 2>&1 && exit 0
  echo "gpool: apt-get install ${all[*]} failed" >&2
  [ ${#missing[@]} -eq 0 ] && exit 0 # only test-python's: it says so itself
  exit 1
fi
if [ ${#missing[@]} -eq 0 ]; then
  echo "gpool: make test-python will need ${for_python[*]}; run: sudo apt-get install ${for_python[*]}" >&2
  exit 0
fi
echo "gpool: missing ${all[*]}; run: sudo apt-get install ${all[*]}" >&2
exit 1
