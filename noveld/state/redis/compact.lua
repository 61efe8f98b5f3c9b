-- noveld vocabulary compaction: renumber a namespace's word ids over the words still in use.
--
-- KEYS[1] meta  KEYS[2] ckpt  KEYS[3] log  KEYS[4] vocab  KEYS[5] vocab_idx
-- KEYS[6] vocab staged (the new word list)  KEYS[7] vocab_idx staged (both the writer's own,
--         with an expiry)  KEYS[8] vocab_gone
-- KEYS[9] novelty
-- ARGV[1] seq: the log position the writer's statistics reflect
-- ARGV[2] the vocabulary generation the writer loaded
-- ARGV[3] the vocabulary length the writer knows
-- ARGV[4] the new vocabulary's length (what the staged keys must hold)
-- ARGV[5] the renumbered statistics as a checkpoint at seq
-- ARGV[6] hashes of the words gone (packed little-endian uint64, sorted)
-- ARGV[7] novelty JSON with the new word ids
--
-- Every word id changes meaning, so the step is all or nothing and only from the namespace's
-- present: no commit after seq, no word added, no compaction since the writer loaded. Then the
-- checkpoint replaces the log (its entries use the old ids) and the generation moves on, so
-- writers holding old ids are refused ('stale') at their next commit or interning and reload.
-- Returns 1 if compacted, 0 if the namespace moved on (nothing written but the staged keys,
-- which are dropped).

local function drop_staged()
  redis.call('UNLINK', KEYS[6], KEYS[7])
end

if redis.call('HEXISTS', KEYS[1], 'fingerprint') == 0 then
  drop_staged()
  return 0
end
local seq = tonumber(redis.call('HGET', KEYS[1], 'seq') or '0')
local gen = tonumber(redis.call('HGET', KEYS[1], 'vocab_gen') or '0')
if seq ~= tonumber(ARGV[1]) or gen ~= tonumber(ARGV[2])
    or redis.call('LLEN', KEYS[4]) ~= tonumber(ARGV[3])
    or redis.call('LLEN', KEYS[6]) ~= tonumber(ARGV[4])
    or redis.call('HLEN', KEYS[7]) ~= tonumber(ARGV[4]) then
  drop_staged()
  return 0
end
redis.call('UNLINK', KEYS[4], KEYS[5])
if tonumber(ARGV[4]) > 0 then
  redis.call('RENAME', KEYS[6], KEYS[4])
  redis.call('RENAME', KEYS[7], KEYS[5])
  redis.call('PERSIST', KEYS[4])  -- RENAME keeps the staged keys' expiry
  redis.call('PERSIST', KEYS[5])
end
redis.call('SET', KEYS[8], ARGV[6])
redis.call('SET', KEYS[2], ARGV[5])
redis.call('SET', KEYS[9], ARGV[7])
-- schema 3: a noveld that reads only schema 2 would ignore vocab_gone and the generation check
-- vocab_checked: none of the new list's words is a gone one (loading hashes only later words)
redis.call('HSET', KEYS[1], 'ckpt_seq', seq, 'vocab_gen', gen + 1, 'schema', 3,
  'vocab_checked', ARGV[4])
redis.call('XTRIM', KEYS[3], 'MINID', (seq + 1) .. '-0')
return 1
