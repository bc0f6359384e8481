"""Compiles pdf_pass.c, page_lines.c and page_box.c into `_pdf_pass.<extension suffix>.so`
beside them, against the mupdf that the installed pymupdf ships (its headers in
`pymupdf/mupdf-devel/include`, its `libmupdf.so.*`).

    python -m parser_svc.parsers.native.build [--force]

Exit 0: built, or already built from this source for this mupdf. Exit 1: no compiler, no
headers, or the compile failed (the reason on stderr); the parser then reads each PDF page
twice, as pymupdf alone does (parser_svc/parsers/pdf_pass.py). `make setup` and the
Dockerfile run it.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCES = (
    HERE / "pdf_pass.c",
    HERE / "page_lines.c",
    HERE / "page_lines.h",
    HERE / "page_box.c",
    HERE / "page_box.h",
)
TARGET = HERE / f"_pdf_pass{EXTENSION_SUFFIXES[0]}"  # what this interpreter imports first
STAMP = HERE / "_pdf_pass.stamp"


def _pymupdf() -> tuple[Path, str]:
    import pymupdf  # a server dependency; absent with the SDK alone

    return Path(pymupdf.__file__).resolve().parent, str(pymupdf.mupdf_version)


def _fingerprint(version: str) -> str:
    digest = hashlib.sha256()
    for source in SOURCES:
        digest.update(source.read_bytes())
    digest.update(f"{version} {sys.version} {EXTENSION_SUFFIXES[0]}".encode())
    return digest.hexdigest()


def build(force: bool = False) -> Path:
    """The compiled module's path; RuntimeError saying why it cannot be built."""
    try:
        where, version = _pymupdf()
    except ImportError as err:
        raise RuntimeError(f"pymupdf is not installed ({err})") from err
    fingerprint = _fingerprint(version)
    if not force and TARGET.is_file() and STAMP.is_file() and STAMP.read_text() == fingerprint:
        return TARGET
    include = where / "mupdf-devel" / "include"
    libraries = sorted(where.glob("libmupdf.so.*"))
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not (include / "mupdf" / "fitz.h").is_file() or not libraries:
        raise RuntimeError(f"pymupdf {version} ships no mupdf headers or library in {where}")
    if compiler is None:
        raise RuntimeError("no C compiler (cc) on PATH")
    try:
        with tempfile.TemporaryDirectory(dir=HERE) as tmp:
            built = Path(tmp) / TARGET.name
            command = [
                compiler,
                "-O2",
                "-shared",
                "-fPIC",
                "-std=c11",
                "-Wall",
                f"-I{sysconfig.get_paths()['include']}",
                f"-I{include}",
                f'-DDOCPARSE_MUPDF_VERSION="{version}"',
                *(str(source) for source in SOURCES if source.suffix == ".c"),
                "-o",
                str(built),
                f"-L{where}",
                f"-l:{libraries[0].name}",
                f"-Wl,-rpath,{where}",
            ]
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"{' '.join(command)}\n{done.stderr.strip()}")
            os.replace(built, TARGET)  # atomic: a parse starting now loads the old or the new
        STAMP.write_text(fingerprint)
    except OSError as err:  # a read-only install, a full disk
        raise RuntimeError(f"cannot write in {HERE}: {err}") from err
    return TARGET


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="rebuild even when up to date")
    args = parser.parse_args()
    try:
        path = build(args.force)
    except RuntimeError as err:
        print(
            f"parser_svc.parsers.native: not built, PDF pages will be read twice: {err}",
            file=sys.stderr,
        )
        sys.exit(1)
    print(f"parser_svc.parsers.native: {path.name} ready")


if __name__ == "__main__":
    main()
