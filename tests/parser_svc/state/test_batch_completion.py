"""The moment a batch completes (what its webhook hangs on, parser_svc/webhooks/
batch_deliveries.py): `completed_ms` on the batch's meta record, written once, in the step that
ends its last file, however many writers end files at the same moment."""

from __future__ import annotations

import asyncio
import uuid

from docparse.local.embedded_redis import EmbeddedRedis
from parser_svc.settings import Settings
from parser_svc.state.keys import batch_file_id
from parser_svc.state.store import JobStore, connect

FILES = 12


async def test_racing_writers_complete_a_batch_once(redis_server: EmbeddedRedis) -> None:
    settings = Settings(redis_url=redis_server.url, env=f"t{uuid.uuid4().hex[:8]}")
    # Two replicas: two stores, each on its own connections.
    stores = [JobStore(connect(settings), settings) for _ in range(2)]
    batch_id = uuid.uuid4().hex
    files = [
        {"file_name": f"f{i}.pdf", "content_sha256": "a" * 64, "content_type": "pdf",
         "size_bytes": "10"}
        for i in range(FILES)
    ]  # fmt: skip
    assert (await stores[0].create_batch(batch_id, "t", files)).created
    ids = [batch_file_id(batch_id, i) for i in range(FILES)]
    for i, job_id in enumerate(ids):
        assert (await stores[i % 2].claim(job_id, f"w{i}")).ok
    meta_key = stores[0].keys.batch_meta(batch_id)
    # All but one end, at once, from both stores: the batch is not complete.
    await asyncio.gather(
        *(stores[i % 2].finish(ids[i], f"w{i}", "SUCCEEDED", {}) for i in range(FILES - 1))
    )
    assert await stores[0]._redis.hget(meta_key, "completed_ms") is None
    # The last file ends on both stores at once (one write and its retry after a lost reply):
    # one step completes the batch, the other is a re-run that changes nothing.
    last = FILES - 1
    writes = await asyncio.gather(
        *(store.finish(ids[last], f"w{last}", "FAILED", {}) for store in stores)
    )
    assert sorted(w.status for w in writes) == ["DONE", "OK"]
    meta = await stores[1].batch_fields(batch_id, ["completed", "failed", "completed_ms"])
    assert (meta["completed"], meta["failed"]) == (str(FILES), "1")
    record = await stores[0].get(ids[last])
    # Written in the step that ended the last file: the same clock reading.
    assert int(meta["completed_ms"]) == record.update_time.ToMilliseconds()
    # A cancel that comes too late changes nothing either.
    assert (await stores[1].cancel(ids[0])).status == "TERMINAL"
    again = await stores[0].batch_fields(batch_id, ["completed", "completed_ms"])
    assert again == {"completed": str(FILES), "completed_ms": meta["completed_ms"]}
