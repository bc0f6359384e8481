-- The current share of each tenant under fair admission (parser_svc/state/admission.py,
-- Admission.shares): its jobs queued (pushed, not yet claimed), on its pending lists per lane,
-- and running (claimed, and active in BullMQ), with its weight; and the deployment's bulk slots
-- (the worker replicas' registrations still valid), its jobs waiting and active in BullMQ.
-- Also forgets the running index's jobs BullMQ has finished or removed (fair_admit.lua adds
-- a job there at its claim and keeps it across retries: a job waiting for its next attempt is
-- kept, not counted). Every key is in the queue's slot (`{bull}` on Redis Cluster).
--
-- KEYS[1] the running index (hash: job id -> tenant), KEYS[2] the per-tenant queued counts,
-- KEYS[3] BullMQ's active list, KEYS[4] its wait list, KEYS[5] its prioritized set.
-- ARGV[1] the prefix of fair admission's other keys (Keys.fair), ARGV[2] the prefix of BullMQ's
-- job hashes, ARGV[3] now (ms).
-- Replies {bulk slots, waiting, active, then per tenant with jobs queued or running: tenant,
-- queued, pending interactive, pending bulk, running, weight ('' when none was pushed)}.
local P, jobs, now = ARGV[1], ARGV[2], tonumber(ARGV[3])

local active = {}
for _, job in ipairs(redis.call('LRANGE', KEYS[3], 0, -1)) do active[job] = true end

local running, queued, order = {}, {}, {}
local function seen(tenant)
  if not running[tenant] then
    running[tenant] = 0
    order[#order + 1] = tenant
  end
end

local entries = redis.call('HGETALL', KEYS[1])
for i = 1, #entries, 2 do
  local job, tenant = entries[i], entries[i + 1]
  if active[job] then
    seen(tenant)
    running[tenant] = running[tenant] + 1
  elseif redis.call('EXISTS', jobs .. job) == 0
      or redis.call('HEXISTS', jobs .. job, 'finishedOn') == 1 then
    redis.call('HDEL', KEYS[1], job)
  end
end

local counts = redis.call('HGETALL', KEYS[2])
for i = 1, #counts, 2 do
  seen(counts[i])
  queued[counts[i]] = tonumber(counts[i + 1])
end

local slots = 0
local registered = redis.call('HGETALL', P .. 'slots')
for i = 1, #registered, 2 do
  local n, expires = string.match(registered[i + 1], '^(%d+) (%d+)$')
  if n and tonumber(expires) > now then slots = slots + tonumber(n) end
end

local waiting = redis.call('LLEN', KEYS[4]) + redis.call('ZCARD', KEYS[5])
local out = {slots, waiting, redis.call('LLEN', KEYS[3])}
for _, tenant in ipairs(order) do
  out[#out + 1] = tenant
  out[#out + 1] = queued[tenant] or 0
  out[#out + 1] = redis.call('LLEN', P .. 'list:interactive:' .. tenant)
  out[#out + 1] = redis.call('LLEN', P .. 'list:bulk:' .. tenant)
  out[#out + 1] = running[tenant]
  out[#out + 1] = redis.call('HGET', P .. 'weights', tenant) or ''
end
return out
