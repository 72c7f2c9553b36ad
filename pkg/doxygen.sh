#!/usr/bin/env bash
# Makes sure doxygen is there for `make docs`: installs it with apt-get when run as root,
# otherwise prints the command to run. Exit 0 when doxygen is available.
set -u
command -v doxygen >/dev/null 2>&1 && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "gpool: installing doxygen" >&2
  export DEBIAN_FRONTEND=noninteractive
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends doxygen; } >/dev/null 2>&1 &&
    command -v doxygen >/dev/null 2>&1 && exit 0
  echo "gpool: apt-get install doxygen failed" >&2
  exit 1
fi
echo "gpool: doxygen not found; run: sudo apt-get install doxygen" >&2
exit 1
