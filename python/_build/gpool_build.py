"""A PEP 517 build backend for the gpool package that needs nothing but the standard library,
so that `pip install ./python` works offline: pip's isolated build environment has nothing to
download (requires = []).

build_wheel builds the C library from the checkout around python/ with the project's own
Makefile (`make lib`: libgpool.so and libgpool_preload.so), puts both inside the package and
writes a platform wheel (py3-none-<platform>, Root-Is-Purelib: false: the libraries are
native code, loaded through ctypes, so any Python 3 on that platform can use them). Settings,
as environment variables or pip's --config-settings:
  GPOOL_LIB_DIR   take libgpool.so and libgpool_preload.so from this folder, build nothing
                  (an sdist, or a build made elsewhere);
  GPOOL_BUILD     the Makefile's build folder (default: build, the checkout's own);
  GPOOL_MAKE      the make program (default: make); GPOOL_JOBS its -j (default: 2).
build_sdist writes the Python sources only (building a wheel from it needs GPOOL_LIB_DIR)."""

import base64
import hashlib
import io
import os
import re
import subprocess
import sys
import sysconfig
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = "gpool"
SUMMARY = ("Python bindings for gpool, a caching memory-pool allocator for NVIDIA GPUs "
           "(ctypes over libgpool.so)")
#: the native files the wheel carries, as the package names them
LIBRARIES = ("libgpool.so", "libgpool_preload.so")
ENTRY_POINTS = "[console_scripts]\ngpool-run = gpool.__main__:main\n"


class BuildError(RuntimeError):
    pass


def _version():
    text = open(os.path.join(ROOT, NAME, "__init__.py")).read()
    return re.search(r'^__version__ = "([^"]+)"', text, re.M).group(1)


def _metadata():
    readme = open(os.path.join(ROOT, "README.md")).read()
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: %s\nLicense: MIT\n"
            "Requires-Python: >=3.8\nDescription-Content-Type: text/markdown\n\n%s"
            % (NAME, _version(), SUMMARY, readme))


def _package_files():
    pkg = os.path.join(ROOT, NAME)
    return sorted(os.path.join(NAME, f) for f in os.listdir(pkg) if f.endswith(".py"))


def _setting(config_settings, key, default=None):
    if config_settings and config_settings.get(key):
        return config_settings[key]
    return os.environ.get(key) or default


def platform_tag():
    """The wheel's platform tag: sysconfig's platform, as wheel tags spell it
    (linux-x86_64 -> linux_x86_64)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", sysconfig.get_platform())


def wheel_name(version=None):
    return "%s-%s-py3-none-%s.whl" % (NAME, version or _version(), platform_tag())


def _checkout():
    """The gpool checkout python/ sits in, or None (an unpacked sdist)."""
    repo = os.path.dirname(ROOT)
    if os.path.isfile(os.path.join(repo, "Makefile")) and \
            os.path.isfile(os.path.join(repo, "include", "gpool.h")):
        return repo
    return None


def _native_libraries(config_settings):
    """{name in the package: path} of the libraries, building them when needed."""
    lib_dir = _setting(config_settings, "GPOOL_LIB_DIR")
    if not lib_dir:
        repo = _checkout()
        if repo is None:
            raise BuildError(
                "gpool_build: no gpool checkout around %s (its Makefile and include/gpool.h) "
                "to build libgpool.so from; set GPOOL_LIB_DIR to a folder holding %s"
                % (ROOT, " and ".join(LIBRARIES)))
        build = _setting(config_settings, "GPOOL_BUILD", "build")
        cmd = [_setting(config_settings, "GPOOL_MAKE", "make"), "-C", repo,
               "-j%s" % _setting(config_settings, "GPOOL_JOBS", "2"), "BUILD=" + build, "lib"]
        sys.stderr.write("gpool_build: %s\n" % " ".join(cmd))
        try:
            done = subprocess.run(cmd, stdout=sys.stderr)
        except OSError as e:
            raise BuildError("gpool_build: cannot run %s: %s (install make and a C compiler)"
                             % (cmd[0], e)) from None
        if done.returncode != 0:
            raise BuildError("gpool_build: %s failed (exit %d)" % (" ".join(cmd),
                                                                  done.returncode))
        lib_dir = build if os.path.isabs(build) else os.path.join(repo, build)
    out = {}
    for name in LIBRARIES:
        path = os.path.join(lib_dir, name)
        if not os.path.isfile(path):
            raise BuildError("gpool_build: %s is missing" % path)
        out[name] = os.path.realpath(path)
    return out


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "%s,sha256=%s,%d\n" % (name, digest.decode(), len(data))


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    version = _version()
    dist_info = "%s-%s.dist-info" % (NAME, version)
    name = wheel_name(version)
    files = [(f, open(os.path.join(ROOT, f), "rb").read(), 0o644) for f in _package_files()]
    for lib, path in _native_libraries(config_settings).items():
        files.append((NAME + "/" + lib, open(path, "rb").read(), 0o755))
    files.append((dist_info + "/METADATA", _metadata().encode(), 0o644))
    files.append((dist_info + "/WHEEL", ("Wheel-Version: 1.0\nGenerator: gpool_build\n"
                                         "Root-Is-Purelib: false\nTag: py3-none-%s\n"
                                         % platform_tag()).encode(), 0o644))
    files.append((dist_info + "/entry_points.txt", ENTRY_POINTS.encode(), 0o644))
    record = io.StringIO()
    path = os.path.join(wheel_directory, name)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for fname, data, mode in files:
            info = zipfile.ZipInfo(fname, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
            record.write(_record_line(fname, data))
        record.write("%s/RECORD,,\n" % dist_info)
        z.writestr(dist_info + "/RECORD", record.getvalue())
    return name


def build_sdist(sdist_directory, config_settings=None):
    base = "%s-%s" % (NAME, _version())
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for f in ["pyproject.toml", "README.md", "_build/gpool_build.py"] + _package_files():
            t.add(os.path.join(ROOT, f), arcname=base + "/" + f)
        info = tarfile.TarInfo(base + "/PKG-INFO")
        data = _metadata().encode()
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return name


if __name__ == "__main__":  # python3 _build/gpool_build.py DIR: a wheel, for a look inside
    print(build_wheel(sys.argv[1] if len(sys.argv) > 1 else "."))
