-- lib/publish_sharded.lua: how a script publishes on Redis Cluster: on a sharded channel, so
-- a record stays on its job's shard (parser_svc/state/sharded_pubsub.py). Put first, before
-- lib/publish.lua, by parser_svc/state/lua_scripts.py.
local PUBLISH_COMMAND = 'SPUBLISH'
