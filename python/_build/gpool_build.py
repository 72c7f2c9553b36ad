"""A PEP 517 build backend for the gpool package that needs nothing but the standard library,
so that `pip install ./python` works offline: pip's isolated build environment has nothing to
download (requires = []). It builds a pure-Python wheel (gpool/*.py) and an sdist."""

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = "gpool"
SUMMARY = ("Python bindings for gpool, a caching memory-pool allocator for NVIDIA GPUs "
           "(ctypes over libgpool.so)")


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


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    version = _version()
    dist_info = "%s-%s.dist-info" % (NAME, version)
    wheel_name = "%s-%s-py3-none-any.whl" % (NAME, version)
    files = [(f, open(os.path.join(ROOT, f), "rb").read()) for f in _package_files()]
    files.append((dist_info + "/METADATA", _metadata().encode()))
    files.append((dist_info + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: gpool_build\n"
                  b"Root-Is-Purelib: true\nTag: py3-none-any\n"))
    record = io.StringIO()
    path = os.path.join(wheel_directory, wheel_name)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files:
            z.writestr(name, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.write("%s,sha256=%s,%d\n" % (name, digest.decode(), len(data)))
        record.write("%s/RECORD,,\n" % dist_info)
        z.writestr(dist_info + "/RECORD", record.getvalue())
    return wheel_name


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
