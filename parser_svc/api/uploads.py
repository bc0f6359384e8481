"""UploadBatch: files stream to the blob store as they arrive, checked as they arrive.

A replica holds at most one chunk of an upload in memory, never a file or a batch, plus what
the fixed HTTP/2 receive window lets the client send ahead (4 MiB: docparse_server/flow_control.py),
for at most `max_uploads_per_tenant` uploads of a tenant at once: each chunk
is hashed and appended to the file's upload in the blob store (off the event loop). The
limits are checked before the bytes they limit are kept: the file count at each file header,
the tenant's rate at each file header (one submit each), its queued jobs against its key's
`max_queued_jobs` at the header and at each file header (the files so far count as queued),
the announced size against the service's and the tenant's limits, and the bytes actually
sent against what was announced.
Content types are sniffed afterwards from the stored files (bounded, detect.py). A stream
that fails leaves no upload behind.
"""

from __future__ import annotations

import asyncio
import hashlib
import mmap
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import BinaryIO

from docparse.errors import DocparseError
from docparse.reasons import ErrorReason
from docparse.v1 import parser_service_pb2
from docparse_server.errors import error
from docparse_server.tenancy import DEFAULT_TENANT
from parser_svc.api.submit import Submitter, check_languages
from parser_svc.parsers.detect import Detection, sniff
from parser_svc.state.caller_scope import current_tenant
from parser_svc.state.keys import batch_file_id
from parser_svc.webhooks.outbox import Hook
from parser_svc.work.blobs import BlobStore

MAX_FILES = 1000
# The initial metadata an UploadBatch call sends once its header is accepted (see
# receive_batch_upload); gateway/http/api.py waits for it before streaming files.
UPLOAD_ACCEPTED = (("x-docparse-upload", "header-accepted"),)


@dataclass
class StoredFile:
    """One file of a batch, already in the blob store under its job id."""

    job_id: str
    file_name: str
    size_bytes: int = 0
    sha256: str = ""
    announced: int = 0
    # The batch's OCR language hints, comma separated ("" = detect the script per page).
    languages: str = ""
    _hash: hashlib._Hash = field(default_factory=hashlib.sha256, repr=False)


def sniff_stored(blobs: BlobStore, job_id: str) -> Detection:
    """What a stored upload is, read through a memory map: sniffing touches the few pages it
    looks at, not the whole file."""
    with open(blobs.path(blobs.input_key(job_id)), "rb") as stored:
        if stored.seek(0, 2) == 0:
            return Detection(None, "empty content")
        with mmap.mmap(stored.fileno(), 0, access=mmap.ACCESS_READ) as view:
            return sniff(view)


async def receive_batch_upload(
    parts: AsyncIterator[parser_service_pb2.UploadBatchRequest],
    new_batch_id: Callable[[str], str],
    submitter: Submitter,
    accepted: Callable[[], Awaitable[None]] | None = None,
) -> tuple[str, str, list[StoredFile], Hook | None]:
    """Stores an UploadBatch stream (a header, then per file a file header and chunks) as the
    uploads of `<batch_id>-<i>`, the batch id minted from the header's request_id
    (`new_batch_id`: on Redis Cluster it places the batch). Returns the batch id, the
    request_id, the stored files and the checked callback. The header's language hints and
    callback are checked when it arrives (before any file is stored), the hints kept on each
    file; then `accepted` runs (the service sends the call's initial metadata: a client may wait
    for it before streaming files, so a refused header's status reaches it intact instead of
    racing its writes)."""
    receiver = _BatchReceiver(submitter, new_batch_id, accepted)
    try:
        index = 0
        async for part in parts:
            kind = part.WhichOneof("part")
            if index == 0 and kind != "header":
                raise error(
                    ErrorReason.UPLOAD_PROTOCOL, "an UploadBatch stream starts with a header"
                )
            index += 1
            if kind == "header":
                await receiver.header(part.header)
            elif kind == "file":
                await receiver.file(part.file)
            elif kind == "chunk":
                await receiver.chunk(part.chunk)
        await receiver.close_file()
    except BaseException:
        await receiver.discard()
        raise
    return receiver.batch_id, receiver.request_id, receiver.files, receiver.hook


class _BatchReceiver:
    """What an UploadBatch stream has sent so far: its header's ids and hints, the files
    stored, and the one file being written."""

    def __init__(
        self,
        submitter: Submitter,
        new_batch_id: Callable[[str], str],
        accepted: Callable[[], Awaitable[None]] | None,
    ) -> None:
        self.submitter = submitter
        self.blobs = submitter.blobs
        self.new_batch_id = new_batch_id
        self.accepted = accepted
        self.request_id = self.batch_id = self.languages = ""
        self.files: list[StoredFile] = []
        self.out: BinaryIO | None = None
        self.hook: Hook | None = None

    async def header(self, header: parser_service_pb2.UploadBatchHeader) -> None:
        self.request_id = header.request_id
        self.batch_id = self.new_batch_id(self.request_id)
        self.languages = ",".join(check_languages(list(header.languages)))
        tenant = current_tenant() or DEFAULT_TENANT
        self.hook = await self.submitter.callbacks.check_callback(header.callback, tenant)
        await self.submitter.check_queued()  # a tenant at its limit is refused before any file
        if self.accepted is not None:
            await self.accepted()

    async def file(self, file: parser_service_pb2.UploadFileHeader) -> None:
        await self.close_file()
        if len(self.files) >= MAX_FILES:
            raise error(ErrorReason.TOO_MANY_FILES, f"a batch holds at most {MAX_FILES} files")
        name = file.file_name[:512]
        self.submitter.check_announced(file.size_bytes, name)
        await self.submitter.check_rate()  # each file is a submit, counted as it comes
        await self.submitter.check_queued(len(self.files) + 1)  # before its bytes are stored
        job_id = batch_file_id(self.batch_id, len(self.files))
        self.files.append(
            StoredFile(job_id, name, announced=file.size_bytes, languages=self.languages)
        )
        self.out = await asyncio.to_thread(self.blobs.open_input, job_id)

    async def chunk(self, chunk: bytes) -> None:
        if self.out is None:
            raise error(ErrorReason.UPLOAD_PROTOCOL, "content arrived before any file header")
        current = self.files[-1]
        current.size_bytes += len(chunk)
        if current.size_bytes > current.announced:
            raise error(ErrorReason.UPLOAD_SIZE_MISMATCH, "a file sent more bytes than announced")
        current._hash.update(chunk)
        await asyncio.to_thread(self.out.write, chunk)

    async def close_file(self) -> None:
        """The file being written, closed and checked against its header."""
        if self.out is None:
            return
        await asyncio.to_thread(self.out.close)
        self.out = None
        current = self.files[-1]
        if current.size_bytes != current.announced:
            raise error(
                ErrorReason.UPLOAD_SIZE_MISMATCH,
                f"file {len(self.files) - 1} announced {current.announced} bytes and sent "
                f"{current.size_bytes}",
            )
        current.sha256 = current._hash.hexdigest()
        if not current.size_bytes:
            raise error(ErrorReason.EMPTY_CONTENT, f"file {len(self.files) - 1} is empty")

    async def discard(self) -> None:
        """A stream that failed: every upload it stored goes."""
        unfinished, job_ids = self.out, [stored.job_id for stored in self.files]

        def discard() -> None:  # one thread call: a second cancel cannot split it
            if unfinished is not None:
                unfinished.close()
            self.blobs.delete_uploads(job_ids)

        await asyncio.to_thread(discard)


def file_error(index: int, file_name: str, err: DocparseError) -> DocparseError:
    """`err` naming the file of the batch it is about (index, and a bounded echo of its name)."""
    return DocparseError(
        err.code,
        err.reason,
        f"file {index} ({file_name[:200]!r}): {err.message}",
        {**err.metadata, "file_index": str(index), "file_name": file_name[:200]},
    )
