"""The blob store: a directory shared by every replica (a volume all pods mount).

Writes are atomic (temporary file + rename), so a reader never sees half a blob. Keys are
relative paths under the deployment's environment, e.g. `dev/results/<job>/<attempt>-<sha>.pb.gz`.
"""

from __future__ import annotations

import gzip
import os
import tempfile
from pathlib import Path


class BlobStore:
    def __init__(self, root: Path, env: str) -> None:
        self.root = root
        self.env = env

    def path(self, key: str) -> Path:
        resolved = (self.root / key).resolve()
        if not resolved.is_relative_to(self.root.resolve()):
            raise ValueError(f"blob key escapes the store: {key}")
        return resolved

    def _write(self, key: str, data: bytes) -> str:
        target = self.path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return key

    def put_input(self, job_id: str, data: bytes) -> str:
        return self._write(f"{self.env}/inputs/{job_id}", data)

    def put_result(self, job_id: str, attempt: int, sha256: str, data: bytes) -> str:
        """Stores a result compressed; the attempt in the name keeps a retry from clobbering."""
        key = f"{self.env}/results/{job_id}/{attempt}-{sha256[:16]}.pb.gz"
        return self._write(key, gzip.compress(data, compresslevel=6))

    def read_result(self, key: str) -> bytes:
        return gzip.decompress(self.path(key).read_bytes())

    def delete(self, key: str) -> None:
        self.path(key).unlink(missing_ok=True)
