"""An upload the server refuses on its first message is answered with the server's status,
every time, also while the client is still streaming (grpc/grpc#36066: grpc.aio turned the
client's next failed write into INTERNAL "Internal error from Core", about 1 call in 40 here).
The gateway relays uploads with grpc.aio, so a user saw INTERNAL where parser_svc had said
INVALID_ARGUMENT LANGUAGE_NOT_INSTALLED (docparse/aio_status.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from docparse.local.stack import LocalStack
from docparse.v1 import parser_service_pb2
from tests.conftest import make_stack
from tests.helpers import rpc_error, stub

CALLS = 200
CHUNK = b"\0" * 65536


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with make_stack(tmp_path_factory.mktemp("refusals"), replicas=1, gateways=1) as running:
        yield running


def test_an_upload_refused_on_its_header_says_why_through_the_gateway(stack: LocalStack) -> None:
    def parts() -> Iterator[parser_service_pb2.UploadBatchRequest]:
        header = parser_service_pb2.UploadBatchHeader(languages=["tlh"])  # not installed
        yield parser_service_pb2.UploadBatchRequest(header=header)
        size = 16 * len(CHUNK)
        yield parser_service_pb2.UploadBatchRequest(
            file=parser_service_pb2.UploadFileHeader(file_name="a.pdf", size_bytes=size)
        )
        for _ in range(16):  # still streaming when the refusal comes back
            yield parser_service_pb2.UploadBatchRequest(chunk=CHUNK)

    channel, s = stub(stack.gateway_addresses[0])
    with channel:
        errors = [rpc_error(lambda: s.UploadBatch(parts(), timeout=30)) for _ in range(CALLS)]
    seen = Counter((error.code.name, error.reason) for error in errors)
    assert seen == {("INVALID_ARGUMENT", "LANGUAGE_NOT_INSTALLED"): CALLS}
