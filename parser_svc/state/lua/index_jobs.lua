-- Lists new jobs in a tenant's job index (ListJobs) on Redis Cluster, where the index is in
-- another slot than the jobs, so the create scripts cannot (store.py: after a create; the
-- sweeper again for a job still pending, so a create whose caller died before this is listed
-- too). Safe to run again: ZADD of the same (id, create time) changes nothing.
-- KEYS[1] the tenant's job index (sorted set: job id -> create time in ms)
-- ARGV[1] now (ms), ARGV[2] how long the index must keep a new entry (ms), ARGV[3..] id, ms pairs
-- Loaded after lib/tags.lua and lib/job_index.lua (tidy_job_index): parser_svc/state/lua_scripts.py.
for i = 3, #ARGV, 2 do redis.call('ZADD', KEYS[1], tonumber(ARGV[i + 1]), ARGV[i]) end
tidy_job_index(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), '', 0)
return {#ARGV / 2 - 1}
