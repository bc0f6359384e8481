-- The only way a job record changes after creation. One atomic step:
--   1. terminal records (SUCCEEDED / FAILED / CANCELLED) are final: reject;
--   2. every op but 'claim' must carry the current fencing token: reject a stale writer;
--   3. merge progress without going backwards; 4. bump version (no-op writes change nothing);
--   5. TTL by state (running: renewed on each write; terminal: retention from now) and the
--      tombstone that outlives the record; 6. PUBLISH the full new record on the job's channel.
-- KEYS[1] job record, KEYS[2] tombstone, KEYS[3] inline result
-- KEYS[4] the batch meta record when the job is a batch file, else ''
-- KEYS[5] (claim) the queue's lock key of this job, else '': the claim is refused unless the
--         lock holds patch.lock_token, so only the worker that holds the queue lock can claim
-- ARGV[1] op: 'claim' | 'progress' | 'touch' | 'finish' | 'release' | 'cancel'
--   claim: a worker takes the job (RUNNING, attempt + 1, its token becomes the fence)
--   release: the owner hands the job back for a retry (QUEUED, stage 'retrying', no owner)
--   cancel: anyone may cancel a job that has not ended (no fence needed)
-- ARGV[2] fencing token of the writer (for 'claim': the new token)
-- ARGV[3] now (ms)  ARGV[4] event channel  ARGV[5] running TTL (ms)  ARGV[6] retention (ms)
-- ARGV[7] tombstone extra (ms)  ARGV[8] JSON patch  ARGV[9] inline result bytes ('' = none)
-- ARGV[10] the batch's event channel ('' outside a batch)
-- Returns {status, version}: OK | NOOP | NOT_FOUND | TERMINAL | FENCED | BAD_PATCH.
local cur = redis.call('HMGET', KEYS[1], 'state', 'version', 'done', 'total', 'stage', 'fence',
  'attempt')
local state = cur[1]
if not state then return {'NOT_FOUND', 0} end
local version = tonumber(cur[2])
if state == 'SUCCEEDED' or state == 'FAILED' or state == 'CANCELLED' then
  return {'TERMINAL', version}
end
local op = ARGV[1]
if op ~= 'claim' and op ~= 'cancel' and ARGV[2] ~= cur[6] then return {'FENCED', version} end
local now = tonumber(ARGV[3])
local running_ttl, retention = tonumber(ARGV[5]), tonumber(ARGV[6])
local tomb_extra = tonumber(ARGV[7])
local owner = redis.call('HGET', KEYS[1], 'tenant') or ''

if op == 'touch' then
  redis.call('PEXPIRE', KEYS[1], running_ttl)
  redis.call('HSET', KEYS[1], 'expire_ms', tostring(now + running_ttl))
  redis.call('SET', KEYS[2], tostring(now + running_ttl) .. ':' .. owner, 'PX',
    running_ttl + tomb_extra)
  return {'OK', version}
end

local patch = cjson.decode(ARGV[8])
local set = {}
local changed = false
local done, total = tonumber(cur[3]), tonumber(cur[4])
local new_done = tonumber(patch['done'] or done)
local new_total = tonumber(patch['total'] or total)
local terminal = false

if op == 'claim' then
  if KEYS[5] ~= '' and redis.call('GET', KEYS[5]) ~= patch['lock_token'] then
    return {'FENCED', version}
  end
  set['fence'] = ARGV[2]
  set['attempt'] = tostring(tonumber(cur[7]) + 1)
  set['state'] = 'RUNNING'
  set['stage'] = patch['stage'] or 'opening'
  changed = true
elseif op == 'finish' then
  local final = patch['state']
  if final ~= 'SUCCEEDED' and final ~= 'FAILED' and final ~= 'CANCELLED' then
    return {'BAD_PATCH', version}
  end
  set['state'] = final
  set['stage'] = 'done'
  for k, v in pairs(patch) do
    if string.sub(k, 1, 4) == 'err_' or string.sub(k, 1, 4) == 'res_' then set[k] = v end
  end
  terminal = true
  changed = true
elseif op == 'cancel' then
  set['state'] = 'CANCELLED'
  set['stage'] = 'done'
  set['err_reason'] = 'CANCELLED'
  set['err_message'] = patch['err_message'] or 'cancelled by request'
  set['fence'] = 'cancelled'
  terminal = true
  changed = true
elseif op == 'release' then
  set['state'] = 'QUEUED'
  set['stage'] = 'retrying'
  set['fence'] = 'released:' .. ARGV[2]
  changed = true
elseif op ~= 'progress' then
  return {'BAD_PATCH', version}
end

if new_total > total then set['total'] = tostring(new_total); changed = true end
if new_done > done then set['done'] = tostring(new_done); changed = true end
if op == 'progress' and patch['stage'] and new_done >= done and patch['stage'] ~= cur[5] then
  set['stage'] = patch['stage']
  changed = true
end
if not changed then return {'NOOP', version} end

version = version + 1
local ttl = running_ttl
if terminal then ttl = retention end
set['version'] = tostring(version)
set['update_ms'] = ARGV[3]
set['expire_ms'] = tostring(now + ttl)
for k, v in pairs(set) do redis.call('HSET', KEYS[1], k, v) end
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('SET', KEYS[2], tostring(now + ttl) .. ':' .. owner, 'PX', ttl + tomb_extra)
if terminal and ARGV[9] ~= '' then redis.call('SET', KEYS[3], ARGV[9], 'PX', ttl) end
if terminal then
  -- Dedupe is active-only: once this job has ended, the same upload makes a new job.
  local ids = redis.call('HMGET', KEYS[1], 'dedupe_key', 'job_id')
  local dedupe = ids[1]
  if dedupe and dedupe ~= '' and redis.call('GET', dedupe) == ids[2] then
    redis.call('DEL', dedupe)
  end
end

if KEYS[4] ~= '' then
  if terminal then
    -- The batch counters move in the same step as the file's terminal transition.
    redis.call('HINCRBY', KEYS[4], 'completed', 1)
    redis.call('HINCRBY', KEYS[4], string.lower(set['state']), 1)
    if redis.call('PTTL', KEYS[4]) < retention then redis.call('PEXPIRE', KEYS[4], retention) end
  end
  redis.call('PUBLISH', ARGV[10], cjson.encode({job_id = redis.call('HGET', KEYS[1], 'job_id'),
    version = version}))
end

local flat = redis.call('HGETALL', KEYS[1])
local rec = {}
for i = 1, #flat, 2 do rec[flat[i]] = flat[i + 1] end
rec['fence'] = nil
rec['dedupe_key'] = nil
redis.call('PUBLISH', ARGV[4], cjson.encode(rec))
return {'OK', version}
