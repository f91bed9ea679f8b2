// tally/redis/detail/scripts.hpp: the Lua sources that tally::redis runs
// inside Redis (EVALSHA). Keys and numbers only ever arrive as KEYS/ARGV
// arguments, never spliced into the text.
//
// Redis Lua numbers are IEEE doubles, exact for integers below 2^53. The
// scripts therefore keep every 64-bit quantity (times, grid indices) as two
// 32-bit halves, multiply through base-2^16 digits (each partial product
// below 2^32, each column below 2^35), and take remainders with math.fmod,
// which is exact (Lua's `%` is floor-based and may round). Every other value
// they compute with is an integer below 2^53 by construction of the
// arguments (see protocol.hpp). The scripts only decide and update; the
// Decision fields are computed by the caller with tally's own limiter code
// from the state the script read, so they are tally's by construction.
#pragma once

#include "../../detail/abi.hpp"

#include <string_view>

TALLY_BEGIN_NAMESPACE
namespace redis::detail {

// Shared helpers: base-2^16 digits of x < 2^53, x * y as eight digits, and
// the sign of x1*y1 - x2*y2.
inline constexpr std::string_view lua_prelude = R"lua(
-- Redis 3.2-4 need effects replication switched on before a write that
-- follows TIME; Redis 5+ always replicate effects (7 names its version).
if not redis.REDIS_VERSION_NUM and redis.replicate_commands then pcall(redis.replicate_commands) end
local P = 4294967296
local function base65536(c, n)
  local carry = 0
  for k = 1, n do
    local v = c[k] + carry
    local r = v % 65536
    c[k] = r
    carry = (v - r) / 65536
  end
  return c
end
-- (h, l) + x as a 64-bit (high, low) pair of 32-bit halves, the carry moved up.
local function add_carry(h, l, x)
  local xh, xl = h, l + x
  if xl >= P then
    local k = math.floor(xl / P)
    xl = xl - k * P
    xh = xh + k
  end
  return xh, xl
end
local function mul(x, y)
  local a, b, c = base65536({x, 0, 0, 0}, 4), base65536({y, 0, 0, 0}, 4), {0, 0, 0, 0, 0, 0, 0, 0}
  for i = 1, 4 do
    for j = 1, 4 do c[i + j - 1] = c[i + j - 1] + a[i] * b[j] end
  end
  return base65536(c, 8)
end
local function cmpmul(x1, y1, x2, y2)
  local a, b = mul(x1, y1), mul(x2, y2)
  for k = 8, 1, -1 do
    if a[k] ~= b[k] then return a[k] < b[k] and -1 or 1 end
  end
  return 0
end
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
-- index(t) = floor(u * x / y) for u = TIME in microseconds, as 32-bit halves
-- (hi, lo), and lead = t - time_of(index(t)) in milliseconds.
local function index_now(u, x, y)
  local r = math.fmod(u, y)
  local rx = r * x
  local ry = math.fmod(rx, y)
  local f = (rx - ry) / y
  local q = (u - r) / y
  local nh, nl
  if q * x < 4503599627370496 then
    local n = q * x + f
    nl = math.fmod(n, P)
    nh = (n - nl) / P
  else
    local c = mul(q, x)
    nh = c[4] * 65536 + c[3]
    nl = c[2] * 65536 + c[1] + f
    if nl >= P then
      local k = math.floor(nl / P)
      nl = nl - k * P
      nh = nh + k
    end
  end
  return nh, nl, ry / x / 1000
end
local function fmt(x) return string.format('%.0f', x) end
-- Integers below 10^14 concatenate exactly ("%.14g"), without string.format.
local function ttl(ms)
  if ms > 99999999999999 then ms = 99999999999999 end
  return ms
end
-- Lost-state guard. The last three ARGV are G ('1': KEYS ends with the
-- sentinel counter and the lost-at key), the highest count the client has
-- seen (0: none), and the call's token, echoed last in the reply so the
-- client knows the reply is this call's. The counter has no TTL and counts the calls; INCR returning
-- at most the count seen means state was lost (gone: restart without
-- persistence, FLUSHALL; behind: a restore or a failover that missed writes).
-- Then lost-at = now (no TTL), and for a key's time to full replenishment
-- after it, a key found missing starts spent. Every array reply ends with
-- count, detected (0 0 without a sentinel), token.
local NA = #ARGV - 3
local G = ARGV[NA + 1] == '1'
local NK = #KEYS
if G then NK = NK - 2 end
local T, lost_at, gcnt, gdet = 0, nil, 0, 0
-- The server's time for this call, kept in T for lost_within().
local function call_now()
  T = now_us()
  return T
end
local function guard()
  if not G then return end
  local ec = tonumber(ARGV[NA + 2])
  local c = redis.pcall('INCR', KEYS[#KEYS - 1])
  if type(c) ~= 'number' then
    redis.call('SET', KEYS[#KEYS - 1], '1')
    c = 1
  end
  gcnt = c
  if ec > 0 and c <= ec then
    T = now_us()
    lost_at = T
    gdet = 1
    redis.call('SET', KEYS[#KEYS], fmt(T))
  end
end
-- True within horizon_us after a detected loss (read only for missing keys).
local function lost_within(horizon_us)
  if not G then return false end
  if not lost_at then
    local v = redis.pcall('GET', KEYS[#KEYS])
    lost_at = (type(v) == 'string' and tonumber(v)) or 0
  end
  if lost_at == 0 then return false end
  if T == 0 then T = now_us() end
  return T < lost_at + horizon_us
end
-- The GCRA state of a spent key at index (h, l): TAT = index + cap.
local function spent(h, l, cap)
  local xh, xl = add_carry(h, l, cap)
  if xh >= P then xh, xl = P - 1, P - 1 end
  return 'g1:' .. fmt(xh) .. ':' .. fmt(xl)
end
local function seal(out)
  local n = #out
  out[n + 1] = gcnt
  out[n + 2] = gdet
  out[n + 3] = ARGV[NA + 3]
  return out
end
-- An error reply ends with ' @' and the call's token, as seal ends an array.
local function fail(msg) return redis.error_reply(msg .. ' @' .. ARGV[NA + 3]) end
)lua";

// GCRA over #KEYS keys, all or nothing (limits), six arguments per key.
// ARGV[1] is the mode: 's' reads Redis TIME, 'c' takes the caller's index.
// The six arguments: cap, cost, x, y, ms_per_unit, lead_ms, where
//   Redis time: x/y = 1000 * limit / window_ns in lowest terms (x * y <
//        2^53), so index(t) = floor(u * x / y) for u = TIME in microseconds;
//   caller's time: x, y = the high and low 32 bits of index(now), and
//        lead_ms = now - time_of(index(now)) in milliseconds.
// TTL: time_of(next) - now <= (next - index(now)) * T - lead + 1 ns, so
// floor((next - index(now)) * ms_per_unit - lead_ms) + 2 ms covers it
// (doubles err by far less than the 1 ms margin) and exceeds it by < 2 ms.
// State: "g1:<hi>:<lo>", the TAT grid index. Reply: {all_ok, u, then per
// key tat_hi, tat_lo, ok}, the TAT as read.
// Leases ('l': Redis time, 'k': caller's time; one key): five more
// arguments want, share, ret_hi, ret_lo, ret_n; ok is the number of tokens
// granted (0 when cost does not fit), and the reply ends with the number of
// tokens handed back.
inline constexpr std::string_view lua_gcra = R"lua(
local mode = ARGV[1]
local server = mode == 's' or mode == 'l'
local lease = mode == 'l' or mode == 'k'
local u = 0
guard()
if server then
  u = call_now()
end
-- A lease first hands back `rn` unused tokens of this process's previous
-- lease, and only while the stored TAT is still the one that lease wrote:
-- then no charge made since depends on them, and lowering the TAT by rn is
-- the state of a history in which that lease charged rn fewer tokens. The
-- TTL shrinks by at most rn emission intervals, so it still covers the time
-- to full replenishment.
local returned = 0
if lease then
  local rn = tonumber(ARGV[12])
  if rn > 0 then
    local rh, rl = tonumber(ARGV[10]), tonumber(ARGV[11])
    local cur = redis.pcall('GET', KEYS[1])
    if cur == 'g1:' .. rh .. ':' .. rl and (rh >= 512 or rh * P + rl >= rn) then
      local pt = redis.call('PTTL', KEYS[1])
      if pt > 0 then
        local xh, xl = rh, rl - rn
        if xl < 0 then
          local k = math.floor((P - 1 - xl) / P)
          xl = xl + k * P
          xh = xh - k
        end
        local t = pt - math.floor(rn * tonumber(ARGV[6]))
        if t < 2 then t = 2 end
        redis.call('SET', KEYS[1], 'g1:' .. xh .. ':' .. xl, 'PX', t)
        returned = rn
      end
    end
  end
end
local out, plan, all, at = {0, u}, {}, true, 2
local function write(i, bh, bl, cost, debt, ms, lead)
  local xh, xl = add_carry(bh, bl, cost)
  redis.call('SET', KEYS[i], 'g1:' .. xh .. ':' .. xl, 'PX', ttl(math.floor((debt + cost) * ms - lead) + 2))
end
local cap, cost, x, y, ms, lead, nh, nl
for i = 1, NK do
  local o = 1 + (i - 1) * 6
  cap, cost = tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2])
  x, y, ms, lead = tonumber(ARGV[o + 3]), tonumber(ARGV[o + 4]), tonumber(ARGV[o + 5]), tonumber(ARGV[o + 6])
  nh, nl = x, y
  if server then nh, nl, lead = index_now(u, x, y) end
  local v = redis.pcall('GET', KEYS[i])
  if not v and lost_within(cap * ms * 1000) then v = spent(nh, nl, cap) end
  local th, tl, bad = 0, 0, nil
  if type(v) == 'table' then
    bad = 'holds a non-string value'
  elseif v then
    local h, l = string.match(v, '^g1:(%d+):(%d+)$')
    if not h then
      bad = 'holds a string tally did not write'
    else
      th, tl = tonumber(h), tonumber(l)
      if th >= P or tl >= P then bad = 'holds an out-of-range state' end
    end
  end
  if bad then return fail('TALLYFOREIGN ' .. i .. ' ' .. bad) end
  local level, bh, bl, debt = cap, nh, nl, 0
  if th > nh or (th == nh and tl > nl) then
    local dh, dl = th - nh, tl - nl
    if dl < 0 then
      dl = dl + P
      dh = dh - 1
    end
    bh, bl = th, tl
    if dh >= 512 then
      level = 0
    else
      debt = dh * P + dl
      if debt >= cap then level = 0 else level = cap - debt end
    end
  end
  local avail = level
  local rh = P - 1 - bh
  if rh < 512 then
    local room = rh * P + (P - 1 - bl)
    if room < avail then avail = room end
  end
  local ok = cost <= avail
  if not ok then all = false end
  local granted = ok and 1 or 0
  if lease and ok then
    -- Lease size: min(want, max(cost, floor(avail / share))), exact (fmod).
    local want, share = tonumber(ARGV[8]), tonumber(ARGV[9])
    local r = math.fmod(avail, share)
    local g = (avail - r) / share
    if g > want then g = want end
    if g < cost then g = cost end
    cost = g
    granted = g
  end
  plan[i] = {bh, bl, cost, debt, ms, lead}
  out[at + 1] = th
  out[at + 2] = tl
  out[at + 3] = granted
  at = at + 3
end
if lease then out[at + 1] = returned end
if all then
  out[1] = 1
  for i = 1, NK do
    local p = plan[i]
    if p[3] > 0 then write(i, p[1], p[2], p[3], p[4], p[5], p[6]) end
  end
end
return seal(out)
)lua";

// GCRA batch: every key of #KEYS decided and charged on its own, one quota
// and cost for all. ARGV: mode ('S' Redis TIME, 'C' the caller's index),
// then the six arguments of lua_gcra. One MGET reads every key, one MSET
// writes the charged ones, one PEXPIRE per charged key sets its TTL (one
// SET ... PX when a single key is charged).
//
// Reply, flat: {ext, u, r_1 .. r_m, then ext triples tat_hi, tat_lo, ok}.
// r_i = ok + 4 * debt, with ok 0 (denied) or 1 (admitted) and debt = TAT -
// index(now) as read when the TAT is ahead of now (else 0: every TAT at or
// behind now gives the same decision as a fresh key). debt < 2^50, so r_i
// is an exact double. r_i = 2: a foreign value. r_i = 3: a debt of 2^50 or
// more (a caller's time far behind the key's), whose TAT and ok follow in
// order after the m entries; ext counts those triples.
//
// Cost per key: the MGET slot, the parse of a non-fresh state, the MSET
// slot and one PEXPIRE. A fresh or replenished key gets the same state
// string and TTL, formatted once per call; only a key in debt formats its
// own.
inline constexpr std::string_view lua_gcra_batch = R"lua(
local cap, cost = tonumber(ARGV[2]), tonumber(ARGV[3])
local x, y, ms, lead = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local u, nh, nl = 0, x, y
guard()
if ARGV[1] == 'S' then
  u = call_now()
  nh, nl, lead = index_now(u, x, y)
end
local m = NK
-- MGET answers nil both for a missing key and for a key of another type:
-- one EXISTS over the nil keys tells them apart, and one EXISTS per nil key
-- only when some of them exist.
local vals = redis.call('MGET', unpack(KEYS, 1, m))
local nils, nn = {}, 0
for i = 1, m do
  if not vals[i] then
    nn = nn + 1
    nils[nn] = KEYS[i]
  end
end
if nn > 0 and redis.call('EXISTS', unpack(nils)) > 0 then
  for i = 1, m do
    if not vals[i] and redis.call('EXISTS', KEYS[i]) == 1 then vals[i] = {} end
  end
end
-- Missing keys shortly after a loss of state start spent.
if nn > 0 and lost_within(cap * ms * 1000) then
  local sp = spent(nh, nl, cap)
  for i = 1, m do
    if not vals[i] then vals[i] = sp end
  end
end
local function state(h, l)
  if l >= P then
    local k = math.floor(l / P)
    l = l - k * P
    h = h + k
  end
  return 'g1:' .. h .. ':' .. l
end
-- What may be charged from base index (bh, bl) at `level`: no index past
-- 2^64 - 1 (the end of the clock) is ever written.
local function avail(bh, bl, level)
  local rh = P - 1 - bh
  if rh < 512 then
    local room = rh * P + (P - 1 - bl)
    if room < level then return room end
  end
  return level
end
-- A fresh key (or one whose TAT is not ahead of now) starts from index(now)
-- with a full bucket: one decision, one state, one TTL for all of them.
local fresh_ok = cost <= avail(nh, nl, cap)
local fresh_state, fresh_ttl
if fresh_ok and cost > 0 then
  fresh_state = state(nh, nl + cost)
  fresh_ttl = string.format('%d', ttl(math.floor(cost * ms - lead) + 2))
end
-- The writes go out together at the end: one MSET, then one PEXPIRE per key
-- in batch order (cheaper than a SET ... PX each: no status reply to turn
-- into a Lua table); a single write (a cluster's one-key calls) is one SET. `seen`: the state this call gave a key, for keys that
-- repeat within the batch.
local out, ext, ne, seen = {0, u}, {}, 0, {}
local kv, ttls, nw = {}, {}, 0
local function put(k, st, t)
  kv[2 * nw + 1] = k
  kv[2 * nw + 2] = st
  nw = nw + 1
  ttls[nw] = t
  seen[k] = st
end
for i = 1, m do
  local k = KEYS[i]
  local v = seen[k] or vals[i]
  local r = 2
  local h, l
  if type(v) == 'string' then h, l = string.match(v, '^g1:(%d+):(%d+)$') end
  local th, tl = 0, 0
  if h then
    th, tl = tonumber(h), tonumber(l)
    if th >= P or tl >= P then h = nil end
  end
  if not v or (h and (th < nh or (th == nh and tl <= nl))) then
    r = 0
    if fresh_ok then
      r = 1
      if fresh_state then put(k, fresh_state, fresh_ttl) end
    end
  elseif h then
    local dh, dl = th - nh, tl - nl
    if dl < 0 then
      dl = dl + P
      dh = dh - 1
    end
    local level, debt = 0, 0
    if dh < 512 then
      debt = dh * P + dl
      if debt < cap then level = cap - debt end
    end
    r = 0
    if cost <= avail(th, tl, level) then
      r = 1
      if cost > 0 then
        put(k, tl + cost < P and 'g1:' .. h .. ':' .. (tl + cost) or state(th, tl + cost),
            ttl(math.floor((debt + cost) * ms - lead) + 2))
      end
    end
    if dh < 262144 then
      r = r + 4 * (dh * P + dl)
    else
      ext[ne + 1] = th
      ext[ne + 2] = tl
      ext[ne + 3] = r
      ne = ne + 3
      r = 3
    end
  end
  out[i + 2] = r
end
if nw == 1 then
  redis.call('SET', kv[1], kv[2], 'PX', ttls[1])
elseif nw > 1 then
  redis.call('MSET', unpack(kv))
  for j = 1, nw do redis.call('PEXPIRE', kv[2 * j - 1], ttls[j]) end
end
out[1] = ne / 3
for j = 1, ne do out[m + 2 + j] = ext[j] end
return seal(out)
)lua";

// Sliding-window counter ring, one key.
// ARGV: mode ('s' or 'c'), slots S, limit, cost, bucket_ns w, x, y, g where
//   's': x/y = 1000 / w in lowest terms (x * y < 2^53), g = w / y; bucket
//        b = floor(u * x / y), elapsed e = g * ((u mod y) * x mod y);
//   'c': x = b, y = e, computed by the caller.
// State: "w1:<w>:<newest>:<c_0>,...,<c_{S-1}>", c_p the count of the bucket
// at ring position p = bucket mod S; written when the ring rolls or is
// charged. Reply: {ok, u, newest, c_0..c_{S-1}}
// as read (before the ring advanced).
inline constexpr std::string_view lua_sliding = R"lua(
local S, limit, cost, w = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local x, y, g, skew = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local u, b, e = 0, x, y
guard()
if ARGV[1] == 's' then
  u = call_now()
  local r = math.fmod(u, y)
  local rx = r * x
  local f = math.fmod(rx, y)
  b = (u - r) / y * x + (rx - f) / y
  e = g * f
end
local key = KEYS[1]
local v = redis.pcall('GET', key)
if type(v) == 'table' then return fail('TALLYFOREIGN 1 holds a non-string value') end
local newest, c = 0, {}
for i = 1, S do c[i] = 0 end
if v then
  local sw, sn, list = string.match(v, '^w1:(%d+):(%d+):([%d,]+)$')
  if not sw or tonumber(sw) ~= w then return fail('TALLYFOREIGN 1 holds a string tally did not write with this bucket width') end
  newest = tonumber(sn)
  local n = 0
  for d in string.gmatch(list, '%d+') do
    n = n + 1
    if n > S then break end
    c[n] = tonumber(d)
    if c[n] >= 9007199254740992 then n = S + 1 break end
  end
  if n ~= S or newest >= 9007199254740992 then return fail('TALLYFOREIGN 1 holds a ring of another size') end
elseif lost_within(S * w / 1000) then
  -- Missing shortly after a loss of state: the ring starts full.
  newest = b
  c[math.fmod(b, S) + 1] = limit
end
local out = {0, u, newest}
for i = 1, S do out[3 + i] = c[i] end
if b < newest then
  b = newest
  e = 0
end
local changed = false
if b > newest then
  changed = true
  local d = b - newest
  if d >= S then
    for i = 1, S do c[i] = 0 end
  else
    for k = 1, d do c[math.fmod(newest + k, S) + 1] = 0 end
  end
  newest = b
end
local total = 0
for i = 1, S do total = total + c[i] end
local oldest = c[math.fmod(newest + 1, S) + 1]
local rest = total - oldest
local ok = cost == 0
if not ok and cost <= limit and rest <= limit - cost then
  local room = limit - cost - rest
  ok = oldest <= room or cmpmul(oldest, w - e, room, w) <= 0
end
if ok then
  out[1] = 1
  if cost > 0 then
    local p = math.fmod(newest, S) + 1
    c[p] = c[p] + cost
    changed = true
  end
end
-- A roll is written too (even on a denial or a peek), as tally's ring does:
-- a later request from behind the new newest bucket is then read at its start.
if changed then
  local parts = {}
  for i = 1, S do parts[i] = fmt(c[i]) end
  redis.call('SET', key, 'w1:' .. fmt(w) .. ':' .. fmt(newest) .. ':' .. table.concat(parts, ','),
             'PX', ttl(math.floor((S * w - e) / 1000000) + 2 + skew))
end
return seal(out)
)lua";

}  // namespace redis::detail
TALLY_END_NAMESPACE
