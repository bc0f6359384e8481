-- lib/job_index.lua, put before the scripts that list new jobs in a tenant's job index
-- (Redis scripts cannot import; parser_svc/state/lua_scripts.py: LuaScript(..., uses=('job_index',))).
-- After new entries went into `index` (a sorted set: job id -> create time in ms): the index
-- lives as long as any record it lists can (`listed` ms, lifetimes.py: the longest a record can
-- live) and sheds entries whose records are certainly gone; then the `oldest` oldest entries
-- go when their record is gone, so the index follows the live jobs even when nobody lists
-- (records expire about in the order they were made); `oldest` 0 checks no record (on Redis
-- Cluster the records are in other slots). Job keys: lib/tags.lua's job_key (`job_prefix`:
-- '...:job:'), so lib/tags.lua goes before this.
local function tidy_job_index(index, now, listed, job_prefix, oldest)
  redis.call('ZREMRANGEBYSCORE', index, '-inf', '(' .. tostring(now - listed))
  if redis.call('PTTL', index) < listed then redis.call('PEXPIRE', index, listed) end
  if oldest < 1 then return end
  for _, old in ipairs(redis.call('ZRANGE', index, 0, oldest - 1)) do
    if redis.call('EXISTS', job_key(job_prefix, old)) == 0 then redis.call('ZREM', index, old) end
  end
end
