"""Result assembly and verification, shared by the sync and asyncio clients."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any, Generic, TypeVar

import grpc

from docparse.errors import ContractError, DocparseError
from docparse.reasons import ErrorReason
from docparse.v1 import job_pb2, parser_service_pb2, reading_package_pb2

M = TypeVar("M", job_pb2.ResultRef, reading_package_pb2.Asset)


class Chunks(Generic[M]):
    """A download's chunks, collected in order, then checked against the size and sha256 its
    first message named (`named`: the message's `field`, a ResultRef or an Asset). `what`
    names the download in errors ("result of J1")."""

    def __init__(self, what: str, field: str, named: M) -> None:
        self.what = what
        self.field = field
        self.named: M = named
        self.chunks: list[bytes] = []
        self.received = 0

    def add(self, message: Any) -> None:
        """Takes a GetResult or GetAsset message."""
        if message.HasField(self.field):
            self.named.CopyFrom(getattr(message, self.field))
        if message.offset != self.received:
            raise ContractError(
                f"{self.what}: chunk at offset {message.offset}, expected {self.received}"
            )
        self.chunks.append(message.chunk)
        self.received += len(message.chunk)

    def checked(self, sha256: str, size_bytes: int) -> bytes:
        data = b"".join(self.chunks)
        digest = hashlib.sha256(data).hexdigest()
        if digest != sha256 or len(data) != size_bytes:
            raise DocparseError(
                grpc.StatusCode.DATA_LOSS,
                ErrorReason.CHECKSUM_MISMATCH,
                f"{self.what}: got {len(data)} bytes sha256 {digest}, "
                f"expected {size_bytes} bytes sha256 {sha256}",
            )
        return data


class ResultAssembler(Chunks[job_pb2.ResultRef]):
    """Collects GetResult chunks in order and checks size and sha256 against the ResultRef."""

    def __init__(self, job_id: str) -> None:
        super().__init__(f"result of {job_id}", "result", job_pb2.ResultRef())
        self.job_id = job_id
        # What the first message says of a GetResult with `pages`: the job had not ended, and
        # which of the pages sent are drafts.
        self.partial = False
        self.draft_pages: list[int] = []

    def add(self, message: Any) -> None:
        if message.offset == 0:
            self.partial = message.partial
            self.draft_pages = list(message.draft_pages)
        super().add(message)

    @property
    def ref(self) -> job_pb2.ResultRef:
        return self.named

    def verified_bytes(self) -> bytes:
        if not self.ref.sha256:
            raise ContractError(f"result of {self.job_id} came without its sha256")
        return self.checked(self.ref.sha256, self.ref.size_bytes)

    def package(self) -> reading_package_pb2.ReadingPackage:
        return reading_package_pb2.ReadingPackage.FromString(self.verified_bytes())

    def write(self, path: Path) -> job_pb2.ResultRef:
        """Writes the verified bytes atomically and checks the file on disk has that size."""
        data = self.verified_bytes()
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
        if not path.is_file() or path.stat().st_size != self.ref.size_bytes:
            raise DocparseError(
                grpc.StatusCode.DATA_LOSS,
                ErrorReason.WRITE_FAILED,
                f"{path} does not hold the {self.ref.size_bytes} bytes just written",
            )
        return self.ref


class AssetChunks(Chunks[reading_package_pb2.Asset]):
    """Collects GetAsset chunks in order and checks size and sha256 against the Asset."""

    def __init__(self, asset_id: str) -> None:
        super().__init__(f"asset {asset_id}", "asset", reading_package_pb2.Asset())
        self.asset_id = asset_id

    def verified(self) -> tuple[reading_package_pb2.Asset, bytes]:
        return self.named, self.checked(self.named.sha256, self.named.size_bytes)


def check_submit_answer(response: parser_service_pb2.SubmitJobResponse) -> job_pb2.Job:
    """A SubmitJob answer must name a job in a real state; anything else is a contract error."""
    job = response.job
    if not response.HasField("job") or not job.job_id or job.state == job_pb2.STATE_UNSPECIFIED:
        raise ContractError(f"SubmitJob answered without a usable job: {response!r}")
    if job.state == job_pb2.STATE_SUCCEEDED and not job.result.sha256:
        raise ContractError(f"job {job.job_id} is SUCCEEDED but names no result")
    return job
