"""Repack the nvidia-pytriton wheel down to what serving with the bundled tritonserver needs on one Python.

    python bench/device/repack_pytriton.py WHEEL --python 3.12 --out DIR

The 53 MiB wheel does not fit the GPU machine's 64 MiB carry limit beside the project and the load-test
wheels. What ``accelbench serve``/``loadtest`` use of it is the server binary, the python backend, the local
cache plugin, one python-backend stub and the shared libraries those link (followed through ELF DT_NEEDED, so
nothing they load is dropped). Dropped: the other stubs and the libpython 3.13 only the 3.13 stub links, and
pytriton's own Python client and model API (accelbench finds the server through ``find_spec('pytriton')``,
which needs only the package's ``__init__.py``). The result is a normal wheel, version ``<v>+slim``, that
``pip install --no-deps --target`` installs.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import re
import sys
import zipfile
from pathlib import Path

LIBS = "nvidia_pytriton.libs/"
SERVER = "pytriton/tritonserver/"
_ELF_ROOTS = (
    "bin/tritonserver",
    "backends/python/libtriton_python.so",
    "caches/local/libtritoncache_local.so",
)


def needed(data: bytes) -> list[str]:
    """DT_NEEDED names of a 64-bit little-endian ELF file (what the dynamic loader will look for)."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file")
    shoff = int.from_bytes(data[0x28:0x30], "little")
    shentsize, shnum = int.from_bytes(data[0x3A:0x3C], "little"), int.from_bytes(data[0x3C:0x3E], "little")
    sections = []
    for i in range(shnum):
        base = shoff + i * shentsize
        kind = int.from_bytes(data[base + 4 : base + 8], "little")
        offset = int.from_bytes(data[base + 0x18 : base + 0x20], "little")
        size = int.from_bytes(data[base + 0x20 : base + 0x28], "little")
        link = int.from_bytes(data[base + 0x28 : base + 0x2C], "little")
        sections.append((kind, offset, size, link))
    names = []
    for kind, offset, size, link in sections:
        if kind != 6:  # SHT_DYNAMIC
            continue
        strtab = sections[link][1]
        for entry in range(offset, offset + size, 16):
            tag = int.from_bytes(data[entry : entry + 8], "little")
            if tag == 0:
                break
            if tag == 1:  # DT_NEEDED
                value = int.from_bytes(data[entry + 8 : entry + 16], "little")
                names.append(data[strtab + value : data.index(b"\0", strtab + value)].decode())
    return names


def keep_list(wheel: zipfile.ZipFile, python: str) -> tuple[set[str], list[str]]:
    """Members to keep, and the bundled libraries reached from the roots (for the report)."""
    members = set(wheel.namelist())
    bundled = {Path(m).name: m for m in members if m.startswith(LIBS)}
    roots = [SERVER + r for r in _ELF_ROOTS] + [
        f"{SERVER}python_backend_stubs/{python}/triton_python_backend_stub"
    ]
    missing = [r for r in roots if r not in members]
    if missing:
        raise SystemExit(f"repack: the wheel has no {missing[0]} (is {python} a Python it ships a stub for?)")
    keep, todo, libs = set(roots), list(roots), []
    while todo:
        for name in needed(wheel.read(todo.pop())):
            if name in bundled and bundled[name] not in keep:
                keep.add(bundled[name])
                todo.append(bundled[name])
                libs.append(name)
    backends = {m for m in members if m.startswith(SERVER + "backends/") and "__pycache__" not in m}
    # no RECORD (rewritten) and no entry_points.txt (pytriton's CLI script is not shipped)
    dist_info = {m for m in members if ".dist-info/" in m and not m.endswith(("RECORD", "entry_points.txt"))}
    return keep | backends | dist_info | {"pytriton/__init__.py"}, sorted(libs)


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def repack(wheel_path: Path, out_dir: Path, python: str) -> Path:
    with zipfile.ZipFile(wheel_path) as wheel:
        keep, libs = keep_list(wheel, python)
        version = re.match(r"nvidia_pytriton-([^-]+)-", wheel_path.name).group(1)
        slim = f"{version}+slim"
        out = out_dir / wheel_path.name.replace(f"-{version}-", f"-{slim}-")
        out_dir.mkdir(parents=True, exist_ok=True)
        dist = f"nvidia_pytriton-{slim}.dist-info/"
        record: list[str] = []
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as new:
            for info in wheel.infolist():
                if info.filename not in keep:
                    continue
                data = wheel.read(info)
                name = info.filename.replace(f"nvidia_pytriton-{version}.dist-info/", dist)
                if name == dist + "METADATA":
                    data = data.replace(f"\nVersion: {version}\n".encode(), f"\nVersion: {slim}\n".encode())
                if name == "pytriton/__init__.py":
                    data = b'"""nvidia-pytriton repacked by accelbench: the bundled tritonserver only."""\n'
                new.writestr(_copy_info(info, name), data)
                record.append(_record_line(name, data))
            record.append(f"{dist}RECORD,,")
            new.writestr(dist + "RECORD", "\n".join(record) + "\n")
    size_mib = out.stat().st_size / 2**20
    print(
        f"{out}  {size_mib:.1f} MiB (from {wheel_path.stat().st_size / 2**20:.1f} MiB); libraries: {len(libs)}"
    )
    return out


def _copy_info(info: zipfile.ZipInfo, name: str) -> zipfile.ZipInfo:
    copy = zipfile.ZipInfo(name, date_time=info.date_time)
    copy.external_attr, copy.compress_type = info.external_attr, zipfile.ZIP_DEFLATED  # keeps the x bits
    return copy


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("wheel", type=Path)
    ap.add_argument("--python", default="3.12", help="the Python whose python-backend stub to keep")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    if not args.wheel.is_file() or not args.wheel.name.startswith("nvidia_pytriton-"):
        print(f"repack: {args.wheel}: not an nvidia_pytriton wheel file", file=sys.stderr)
        return 2
    try:
        repack(args.wheel, args.out, args.python)
    except (zipfile.BadZipFile, ValueError) as err:
        print(f"repack: {args.wheel}: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
