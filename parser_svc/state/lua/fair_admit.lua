-- Fair admission into the BullMQ queue (parser_svc/state/admission.py): takes the jobs a
-- caller claimed out of the indexes, pushes a new job onto its tenant's pending list, then
-- moves job ids from the pending lists to the caller (who adds them to BullMQ) while fewer
-- than the window wait in BullMQ. Every key is in the queue's slot (`{bull}` on Redis Cluster).
--
-- Lanes: 'interactive' before 'bulk', but one bulk admission after every K interactive ones
-- while bulk waits (until that one is in, no interactive one is). An interactive job is
-- admitted while fewer than the window wait in BullMQ; a bulk job only while the jobs waiting
-- and running there are fewer than the bulk slots: the parse slots the worker replicas
-- registered (each keeps one more, or more, than it registers: the interactive lane's reserve,
-- so a small job never waits for a long one to end). Without any registered, the window. Tenants within a lane: start-time fair queuing. Each tenant with pending
-- jobs sits in the lane's sorted set scored by its virtual start time; the lowest is admitted,
-- the lane's virtual time becomes its score, and its score grows by 1 / its weight. A tenant
-- that comes back from idle starts at max(its old score, the lane's virtual time): no credit
-- for the time it was away.
--
-- KEYS[1] queued (hash: job id -> '<lane> <tenant>', from its push until a worker claims it),
-- KEYS[2] BullMQ's wait list, KEYS[3] BullMQ's prioritized set, KEYS[4] BullMQ's active list.
-- ARGV[1] the prefix of the other keys (Keys.fair), ARGV[2] the window (jobs waiting in
-- BullMQ at most), ARGV[3] K, ARGV[4] now (ms), ARGV[5] the job to push ('' none), ARGV[6]
-- its tenant, ARGV[7] its lane, ARGV[8] its tenant's weight ('' keeps the last), ARGV[9] the prefix of BullMQ's
-- job hashes, ARGV[10] ids claimed (space-separated, '' none), ARGV[11] a worker replica
-- registering its bulk slots ('' none), ARGV[12] how many (0: it leaves), ARGV[13] until (ms),
-- ARGV[14] the pushed job's tenant's cap on jobs in flight ('' keeps the last, '0' none).
--
-- A tenant with a cap (its key's max_running_jobs) is passed over, keeping its place, while its
-- jobs in flight reach it: admitted and not yet claimed (the admitting set), or claimed and not
-- finished (the running index: running, or waiting for a retry). Admission runs again at each
-- claim and each job's end (and on the sweeper's tick), so its next job goes in then.
-- Replies {pushed (1, or 0 when the job was queued already), id, lane, id, lane...}: the jobs
-- admitted now, each also in the admitting set (the sweeper adds those a caller did not).
-- A claimed job moves from the queued index to the running one (hash: job id -> tenant), which
-- keeps it across its retries; fair_shares.lua counts it while BullMQ has it active and drops
-- it once BullMQ has finished or removed it.
local P, queued = ARGV[1], KEYS[1]
local counts, state, weights, admitting = P .. 'counts', P .. 'state', P .. 'weights', P .. 'admitting'
local running_jobs, caps = P .. 'running', P .. 'caps'
-- backlog: one element per job on a pending list (its length is the backlog an autoscaler reads)
local slots, backlog = P .. 'slots', P .. 'backlog'
local function list(lane, tenant) return P .. 'list:' .. lane .. ':' .. tenant end
local function tenants(lane) return P .. 'tenants:' .. lane end

for job in string.gmatch(ARGV[10], '%S+') do
  redis.call('ZREM', admitting, job)
  local entry = redis.call('HGET', queued, job)
  if entry then
    redis.call('HDEL', queued, job)
    local tenant = string.match(entry, '^%S+ (.*)$')
    if redis.call('HINCRBY', counts, tenant, -1) <= 0 then redis.call('HDEL', counts, tenant) end
    redis.call('HSET', running_jobs, job, tenant)
  end
end

local pushed, job = 0, ARGV[5]
if job ~= '' and redis.call('HEXISTS', queued, job) == 0
    and redis.call('EXISTS', ARGV[9] .. job) == 0 then
  local tenant, lane = ARGV[6], ARGV[7]
  redis.call('HSET', queued, job, lane .. ' ' .. tenant)
  redis.call('HINCRBY', counts, tenant, 1)
  if ARGV[8] ~= '' then redis.call('HSET', weights, tenant, ARGV[8]) end
  if ARGV[14] ~= '' then
    if tonumber(ARGV[14]) > 0 then
      redis.call('HSET', caps, tenant, ARGV[14])
    else
      redis.call('HDEL', caps, tenant)
    end
  end
  redis.call('RPUSH', backlog, 1)
  if redis.call('RPUSH', list(lane, tenant), job) == 1 then
    local vt = tonumber(redis.call('HGET', state, 'vt:' .. lane) or '0')
    local last = tonumber(redis.call('HGET', state, 'last:' .. lane .. ':' .. tenant) or '0')
    redis.call('HDEL', state, 'last:' .. lane .. ':' .. tenant)
    redis.call('ZADD', tenants(lane), math.max(vt, last), tenant)
  end
  pushed = 1
end

if ARGV[11] ~= '' then
  if tonumber(ARGV[12]) > 0 then
    redis.call('HSET', slots, ARGV[11], ARGV[12] .. ' ' .. ARGV[13])
  else
    redis.call('HDEL', slots, ARGV[11])
  end
end
local bulk_slots = 0
local registered = redis.call('HGETALL', slots)
for i = 1, #registered, 2 do
  local n, expires = string.match(registered[i + 1], '^(%d+) (%d+)$')
  if n and tonumber(expires) > tonumber(ARGV[4]) then
    bulk_slots = bulk_slots + tonumber(n)
  else
    redis.call('HDEL', slots, registered[i])
  end
end
local window = tonumber(ARGV[2])
if bulk_slots == 0 then bulk_slots = window end

-- Jobs in flight per tenant (counted once per call, when a capped tenant is first met).
local in_flight = nil
local function flight()
  if in_flight then return in_flight end
  in_flight = {}
  local entries = redis.call('HGETALL', running_jobs)
  for i = 1, #entries, 2 do
    local hash = ARGV[9] .. entries[i]
    if redis.call('EXISTS', hash) == 1 and redis.call('HEXISTS', hash, 'finishedOn') == 0 then
      in_flight[entries[i + 1]] = (in_flight[entries[i + 1]] or 0) + 1
    end
  end
  for _, id in ipairs(redis.call('ZRANGE', admitting, 0, -1)) do
    local entry = redis.call('HGET', queued, id)
    if entry then
      local tenant = string.match(entry, '^%S+ (.*)$')
      in_flight[tenant] = (in_flight[tenant] or 0) + 1
    end
  end
  return in_flight
end

local function under_cap(tenant)
  local cap = tonumber(redis.call('HGET', caps, tenant) or '0')
  return cap <= 0 or (flight()[tenant] or 0) < cap
end

-- The lane's next tenant (lowest virtual start time) not at its cap, and its score; or nil.
local function next_tenant(lane)
  local top = redis.call('ZRANGE', tenants(lane), 0, 0, 'WITHSCORES')
  if #top == 0 then return nil end
  if under_cap(top[1]) then return top[1], tonumber(top[2]) end
  local rest = redis.call('ZRANGE', tenants(lane), 1, -1, 'WITHSCORES')
  for i = 1, #rest, 2 do
    if under_cap(rest[i]) then return rest[i], tonumber(rest[i + 1]) end
  end
  return nil
end

-- The lane of the next admission with its tenant and score, or nil: none may be admitted now.
local function pick(k, waiting, running)
  local bulk_tenant, bulk_score = next_tenant('bulk')
  local bulk_waits = bulk_tenant ~= nil
  local tenant, score = nil, nil
  if waiting < window then tenant, score = next_tenant('interactive') end
  local streak = tonumber(redis.call('HGET', state, 'streak') or '0')
  if bulk_waits and streak >= k then tenant = nil end
  if tenant then
    redis.call('HSET', state, 'streak', bulk_waits and streak + 1 or 0)
    return 'interactive', tenant, score
  end
  if bulk_waits and waiting + running < bulk_slots then
    redis.call('HSET', state, 'streak', 0)
    return 'bulk', bulk_tenant, bulk_score
  end
  return nil
end

local out = {pushed}
local waiting = redis.call('LLEN', KEYS[2]) + redis.call('ZCARD', KEYS[3])
local running = redis.call('LLEN', KEYS[4])
local k = tonumber(ARGV[3])
while true do
  local lane, tenant, score = pick(k, waiting, running)
  if not lane then break end
  local admitted = redis.call('LPOP', list(lane, tenant))
  redis.call('HSET', state, 'vt:' .. lane, score)
  local after = score + 1 / tonumber(redis.call('HGET', weights, tenant) or '1')
  if redis.call('LLEN', list(lane, tenant)) > 0 then
    redis.call('ZADD', tenants(lane), after, tenant)
  else
    redis.call('ZREM', tenants(lane), tenant)
    redis.call('HSET', state, 'last:' .. lane .. ':' .. tenant, after)
  end
  if admitted then
    redis.call('LPOP', backlog)
    redis.call('ZADD', admitting, ARGV[4], admitted)
    out[#out + 1] = admitted
    out[#out + 1] = lane
    waiting = waiting + 1
    if in_flight then in_flight[tenant] = (in_flight[tenant] or 0) + 1 end
  end
end
return out
