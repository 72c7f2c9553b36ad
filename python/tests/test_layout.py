"""The ctypes structures match include/gpool.h: a C program compiled against the header prints
sizeof and every field's offsetof; and the header's field names, read from its text, are exactly
the ctypes fields (a field added to the header fails here even where it fits in padding)."""
import ctypes
import os
import re
import shutil
import subprocess

import pytest

from conftest import REPO
from gpool import _lib

HEADER = os.path.join(REPO, "include", "gpool.h")


def _cc():
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")


def test_sizes_and_offsets_match_the_c_compiler(tmp_path):
    cc = _cc()
    if not cc:
        pytest.skip("no C compiler to compile the layout probe")
    lines = ['#include <stdio.h>', '#include <stddef.h>', '#include "gpool.h"', "int main(void) {"]
    for cname, st in _lib.STRUCTS.items():
        lines.append('printf("%s %%zu %%zu\\n", sizeof(%s), _Alignof(%s));' % (cname, cname, cname))
        for field, _ in st._fields_:
            lines.append('printf("%s.%s %%zu %%zu\\n", offsetof(%s, %s), sizeof(((%s *)0)->%s));'
                         % (cname, field, cname, field, cname, field))
    lines.append("return 0; }")
    src = tmp_path / "probe.c"
    src.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "probe"
    subprocess.run([cc, "-std=c11", "-I", os.path.join(REPO, "include"), str(src), "-o", str(exe)],
                   check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    c = {k: (int(a), int(b)) for k, a, b in (l.split() for l in out.splitlines())}
    for cname, st in _lib.STRUCTS.items():
        assert c[cname] == (ctypes.sizeof(st), ctypes.alignment(st)), cname
        for field, _ in st._fields_:
            desc = getattr(st, field)
            assert c["%s.%s" % (cname, field)] == (desc.offset, desc.size), (cname, field)


def _header_fields(text, cname):
    m = re.search(r"typedef struct %s \{(.*?)\} %s;" % (cname, cname), text, re.S)
    assert m, "struct %s not found in gpool.h" % cname
    body = re.sub(r"/\*.*?\*/", "", m.group(1), flags=re.S)
    names = []
    for decl in body.split(";"):
        decl = decl.strip()
        if decl:
            names.append(re.match(r".*?(\w+)\s*(\[[^\]]*\])?$", decl, re.S).group(1))
    return names


def test_every_header_field_is_mirrored():
    text = open(HEADER).read()
    for cname, st in _lib.STRUCTS.items():
        assert _header_fields(text, cname) == [f for f, _ in st._fields_], cname


def test_enum_counts_match_the_header():
    text = open(HEADER).read()
    assert "GPOOL_MEM_KIND_COUNT = %d" % _lib.GPOOL_MEM_KIND_COUNT in text
    assert "#define GPOOL_MEM_KIND_SLOTS %d\n" % _lib.GPOOL_MEM_KIND_SLOTS in text
    assert "#define GPOOL_DRV_SLOTS %d\n" % _lib.GPOOL_DRV_SLOTS in text
    drv = re.search(r"typedef enum gpool_driver_call \{(.*?)\} gpool_driver_call;", text, re.S)
    names = re.findall(r"^\s*(GPOOL_DRV_\w+)", drv.group(1), re.M)
    assert names.index("GPOOL_DRV_COUNT") == _lib.GPOOL_DRV_COUNT
    statuses = dict((int(v), n) for n, v in re.findall(r"(GPOOL_(?:OK|ERR_\w+)) = (\d+)", text))
    assert statuses == _lib.STATUS_NAMES
    kinds = re.findall(r"GPOOL_MEM_(AUTO|DEVICE|HOST_PINNED|HOST_MAPPED) = (\d+)", text)
    assert [int(v) for _, v in kinds] == sorted(_lib.KINDS.values())
    usages = re.findall(r"GPOOL_USAGE_(\w+) = (\d+)", text)
    assert {n.lower(): int(v) for n, v in usages if n != "COUNT"} == _lib.USAGES
    flags = re.findall(r"GPOOL_ALLOC_(\w+) = 1u << (\d+)", text)
    assert {n.lower(): 1 << int(v) for n, v in flags} == _lib.FLAGS


def test_new_structs_carry_their_size():
    """Every public struct starts with struct_size, set as the C initializer macros do."""
    for cname, st in _lib.STRUCTS.items():
        if cname == "gpool_kind_stats":  # an array element only: no struct_size
            assert st._fields_[0][0] != "struct_size"
            continue
        assert st._fields_[0][0] == "struct_size", cname
        assert st().struct_size == ctypes.sizeof(st), cname
