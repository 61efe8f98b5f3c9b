-- noveld vocabulary interning: give words global ids, shared by every writer of a namespace.
--
-- KEYS[1] vocab      list: word id -> word
-- KEYS[2] vocab_idx  hash: word -> word id
-- KEYS[3] meta       hash: vocab_gen (the vocabulary's compaction generation)
-- ARGV[1] how many words the caller already knows (its vocabulary is vocab[0:known])
-- ARGV[2] the vocabulary generation the caller loaded
-- ARGV[3..] words the caller has not seen, in first-seen order
--
-- Returns vocab[known:] after adding the unknown words: the caller's new words in order when it
-- is the only writer, else also the words other writers added meanwhile. Refuses with an error
-- whose text is a code and the facts its message quotes, space separated (noveld words it for
-- the operator: noveld/state/redis/reasons.py): NOVELD_STALE <generation> <loaded generation>,
-- NOVELD_VOCAB <words held> <words the caller knows>.

-- a vocabulary shorter than what the caller knows was deleted, evicted or cut: new ids would
-- repeat old ones and mix words up
-- a compaction renumbered the words since the caller loaded: its ids mean other words now
local gen = tonumber(redis.call('HGET', KEYS[3], 'vocab_gen') or '0')
if gen ~= tonumber(ARGV[2]) then
  return redis.error_reply('NOVELD_STALE ' .. gen .. ' ' .. ARGV[2])
end

local have = redis.call('LLEN', KEYS[1])
if have < tonumber(ARGV[1]) then
  return redis.error_reply('NOVELD_VOCAB ' .. have .. ' ' .. ARGV[1])
end

for i = 3, #ARGV do
  local w = ARGV[i]
  if redis.call('HEXISTS', KEYS[2], w) == 0 then
    local n = redis.call('RPUSH', KEYS[1], w)
    redis.call('HSET', KEYS[2], w, n - 1)
  end
end
return redis.call('LRANGE', KEYS[1], tonumber(ARGV[1]), -1)
