"""The launcher (issue 25): `python -m gpool run [--stats] -- PROGRAM ARGS` runs PROGRAM under
the drop-in: LD_PRELOAD appended, PYTORCH_NO_CUDA_MEMORY_CACHING=1, GPOOL_CONF passed on, the
exit status kept, and with --stats a summary of the program's allocations on stderr."""
import os
import re
import subprocess
import sys

from conftest import BUILD, PYDIR

PRELOAD = os.path.join(BUILD, "libgpool_preload.so")
HELPER = os.path.join(BUILD, "tests", "preload")
LIBM = "libm.so.6"  # harmless to preload


def _env(**extra):
    env = dict(os.environ, PYTHONPATH=PYDIR, GPOOL_PRELOAD=PRELOAD)
    env.pop("LD_PRELOAD", None)
    env.pop("PYTORCH_NO_CUDA_MEMORY_CACHING", None)
    env.update(extra)
    return env


def _run(args, **extra):
    return subprocess.run([sys.executable, "-m", "gpool", "run"] + args, capture_output=True,
                          text=True, env=_env(**extra), timeout=120)


SHOW = [sys.executable, "-c",
        "import os; print(os.environ.get('LD_PRELOAD')); "
        "print(os.environ.get('PYTORCH_NO_CUDA_MEMORY_CACHING')); "
        "print(os.environ.get('GPOOL_CONF'))"]


def test_child_gets_the_drop_in_and_the_settings():
    out = _run(["--"] + SHOW, GPOOL_CONF="tcache_bytes=1M")
    assert out.returncode == 0, out.stderr
    pre, nocache, conf = out.stdout.split("\n")[:3]
    assert pre == PRELOAD
    assert nocache == "1"
    assert conf == "tcache_bytes=1M"


def test_ld_preload_is_appended_and_conf_added():
    out = _run(["--conf", "small_max=8K", "--"] + SHOW, LD_PRELOAD=LIBM,
               GPOOL_CONF="verbose=1")
    assert out.returncode == 0, out.stderr
    pre, _, conf = out.stdout.split("\n")[:3]
    assert pre == LIBM + ":" + PRELOAD
    assert conf == "verbose=1,small_max=8K"


def test_exit_status_is_the_programs():
    out = _run(["--", sys.executable, "-c", "raise SystemExit(7)"])
    assert out.returncode == 7
    out = _run(["--stats", "--", sys.executable, "-c", "raise SystemExit(5)"])
    assert out.returncode == 5


def test_no_program_and_missing_drop_in_are_clear():
    out = _run([])
    assert out.returncode == 2 and "no program given" in out.stderr
    out = _run(["--", "true"], GPOOL_PRELOAD="/nonexistent.so")
    assert out.returncode == 127 and "libgpool_preload.so" in out.stderr


def test_stats_summarizes_a_served_program(tmp_path):
    """A program that allocates through the CUDA runtime is served by gpool (its trace has the
    rows) and the summary counts them."""
    prog = tmp_path / "alloc.py"
    prog.write_text(
        "import ctypes, os\n"
        "ctypes.CDLL(os.environ['GPOOL_TEST_CUDART'], mode=ctypes.RTLD_GLOBAL)\n"
        "rt = ctypes.CDLL(None)  # the global scope, where the preloaded drop-in comes first\n"
        "p = ctypes.c_void_p()\n"
        "for i in range(3):\n"
        "    assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(3 << 20)) == 0\n"
        "    assert rt.cudaFree(p) == 0\n"
        "assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(1 << 20)) == 0\n")
    # the tests' stand-in runtime: its own memory functions fail loudly, so only the drop-in
    # can serve these calls
    cudart = os.path.join(HELPER, "libcudart.so.13")
    out = _run(["--stats", "--", sys.executable, str(prog)], GPOOL_TEST_CUDART=cudart,
               GPOOL_SIM_STRICT="1")
    assert out.returncode == 0, out.stderr
    assert "gpool: 4 allocations, 3 frees, 1 blocks live at exit (1048576 bytes)" in out.stderr
    # a cudaFree'd block comes back to gpool when its batch is flushed (docs/dropin.md), so
    # the peak lies between one block and all of them
    m = re.search(r"gpool: peak device bytes in use: (\d+) \(", out.stderr)
    assert m and 3 << 20 <= int(m.group(1)) <= 10 << 20, out.stderr
