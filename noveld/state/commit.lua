-- noveld batch commit (DESIGN §6): one atomic step per batch.
--
-- KEYS[1] meta      hash: fingerprint, scale, next_uid, docs_seen
-- KEYS[2] counters  hash
-- KEYS[3] offsets   hash: "topic:partition" -> next offset
-- KEYS[4] epochs    hash: "topic:partition" -> fencing epoch
-- KEYS[5] outbox    stream of events
-- KEYS[6] cm        hash: cluster uid -> raw document mass
-- KEYS[7] cn        hash: cluster uid -> raw token mass
-- KEYS[8] vocab     list: word id -> word
-- KEYS[9] novelty   string: novelty-tracker JSON
-- ARGV[1] the packed payload (JSON), ARGV[2] key prefix for per-cluster word hashes
--
-- Returns {status, detail}: "committed", "replay", "fenced" or "conflict".
-- Statistics are stored raw (true value = raw * scale); the payload's delta is in true units.

local p = cjson.decode(ARGV[1])
local cw_prefix = ARGV[2]

-- 1. fencing: every partition's epoch must be the one this writer was granted
for key, epoch in pairs(p.epochs) do
  local current = tonumber(redis.call('HGET', KEYS[4], key) or '0')
  if current ~= epoch then
    return {'fenced', key .. ' epoch ' .. current .. ' ~= ' .. epoch}
  end
end

-- 2. offsets: the store must hold exactly the batch's first offsets, else it was applied
for key, first in pairs(p.first) do
  local stored = tonumber(redis.call('HGET', KEYS[3], key) or '0')
  if stored > first then
    return {'replay', key .. ' stored ' .. stored .. ' > ' .. first}
  end
  if stored < first then
    return {'conflict', key .. ' gap: stored ' .. stored .. ' < ' .. first}
  end
end

-- 3. vocabulary: new words are appended at the expected ids (single writer per vocabulary id)
if redis.call('LLEN', KEYS[8]) ~= p.vocab_base then
  return {'conflict', 'vocabulary has ' .. redis.call('LLEN', KEYS[8]) .. ' words, expected '
    .. p.vocab_base}
end
for _, w in ipairs(p.new_words) do
  redis.call('RPUSH', KEYS[8], w)
end

-- 4. decay, then the batch delta in raw units of the new scale
local scale = tonumber(redis.call('HGET', KEYS[1], 'scale') or '1') * p.decay
redis.call('HSET', KEYS[1], 'scale', string.format('%.17g', scale))
for i, uid in ipairs(p.clusters) do
  redis.call('HINCRBYFLOAT', KEYS[6], uid, p.dm[i] / scale)
  redis.call('HINCRBYFLOAT', KEYS[7], uid, p.dn[i] / scale)
end
local wc = p.wc
if scale == 1 and p.integral then
  -- no forgetting so far: counts are integers, and HINCRBY is cheaper than HINCRBYFLOAT
  for i = 1, #wc, 3 do
    redis.call('HINCRBY', cw_prefix .. p.clusters[wc[i] + 1], wc[i + 1], wc[i + 2])
  end
else
  for i = 1, #wc, 3 do
    local uid = p.clusters[wc[i] + 1]
    redis.call('HINCRBYFLOAT', cw_prefix .. uid, wc[i + 1], wc[i + 2] / scale)
  end
end
for _, uid in ipairs(p.retired) do
  redis.call('HDEL', KEYS[6], uid)
  redis.call('HDEL', KEYS[7], uid)
  redis.call('DEL', cw_prefix .. uid)
end

-- 5. offsets, counters, model counters, novelty state
for key, nxt in pairs(p.next) do
  redis.call('HSET', KEYS[3], key, nxt)
end
for name, v in pairs(p.counters) do
  redis.call('HINCRBY', KEYS[2], name, v)
end
redis.call('HSET', KEYS[1], 'next_uid', p.next_uid, 'docs_seen', p.docs_seen)
redis.call('SET', KEYS[9], p.novelty)

-- 6. outbox
for _, ev in ipairs(p.events) do
  redis.call('XADD', KEYS[5], '*', 'id', ev[1], 'event', ev[2])
end
return {'committed', ''}
