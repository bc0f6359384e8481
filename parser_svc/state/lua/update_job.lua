-- The only way a job record changes after creation. One atomic step:
--   1. terminal records (SUCCEEDED / FAILED / CANCELLED) are final: reject;
--   2. every op but 'claim', 'cancel' and 'give_up' must carry the current fencing token;
--   3. merge progress without going backwards; 4. bump version (no-op writes change nothing);
--   5. TTL by state (parser_svc/state/lifetimes.py has the rules) and the tombstone that outlives
--      the record; 6. PUBLISH the full new record on the job's channel (a worker's claim
--      may be 'quiet', ARGV[14]: its next write publishes; a terminal write always does).
-- Every op is safe to run twice (a retry after a lost reply): a re-run of a write that already
-- took effect answers DONE and changes nothing. That is how the caller tells "my write is in"
-- (claim, release, finish, cancel, give_up that find their own effect) from "someone else won".
-- KEYS[1] job record, KEYS[2] tombstone, KEYS[3] inline result
-- KEYS[4] the batch meta record when the job is a batch file, else ''
-- KEYS[5] (claim, give_up) the queue's lock key of this job, else '': refused unless the lock
--         holds patch.lock_token, so only the worker that holds the queue lock may do them
-- ARGV[1] op: 'claim' | 'progress' | 'finish' | 'release' | 'cancel' | 'give_up'
--   claim: a worker takes the job (RUNNING, attempt + 1, its token becomes the fence)
--   release: the owner hands the job back for a retry (QUEUED, stage 'retrying', no owner)
--   cancel: anyone may cancel a job that has not ended (no fence needed)
--   give_up: the queue gave up on the job (FAILED with patch.err_*): the lock holder's last word
-- ARGV[2] fencing token of the writer (for 'claim': the new token)
-- ARGV[3] now (ms)  ARGV[4] event channel  ARGV[5] running TTL (ms)  ARGV[6] retention (ms)
-- ARGV[7] tombstone extra (ms)  ARGV[8] JSON patch  ARGV[9] inline result bytes ('' = none)
-- ARGV[10] the batch's event channel ('' outside a batch)  ARGV[11] queued TTL (ms)
-- ARGV[12] key prefix of the batch's files ('...:job:{batch}-'; '' outside a batch)
-- ARGV[13] the retained index (sorted set): ended jobs by the time their record expires, for
--          the sweeper that deletes their blobs after the retention
-- ARGV[14] publishing: '' publishes every change (steps 5-6); 'quiet' changes the record and
--          its version but publishes nothing (a worker's claim: the worker's next write, at most
--          a progress interval later, or its terminal write, publishes the record);
--          'announce' also publishes the current record when nothing changed (NOOP) and that
--          version is not published yet, so the write that follows a quiet one always tells
--          watchers (a version they have not seen), and each version is published once
-- Returns {status, version}: OK | DONE | NOOP | NOT_FOUND | TERMINAL | FENCED | BAD_PATCH;
-- a claim that is in (OK or DONE) adds the record as a flat field/value list (no second read).
-- A progress write that is in (OK or NOOP) adds the record's 'drafts' mark ('1' once a reader
-- asked for the job's pages while it runs: lua/want_drafts.lua; else ''): the worker learns
-- of a reader with the write it makes anyway.
-- Loaded after lib/publish.lua (publish_record, PUBLISH_COMMAND): parser_svc/state/lua_scripts.py.
local cur = redis.call('HMGET', K[1], 'state', 'version', 'done', 'total', 'stage', 'fence',
  'attempt', 'tenant', 'job_id', 'dedupe_key', 'drafts')
local state = cur[1]
if not state then return {'NOT_FOUND', 0} end
local version = tonumber(cur[2])
local op = ARGV[1]
local patch = cjson.decode(ARGV[8])
if state == 'SUCCEEDED' or state == 'FAILED' or state == 'CANCELLED' then
  -- A re-run of the write that ended the job (its reply was lost) is told apart from a write
  -- that came too late: same writer (fence), same final state.
  if op == 'finish' and cur[6] == ARGV[2] and patch['state'] == state then
    return {'DONE', version}
  end
  if (op == 'cancel' and state == 'CANCELLED')
    or (op == 'give_up' and state == 'FAILED' and cur[6] == 'gave_up:' .. ARGV[2]) then
    return {'DONE', version}
  end
  return {'TERMINAL', version}
end
if op == 'claim' and state == 'RUNNING' and cur[6] == ARGV[2] then
  return {'DONE', version, redis.call('HGETALL', K[1])}
end
if op == 'release' and state == 'QUEUED' and cur[6] == 'released:' .. ARGV[2] then
  return {'DONE', version}
end
if op ~= 'claim' and op ~= 'cancel' and op ~= 'give_up' and ARGV[2] ~= cur[6] then
  return {'FENCED', version}
end
local now = tonumber(ARGV[3])
local running_ttl, retention = tonumber(ARGV[5]), tonumber(ARGV[6])
local tomb_extra, queued_ttl = tonumber(ARGV[7]), tonumber(ARGV[11])
local owner, job_id, dedupe = cur[8] or '', cur[9], cur[10]
local publishing = ARGV[14] or ''

local function publish_batch(batch_version)
  redis.call(PUBLISH_COMMAND, ARGV[10], cjson.encode({job_id = job_id,
    version = version, batch_version = batch_version}))
end

-- A batch's meta record outlives every file that is still open by at least the retention, so
-- a batch never loses its counters while a file can still end (lifetimes.py).
local function keep_meta_past(ttl)
  if K[4] ~= '' and redis.call('PTTL', K[4]) < ttl + retention then
    redis.call('PEXPIRE', K[4], ttl + retention)
  end
end

-- The TTL of a record that has not ended follows its state: QUEUED ones wait in the queue.
local function open_ttl(s)
  if s == 'QUEUED' then return queued_ttl end
  return running_ttl
end

local set = {}
local changed = false
local done, total = tonumber(cur[3]), tonumber(cur[4])
local new_done = tonumber(patch['done'] or done)
local new_total = tonumber(patch['total'] or total)
local terminal = false

if op == 'claim' or op == 'give_up' then
  if K[5] ~= '' and redis.call('GET', K[5]) ~= patch['lock_token'] then
    return {'FENCED', version}
  end
end
if op == 'claim' then
  set['fence'] = ARGV[2]
  set['attempt'] = tostring(tonumber(cur[7]) + 1)
  set['state'] = 'RUNNING'
  set['stage'] = patch['stage'] or 'opening'
  changed = true
elseif op == 'finish' or op == 'give_up' then
  local final = patch['state']
  if op == 'give_up' then final = 'FAILED' end
  if final ~= 'SUCCEEDED' and final ~= 'FAILED' and final ~= 'CANCELLED' then
    return {'BAD_PATCH', version}
  end
  set['state'] = final
  set['stage'] = 'done'
  for k, v in pairs(patch) do
    if string.sub(k, 1, 4) == 'err_' or string.sub(k, 1, 4) == 'res_' then set[k] = v end
  end
  if final == 'SUCCEEDED' and patch['ready'] then set['ready'] = patch['ready'] end
  if op == 'give_up' then set['fence'] = 'gave_up:' .. ARGV[2] end
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
-- The pages a running job's readers can have (its drafts): as this attempt's worker says.
if op == 'progress' and patch['ready'] and patch['ready'] ~= redis.call('HGET', K[1], 'ready') then
  set['ready'] = patch['ready']
  changed = true
end
if not changed then
  -- Not when this version is out already: a re-run of an announce (a retry after a lost reply)
  -- would tell watchers the same version twice.
  if publishing == 'announce' and redis.call('HGET', K[1], 'published') ~= cur[2] then
    if K[4] ~= '' then publish_batch(tonumber(redis.call('HGET', K[4], 'version') or '0')) end
    publish_record(K[1], ARGV[4])
  end
  if op == 'progress' then return {'NOOP', version, cur[11] or ''} end
  return {'NOOP', version}
end

-- A terminal write always tells watchers: it is the record a watch ends with.
if terminal then publishing = '' end
version = version + 1
local batch_done = false
-- Back in the queue (released for a retry), a job may wait there as long as a new one may.
local ttl = open_ttl(set['state'] or state)
if terminal then
  ttl = retention
  if K[4] ~= '' then
    -- The batch counters move in the same step as the file's terminal transition.
    local completed = redis.call('HINCRBY', K[4], 'completed', 1)
    redis.call('HINCRBY', K[4], string.lower(set['state']), 1)
    batch_done = completed >= tonumber(redis.call('HGET', K[4], 'total') or '0')
    -- While the batch is open, an ended file lives as long as the batch may.
    if not batch_done then ttl = math.max(retention, redis.call('PTTL', K[4])) end
  end
end
set['version'] = tostring(version)
set['update_ms'] = ARGV[3]
set['expire_ms'] = tostring(now + ttl)
local fields = {}
for k, v in pairs(set) do fields[#fields + 1] = k; fields[#fields + 1] = v end
redis.call('HSET', K[1], unpack(fields))
redis.call('PEXPIRE', K[1], ttl)
redis.call('SET', K[2], tostring(now + ttl) .. ':' .. owner, 'PX', ttl + tomb_extra)
if terminal and ARGV[9] ~= '' then redis.call('SET', K[3], ARGV[9], 'PX', ttl) end
if terminal then
  redis.call('ZADD', ARGV[13], now + ttl, job_id)
  -- Dedupe is active-only: once this job has ended, the same upload makes a new job.
  if dedupe and dedupe ~= '' and redis.call('GET', dedupe) == job_id then
    redis.call('DEL', dedupe)
  end
end

if K[4] ~= '' then
  local batch_version = redis.call('HINCRBY', K[4], 'version', 1)
  if batch_done then
    -- The last file ended: the batch and all its files expire together, a retention from now.
    -- `completed_ms` is written here and nowhere else, once: it makes the batch's webhook
    -- deliveries ready (parser_svc/webhooks/batch_deliveries.py) and is their timestamp.
    redis.call('HSETNX', K[4], 'completed_ms', ARGV[3])
    redis.call('PEXPIRE', K[4], retention)
    local n = tonumber(redis.call('HGET', K[4], 'total'))
    for i = 0, n - 1 do
      local key = ARGV[12] .. i
      if redis.call('PEXPIRE', key, retention) == 1 then
        redis.call('HSET', key, 'expire_ms', tostring(now + retention))
        redis.call('SET', key .. ':tomb', tostring(now + retention) .. ':' .. owner, 'PX',
          retention + tomb_extra)
        redis.call('PEXPIRE', key .. ':result', retention)
        redis.call('ZADD', ARGV[13], now + retention, redis.call('HGET', key, 'job_id'))
      end
    end
  elseif not terminal then
    keep_meta_past(ttl)
  end
  if publishing ~= 'quiet' then publish_batch(batch_version) end
end

if publishing ~= 'quiet' then
  local flat = publish_record(K[1], ARGV[4])
  if op == 'claim' then return {'OK', version, flat} end
elseif op == 'claim' then
  return {'OK', version, redis.call('HGETALL', K[1])}
end
if op == 'progress' then return {'OK', version, cur[11] or ''} end
return {'OK', version}
