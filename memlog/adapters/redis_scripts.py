"""The Lua scripts of the Redis session store: each applies one change to one thread atomically.

Every script touches the keys of one thread only (one Redis Cluster hash slot: see `thread_base`).
A thread's keys: head (hash), exchanges (hash id -> JSON), order (list of ids), and its ready context
(issue 16, `projections/ready.py`): `r` (hash: `fmt` the fragments' format, `pos` the head's position
they were made at, `n` how many exchanges they hold, `l:<id>` the byte lengths of an exchange's two
fragments, "<text>:<view>"), `t` (string: the rendered exchanges' JSON string bodies, in order),
`v` (string: the exchanges' views, each after a comma, in order) and `m` (string: what a read needs
beside `t` and `v`, so that it is one MGET: see `ready_meta` below and `RedisSessionStore.read_ready`).
"""

from __future__ import annotations

# Shared by the scripts that keep the ready context. `ready_splice(order, edits)` rewrites the
# fragments of some exchanges (edits[id] = {text, view}, or false to take it out) walking the order
# with the stored lengths; false when they disagree with the strings (then the ready form is dropped
# and the next read makes it afresh from the exchanges).
_READY_HELPERS = """
-- `ready_meta(fmt)`: where a thread's ready context is current, its meta `m`, rewritten from the keys
-- themselves (so it cannot disagree with them): the JSON array [format, bytes of `t`, bytes of `v`,
-- the head's fields but the askers (`ask:`), the order's ids]. It makes `t` and `v` exist (empty for a
-- thread without exchanges): a read takes a missing one for a ready context some other writer dropped.
-- Every script that changes the head, the order, `t` or `v` rewrites `m` or deletes it.
local function ready_meta(fmt)
  if redis.call('EXISTS', KEYS[5]) == 0 then redis.call('SET', KEYS[5], '') end
  if redis.call('EXISTS', KEYS[6]) == 0 then redis.call('SET', KEYS[6], '') end
  local head = {}
  local all = redis.call('HGETALL', KEYS[1])
  for i = 1, #all, 2 do
    if string.sub(all[i], 1, 4) ~= 'ask:' then head[all[i]] = all[i + 1] end
  end
  local texts, views = redis.call('STRLEN', KEYS[5]), redis.call('STRLEN', KEYS[6])
  redis.call('SET', KEYS[7], cjson.encode({fmt, texts, views, head, redis.call('LRANGE', KEYS[3], 0, -1)}))
end
local function ready_lens(id)
  local l = redis.call('HGET', KEYS[4], 'l:' .. id)
  if not l then return nil end
  local sep = string.find(l, ':', 1, true)
  return tonumber(string.sub(l, 1, sep - 1)), tonumber(string.sub(l, sep + 1))
end
-- `ready_tail(key, size, old, new)`: the string at `key`, `size` bytes long, with its last `old` bytes
-- replaced by `new`. A fragment that grows (the newest exchange's tool call, then its answer, each
-- lengthens it) is written over in place: its own bytes, whatever the thread holds. Only one that
-- shrinks rewrites the whole string.
local function ready_tail(key, size, old, new)
  if #new >= old then
    if #new > 0 then redis.call('SETRANGE', key, size - old, new) end
  else
    local whole = redis.call('GET', key) or ''
    redis.call('SET', key, string.sub(whole, 1, size - old) .. new, 'KEEPTTL')
  end
end
local function ready_splice(order, edits)
  local texts = redis.call('GET', KEYS[5]) or ''
  local views = redis.call('GET', KEYS[6]) or ''
  local nt, nv = {}, {}
  local at, av = 1, 1
  for _, id in ipairs(order) do
    local tl, vl = ready_lens(id)
    if not tl then return false end
    local edit = edits[id]
    if edit == nil then
      nt[#nt + 1] = string.sub(texts, at, at + tl - 1)
      nv[#nv + 1] = string.sub(views, av, av + vl - 1)
    elseif edit then
      nt[#nt + 1] = edit[1]
      nv[#nv + 1] = edit[2]
      redis.call('HSET', KEYS[4], 'l:' .. id, #edit[1] .. ':' .. #edit[2])
    else
      redis.call('HDEL', KEYS[4], 'l:' .. id)
    end
    at = at + tl
    av = av + vl
  end
  if at ~= #texts + 1 or av ~= #views + 1 then return false end
  redis.call('SET', KEYS[5], table.concat(nt), 'KEEPTTL')
  redis.call('SET', KEYS[6], table.concat(nv), 'KEEPTTL')
  return true
end
"""

# KEYS: head, exchanges (hash id -> JSON), order (list of ids), ready r, t, v, m
# ARGV: now ms, then a JSON array of the thread's changes in log order, each an array of strings:
#   offset, exchange id ('' for none), exchange JSON, token delta, last question ms, expires-at ms,
#   reset ('1'/'0'), summary flag ('1' when the summary changes), summary, summary tokens, count delta,
#   an array of the ids of exchanges to remove, the asker of a shared thread's line ('' for none), the
#   head field of a shared thread's summary part ('' for none) and its JSON ('' drops it), and with a
#   new summary what it folded away (JSON, head field `folded`; '' drops it);
#   then '1' for a shared thread; then the ready fragments' format; then, for change n, its exchange's
#   two ready fragments at ARGV[3 + 2n] (rendered text) and ARGV[4 + 2n] (view) ('' for none).
# Each change applies atomically with its position, and only past the thread's position. Replies: one
# flag per change (1 applied, or expired so not written; 0 applied already), and for a shared thread
# its expiry (PEXPIRETIME) and everyone who has had lines in it (head fields `ask:<subject>`), whose
# lines indexes must live as long as it does. One call per thread and batch.
# The ready context is kept where the thread has a current one (or is new), dropped otherwise: a new
# exchange is appended, the newest one's update replaces the end (in place where it grows), anything
# else splices.
WRITE_THREAD = (
    _READY_HELPERS
    + """
local now = tonumber(ARGV[1])
local changes = cjson.decode(ARGV[2])
local fmt = ARGV[4]
local ready = true
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[4], KEYS[5], KEYS[6], KEYS[7])
else
  -- kept only where it is current: made in this format at the head's position, over the whole order
  local r = redis.call('HMGET', KEYS[4], 'fmt', 'pos', 'n')
  ready = r[1] == fmt and r[2] == redis.call('HGET', KEYS[1], 'pos') and tonumber(r[3]) == redis.call('LLEN', KEYS[3])
end
local replies = {}
local expire_at = nil
for n = 1, #changes do
  local c = changes[n]
  local offset = tonumber(c[1])
  local pos = redis.call('HGET', KEYS[1], 'pos')
  if pos and tonumber(pos) >= offset then
    replies[n] = 0
  else
    replies[n] = 1
    if tonumber(c[6]) > now then
      if c[7] == '1' then
        redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7])
        ready = true
      end
      if ready and #c[12] > 0 then
        local edits = {}
        for _, gone in ipairs(c[12]) do
          edits[gone] = false
        end
        ready = ready_splice(redis.call('LRANGE', KEYS[3], 0, -1), edits)
      end
      for _, gone in ipairs(c[12]) do
        redis.call('HDEL', KEYS[2], gone)
        redis.call('LREM', KEYS[3], 1, gone)
      end
      if c[2] ~= '' then
        local new = redis.call('HEXISTS', KEYS[2], c[2]) == 0
        if new then
          redis.call('RPUSH', KEYS[3], c[2])
        end
        redis.call('HSET', KEYS[2], c[2], c[3])
        if ready then
          local text, view = ARGV[3 + 2 * n], ARGV[4 + 2 * n]
          if new then
            redis.call('APPEND', KEYS[5], text)
            redis.call('APPEND', KEYS[6], view)
            redis.call('HSET', KEYS[4], 'l:' .. c[2], #text .. ':' .. #view)
          elseif redis.call('LINDEX', KEYS[3], -1) == c[2] then
            local tl, vl = ready_lens(c[2])
            local tn, vn = redis.call('STRLEN', KEYS[5]), redis.call('STRLEN', KEYS[6])
            if tl and tn >= tl and vn >= vl then
              ready_tail(KEYS[5], tn, tl, text)
              ready_tail(KEYS[6], vn, vl, view)
              redis.call('HSET', KEYS[4], 'l:' .. c[2], #text .. ':' .. #view)
            else
              ready = false
            end
          else
            local edits = {}
            edits[c[2]] = {text, view}
            ready = ready_splice(redis.call('LRANGE', KEYS[3], 0, -1), edits)
          end
        end
      end
      if c[8] == '1' then
        redis.call('HSET', KEYS[1], 'summary', c[9], 'stokens', c[10])
        if c[16] == '' then
          redis.call('HDEL', KEYS[1], 'folded')
        else
          redis.call('HSET', KEYS[1], 'folded', c[16])
        end
      end
      if c[14] ~= '' then
        if c[15] == '' then
          redis.call('HDEL', KEYS[1], c[14])
        else
          redis.call('HSET', KEYS[1], c[14], c[15])
        end
      end
      if c[13] ~= '' then
        redis.call('HSET', KEYS[1], 'ask:' .. c[13], '1')
      end
      redis.call('HINCRBY', KEYS[1], 'tokens', c[4])
      redis.call('HINCRBY', KEYS[1], 'count', c[11])
      redis.call('HSET', KEYS[1], 'pos', c[1], 'last_q', c[5])
      expire_at = c[6]
    end
  end
end
if expire_at then
  if ready then
    redis.call('HSET', KEYS[4], 'fmt', fmt, 'pos', redis.call('HGET', KEYS[1], 'pos'), 'n', redis.call('LLEN', KEYS[3]))
    ready_meta(fmt)
  else
    redis.call('DEL', KEYS[4], KEYS[5], KEYS[6], KEYS[7])
  end
  for i = 1, 7 do
    redis.call('PEXPIREAT', KEYS[i], expire_at)
  end
end
if ARGV[3] ~= '1' then
  return {replies, -2, {}}
end
local askers = {}
for _, name in ipairs(redis.call('HKEYS', KEYS[1])) do
  if string.sub(name, 1, 4) == 'ask:' then
    askers[#askers + 1] = string.sub(name, 5)
  end
end
return {replies, redis.call('PEXPIRETIME', KEYS[1]), askers}
"""
)

# KEYS: head, exchanges, order, ready r, t, v, m. ARGV: format, the head's pos and ver as read, the
# rendered texts, the views, then for each exchange in order its id and its fragments' lengths
# "<text>:<view>". Stores a thread's ready context made by a reader from its exchanges (a thread written
# before there was one, or whose ready form an erasure dropped), only if the thread is still as the
# reader read it. Replies 1 when stored.
STORE_READY = (
    _READY_HELPERS
    + """
if redis.call('HGET', KEYS[1], 'pos') ~= ARGV[2] or (redis.call('HGET', KEYS[1], 'ver') or '0') ~= ARGV[3] then
  return 0
end
redis.call('DEL', KEYS[4], KEYS[5], KEYS[6], KEYS[7])
redis.call('SET', KEYS[5], ARGV[4])
redis.call('SET', KEYS[6], ARGV[5])
for i = 6, #ARGV, 2 do
  redis.call('HSET', KEYS[4], 'l:' .. ARGV[i], ARGV[i + 1])
end
redis.call('HSET', KEYS[4], 'fmt', ARGV[1], 'pos', ARGV[2], 'n', redis.call('LLEN', KEYS[3]))
ready_meta(ARGV[1])
local at = redis.call('PEXPIRETIME', KEYS[1])
if at > 0 then
  for i = 4, 7 do
    redis.call('PEXPIREAT', KEYS[i], at)
  end
end
return 1
"""
)

# KEYS: checkpoints; ARGV: partition, offset. A move is published on the checkpoints' own name, where a
# read waiting for `after` hears it (memlog/adapters/redis_signals.py)
ADVANCE = """
local applied = redis.call('HGET', KEYS[1], ARGV[1])
if (not applied) or tonumber(applied) < tonumber(ARGV[2]) then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
  redis.call('PUBLISH', KEYS[1], ARGV[1] .. ':' .. ARGV[2])
end
return 1
"""


# KEYS: head, exchanges, order, ready r, t, v, m; ARGV: subject. Removes the subject's exchanges and
# their part of the summary from a shared thread, drops its ready context (the next read makes it
# afresh) and counts the change in the head's `ver`; replies {lines, parts} removed.
ERASE_LINES = """
local removed = 0
local tokens = 0
local all = redis.call('HGETALL', KEYS[2])
for i = 1, #all, 2 do
  local ok, ex = pcall(cjson.decode, all[i + 1])
  if ok and ex['subject'] == ARGV[1] then
    redis.call('HDEL', KEYS[2], all[i])
    redis.call('LREM', KEYS[3], 0, all[i])
    removed = removed + 1
    tokens = tokens + (tonumber(ex['tokens']) or 0)
  end
end
local parts = 0
local part = redis.call('HGET', KEYS[1], 'seg:' .. ARGV[1])
if part then
  local ok, seg = pcall(cjson.decode, part)
  tokens = tokens + ((ok and tonumber(seg['tokens'])) or 0)
  redis.call('HDEL', KEYS[1], 'seg:' .. ARGV[1])
  parts = 1
end
redis.call('HDEL', KEYS[1], 'ask:' .. ARGV[1])
if (removed > 0 or parts > 0) then
  redis.call('DEL', KEYS[4], KEYS[5], KEYS[6], KEYS[7])
  if redis.call('EXISTS', KEYS[1]) == 1 then
    -- 0 - n, not -n: Lua writes -0 as "-0", which HINCRBY refuses
    redis.call('HINCRBY', KEYS[1], 'tokens', 0 - tokens)
    redis.call('HINCRBY', KEYS[1], 'count', 0 - removed)
    redis.call('HINCRBY', KEYS[1], 'ver', 1)
  end
end
return {removed, parts}
"""
