"""`pip install ./python` works offline (the build backend is python/_build, standard library
only, so pip's isolated build fetches nothing), and the installed package finds libgpool.so
next to itself before $GPOOL_LIBRARY."""
import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

from conftest import BUILD, PYDIR

needs_pip = pytest.mark.skipif(
    importlib.util.find_spec("pip") is None,
    reason="pip is missing (Debian: python3-pip)",
)


def _install(tmp_path):
    src = tmp_path / "src"  # a copy: pip builds in the source tree
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(os.path.join(PYDIR, name), src / name)
    shutil.copytree(os.path.join(PYDIR, "_build"), src / "_build",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(os.path.join(PYDIR, "gpool"), src / "gpool",
                    ignore=shutil.ignore_patterns("__pycache__", "libgpool.so*"))
    target = tmp_path / "site"
    # a copy has no checkout around it to build the library from: take the built one
    env = dict(os.environ, GPOOL_LIB_DIR=BUILD)
    out = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-index",
         "--disable-pip-version-check", "--target", str(target), str(src)],
        capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    return target


CHECK = (
    "import gpool\n"
    "with gpool.Pool() as p:\n"
    "    x = p.alloc(1 << 20, kind='pinned'); assert p.block_info(x)['kind'] == 'pinned'; p.free(x)\n"
    "print(gpool.__file__); print(gpool.library_path())\n"
)


@needs_pip
def test_pip_install_offline_and_import(tmp_path):
    target = _install(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(target))
    out = subprocess.run([sys.executable, "-c", CHECK], env=env, capture_output=True, text=True,
                         cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    pkg, lib = out.stdout.split()
    assert pkg.startswith(str(target))
    assert lib == str(target / "gpool" / "libgpool.so")  # the wheel carries it


@needs_pip
def test_library_next_to_the_package_comes_first(tmp_path):
    target = _install(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(target), GPOOL_LIBRARY="/nonexistent/libgpool.so")
    out = subprocess.run([sys.executable, "-c", CHECK], env=env, capture_output=True, text=True,
                         cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[1] == str(target / "gpool" / "libgpool.so")


def test_missing_library_is_a_clear_error(tmp_path):
    env = dict(os.environ, PYTHONPATH=PYDIR, GPOOL_LIBRARY="/nonexistent/libgpool.so",
               LD_LIBRARY_PATH="")
    out = subprocess.run([sys.executable, "-c", "import gpool; gpool.version()"], env=env,
                         capture_output=True, text=True, cwd=str(tmp_path))
    assert out.returncode != 0
    assert "cannot load libgpool.so" in out.stderr and "/nonexistent/libgpool.so" in out.stderr
