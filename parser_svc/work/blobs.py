"""The blob store: a directory shared by every replica (a volume all pods mount).

Writes are atomic (temporary file + rename), so a reader never sees half a blob. Keys are
relative paths under the deployment's environment, e.g. `dev/results/<job>/<attempt>-<sha>.pb.gz`.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import io
import os
import shutil
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

from parser_svc.work import part_packs

# zlib's fast levels (1-3) match strings greedily, 4-9 lazily: on the corpus's packages (1.66
# MB) level 3 took 12 ms and kept 0.416 MB where level 6 took 31 ms for 0.377 MB. The job pays
# this CPU in its replica's worker, once per job: for a long text PDF the largest piece of
# the replica's own CPU (a 352-page book's 1.45 MB package: level 3 28 ms, level 1 17 ms for
# 6 % more bytes, 0.334 MB against 0.314; the corpus's PDFs, 2.38 MB: 46 against 36 ms,
# 0.662 MB against 0.623; bench/README.md). Level 1: the bytes are kept for the retention
# only, the CPU is spent on every job.
RESULT_GZIP_LEVEL = 1
# Page folders a store keeps resolved (BlobStore._page_folder).
PAGE_FOLDERS = 256


class _RenamedOnClose(io.FileIO):
    """Writes to a temporary file beside `target` and renames it into place on close."""

    def __init__(self, target: Path) -> None:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
        os.close(fd)
        super().__init__(tmp, "wb")
        self.target, self.tmp = target, tmp

    def close(self) -> None:
        if not self.closed:
            super().close()
            os.replace(self.tmp, self.target)


class BlobStore:
    def __init__(self, root: Path, env: str) -> None:
        self.root = root
        self.env = env
        # Jobs' page folders, resolved and checked once: a draft batch of every few pages of
        # each running job asks for its folder (the latest PAGE_FOLDERS kept; the cache is
        # thread-safe, and the store's writes run in threads).
        self._page_folder = functools.lru_cache(maxsize=PAGE_FOLDERS)(self._resolve_page_folder)

    def path(self, key: str) -> Path:
        resolved = (self.root / key).resolve()
        if not resolved.is_relative_to(self.root.resolve()):
            raise ValueError(f"blob key escapes the store: {key}")
        return resolved

    def _make_dir(self, folder: Path) -> None:
        """`folder` and its missing parents, owner-only (0700) like the files (0600, mkstemp):
        a parse child that dropped to another uid (child/privileges.py) reads nothing here."""
        missing = []
        while not folder.is_dir():
            missing.append(folder)
            folder = folder.parent
        for level in reversed(missing):
            with contextlib.suppress(FileExistsError):
                level.mkdir(mode=0o700)

    def _write(self, key: str, data: bytes) -> str:
        target = self.path(key)
        self._make_dir(target.parent)
        _write_file(target, data)
        return key

    def open_input(self, job_id: str) -> BinaryIO:
        """A file to stream an upload into; it appears under its key, whole, when closed."""
        target = self.path(self.input_key(job_id))
        self._make_dir(target.parent)
        return _RenamedOnClose(target)

    def put_input(self, job_id: str, data: bytes) -> str:
        return self._write(self.input_key(job_id), data)

    def put_result(self, job_id: str, attempt: int, sha256: str, data: bytes) -> str:
        """Stores a result compressed; the attempt in the name keeps a retry from clobbering."""
        key = f"{self.env}/results/{job_id}/{attempt}-{sha256[:16]}.pb.gz"
        return self._write(key, gzip.compress(data, compresslevel=RESULT_GZIP_LEVEL))

    def discard_results(self, job_id: str) -> int:
        """Deletes every stored result of a job that has not ended: what is there was written
        by an attempt that died before its terminal write, and nothing refers to it."""
        folder = self.path(f"{self.env}/results/{job_id}")
        removed = 0
        for item in folder.glob("*") if folder.is_dir() else ():
            item.unlink(missing_ok=True)
            removed += 1
        return removed

    def read_result(self, key: str) -> bytes:
        return gzip.decompress(self.path(key).read_bytes())

    def delete(self, key: str) -> None:
        self.path(key).unlink(missing_ok=True)

    # Passwords of encrypted uploads: an owner-only (0600) file beside the input, never in Redis
    # or a log; the worker reads it for the parse and deletes it when the parse ends.
    def secret_key(self, job_id: str) -> str:
        return f"{self.env}/inputs/{job_id}.secret"

    def put_secret(self, job_id: str, secret: str) -> str:
        return self._write(self.secret_key(job_id), secret.encode("utf-8"))  # mode 0600

    def read_secret(self, job_id: str) -> str:
        """The stored password of a job, "" when there is none."""
        try:
            return self.path(self.secret_key(job_id)).read_bytes().decode("utf-8")
        except FileNotFoundError:
            return ""

    def delete_secret(self, job_id: str) -> None:
        self.delete(self.secret_key(job_id))

    def input_key(self, job_id: str) -> str:
        return f"{self.env}/inputs/{job_id}"

    def delete_upload(self, job_id: str) -> None:
        """The upload and its password file, if any."""
        self.delete(self.input_key(job_id))
        self.delete_secret(job_id)

    def delete_uploads(self, job_ids: Iterable[str]) -> None:
        for job_id in job_ids:
            self.delete_upload(job_id)

    def uploads_older_than(self, age_s: float, limit: int) -> list[str]:
        """Job ids of up to `limit` stored uploads last written more than `age_s` ago."""
        folder = self.path(f"{self.env}/inputs")
        cutoff = time.time() - age_s
        found: list[str] = []
        for entry in os.scandir(folder) if folder.is_dir() else ():
            name = entry.name
            if name.startswith(".") or name.endswith(".secret"):
                continue
            try:
                if entry.stat().st_mtime < cutoff:
                    found.append(name)
            except FileNotFoundError:
                continue
            if len(found) >= limit:
                break
        return found

    # Assets (images of a reading package): `{env}/assets/{job_id}/{asset_id}`. Asset ids are
    # content-derived, so a retried parse writes the same names with the same bytes.
    def asset_key(self, job_id: str, asset_id: str) -> str:
        return f"{self.env}/assets/{job_id}/{asset_id}"

    def put_assets(self, job_id: str, directory: Path) -> int:
        """Stores every file of `directory` (named by asset id) as an asset of `job_id`."""
        stored = 0
        if directory.is_dir():
            for item in sorted(directory.iterdir()):
                if item.is_file():
                    self._write(self.asset_key(job_id, item.name), item.read_bytes())
                    stored += 1
        return stored

    def delete_job(self, job_id: str) -> int:
        """Everything stored for a job whose retention ended: results, assets, page parts, the
        upload and its password file. Returns how many files went."""
        removed = 0
        for folder in (
            self.path(f"{self.env}/results/{job_id}"),
            self.path(f"{self.env}/assets/{job_id}"),
            self.path(f"{self.env}/pages/{job_id}"),
        ):
            if folder.is_dir():
                removed += sum(1 for item in folder.iterdir() if item.is_file())
                shutil.rmtree(folder, ignore_errors=True)
        for key in (self.input_key(job_id), self.secret_key(job_id)):
            if self.path(key).exists():
                self.delete(key)
                removed += 1
        return removed

    def read_asset(self, job_id: str, asset_id: str) -> bytes:
        return self.path(self.asset_key(job_id, asset_id)).read_bytes()

    # Page parts of a running job (parser_svc/state/page_parts.py points at them), a batch to
    # a pack file named from their sha256s (work/part_packs.py): a part once stored never
    # changes and every attempt may write its own.
    def page_part_key(self, job_id: str, ref: str) -> str:
        """The key of the file that holds the part `ref` names (its pack, or its own file)."""
        return f"{self.env}/pages/{job_id}/{part_packs.file_name(ref)}"

    def put_page_part(self, job_id: str, sha256: str, data: bytes) -> str:
        """Stores one part; its ref."""
        return self.put_page_parts(job_id, [(sha256, data)])[0]

    def read_page_part(self, job_id: str, ref: str) -> bytes:
        data = self.read_page_parts(job_id, [ref])[0]
        if data is None:
            raise FileNotFoundError(f"no page part {ref} of job {job_id}")
        return data

    def put_page_parts(self, job_id: str, parts: list[tuple[str, bytes]]) -> list[str]:
        """Stores parts of one job, each (its sha256, its bytes), as one pack unless it is there
        already: one file's create for a batch (a draft of every page of a long document, on
        the worker's cores beside the parse). Their refs, in order."""
        folder = self._page_folder(job_id)
        self._make_dir(folder)
        return part_packs.write_pack(str(folder), parts, _write_file)

    def read_page_parts(self, job_id: str, refs: list[str]) -> list[bytes | None]:
        """The parts of one job these refs name, in order; None for one that is gone (with the
        job's retention)."""
        return part_packs.read_parts(str(self._page_folder(job_id)), refs)

    def _resolve_page_folder(self, job_id: str) -> Path:
        return self.path(f"{self.env}/pages/{job_id}")


def _write_file(target: Path | str, data: bytes) -> None:
    """`data` at `target`, whole or not at all: a temporary file beside it (owner-only, a
    random name no other writer opens), renamed. Plain system calls: a page part is a few KB,
    and mkstemp's name making and a buffered file object cost more than its write."""
    tmp = os.path.join(os.path.dirname(target), f".tmp-{os.urandom(8).hex()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
