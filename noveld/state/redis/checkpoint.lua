-- noveld checkpoint: the statistics as of log entry <seq>, so loading replays only the tail.
--
-- KEYS[1] meta  KEYS[2] ckpt (string)  KEYS[3] log (stream)
-- ARGV[1] seq the checkpoint reflects, ARGV[2] the encoded checkpoint, ARGV[3] the vocabulary
-- generation of its word ids
--
-- Keeps the log entries after the previous checkpoint, so a replica one interval behind can
-- still catch up from the log; older entries are covered by this checkpoint and trimmed.
-- Returns 1 if written, 0 if a checkpoint at or after seq already exists or the vocabulary was
-- compacted since the writer loaded (its word ids are stale).

local seq = tonumber(ARGV[1])
local prev = tonumber(redis.call('HGET', KEYS[1], 'ckpt_seq') or '0')
if seq <= prev or tonumber(redis.call('HGET', KEYS[1], 'vocab_gen') or '0') ~= tonumber(ARGV[3]) then
  return 0
end
redis.call('SET', KEYS[2], ARGV[2])
redis.call('HSET', KEYS[1], 'ckpt_seq', seq)
redis.call('XTRIM', KEYS[3], 'MINID', (prev + 1) .. '-0')
return 1
