-- lib/tags.lua, put before the scripts that name a job's or a batch's keys from its id (Redis
-- scripts cannot import; parser_svc/state/lua_scripts.py). The same rule as parser_svc/state/keys.py: an
-- id's hash tag is '{<id>}', or '{<cell>}_<rest>' for an id placed in a Redis Cluster cell
-- ('c<i>x<n>_<hex>'); a batch's file '<batch>-<i>' is tagged by its batch.
local function tag_id(id)
  local cell = string.match(id, '^(c%d+x%d+)_')
  if cell then return '{' .. cell .. '}' .. string.sub(id, #cell + 1) end
  return '{' .. id .. '}'
end

-- The record key of a job or a batch's file: '<prefix><tagged id>' ('...:job:' prefix).
local function job_key(prefix, id)
  local dash = string.find(id, '-', 1, true)
  if dash then return prefix .. tag_id(string.sub(id, 1, dash - 1)) .. string.sub(id, dash) end
  return prefix .. tag_id(id)
end
