-- lib/publish.lua, put before the scripts that publish a job record (Redis scripts cannot
-- import; parser_svc/state/lua_scripts.py: LuaScript(..., uses=('publish',))).
-- Publishes the job record at `key` on `channel` as watchers see it: its fields as one JSON
-- object, without the fencing token, the dedupe pointer and `published` (the version published
-- last, kept so that a re-run of a write that publishes without a change, update_job.lua's
-- 'announce', does not publish one version twice). Returns the record as HGETALL gives it (a
-- flat field/value list). PUBLISH_COMMAND (PUBLISH, or SPUBLISH on Redis Cluster) is defined
-- before it by lib/publish_plain.lua or lib/publish_sharded.lua.
local function publish_record(key, channel)
  redis.call('HSET', key, 'published', redis.call('HGET', key, 'version'))
  local flat = redis.call('HGETALL', key)
  local rec = {}
  for i = 1, #flat, 2 do rec[flat[i]] = flat[i + 1] end
  rec['fence'] = nil
  rec['dedupe_key'] = nil
  rec['published'] = nil
  redis.call(PUBLISH_COMMAND, channel, cjson.encode(rec))
  return flat
end
