"""`python -m gpool` (gpool/__main__.py) and the loader's error (gpool/_lib.py): --help is
usage on stdout and status 0, a wrong usage is usage on stderr and 2; a libgpool.so that cannot
be loaded is the loader's one-line message on stderr (no traceback), and that message names
every path the loader tried, in order, with why each failed."""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import PYDIR


def _package_copy(tmp_path, lib=None):
    """The package, copied under tmp_path without any library next to it (or with ``lib``'s
    bytes as gpool/libgpool.so); returns the folder to put on PYTHONPATH."""
    root = tmp_path / "pkg"
    shutil.copytree(os.path.join(PYDIR, "gpool"), str(root / "gpool"),
                    ignore=shutil.ignore_patterns("*.so", "*.so.*", "__pycache__"))
    if lib is not None:
        (root / "gpool" / "libgpool.so").write_bytes(lib)
    return root


def _gpool(args, pythonpath=PYDIR, cwd=None, **env_changes):
    """python -m gpool ARGS, from cwd (not the source tree, whose package -m would find first
    when pythonpath names another)."""
    env = dict(os.environ, PYTHONPATH=str(pythonpath))
    for key, value in env_changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return subprocess.run([sys.executable, "-m", "gpool"] + args, capture_output=True,
                          text=True, env=env, timeout=60, cwd=str(cwd) if cwd else None)


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_prints_usage_on_stdout_and_exits_0(flag):
    out = _gpool([flag])
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: python -m gpool run")
    assert "python -m gpool version" in out.stdout
    assert out.stderr == ""


def test_version_help_prints_usage_on_stdout_and_exits_0():
    out = _gpool(["version", "--help"], GPOOL_LIBRARY="/nonexistent/libgpool.so")
    assert out.returncode == 0, out.stderr
    assert "python -m gpool version" in out.stdout and out.stderr == ""


@pytest.mark.parametrize("args", [[], ["frobnicate"], ["version", "extra"]])
def test_wrong_usage_prints_usage_on_stderr_and_exits_2(args):
    out = _gpool(args)
    assert out.returncode == 2
    assert out.stderr.startswith("usage: python -m gpool run") and out.stdout == ""


@pytest.mark.parametrize("library", [None, "/nonexistent/libgpool.so"])
def test_version_without_the_library_is_one_line_no_traceback(tmp_path, library):
    out = _gpool(["version"], pythonpath=_package_copy(tmp_path), cwd=tmp_path,
                 GPOOL_LIBRARY=library,
                 LD_LIBRARY_PATH="")
    assert out.returncode == 127  # as `run` when the drop-in cannot be found
    assert "Traceback" not in out.stderr
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("gpool: cannot load libgpool.so")
    assert out.stdout == ""


def test_version_with_the_library_still_works():
    out = _gpool(["version"])
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("gpool ") and "library: " in out.stdout


def _loader_error(pythonpath, **env_changes):
    out = subprocess.run(
        [sys.executable, "-c",
         "import gpool\n"
         "try:\n"
         "    gpool.version()\n"
         "except OSError as e:\n"
         "    print(e)\n"
         "else:\n"
         "    print('loaded')\n"],
        capture_output=True, text=True, timeout=60, cwd=str(pythonpath),
        env=dict({k: v for k, v in os.environ.items() if k not in env_changes},
                 PYTHONPATH=str(pythonpath),
                 **{k: v for k, v in env_changes.items() if v is not None}))
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def _in_order(text, parts):
    """Asserts that each part appears in text after the one before."""
    at = 0
    for part in parts:
        i = text.find(part, at)
        assert i >= 0, "%r not found (in order) in: %s" % (part, text)
        at = i + len(part)


def test_loader_error_names_every_path_tried_in_order(tmp_path):
    root = _package_copy(tmp_path)
    here = os.path.join(str(root), "gpool")
    msg = _loader_error(root, GPOOL_LIBRARY="/nonexistent/libgpool.so", LD_LIBRARY_PATH="")
    assert msg.startswith("gpool: cannot load libgpool.so")
    assert "\n" not in msg
    _in_order(msg, [
        os.path.join(here, "libgpool.so") + " (next to the package): not found",
        os.path.join(here, "libgpool.so.0") + " (next to the package): not found",
        "/nonexistent/libgpool.so ($GPOOL_LIBRARY): ",
        "No such file",
        "libgpool.so.0 (the system library path): ",
    ])


def test_loader_error_says_gpool_library_is_unset_and_why_a_file_failed(tmp_path):
    root = _package_copy(tmp_path, lib=b"not a shared object\n" * 256)
    here = os.path.join(str(root), "gpool")
    msg = _loader_error(root, GPOOL_LIBRARY=None, LD_LIBRARY_PATH="")
    _in_order(msg, [
        os.path.join(here, "libgpool.so") + " (next to the package): ",
        "ELF",  # the dynamic loader's reason: not an ELF file
        os.path.join(here, "libgpool.so.0") + " (next to the package): not found",
        "$GPOOL_LIBRARY: not set",
        "libgpool.so.0 (the system library path): ",
    ])
