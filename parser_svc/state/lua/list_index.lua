-- One slice of a tenant's job index (ListJobs), newest first: the entries after a cursor in
-- the order (create time descending, job id descending), read in one atomic step so an entry
-- another reader removes meanwhile cannot shift the slice. Reads one key only.
-- KEYS[1] the tenant's job index (sorted set: job id -> create time in ms)
-- ARGV[1] the newest create time to read (ms), or '+inf'
-- ARGV[2] the cursor's job id, or '' for none: with one, ARGV[1] is the cursor's create time
--         and entries at that time are taken only after it (ties are ordered by job id, byte
--         by byte, as Redis orders them)
-- ARGV[3] the oldest create time to read (ms), or '-inf'
-- ARGV[4] at most this many entries
-- ARGV[5] only job ids that start with this ('' = all), e.g. '<batch_id>-'
-- ARGV[6] examine at most this many entries (a bound on the work of one call)
-- Returns {ended, examined, last_id, last_ms, id1, ms1, id2, ms2, ...}: ended is 1 when no
-- entry is left past the last one examined; examined counts the entries looked at;
-- last_id/last_ms name the last of them ('' when none), the cursor to go on from; then the
-- matching entries, in order.
local want, budget = tonumber(ARGV[4]), tonumber(ARGV[6])
local cursor_id, prefix = ARGV[2], ARGV[5]
local cursor_ms = tonumber(ARGV[1])

-- Byte-wise a < b (Lua's `<` on strings follows the server's locale, Redis's order does not).
local function before(a, b)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end

local found, examined = {}, 0
local last_id, last_ms = '', ''
local offset, chunk = 0, math.min(math.max(want, 16), 512)
while #found < want * 2 and examined < budget do
  local got = redis.call('ZREVRANGEBYSCORE', KEYS[1], ARGV[1], ARGV[3], 'WITHSCORES',
    'LIMIT', offset, chunk)
  if #got == 0 then break end
  offset = offset + #got / 2
  for i = 1, #got, 2 do
    local id, ms = got[i], got[i + 1]
    -- Ties at the cursor's time that come before it (or are it) were on earlier pages.
    local past = cursor_id == '' or tonumber(ms) < cursor_ms or before(id, cursor_id)
    if past then
      examined = examined + 1
      last_id, last_ms = id, ms
      if prefix == '' or string.sub(id, 1, #prefix) == prefix then
        found[#found + 1] = id
        found[#found + 1] = ms
      end
      if #found >= want * 2 or examined >= budget then break end
    end
  end
  if #got < chunk * 2 then break end
end
local ended = 0
if #found < want * 2 and examined < budget then ended = 1 end
local out = {ended, examined, last_id, last_ms}
for i = 1, #found do out[#out + 1] = found[i] end
return out
