-- Creates a whole batch in one atomic step: the meta record with its counters, one QUEUED
-- record per file, and the request_id record. A concurrent or retried CreateBatch with the same
-- request_id therefore sees either no batch (and creates it) or the whole batch, never a part.
-- Safe to run twice: a re-run finds its own batch (EXISTS, or REPLAY naming ARGV[8]).
-- KEYS[1] batch meta, KEYS[2] request_id record of (tenant, request_id) or ''
-- KEYS[3] the pending-enqueue index (sorted set)
-- KEYS[4] the tenant's job index (sorted set by create time, ListJobs), or '' on Redis Cluster
--   (another slot: the caller adds the files in a step of its own, store.py)
-- ARGV[1] now (ms), ARGV[2] queued TTL (ms), ARGV[3] retention (ms), ARGV[4] tombstone extra (ms)
-- ARGV[5] request_id TTL (ms), ARGV[6] digest of the batch's content (names and sha256s)
-- ARGV[7] key prefix of the batch's files ('...:job:{batch}-'), ARGV[8] the batch id
-- ARGV[9] batch meta key prefix ('...:batch:'), ARGV[10] tenant, ARGV[11] number of files
-- ARGV[12..] per file: file_name, content_sha256, content_type, size_bytes, languages ('' = none),
-- max_pages (the tenant's page cap, '' = none)
-- ARGV[#ARGV] (the last, after the files) how long the tenant's job index must keep a new entry
-- (ms, lifetimes.py: the longest a record can live)
-- Returns {status, batch_id}: OK | EXISTS | REPLAY (first batch) | CONFLICT (first batch).
-- Loaded after lib/tags.lua (tag_id) and lib/job_index.lua (tidy_job_index):
-- parser_svc/state/lua_scripts.py.
local now, queued_ttl = tonumber(ARGV[1]), tonumber(ARGV[2])
local retention, tomb_extra = tonumber(ARGV[3]), tonumber(ARGV[4])
local batch_id, tenant, n = ARGV[8], ARGV[10], tonumber(ARGV[11])

if K[2] ~= '' then
  local first = redis.call('HMGET', K[2], 'batch_id', 'digest')
  if first[1] and redis.call('EXISTS', ARGV[9] .. tag_id(first[1]) .. ':meta') == 1 then
    if first[2] ~= ARGV[6] then return {'CONFLICT', first[1]} end
    return {'REPLAY', first[1]}
  end
end
if redis.call('EXISTS', K[1]) == 1 then return {'EXISTS', batch_id} end

-- Counters, and the batch version: the sum of its files' versions (each file starts at 1).
redis.call('HSET', K[1], 'batch_id', batch_id, 'tenant', tenant, 'total', n,
  'completed', 0, 'succeeded', 0, 'failed', 0, 'cancelled', 0, 'create_ms', ARGV[1],
  'version', n)
redis.call('PEXPIRE', K[1], queued_ttl + retention)
for i = 0, n - 1 do
  local at = 12 + i * 6
  local job_id = batch_id .. '-' .. i
  local key = ARGV[7] .. i
  redis.call('HSET', key, 'job_id', job_id, 'file_name', ARGV[at], 'content_sha256',
    ARGV[at + 1], 'content_type', ARGV[at + 2], 'size_bytes', ARGV[at + 3], 'tenant', tenant,
    'batch_id', batch_id, 'state', 'QUEUED', 'version', '1', 'done', '0', 'total', '0',
    'stage', 'queued', 'attempt', '0', 'fence', '', 'create_ms', ARGV[1],
    'update_ms', ARGV[1], 'expire_ms', tostring(now + queued_ttl), 'dedupe_key', '')
  if ARGV[at + 4] ~= '' then redis.call('HSET', key, 'languages', ARGV[at + 4]) end
  if ARGV[at + 5] ~= '' then redis.call('HSET', key, 'max_pages', ARGV[at + 5]) end
  redis.call('PEXPIRE', key, queued_ttl)
  redis.call('SET', key .. ':tomb', tostring(now + queued_ttl) .. ':' .. tenant, 'PX',
    queued_ttl + tomb_extra)
  redis.call('ZADD', K[3], now, job_id)
  if K[4] ~= '' then redis.call('ZADD', K[4], now, job_id) end
end
-- The files are listed from now on; the n + 1 oldest entries are checked (lib/job_index.lua).
-- The job key prefix is ARGV[7] without this batch's '{<batch>}-'.
local job_prefix = string.sub(ARGV[7], 1, #ARGV[7] - #tag_id(batch_id) - 1)
if K[4] ~= '' then tidy_job_index(K[4], now, tonumber(ARGV[#ARGV]), job_prefix, n + 1) end
if K[2] ~= '' then
  redis.call('HSET', K[2], 'batch_id', batch_id, 'digest', ARGV[6])
  redis.call('PEXPIRE', K[2], tonumber(ARGV[5]))
end
return {'OK', batch_id}
