-- lib/keys.lua, put first in the scripts whose callers may leave a key out ('' in KEYS): K is
-- KEYS with every left-out key as ''. On Redis Cluster a left-out key cannot be '' (the
-- server refuses keys of two slots, and '' is slot 0): parser_svc/redis_cluster.py passes
-- '{<tag of the first key>}:none' instead, which is in the script's slot and is never a key
-- of ours (they all start with 'docparse:').
local K = {}
for i, key in ipairs(KEYS) do
  if string.sub(key, 1, 1) == '{' and string.sub(key, -5) == ':none' then K[i] = '' else K[i] = key end
end
