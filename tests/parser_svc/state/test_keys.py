"""The key layout (parser_svc/state/keys.py): unchanged on one Redis; on Redis Cluster every job
placed in a cell whose tag is in its id, the cells spread over the slot space, and the Lua side
(lua/lib/tags.lua) naming the same keys as the Python side for every kind of id."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import redis
from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

import parser_svc.state
from docparse.local.embedded_redis import EmbeddedRedis
from parser_svc.state.keys import Keys, batch_file_id, cell_of, cell_tags
from parser_svc.state.lua_scripts import CREATE_JOB, LEASE, UPDATE_JOB, LuaScript

CELLS = 16


def test_one_redis_keeps_the_layout_it_always_had() -> None:
    keys = Keys("e")
    job_id = uuid.uuid4().hex
    assert keys.new_id("") != keys.new_id("") and "_" not in keys.new_id("")
    assert keys.job(job_id) == f"docparse:e:job:{{{job_id}}}"
    assert keys.job(f"{job_id}-3") == f"docparse:e:job:{{{job_id}}}-3"
    assert keys.batch_meta(job_id) == f"docparse:e:batch:{{{job_id}}}:meta"
    assert keys.pending(job_id) == "docparse:e:pending" == keys.index_sets("pending")[0]
    assert keys.retained(job_id) == "docparse:e:retained"
    assert keys.request("t", "r") == keys.request("t", "r", cell_of(job_id))
    assert keys.queue_prefix == "docparse:e:bull"
    assert keys.place("t", "r") == ""
    assert (keys.webhooks_due, keys.webhooks_dead, keys.webhooks_lease) == (
        "docparse:e:webhooks:due",
        "docparse:e:webhooks:dead",
        "docparse:e:webhooks:lease",
    )
    assert keys.webhook("j.1") == "docparse:e:webhook:j.1"
    assert keys.webhook_deliveries("j") == "docparse:e:webhook:j:deliveries"


def test_cells_spread_evenly_over_the_slots() -> None:
    tags = cell_tags(CELLS)
    assert len(set(tags)) == CELLS
    share = REDIS_CLUSTER_HASH_SLOTS // CELLS
    slots = [key_slot(tag.encode()) for tag in tags]
    assert [slot // share for slot in slots] == list(range(CELLS))


def test_a_placed_job_keeps_every_key_of_its_create_in_one_slot() -> None:
    keys = Keys("e", CELLS)
    cell = keys.place("tenant", "identity")
    assert cell in cell_tags(CELLS) and keys.place("tenant", "identity") == cell
    job_id = keys.new_id(cell)
    assert cell_of(job_id) == cell and cell_of(batch_file_id(job_id, 2)) == cell
    slot = key_slot(keys.job(job_id).encode())
    same_slot = [
        keys.tombstone(job_id),
        keys.result(job_id),
        keys.job_channel(job_id),
        keys.request("tenant", "req", cell),
        keys.active_upload("tenant", "identity", cell),
        keys.pending(job_id),
        keys.retained(job_id),
        keys.job(batch_file_id(job_id, 7)),
        keys.batch_meta(job_id),
        keys.batch_channel(job_id),
    ]
    assert {key_slot(key.encode()) for key in same_slot} == {slot}
    # A batch's request_id record is in the cell its id was minted for (batches.py).
    batch_cell = keys.place("tenant", "batch-req")
    assert key_slot(keys.batch_request("tenant", "batch-req").encode()) == key_slot(
        keys.batch_meta(keys.new_id(batch_cell)).encode()
    )
    assert set(keys.index_sets("pending")) == {
        keys.pending(keys.new_id(c)) for c in cell_tags(CELLS)
    }
    assert keys.queue_prefix == "docparse:e:{bull}"
    webhooks = [keys.webhooks_due, keys.webhooks_dead, keys.webhooks_lease, keys.webhook("j.1")]
    webhooks.append(keys.webhook_deliveries(job_id))  # the outbox: one slot of its own
    assert {key_slot(key.encode()) for key in webhooks} == {key_slot(b"webhooks")}


@pytest.mark.parametrize("script", [CREATE_JOB, UPDATE_JOB])
def test_a_script_publishes_with_the_command_its_redis_takes(script: LuaScript) -> None:
    """One Redis: PUBLISH; Redis Cluster: SPUBLISH (sharded channels). The two sources differ in
    the library that names the command, put first, and nowhere else."""
    lua = Path(parser_svc.state.__file__).parent / "lua" / "lib"
    plain, sharded = ((lua / f"publish_{kind}.lua").read_text() for kind in ("plain", "sharded"))
    assert "local PUBLISH_COMMAND = 'PUBLISH'" in plain
    assert "local PUBLISH_COMMAND = 'SPUBLISH'" in sharded
    assert script.source.startswith(plain) and script.sharded_source.startswith(sharded)
    assert script.source[len(plain) :] == script.sharded_source[len(sharded) :]
    assert "redis.call('PUBLISH'" not in script.source + script.sharded_source
    assert LEASE.source == LEASE.sharded_source  # a script that publishes nothing: one source


@pytest.mark.parametrize("placed", [False, True])
def test_lua_names_the_same_keys_as_python(redis_server: EmbeddedRedis, placed: bool) -> None:
    keys = Keys("e", CELLS if placed else 0)
    job_id = keys.new_id(keys.place("t", "x"))
    ids = [job_id, batch_file_id(job_id, 0), batch_file_id(job_id, 12), "job_1", "job_1-2"]
    source = LuaScript("lib/tags.lua").source + (  # the library, and a line that calls it
        "local out = {} for i, id in ipairs(ARGV) do out[i] = job_key(KEYS[1], id) end return out"
    )
    with redis.Redis.from_url(redis_server.url, decode_responses=True) as client:
        named = client.eval(source, 1, keys.job_key_prefix, *ids)
    assert named == [keys.job(an_id) for an_id in ids]
