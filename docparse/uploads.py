"""What an UploadBatch stream sends, without I/O of its own: the sync client reads the files as
grpc asks for chunks, the asyncio client reads them off the event loop."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

from docparse.v1 import parser_service_pb2

# UploadBatch sends files in chunks of this size: the client, the gateway and the replica each
# hold a few chunks, never a file or a batch.
UPLOAD_CHUNK_BYTES = 1 << 20
# An upload's deadline grows with its size: the call timeout plus 1 s per MiB.
UPLOAD_MIN_BYTES_PER_S = 1 << 20
# The files of an upload: each a path (sent under its own name), or a name and a path.
Files: TypeAlias = Sequence[Path | tuple[str, Path]]


def batch_request(
    files: list[tuple[str, bytes]],
    request_id: str,
    languages: Sequence[str],
    callback: parser_service_pb2.Callback | None = None,
) -> parser_service_pb2.CreateBatchRequest:
    """One CreateBatch message with every file (small batches: gRPC's message size limit)."""
    return parser_service_pb2.CreateBatchRequest(
        files=[parser_service_pb2.BatchFile(file_name=n, content=c) for n, c in files],
        request_id=request_id or uuid.uuid4().hex,
        languages=list(languages),
        callback=callback,
    )


@dataclass(frozen=True)
class BatchUpload:
    """What an UploadBatch stream sends: a header, then per file a file header (name, size)
    and its content in chunks, read as they are sent (shared by the sync and async clients)."""

    request_id: str
    languages: tuple[str, ...]
    files: tuple[tuple[str, Path, int], ...]  # name, path, size in bytes
    # The batch's webhook (one `batch.completed` delivery when every file has ended), or None.
    callback: parser_service_pb2.Callback | None = None

    @classmethod
    def of(
        cls,
        files: Files,
        request_id: str = "",
        languages: Sequence[str] = (),
        callback: parser_service_pb2.Callback | None = None,
    ) -> BatchUpload:
        named = [(f.name, f) if isinstance(f, Path) else f for f in files]
        return cls(
            request_id or uuid.uuid4().hex,
            tuple(languages),
            tuple((name, path, path.stat().st_size) for name, path in named),
            callback,
        )

    @property
    def total_bytes(self) -> int:
        return sum(size for _, _, size in self.files)

    def header(self) -> parser_service_pb2.UploadBatchRequest:
        return parser_service_pb2.UploadBatchRequest(
            header=parser_service_pb2.UploadBatchHeader(
                request_id=self.request_id, languages=list(self.languages), callback=self.callback
            )
        )

    @staticmethod
    def file_header(name: str, size: int) -> parser_service_pb2.UploadBatchRequest:
        return parser_service_pb2.UploadBatchRequest(
            file=parser_service_pb2.UploadFileHeader(file_name=name, size_bytes=size)
        )

    def requests(self) -> Iterator[parser_service_pb2.UploadBatchRequest]:
        yield self.header()
        for name, path, size in self.files:
            yield self.file_header(name, size)
            with path.open("rb") as source:
                while chunk := source.read(UPLOAD_CHUNK_BYTES):
                    yield parser_service_pb2.UploadBatchRequest(chunk=chunk)
