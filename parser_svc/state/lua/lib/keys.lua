-- lib/keys.lua, put first in the scripts whose callers may leave a key out ('' in KEYS): K is
-- KEYS with every left-out key as ''. On Redis Cluster a left-out key cannot be '' (the
-- server refuses keys of two slots, and '' is slot 0): parser_svc/state/redis_cluster.py passes
-- 'docparse:\0none:{<tag of the first key>}' instead: in the script's slot, under the
-- docparse: prefix an ACL user may be limited to, and never a key of ours (no environment
-- name holds a NUL byte).
local K = {}
for i, key in ipairs(KEYS) do
  if string.sub(key, 1, 15) == 'docparse:\0none:' then K[i] = '' else K[i] = key end
end
