"""Test setup: the package from this tree, libgpool.so and the simulated driver from the build
directory (GPOOL_TEST_BUILD, default ../../build), unless the environment already names them."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.dirname(HERE)
REPO = os.path.dirname(PYDIR)
BUILD = os.path.abspath(os.environ.get("GPOOL_TEST_BUILD") or os.path.join(REPO, "build"))

sys.path.insert(0, PYDIR)
os.environ.setdefault("GPOOL_LIBRARY", os.path.join(BUILD, "libgpool.so"))
if not os.environ.get("GPOOL_TEST_REAL_GPU"):
    os.environ.setdefault("GPOOL_LIBCUDA", os.path.join(BUILD, "sim", "libcuda.so.1"))
os.environ.pop("GPOOL_CONF", None)
os.environ.pop("GPOOL_TRACE", None)
