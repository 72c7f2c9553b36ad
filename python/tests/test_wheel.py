"""One install (issue 25): the in-tree backend builds libgpool.so and libgpool_preload.so from
the checkout (the project's Makefile) and puts them inside a correct platform wheel (tags,
RECORD, console script) that pip installs into a fresh venv offline and uninstalls cleanly;
`import gpool` then works with nothing but the driver set."""
import base64
import hashlib
import importlib.util
import os
import subprocess
import sys
import sysconfig
import zipfile

import pytest

from conftest import BUILD, PYDIR, REPO

sys.path.insert(0, os.path.join(PYDIR, "_build"))
import gpool_build  # noqa: E402

needs_venv = pytest.mark.skipif(
    importlib.util.find_spec("ensurepip") is None or importlib.util.find_spec("venv") is None,
    reason="venv with pip is missing (Debian: python3-venv)")

PLATFORM = sysconfig.get_platform().replace("-", "_").replace(".", "_")


def _bare_env(**extra):
    """What a new user has: the driver (here the simulator) and nothing of gpool's."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GPOOL_", "PYTHON", "PIP_", "LD_PRELOAD"))}
    env["GPOOL_LIBCUDA"] = os.environ["GPOOL_LIBCUDA"]
    env.update(extra)
    return env


def test_wheel_is_a_platform_wheel_with_both_libraries(tmp_path, monkeypatch):
    monkeypatch.setenv("GPOOL_LIB_DIR", BUILD)
    name = gpool_build.build_wheel(str(tmp_path))
    assert name == "gpool-%s-py3-none-%s.whl" % (gpool_build._version(), PLATFORM)
    assert not name.endswith("-any.whl")
    with zipfile.ZipFile(tmp_path / name) as z:
        names = set(z.namelist())
        dist = "gpool-%s.dist-info/" % gpool_build._version()
        for lib in ("gpool/libgpool.so", "gpool/libgpool_preload.so"):
            assert lib in names
            assert z.getinfo(lib).external_attr >> 16 & 0o111  # executable, as a .so is
        wheel = z.read(dist + "WHEEL").decode()
        assert "Root-Is-Purelib: false" in wheel
        assert "Tag: py3-none-%s" % PLATFORM in wheel
        assert "gpool-run = gpool.__main__:main" in z.read(dist + "entry_points.txt").decode()
        record = z.read(dist + "RECORD").decode().splitlines()
        listed = {}
        for line in record:
            path, digest, size = line.rsplit(",", 2)
            listed[path] = (digest, size)
        assert set(listed) == names
        for path in names - {dist + "RECORD"}:
            data = z.read(path)
            want = "sha256=" + base64.urlsafe_b64encode(
                hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert listed[path] == (want, str(len(data))), path
        assert listed[dist + "RECORD"] == ("", "")


def test_without_a_checkout_or_lib_dir_the_error_says_what_to_set(tmp_path, monkeypatch):
    monkeypatch.delenv("GPOOL_LIB_DIR", raising=False)
    monkeypatch.setattr(gpool_build, "_checkout", lambda: None)
    with pytest.raises(gpool_build.BuildError) as e:
        gpool_build.build_wheel(str(tmp_path))
    assert "GPOOL_LIB_DIR" in str(e.value)


@needs_venv
def test_fresh_venv_pip_install_builds_and_imports(tmp_path):
    venv = tmp_path / "v"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py, pip = str(venv / "bin" / "python"), str(venv / "bin" / "pip")
    # the checkout's own python/, built with the project's Makefile (GPOOL_BUILD: the test
    # build folder, so that make finds it up to date)
    out = subprocess.run([pip, "install", "--no-index", "--disable-pip-version-check",
                          os.path.join(REPO, "python")], capture_output=True, text=True,
                         env=_bare_env(GPOOL_BUILD=BUILD), cwd=str(tmp_path))
    assert out.returncode == 0, out.stdout + out.stderr
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    code = ("import gpool, gpool.run\n"
            "p = gpool.Pool(); x = p.alloc(1 << 20); p.free(x); p.close()\n"
            "print(gpool.library_path()); print(gpool.run.preload_path())\n")
    out = subprocess.run([py, "-c", code], capture_output=True, text=True, env=_bare_env(),
                         cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    lib, pre = out.stdout.split()
    assert lib == os.path.join(site, "gpool", "libgpool.so")
    assert pre == os.path.join(site, "gpool", "libgpool_preload.so")
    # the console script
    out = subprocess.run([str(venv / "bin" / "gpool-run"), "--print-env"], capture_output=True,
                         text=True, env=_bare_env(), cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "LD_PRELOAD=" + pre in out.stdout
    # and it all goes away again
    out = subprocess.run([pip, "uninstall", "-y", "gpool"], capture_output=True, text=True,
                         env=_bare_env())
    assert out.returncode == 0, out.stderr
    assert not os.path.exists(os.path.join(site, "gpool"))
    assert not os.path.exists(venv / "bin" / "gpool-run")
    assert not [n for n in os.listdir(site) if n.startswith("gpool")]
