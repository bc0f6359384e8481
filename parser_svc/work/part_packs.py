"""Page parts stored a batch to a file: a *pack*, the parts one after the other, named from
their sha256s. A part is found by its *ref*, '<sha256>/<pack>/<offset>/<length>', which the
job's page pointer holds (parser_svc/state/page_parts.py).

Why not a file per part: creating a file is the dearest step of storing a few KB. On this
project's ext4 VMs a create costs 110-550 us of CPU where a write of 4 KB costs 9, and a shared
volume (NFS, a cloud disk) costs more; a draft of every page of a long document paid it per
page, a third of the replica's CPU a streamed page (bench/README.md). A pack costs one create
per batch (the drafts the worker gathered: 1-16 pages).

Packs are content-derived: the same parts in the same order make the same pack name, so a
retried batch (a lost reply, a retried attempt that read the pages the same) finds its pack
there and writes nothing. A part read back is checked against its sha256: a ref that names
other bytes (a damaged or hand-made pointer) reads as missing, never as another page.

A bare '<sha256>' ref names a file of one part, '<sha256>.pb', as stores wrote before packs;
a replica reads both, so pointers written by an older worker stay readable.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Callable, Iterable

log = logging.getLogger(__name__)

_REF = re.compile(r"([0-9a-f]{64})(?:/([0-9a-f]{32})/(\d{1,12})/(\d{1,12}))?")
_SHA256 = re.compile(r"[0-9a-f]{64}")


def pack_name(sha256s: Iterable[str]) -> str:
    """The pack of these parts, in this order."""
    return hashlib.sha256(",".join(sha256s).encode()).hexdigest()[:32]


def _checked_sha256(sha256: str) -> str:
    if not _SHA256.fullmatch(sha256):
        raise ValueError(f"not a sha256: {sha256[:80]!r}")
    return sha256


def file_name(ref: str) -> str:
    """The file in a job's page folder that holds the part `ref` names: its pack, or a file of
    its own."""
    sha256, pack, _, _ = _parse(ref)
    return _file(sha256, pack)


def _file(sha256: str, pack: str) -> str:
    return f"{pack}.pack" if pack else f"{sha256}.pb"


def write_pack(
    folder: str, parts: list[tuple[str, bytes]], write: Callable[[str, bytes], None]
) -> list[str]:
    """Stores `parts` (each its sha256 and bytes) as one pack in `folder` with `write` (whole
    or not at all), unless that pack is there already; their refs, in order."""
    if not parts:
        return []
    sha256s = [_checked_sha256(sha256) for sha256, _ in parts]
    pack = pack_name(sha256s)
    refs, offset = [], 0
    for sha256, data in parts:
        refs.append(f"{sha256}/{pack}/{offset}/{len(data)}")
        offset += len(data)
    target = os.path.join(folder, _file("", pack))
    if not os.path.exists(target):
        write(target, b"".join(data for _, data in parts))
    return refs


def read_parts(folder: str, refs: list[str]) -> list[bytes | None]:
    """The parts these refs name, in order; None for one that is gone (the job's retention
    ended) or whose bytes are not its sha256's. A pack is opened once for all its parts."""
    located = [_parse(ref) for ref in refs]
    out: list[bytes | None] = [None] * len(refs)
    by_pack: dict[str, list[int]] = {}
    for index, (sha256, pack, _, _) in enumerate(located):
        if pack:
            by_pack.setdefault(pack, []).append(index)
        else:
            out[index] = _read_lone(os.path.join(folder, _file(sha256, "")))
    for pack, indexes in by_pack.items():
        try:
            fd = os.open(os.path.join(folder, _file("", pack)), os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            for index in indexes:
                sha256, _, offset, length = located[index]
                data = os.pread(fd, length, offset)
                if hashlib.sha256(data).hexdigest() == sha256:
                    out[index] = data
                else:
                    log.warning("page part %s: pack %s holds other bytes there", sha256, pack)
        finally:
            os.close(fd)
    return out


def _parse(ref: str) -> tuple[str, str, int, int]:
    match = _REF.fullmatch(ref)
    if match is None:
        raise ValueError(f"not a sha256 or page part ref: {ref[:120]!r}")
    sha256, pack, offset, length = match.groups()
    return sha256, pack or "", int(offset or 0), int(length or 0)


def _read_lone(path: str) -> bytes | None:
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError:
        return None
