-- Creates a job record in state QUEUED with version 1 and publishes it.
-- KEYS[1] job record (hash), KEYS[2] tombstone
-- ARGV[1] event channel, ARGV[2] now (ms), ARGV[3] record TTL (ms), ARGV[4] tombstone extra (ms)
-- ARGV[5..] field, value pairs describing the upload
-- Returns {status, version}: {'OK', 1} or {'EXISTS', version}.
local existing = redis.call('HGET', KEYS[1], 'version')
if existing then return {'EXISTS', tonumber(existing)} end
local now, ttl = tonumber(ARGV[2]), tonumber(ARGV[3])
for i = 5, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('HSET', KEYS[1], 'state', 'QUEUED', 'version', '1', 'done', '0', 'total', '0',
  'stage', 'queued', 'attempt', '0', 'fence', '', 'create_ms', ARGV[2], 'update_ms', ARGV[2],
  'expire_ms', tostring(now + ttl))
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('SET', KEYS[2], tostring(now + ttl), 'PX', ttl + tonumber(ARGV[4]))
local flat = redis.call('HGETALL', KEYS[1])
local rec = {}
for i = 1, #flat, 2 do rec[flat[i]] = flat[i + 1] end
rec['fence'] = nil
redis.call('PUBLISH', ARGV[1], cjson.encode(rec))
return {'OK', 1}
