-- A lease one process of the deployment holds at a time (the sweeper's, the webhook
-- dispatcher's): renewed if the caller holds it, taken if nobody does.
-- KEYS[1] the lease; ARGV[1] the caller (host/pid/role), ARGV[2] its time to live (ms).
-- Replies {1} when the caller holds the lease now, {0} when another process does (a table,
-- as every script run by lua_scripts.LuaScript).
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then return {redis.call('PEXPIRE', KEYS[1], ARGV[2])} end
if holder then return {0} end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1}
