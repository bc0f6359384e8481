-- A reader asks for a job's pages while it runs (StreamResult, GetResult with pages): marks the
-- record (field 'drafts' = '1'), which its worker reads with its next progress write or the
-- claim (update_job.lua), so the parse writes drafts from then on and first the pages it read
-- before (parser_svc/child/draft_pages.py). Nothing else of the record changes (no version, no
-- publish: the mark is the worker's to read, not the watchers').
-- KEYS[1] job record
-- Returns 'SET' (marked now), 'MARKED' (marked before), 'ENDED' (SUCCEEDED, FAILED or
-- CANCELLED: nothing to draft) or 'NOT_FOUND'.
local state = redis.call('HGET', KEYS[1], 'state')
if not state then return {'NOT_FOUND'} end
if state == 'SUCCEEDED' or state == 'FAILED' or state == 'CANCELLED' then return {'ENDED'} end
if redis.call('HSETNX', KEYS[1], 'drafts', '1') == 1 then return {'SET'} end
return {'MARKED'}
