"""A batch's webhook (CreateBatchRequest.callback, UploadBatchHeader.callback): one signed
`batch.completed` delivery when the last file ends, none per file; a bad callback is refused
before any file is stored.

A real stack (2 replicas, 1 gateway: the files end on either replica) and a real HTTP
receiver on 127.0.0.7 (tests/parser_svc/webhooks/test_webhooks.py), which verifies every
signature with the standardwebhooks library."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import redis

from docparse import cli
from docparse.client import Client
from docparse.errors import DocparseError
from docparse.local.stack import LocalStack
from docparse.v1 import parser_service_pb2
from docparse.v1.parser_service_pb2 import Callback
from parser_svc.work.blobs import BlobStore
from tests.conftest import make_stack
from tests.helpers import eventually, make_pdf, stub
from tests.parser_svc.webhooks.test_webhooks import RECEIVER_HOST, Receiver, webhook_env

BROKEN = b"%PDF-1.7 x"  # a PDF by its bytes that no parser reads: the file ends FAILED


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    root = tmp_path_factory.mktemp("batch-webhooks")
    # Ten minutes between rechecks: a delivery leaves on the wake-up its last file's event gives.
    s = make_stack(root / "stack", replicas=2, gateways=1, extra_env=webhook_env(root, 600))
    s.start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def store(stack: LocalStack) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(stack.redis_url, decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    yield server
    server.shutdown()
    server.server_close()


def files(*contents: bytes) -> list[parser_service_pb2.BatchFile]:
    return [
        parser_service_pb2.BatchFile(file_name=f"f{i}.pdf", content=content)
        for i, content in enumerate(contents)
    ]


def create_batch(
    stack: LocalStack, callback: Callback, contents: list[bytes], request_id: str = ""
) -> parser_service_pb2.Batch:
    channel, s = stub(stack.gateway_addresses[0])
    with channel:
        request = parser_service_pb2.CreateBatchRequest(
            files=files(*contents), request_id=request_id, callback=callback
        )
        return s.CreateBatch(request, timeout=30).batch


def upload_batch(
    stack: LocalStack, callback: Callback, contents: list[bytes]
) -> parser_service_pb2.Batch:
    def parts() -> Iterator[parser_service_pb2.UploadBatchRequest]:
        header = parser_service_pb2.UploadBatchHeader(callback=callback)
        yield parser_service_pb2.UploadBatchRequest(header=header)
        for index, content in enumerate(contents):
            yield parser_service_pb2.UploadBatchRequest(
                file=parser_service_pb2.UploadFileHeader(
                    file_name=f"u{index}.pdf", size_bytes=len(content)
                )
            )
            yield parser_service_pb2.UploadBatchRequest(chunk=content)

    channel, s = stub(stack.gateway_addresses[0])
    with channel:
        return s.UploadBatch(parts(), timeout=30).batch


def delivered(store: redis.Redis, batch_id: str) -> dict[str, str]:
    """The batch's one delivery record, once it ended delivered."""

    def ended() -> dict[str, str] | None:
        keys = list(store.scan_iter(f"docparse:test:webhook:batch.{batch_id}.*"))
        assert len(keys) <= 1, keys
        record: dict[str, str] = store.hgetall(keys[0]) if keys else {}  # type: ignore[assignment]
        return record if record.get("outcome") == "delivered" else None

    return eventually(ended, timeout=90, what=f"the delivery of batch {batch_id}")


def the_one_event(receiver: Receiver, batch_id: str) -> dict[str, Any]:
    """The receiver's only request: the batch's, verified; its body as JSON."""
    assert len(receiver.requests) == 1, [h["webhook-id"] for h, _, _ in receiver.requests]
    headers, body, _ = receiver.requests[0]
    assert headers["webhook-id"] == f"msg_{batch_id}_completed"
    assert list(receiver.accepted) == [f"msg_{batch_id}_completed"]  # the signature verified
    event: dict[str, Any] = json.loads(body)
    return event


def test_a_batch_of_three_gets_one_signed_delivery(
    stack: LocalStack, store: redis.Redis, receiver: Receiver
) -> None:
    callback = Callback(url=receiver.url, secret_name="main")
    contents = [make_pdf(2, f"file{i}") for i in range(3)]
    batch = create_batch(stack, callback, contents)
    record = delivered(store, batch.batch_id)
    assert record["attempts"] == "1"

    event = the_one_event(receiver, batch.batch_id)
    assert event["type"] == "batch.completed"
    data = event["data"]
    assert data["batch_id"] == batch.batch_id
    counts = [data[k] for k in ("total", "completed", "succeeded", "failed", "cancelled")]
    assert counts == [3, 3, 3, 0, 0]
    assert [job["job_id"] for job in data["jobs"]] == [f"{batch.batch_id}-{i}" for i in range(3)]
    assert {job["state"] for job in data["jobs"]} == {"STATE_SUCCEEDED"}
    # The batch's own record says the same (GetBatch), and no file has a delivery of its own.
    channel, s = stub(stack.parser_addresses[1])
    with channel:
        got = s.GetBatch(parser_service_pb2.GetBatchRequest(batch_id=batch.batch_id), timeout=10)
    assert data["version"] == str(got.batch.version)
    assert not list(store.scan_iter(f"docparse:test:webhook:{batch.batch_id}-*"))


def test_a_batch_with_a_failing_file_completes_with_failed_1(
    stack: LocalStack, store: redis.Redis, receiver: Receiver
) -> None:
    callback = Callback(url=receiver.url, secret_name="main")
    batch = upload_batch(stack, callback, [make_pdf(1, "a"), BROKEN, make_pdf(1, "c")])
    delivered(store, batch.batch_id)
    data = the_one_event(receiver, batch.batch_id)["data"]
    assert [data[k] for k in ("total", "completed", "succeeded", "failed")] == [3, 3, 2, 1]
    assert data["jobs"][1]["state"] == "STATE_FAILED"
    assert data["jobs"][1]["error"]["reason"] == "CORRUPT_DOCUMENT"


def test_a_retried_create_batch_delivers_once(
    stack: LocalStack, store: redis.Redis, receiver: Receiver
) -> None:
    callback = Callback(url=receiver.url, secret_name="main")
    contents = [make_pdf(1, "retried"), make_pdf(1, "twice")]
    first = create_batch(stack, callback, contents, request_id="batch-hook-retry")
    again = create_batch(stack, callback, contents, request_id="batch-hook-retry")
    assert again.batch_id == first.batch_id
    delivered(store, first.batch_id)
    assert the_one_event(receiver, first.batch_id)["data"]["succeeded"] == 2


def uploads(stack: LocalStack) -> set[str]:
    """Every upload in the stack's blob store, however new."""
    return set(BlobStore(stack.data_dir / "blobs", "test").uploads_older_than(-3600, 100_000))


@pytest.mark.parametrize("path", ["CreateBatch", "UploadBatch"])
@pytest.mark.parametrize(
    ("url", "secret_name", "reason"),
    [
        ("http://10.0.0.1/hook", "main", "CALLBACK_NOT_ALLOWED"),
        (f"http://{RECEIVER_HOST}/hook", "nope", "CALLBACK_SECRET_UNKNOWN"),
        (f"http://{RECEIVER_HOST}/hook", "", "CALLBACK_INVALID"),
        ("ftp://example.com/hook", "main", "CALLBACK_INVALID"),
    ],
)
def test_a_bad_callback_is_refused_before_any_file_is_stored(
    stack: LocalStack, store: redis.Redis, path: str, url: str, secret_name: str, reason: str
) -> None:
    before = uploads(stack)
    deliveries_before = store.zcard("docparse:test:webhooks:due")
    callback = Callback(url=url, secret_name=secret_name)
    send = create_batch if path == "CreateBatch" else upload_batch
    with pytest.raises(grpc.RpcError) as caught:
        send(stack, callback, [make_pdf(1, "refused"), make_pdf(1, "too")])
    err = DocparseError.from_rpc_error(caught.value)
    assert (err.code, err.reason) == (grpc.StatusCode.INVALID_ARGUMENT, reason), err
    assert uploads(stack) <= before
    assert store.zcard("docparse:test:webhooks:due") <= deliveries_before


def post_batch(stack: LocalStack, fields: list[tuple[str, str]], contents: list[bytes]) -> Any:
    """POST /v1/batches as curl -F sends it: the fields first, then the files."""
    boundary = uuid.uuid4().hex
    parts = [(f'name="{name}"', value.encode()) for name, value in fields]
    parts += [(f'name="file"; filename="h{i}.pdf"', c) for i, c in enumerate(contents)]
    body = b"".join(
        f"--{boundary}\r\nContent-Disposition: form-data; {disposition}\r\n\r\n".encode()
        + value
        + b"\r\n"
        for disposition, value in parts
    )
    request = urllib.request.Request(
        f"http://{stack.http_addresses[0]}/v1/batches",
        data=body + f"--{boundary}--\r\n".encode(),
        method="POST",
        headers={"content-type": f"multipart/form-data; boundary={boundary}"},
    )
    with urllib.request.urlopen(request, timeout=30) as reply:
        return json.loads(reply.read())


def test_http_batches_take_the_callback_fields(
    stack: LocalStack, store: redis.Redis, receiver: Receiver
) -> None:
    refused = [("callback_url", "http://10.0.0.1/x"), ("callback_secret", "main")]
    before = uploads(stack)
    with pytest.raises(urllib.error.HTTPError) as caught:
        post_batch(stack, refused, [make_pdf(1, "h0"), make_pdf(1, "h1")])
    assert caught.value.code == 400
    body = json.loads(caught.value.read())
    assert (body["code"], body["reason"]) == ("INVALID_ARGUMENT", "CALLBACK_NOT_ALLOWED")
    assert uploads(stack) <= before

    fields = [("callback_url", receiver.url), ("callback_secret", "main")]
    batch = post_batch(stack, fields, [make_pdf(1, "h0"), make_pdf(1, "h1")])
    delivered(store, batch["batch_id"])
    data = the_one_event(receiver, batch["batch_id"])["data"]
    assert [data[k] for k in ("total", "completed", "succeeded")] == [2, 2, 2]


def test_the_sdk_and_the_cli_send_a_batch_callback(
    stack: LocalStack, store: redis.Redis, receiver: Receiver, tmp_path: Path
) -> None:
    paths = []
    for name in ("one.pdf", "two.pdf"):
        paths.append(tmp_path / name)
        paths[-1].write_bytes(make_pdf(1, name))
    callback = Callback(url=receiver.url, secret_name="main")
    with Client(stack.gateway_addresses[0]) as client:  # the SDK, through the gateway
        small = client.submit_batch([("s.pdf", make_pdf(1, "small"))], callback=callback)
        uploaded = client.upload_batch(paths, callback=callback)
    # The CLI: several files are one batch, and the batch takes the callback.
    argv = ["submit", *map(str, paths), "--target", stack.gateway_addresses[0]]
    argv += ["--callback", receiver.url, "--callback-secret", "main"]
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 0
    # The CLI's batch: the one other delivery to this receiver.
    mine = [k for k in store.scan_iter("docparse:test:webhook:batch.*") if ":deliveries" not in k]
    batch_ids = {key.split(".")[1] for key in mine if store.hget(key, "url") == receiver.url}
    assert {small.batch_id, uploaded.batch_id} < batch_ids and len(batch_ids) == 3
    for batch_id in batch_ids:
        delivered(store, batch_id)
    ids = sorted(headers["webhook-id"] for headers, _, _ in receiver.requests)
    # One each, the SDK's two and the CLI's one; no webhook for any file.
    assert ids == sorted(f"msg_{batch_id}_completed" for batch_id in batch_ids)
