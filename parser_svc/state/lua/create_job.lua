-- Creates a job record in state QUEUED with version 1 and publishes it, unless an earlier
-- request makes this one a replay or a duplicate. One atomic step, so two replicas racing the
-- same submit end with exactly one job.
-- Safe to run twice (a retry after a lost reply): the re-run finds the job this very call
-- created (REPLAY, JOINED or EXISTS naming ARGV[8]) and the caller goes on as if it had
-- answered OK. A request_id whose job has expired no longer holds: a retry makes a new job.
-- KEYS[1] job record (hash), KEYS[2] tombstone
-- KEYS[3] idempotency record of (tenant, request_id), or '' when the request has no id
-- KEYS[4] active-dedupe pointer of (tenant, parser version, options, content), or '' for none
-- KEYS[5] the pending-enqueue index (sorted set): a sweeper enqueues what nobody confirmed
-- KEYS[6] the tenant's job index (sorted set by create time, ListJobs), or '' on Redis Cluster,
--   where it is in another slot: the caller adds the job in a step of its own (store.py)
-- ARGV[1] event channel, ARGV[2] now (ms), ARGV[3] record TTL (ms), ARGV[4] tombstone extra (ms)
-- ARGV[5] idempotency TTL (ms), ARGV[6] content sha256, ARGV[7] job key prefix ('...:job:')
-- ARGV[8] the new job's id, ARGV[9] how long the tenant's job index must keep a new entry (ms,
-- lifetimes.py: the longest a record can live), ARGV[10..] field, value pairs of the upload
-- Returns {status, job_id}:
--   {'OK', new id, the new record as HGETALL gives it (the caller needs no second read)}
--   | {'REPLAY', first id} (same request_id, same content)
--   {'CONFLICT', first id} (same request_id, other content) | {'JOINED', active id}
--   {'EXISTS', new id} (the record already exists: this is a re-run)
-- Loaded after lib/tags.lua (job_key), lib/publish.lua (publish_record) and lib/job_index.lua
-- (tidy_job_index):
-- parser_svc/state/lua_scripts.py.
local now, ttl = tonumber(ARGV[2]), tonumber(ARGV[3])
local job_id = ARGV[8]

local function live(id)
  return redis.call('EXISTS', job_key(ARGV[7], id)) == 1
end

if K[3] ~= '' then
  local first = redis.call('HMGET', K[3], 'job_id', 'content_sha256')
  if first[1] and live(first[1]) then
    if first[2] ~= ARGV[6] then return {'CONFLICT', first[1]} end
    return {'REPLAY', first[1]}
  end
end

local function remember_request(id)
  if K[3] ~= '' then
    redis.call('HSET', K[3], 'job_id', id, 'content_sha256', ARGV[6])
    redis.call('PEXPIRE', K[3], tonumber(ARGV[5]))
  end
end

if K[4] ~= '' then
  local active = redis.call('GET', K[4])
  if active then
    local state = redis.call('HGET', job_key(ARGV[7], active), 'state')
    if state == 'QUEUED' or state == 'RUNNING' then
      remember_request(active)
      return {'JOINED', active}
    end
  end
end

if redis.call('EXISTS', K[1]) == 1 then return {'EXISTS', job_id} end
for i = 10, #ARGV, 2 do redis.call('HSET', K[1], ARGV[i], ARGV[i + 1]) end
redis.call('HSET', K[1], 'state', 'QUEUED', 'version', '1', 'done', '0', 'total', '0',
  'stage', 'queued', 'attempt', '0', 'fence', '', 'create_ms', ARGV[2], 'update_ms', ARGV[2],
  'expire_ms', tostring(now + ttl), 'dedupe_key', K[4])
redis.call('PEXPIRE', K[1], ttl)
-- The tombstone says until when the job lived, and whose it was: '<expire ms>:<tenant>'.
local owner = redis.call('HGET', K[1], 'tenant') or ''
redis.call('SET', K[2], tostring(now + ttl) .. ':' .. owner, 'PX', ttl + tonumber(ARGV[4]))
if K[4] ~= '' then redis.call('SET', K[4], job_id, 'PX', ttl) end
remember_request(job_id)
redis.call('ZADD', K[5], now, job_id)
-- Listed from now on; the two oldest entries are checked (lib/job_index.lua).
if K[6] ~= '' then
  redis.call('ZADD', K[6], now, job_id)
  tidy_job_index(K[6], now, tonumber(ARGV[9]), ARGV[7], 2)
end
return {'OK', job_id, publish_record(K[1], ARGV[1])}
