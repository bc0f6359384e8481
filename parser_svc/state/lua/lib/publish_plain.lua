-- lib/publish_plain.lua: how a script publishes on one Redis (alone, with replicas, behind
-- Sentinel). Put first, before lib/publish.lua, by parser_svc/state/lua_scripts.py.
local PUBLISH_COMMAND = 'PUBLISH'
