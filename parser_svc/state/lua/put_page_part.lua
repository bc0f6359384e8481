-- Points pages of a running job at their stored parts (content-addressed: a part's ref,
-- '<sha256>/<pack>/<offset>/<length>' or a bare '<sha256>', begins with the sha256 of the
-- serialized part, whose blob the caller stored first): ARGV[3] the pages and ARGV[4] their
-- refs, comma-separated, in the same order (a batch of drafts in one step). A part is a 'draft'
-- (the page as read, before the passes that need every page: headings, furniture, tables
-- continued across pages) or 'final' (the page as the package has it). One atomic step:
--   1. only the job's current owner writes (fence ARGV[1], as update_job.lua), and only while
--      the job runs: an ended job's pages are what they were when it ended;
--   2. the same bytes again (a retried write, or a retried attempt that read the page the
--      same; the same sha256, wherever stored): SAME, nothing changes (the first ref stays);
--      a draft for a page that has its final: KEPT, the final stays (a final never goes back
--      to a draft);
--   3. a final replacing a draft, or a draft another draft: the pointer moves (OK);
--   4. a final that differs from the page's final (a retried attempt that read it otherwise):
--      the pointer moves, REPLACED, and field 'r:<page>' keeps the first final, so a reader
--      that had it is told which page changed;
--   5. each move takes the next number of the hash's 'seq' counter: the cursor of a stream of
--      the job's pages (parser_svc/state/page_parts.py reads them back in that order);
--   6. the hash lives as long as the record plus ARGV[6] ms (the record's TTL at the end is
--      its retention, at most what it had while it ran: the pages outlive it);
--   7. each move is appended to the list KEYS[3] ('<page>:<seq>:<attempt>:<kind>:<ref>:'
--      and, when REPLACED, the first final's sha256): entry i is the move numbered i + 1, so a
--      stream reads only the moves after its cursor, not the whole hash each time;
--   8. the last moved pointer's number is published on the channel ARGV[7], once per call (the
--      job's page channel: open StreamResults wake on it instead of polling, and read every
--      move after their cursor).
-- KEYS[1] job record, KEYS[2] the job's page pointers (hash), KEYS[3] the moves (list)
-- ARGV[1] fencing token  ARGV[2] attempt  ARGV[3] page numbers  ARGV[4] refs
-- ARGV[5] 'draft' | 'final'  ARGV[6] extra ms  ARGV[7] the job's page channel
-- Loaded after lib/publish.lua (PUBLISH_COMMAND: PUBLISH, or SPUBLISH on Redis Cluster).
-- Field '<page>' = '<seq>:<attempt>:<kind>:<ref>'.
-- Returns {status, seq} per page, flat: OK | SAME | KEPT | REPLACED; or one {status, 0} for
-- the whole call: NOT_FOUND | TERMINAL | FENCED.
local cur = redis.call('HMGET', KEYS[1], 'state', 'fence')
if not cur[1] then return {'NOT_FOUND', 0} end
if cur[1] == 'SUCCEEDED' or cur[1] == 'FAILED' or cur[1] == 'CANCELLED' then
  return {'TERMINAL', 0}
end
if cur[1] ~= 'RUNNING' or cur[2] ~= ARGV[1] then return {'FENCED', 0} end
local kind = ARGV[5]

local function put(page, ref)
  local sha256 = string.match(ref, '^%x+')
  local before = redis.call('HGET', KEYS[2], page)
  local status = 'OK'
  local first_final = ''
  if before then
    local seq, _attempt, was, sha = string.match(before, '^(%d+):(%d+):(%a+):(%x+)')
    if sha == sha256 and was == kind then return 'SAME', tonumber(seq), false end
    if was == 'final' and kind == 'draft' then return 'KEPT', tonumber(seq), false end
    if was == 'final' then
      status = 'REPLACED'
      if redis.call('HEXISTS', KEYS[2], 'r:' .. page) == 0 then
        redis.call('HSET', KEYS[2], 'r:' .. page, before)
      end
      first_final = string.match(redis.call('HGET', KEYS[2], 'r:' .. page), '^%d+:%d+:%a+:(%x+)')
    end
  end
  local seq = redis.call('HINCRBY', KEYS[2], 'seq', 1)
  local pointer = seq .. ':' .. ARGV[2] .. ':' .. kind .. ':' .. ref
  redis.call('HSET', KEYS[2], page, pointer)
  redis.call('RPUSH', KEYS[3], page .. ':' .. pointer .. ':' .. first_final)
  return status, seq, true
end

local refs = {}
for ref in string.gmatch(ARGV[4], '[^,]+') do refs[#refs + 1] = ref end
local out, moved, n = {}, nil, 0
for page in string.gmatch(ARGV[3], '[^,]+') do
  n = n + 1
  local status, seq, did = put(page, refs[n])
  out[#out + 1] = status
  out[#out + 1] = seq
  if did then moved = seq end
end
if moved then
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then
    redis.call('PEXPIRE', KEYS[2], ttl + tonumber(ARGV[6]))
    redis.call('PEXPIRE', KEYS[3], ttl + tonumber(ARGV[6]))
  end
  redis.call(PUBLISH_COMMAND, ARGV[7], tostring(moved))
end
return out
