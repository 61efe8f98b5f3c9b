-- noveld batch commit: one atomic step per batch, O(partitions + events).
--
-- KEYS[1] meta      hash: fingerprint, schema, seq (last log entry), ckpt_seq
-- KEYS[2] counters  hash
-- KEYS[3] offsets   hash: "topic:partition" -> next offset
-- KEYS[4] epochs    hash: "topic:partition" -> fencing epoch
-- KEYS[5] outbox    stream of events, one entry per commit (per outbox_chunk events)
-- KEYS[6] log       stream of packed batch deltas, entry id "<seq>-1"
-- KEYS[7] uidnext   hash: uid slot -> next cluster counter in that slot
-- KEYS[8] novelty   string: novelty-tracker JSON
-- KEYS[9] lifecycle hash: announced cluster id -> "born" | "retired" | "merged" (its last event);
--         a cluster.merged event's id -> "merged" (each merge pair once)
-- KEYS[10] lease    string: the one writer allowed when lease_ms > 0 (svi), expiring
-- KEYS[11] stories  hash: cluster uid -> born, last, docs, width, head (little-endian doubles),
--          then the ring of counts (little-endian uint32): noveld/state/redis/story_values.py
-- KEYS[12] stories_text hash: cluster uid -> {"t": top terms, "e": exemplars} (JSON)
-- ARGV[1] header JSON: epochs, first, next, counters, slot, uid_start, uid_end, writer, last_seq,
--         vocab_gen (the vocabulary generation the writer's word ids belong to),
--         outbox_chunk (events per outbox entry at most), lifecycle: [[event index (0-based),
--         cluster id, "born"|"retired"|"merged", event id, only if announced (1: an end the
--         writer offers for a cluster it did not announce itself, kept only when another writer
--         did)], ...] for the cluster events, lease_ms (> 0: one writer at a time; the commit
--         is refused while another writer holds the lease, and renews this writer's),
--         stories (absent: summaries are off): the batch's change but for its numbers (absent
--         with put; the script answers "fold" when the change is needed):
--         {uids: the touched clusters, exemplars: {uid: [[doc id, text], ...]}, terms: {uid:
--         [[word, share], ...]}, merges: [[uid, survivor uid], ...], dropped: [uid, ...],
--         limits: {width, buckets, exemplars, terms, max}} (uids as decimal strings;
--         noveld/models/story_table.py StoriesChange.to_json), and, when the writer's
--         summaries were the stored ones as of its last commit, put: the clusters as its table
--         holds them after the batch, texts: {uid: stories_text JSON} of those whose text
--         changed (noveld/state/redis/story_values.py folded)
-- ARGV[2] packed delta ('' when the batch had no valid document)
-- ARGV[3] novelty JSON
-- ARGV[4] the touched clusters' numbers, one packed entry each in the order of stories.uids
--         (as the stories hash holds them; '' when summaries are off)
-- ARGV[5] the entries of stories.put, packed alike, in its order ('' without put)
-- ARGV[6..] the events' JSON, in order
--
-- Returns {status, reason, seq, foreign, suppressed, facts}: status "committed", "replay",
-- "fenced", "stale" (the vocabulary was compacted since the writer loaded), "conflict" or "lost"
-- (the namespace's meta is gone: flushed, evicted); reason = a code saying why a commit was
-- refused ('' when committed; noveld words it for the operator: noveld/state/redis/reasons.py)
-- and facts = the values that message quotes, as strings; seq = the log position after this
-- commit; foreign = entries other writers appended since the writer's last_seq (it must apply those to
-- stay in step); suppressed = ids of cluster events left out because another writer already
-- announced that step of the cluster's life, or because nobody announced the cluster an
-- offered end belongs to (replicas confirm births from their own novelty
-- trackers: each cluster is born, and ends, once in the outbox).

local h = cjson.decode(ARGV[1])

-- a refused commit: its status, the reason's code and the facts the operator message quotes
local function refuse(status, reason, ...)
  local facts = {}
  for i, v in ipairs({...}) do
    facts[i] = tostring(v)
  end
  return {status, reason, 0, 0, {}, facts}
end

-- Every check comes before the first write: a script that fails half-way is not rolled back.

-- 0. the namespace must still exist (its meta carries the fingerprint every writer loaded)
if redis.call('HEXISTS', KEYS[1], 'fingerprint') == 0 then
  return refuse('lost', 'meta_lost')
end

-- 0b. the vocabulary: a compaction since the writer loaded renumbered the word ids its delta uses
local vocab_gen = tonumber(redis.call('HGET', KEYS[1], 'vocab_gen') or '0')
if vocab_gen ~= (h.vocab_gen or 0) then
  return refuse('stale', 'vocab_stale', vocab_gen, h.vocab_gen or 0)
end

-- 1. fencing: every partition's epoch must be the one this writer was granted
for key, epoch in pairs(h.epochs) do
  local current = tonumber(redis.call('HGET', KEYS[4], key) or '0')
  if current ~= epoch then
    return refuse('fenced', 'epoch_fenced', key, current, epoch)
  end
end

-- 1b. the single writer (svi: its global step does not commute): a writer whose
--     lease lapsed (paused, cut off) must not step the model again while another holds it,
--     nor after another stepped it meanwhile (its step would be computed on an old model and
--     the other's entries applied after its own: the writer has to reload)
local lease_ms = tonumber(h.lease_ms or 0)
if lease_ms > 0 then
  local holder = redis.call('GET', KEYS[10])
  if holder and holder ~= h.writer then
    return refuse('fenced', 'lease_held', holder)
  end
  local stepped = tonumber(redis.call('HGET', KEYS[1], 'seq') or '0') - h.last_seq
  if stepped > 0 then
    return refuse('stale', 'lease_lapsed', stepped)
  end
end

-- 2. offsets: the store must hold exactly the batch's first offsets, else it was applied
for key, first in pairs(h.first) do
  local stored = tonumber(redis.call('HGET', KEYS[3], key) or '0')
  if stored > first then
    return refuse('replay', 'offset_replay', key, stored, first)
  end
  if stored < first then
    return refuse('conflict', 'offset_gap', key, stored, first)
  end
end

-- 3. cluster uids: the writer used its slot's counter from where the store has it
--    (slot -1: no document was seated, no uid handed out)
if h.slot >= 0 then
  local uid_next = tonumber(redis.call('HGET', KEYS[7], tostring(h.slot)) or '0')
  if uid_next ~= h.uid_start then
    return refuse('conflict', 'uid_slot_shared', h.slot, uid_next, h.uid_start)
  end
end

-- 4. the delta: one log entry (statistics are additive, so the log is the state); the log
--    must end where meta says (else XADD would fail after the writes above it)
local seq = tonumber(redis.call('HGET', KEYS[1], 'seq') or '0')
local foreign = seq - h.last_seq
local top = redis.call('XREVRANGE', KEYS[6], '+', '-', 'COUNT', 1)
if #top > 0 then
  local top_seq = tonumber(string.match(top[1][1], '^(%d+)'))
  if top_seq > seq then
    return refuse('conflict', 'log_ahead', top_seq, seq)
  end
end
-- 4b. a writer that sent its summaries as they are, without the batch's change, when another
--     writer committed meanwhile: it sends the change to fold instead (nothing written yet)
if h.stories and h.stories.put and not h.stories.uids and foreign ~= 0 then
  return {'fold', '', seq, foreign, {}, {}}
end
if h.slot >= 0 and h.uid_end ~= h.uid_start then
  redis.call('HSET', KEYS[7], tostring(h.slot), h.uid_end)
end
if #ARGV[2] > 0 then
  seq = seq + 1
  redis.call('HSET', KEYS[1], 'seq', seq)
  redis.call('XADD', KEYS[6], seq .. '-1', 'w', h.writer, 'd', ARGV[2])
end

if lease_ms > 0 then
  redis.call('SET', KEYS[10], h.writer, 'PX', lease_ms)
end

-- 5. cluster lifecycle: a birth already announced (by another writer) and an end of a cluster
--    that already ended are left out, and a birth left out is not counted
local skip = {}
local suppressed = {}
for _, ev in ipairs(h.lifecycle or {}) do
  local index, cid, kind, eid, if_announced = ev[1], ev[2], ev[3], ev[4], ev[5]
  local keep
  if if_announced == 1 then
    -- an end the writer offers for a cluster it did not announce itself: kept only when
    -- another writer announced it (and it has not ended yet)
    keep = redis.call('HGET', KEYS[9], cid) == 'born'
    if keep then
      redis.call('HSET', KEYS[9], cid, kind)
    end
  elseif kind == 'born' then
    keep = redis.call('HSETNX', KEYS[9], cid, 'born') == 1
    if not keep then
      h.counters.births = (h.counters.births or 0) - 1
    end
  elseif kind == 'merged' then
    -- a merge is one event per (cluster, survivor) pair: replicas that decided the same merge
    -- emit it once, and a cluster two replicas merged into different survivors (concurrent
    -- decisions, joined on replay) has one event per survivor; the hash keeps the pair's
    -- event id
    local current = redis.call('HGET', KEYS[9], cid)
    keep = current ~= 'retired' and redis.call('HSETNX', KEYS[9], eid, 'merged') == 1
    if current == 'born' then
      redis.call('HSET', KEYS[9], cid, kind)
    end
  else
    -- an end is recorded only for an announced cluster (the hash holds announced clusters)
    local current = redis.call('HGET', KEYS[9], cid)
    keep = current ~= 'retired' and current ~= 'merged'
    if current == 'born' then
      redis.call('HSET', KEYS[9], cid, kind)
    end
  end
  if not keep then
    skip[index + 6] = true
    suppressed[#suppressed + 1] = eid
  end
end

-- 6. offsets, counters, novelty state
for key, nxt in pairs(h.next) do
  redis.call('HSET', KEYS[3], key, nxt)
end
for name, v in pairs(h.counters) do
  if v ~= 0 then
    redis.call('HINCRBY', KEYS[2], name, v)
  end
end
redis.call('SET', KEYS[8], ARGV[3])

-- 6b. story summaries: the batch's deltas folded in, merged clusters folded into their
--     survivors, retired and merged clusters dropped (the fold of noveld/models/stories.py,
--     its oracle). Numbers and text are kept apart, so a batch rewrites only the short packed
--     numeric entry of most clusters it touched (read with one HMGET, written with one HSET):
--     stories holds {born, last, docs, width, head, count...} packed with struct,
--     stories_text {"t": terms, "e": exemplars} (JSON) where a cluster has some. The fold
--     adds counts, so it commutes with other writers' commits.
local FIXED = 40  -- bytes before the counts: five doubles
local CHUNK = 1000  -- fields per HMGET / HSET (Lua's unpack has a bounded stack)
local formats = {}
local function entry_format(n)  -- an entry with a ring of n counts
  local f = formats[n]
  if not f then
    f = '<ddddd' .. string.rep('I4', n)
    formats[n] = f
  end
  return f
end

local function unpack_entry(raw, format, at)
  local t = {struct.unpack(format or entry_format((#raw - FIXED) / 4), raw, at or 1)}
  t[#t] = nil  -- the position after the entry
  return t
end

local function pack_entry(t)
  return struct.pack(entry_format(#t - 5), unpack(t))
end

local function fold_numbers(base, add, lim)
  if base and base[4] == lim.width and add[4] == lim.width and base[5] == add[5]
      and #base == #add and #add == 5 + lim.buckets then
    -- the usual case: the same newest bucket, rings added in place
    base[1] = math.min(base[1], add[1])
    base[2] = math.max(base[2], add[2])
    base[3] = base[3] + add[3]
    for i = 6, #add do
      base[i] = base[i] + add[i]
    end
    return base
  end
  local b = lim.buckets
  local both = {add}  -- (ipairs stops at a nil: no {base, add} when base is nil)
  if base then
    both = {base, add}
  end
  local head = nil
  for _, s in ipairs(both) do
    if s[4] == lim.width and (head == nil or s[5] > head) then
      head = s[5]
    end
  end
  head = head or 0
  local out = {add[1], add[2], add[3], lim.width, head}
  if base then
    out[1] = math.min(base[1], add[1])
    out[2] = math.max(base[2], add[2])
    out[3] = base[3] + add[3]
  end
  for i = 1, b do
    out[5 + i] = 0
  end
  for _, s in ipairs(both) do
    if s[4] == lim.width then
      -- s[5 + j] is bucket s[5] - n + j; out[5 + i] is bucket head - b + i
      local n = #s - 5
      for i = 1, b do
        local j = (head - b + i) - s[5] + n
        if j >= 1 and j <= n then
          out[5 + i] = out[5 + i] + s[5 + j]
        end
      end
    end
  end
  return out
end

local function joined(base, add, n)
  local seen, out = {}, {}
  for _, list in ipairs({base, add}) do
    for _, e in ipairs(list) do
      if #out < n and not seen[e[1]] then
        seen[e[1]] = true
        out[#out + 1] = {e[1], e[2]}
      end
    end
  end
  return out
end

local st = h.stories
if st and st.put and foreign == 0 then
  -- no other writer committed since this writer's last commit, and its summaries were the
  -- stored ones then: its folded entries are the fold of this batch into the stored ones
  local entries, size = ARGV[5], FIXED + 4 * st.limits.buckets
  local writes = {}
  for i, uid in ipairs(st.put) do
    writes[#writes + 1] = uid
    writes[#writes + 1] = string.sub(entries, (i - 1) * size + 1, i * size)
    if #writes >= 2 * CHUNK then
      redis.call('HSET', KEYS[11], unpack(writes))
      writes = {}
    end
  end
  if #writes > 0 then
    redis.call('HSET', KEYS[11], unpack(writes))
  end
  writes = {}
  for uid, t in pairs(st.texts) do
    writes[#writes + 1] = uid
    writes[#writes + 1] = t
    if #writes >= 2 * CHUNK then
      redis.call('HSET', KEYS[12], unpack(writes))
      writes = {}
    end
  end
  if #writes > 0 then
    redis.call('HSET', KEYS[12], unpack(writes))
  end
elseif st then
  local lim = st.limits
  local held = redis.call('HLEN', KEYS[11])
  local function numbers(uid)
    local raw = redis.call('HGET', KEYS[11], uid)
    if raw then
      return unpack_entry(raw)
    end
    return nil
  end
  local function texts(uid)
    local raw = redis.call('HGET', KEYS[12], uid)
    if raw then
      local t = cjson.decode(raw)
      return {t = t.t or {}, e = t.e or {}}
    end
    return {t = {}, e = {}}
  end
  local function cut(list, n)
    local out = {}
    for i = 1, math.min(#list, n) do
      out[i] = list[i]
    end
    return out
  end
  local uids, rows = st.uids, ARGV[4]
  local format, size = entry_format(lim.buckets), FIXED + 4 * lim.buckets
  local writes = {}
  local function flush()
    if #writes > 0 then
      redis.call('HSET', KEYS[11], unpack(writes))
      writes = {}
    end
  end
  for first = 1, #uids, CHUNK do
    local last = math.min(first + CHUNK - 1, #uids)
    local stored = redis.call('HMGET', KEYS[11], unpack(uids, first, last))
    for i = first, last do
      local uid, raw = uids[i], stored[i - first + 1]
      if raw or held < lim.max then
        local base = nil
        if raw then
          base = unpack_entry(raw)
        else
          held = held + 1
        end
        local add = unpack_entry(rows, format, (i - 1) * size + 1)
        writes[#writes + 1] = uid
        writes[#writes + 1] = pack_entry(fold_numbers(base, add, lim))
        if #writes >= 2 * CHUNK then
          flush()
        end
        local ex, terms = st.exemplars[uid], st.terms[uid]
        if (ex and #ex > 0) or (terms and #terms > 0) then
          local t = texts(uid)
          if terms and #terms > 0 then
            t.t = cut(terms, lim.terms)
          end
          if ex then
            t.e = joined(t.e, ex, lim.exemplars)
          end
          redis.call('HSET', KEYS[12], uid, cjson.encode(t))
        end
      end
    end
  end
  flush()
  for _, m in ipairs(st.merges) do
    local gone = numbers(m[1])
    if gone then
      local gone_text = texts(m[1])
      redis.call('HDEL', KEYS[11], m[1])
      redis.call('HDEL', KEYS[12], m[1])
      held = held - 1
      local survivor = numbers(m[2])
      if survivor or held < lim.max then
        local t = gone_text
        if survivor then
          t = texts(m[2])
          t.e = joined(t.e, gone_text.e, lim.exemplars)
        else
          held = held + 1
        end
        redis.call('HSET', KEYS[11], m[2], pack_entry(fold_numbers(survivor, gone, lim)))
        if #t.t > 0 or #t.e > 0 then
          redis.call('HSET', KEYS[12], m[2], cjson.encode(t))
        end
      end
    end
  end
  for _, uid in ipairs(st.dropped) do
    redis.call('HDEL', KEYS[11], uid)
    redis.call('HDEL', KEYS[12], uid)
  end
end

-- 7. outbox: the events' JSON, fields "0", "1", ... of one entry per OUTBOX_ENTRY_EVENTS,
--    and "w", the writer (it publishes its own entries; others only those left behind)
local chunk = tonumber(h.outbox_chunk)
local fields = {'w', h.writer}
local n = 0
for j = 6, #ARGV do
  if not skip[j] then
    fields[#fields + 1] = tostring(n)
    fields[#fields + 1] = ARGV[j]
    n = n + 1
    if n == chunk then
      redis.call('XADD', KEYS[5], '*', unpack(fields))
      fields = {'w', h.writer}
      n = 0
    end
  end
end
if n > 0 then
  redis.call('XADD', KEYS[5], '*', unpack(fields))
end
return {'committed', '', seq, foreign, suppressed, {}}
