-- Writes one webhook delivery into the outbox (parser_svc/state/webhook_store.py): its hash,
-- its entry in its job's deliveries, and its entry in the due set, in one step. A delivery
-- that ended (delivered or dead-lettered) is not added again; one still open keeps its place
-- in the due set (NX). Safe to run twice: a re-run writes the same fields.
-- KEYS[1] the delivery's hash, KEYS[2] the due set, KEYS[3] the job's deliveries (a set)
-- ARGV[1] the delivery id, ARGV[2] when it is due (ms), ARGV[3] how long its keys live (ms),
-- ARGV[4..] field, value pairs of the delivery
-- Replies {1} when written, {0} when the delivery had already ended (a table, as every script
-- run by lua_scripts.LuaScript).
if redis.call('HEXISTS', KEYS[1], 'ended_ms') == 1 then return {0} end
redis.call('HSET', KEYS[1], unpack(ARGV, 4))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('SADD', KEYS[3], ARGV[1])
redis.call('PEXPIRE', KEYS[3], ARGV[3])
redis.call('ZADD', KEYS[2], 'NX', ARGV[2], ARGV[1])
return {1}
