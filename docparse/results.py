"""Result assembly and verification, shared by the sync and asyncio clients."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

import grpc

from docparse.errors import ContractError, DocparseError
from docparse.v1 import job_pb2, parser_service_pb2, reading_package_pb2


class ResultAssembler:
    """Collects GetResult chunks in order and checks size and sha256 against the ResultRef."""

    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        self.ref = job_pb2.ResultRef()
        self.chunks: list[bytes] = []
        self.received = 0

    def add(self, message: parser_service_pb2.GetResultResponse) -> None:
        if message.HasField("result"):
            self.ref.CopyFrom(message.result)
        if message.offset != self.received:
            raise ContractError(
                f"result of {self.job_id}: chunk at offset {message.offset}, "
                f"expected {self.received}"
            )
        self.chunks.append(message.chunk)
        self.received += len(message.chunk)

    def verified_bytes(self) -> bytes:
        data = b"".join(self.chunks)
        digest = hashlib.sha256(data).hexdigest()
        if not self.ref.sha256:
            raise ContractError(f"result of {self.job_id} came without its sha256")
        if digest != self.ref.sha256 or len(data) != self.ref.size_bytes:
            raise DocparseError(
                grpc.StatusCode.DATA_LOSS,
                "CHECKSUM_MISMATCH",
                f"result of {self.job_id}: got {len(data)} bytes sha256 {digest}, "
                f"expected {self.ref.size_bytes} bytes sha256 {self.ref.sha256}",
            )
        return data

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
                "WRITE_FAILED",
                f"{path} does not hold the {self.ref.size_bytes} bytes just written",
            )
        return self.ref


class AssetChunks:
    """Collects GetAsset chunks in order and checks size and sha256 against the Asset."""

    def __init__(self, asset_id: str) -> None:
        self.asset_id = asset_id
        self.asset = reading_package_pb2.Asset()
        self.chunks: list[bytes] = []
        self.received = 0

    def add(self, message: parser_service_pb2.GetAssetResponse) -> None:
        if message.HasField("asset"):
            self.asset.CopyFrom(message.asset)
        if message.offset != self.received:
            raise ContractError(
                f"asset {self.asset_id}: chunk at offset {message.offset}, expected {self.received}"
            )
        self.chunks.append(message.chunk)
        self.received += len(message.chunk)

    def verified(self) -> tuple[reading_package_pb2.Asset, bytes]:
        data = b"".join(self.chunks)
        digest = hashlib.sha256(data).hexdigest()
        if digest != self.asset.sha256 or len(data) != self.asset.size_bytes:
            raise DocparseError(
                grpc.StatusCode.DATA_LOSS,
                "CHECKSUM_MISMATCH",
                f"asset {self.asset_id}: got {len(data)} bytes sha256 {digest}, "
                f"expected {self.asset.size_bytes} bytes sha256 {self.asset.sha256}",
            )
        return self.asset, data


def check_submit_answer(response: parser_service_pb2.SubmitJobResponse) -> job_pb2.Job:
    """A SubmitJob answer must name a job in a real state; anything else is a contract error."""
    job = response.job
    if not response.HasField("job") or not job.job_id or job.state == job_pb2.STATE_UNSPECIFIED:
        raise ContractError(f"SubmitJob answered without a usable job: {response!r}")
    if job.state == job_pb2.STATE_SUCCEEDED and not job.result.sha256:
        raise ContractError(f"job {job.job_id} is SUCCEEDED but names no result")
    return job
