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

#include <string_view>

namespace tally::redis::detail {

// Shared helpers: base-2^16 digits of x < 2^53, x * y as eight digits, and
// the sign of x1*y1 - x2*y2.
inline constexpr std::string_view lua_prelude = R"lua(
if redis.replicate_commands then pcall(redis.replicate_commands) end
local P = 4294967296
local function digits(x)
  local d = {}
  for i = 1, 4 do
    local r = x % 65536
    d[i] = r
    x = (x - r) / 65536
  end
  return d
end
local function mul(x, y)
  local a, b, c = digits(x), digits(y), {0, 0, 0, 0, 0, 0, 0, 0}
  for i = 1, 4 do
    for j = 1, 4 do c[i + j - 1] = c[i + j - 1] + a[i] * b[j] end
  end
  local carry = 0
  for k = 1, 8 do
    local v = c[k] + carry
    local r = v % 65536
    c[k] = r
    carry = (v - r) / 65536
  end
  return c
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
local function fmt(x) return string.format('%.0f', x) end
local function ttl(ms)
  if ms > 4503599627370496 then ms = 4503599627370496 end
  return fmt(ms)
end
)lua";

// GCRA over #KEYS limits, all or nothing.
// ARGV[1] = 's' (Redis TIME) or 'c' (caller's grid index); then per limit
// six arguments: cap, cost, x, y, ms_per_unit, lead_ms, where
//   's': x/y = 1000 * limit / window_ns in lowest terms (x * y < 2^53), so
//        index(t) = floor(u * x / y) for u = TIME in microseconds;
//   'c': x, y = the high and low 32 bits of the caller's index(now), and
//        lead_ms = now - time_of(index(now)) in milliseconds.
// TTL: time_of(next) - now <= (next - index(now)) * T - lead + 1 ns, so
// floor((next - index(now)) * ms_per_unit - lead_ms) + 2 ms covers it
// (doubles err by far less than the 1 ms margin) and exceeds it by < 2 ms.
// State: "g1:<hi>:<lo>", the TAT grid index. Reply: {all_ok, u, then per
// limit tat_hi, tat_lo, ok}; writes only when every limit admits.
inline constexpr std::string_view lua_gcra = R"lua(
local server = ARGV[1] == 's'
local u = 0
if server then u = now_us() end
local out, plan, all = {0, u}, {}, true
for i = 1, #KEYS do
  local o = 1 + (i - 1) * 6
  local cap, cost = tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2])
  local x, y = tonumber(ARGV[o + 3]), tonumber(ARGV[o + 4])
  local nh, nl, lead = x, y, tonumber(ARGV[o + 6])
  if server then
    local r = math.fmod(u, y)
    local rx = r * x
    local ry = math.fmod(rx, y)
    lead = ry / x / 1000
    local f = (rx - ry) / y
    local c = mul((u - r) / y, x)
    nh = c[4] * 65536 + c[3]
    nl = c[2] * 65536 + c[1] + f
    if nl >= P then
      local k = math.floor(nl / P)
      nl = nl - k * P
      nh = nh + k
    end
  end
  local v = redis.pcall('GET', KEYS[i])
  if type(v) == 'table' then return redis.error_reply('TALLYFOREIGN ' .. i .. ' holds a non-string value') end
  local th, tl = 0, 0
  if v then
    local h, l = string.match(v, '^g1:(%d+):(%d+)$')
    if not h then return redis.error_reply('TALLYFOREIGN ' .. i .. ' holds a string tally did not write') end
    th, tl = tonumber(h), tonumber(l)
    if th >= P or tl >= P then return redis.error_reply('TALLYFOREIGN ' .. i .. ' holds an out-of-range state') end
  end
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
  plan[i] = {bh, bl, cost, debt, tonumber(ARGV[o + 5]), lead}
  out[#out + 1] = th
  out[#out + 1] = tl
  out[#out + 1] = ok and 1 or 0
end
if all then
  out[1] = 1
  for i = 1, #KEYS do
    local p = plan[i]
    if p[3] > 0 then
      local xh, xl = p[1], p[2] + p[3]
      if xl >= P then
        local k = math.floor(xl / P)
        xl = xl - k * P
        xh = xh + k
      end
      redis.call('SET', KEYS[i], 'g1:' .. fmt(xh) .. ':' .. fmt(xl), 'PX', ttl(math.floor((p[4] + p[3]) * p[5] - p[6]) + 2))
    end
  end
end
return out
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
local x, y, g = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local u, b, e = 0, x, y
if ARGV[1] == 's' then
  u = now_us()
  local r = math.fmod(u, y)
  local rx = r * x
  local f = math.fmod(rx, y)
  b = (u - r) / y * x + (rx - f) / y
  e = g * f
end
local key = KEYS[1]
local v = redis.pcall('GET', key)
if type(v) == 'table' then return redis.error_reply('TALLYFOREIGN 1 holds a non-string value') end
local newest, c = 0, {}
for i = 1, S do c[i] = 0 end
if v then
  local sw, sn, list = string.match(v, '^w1:(%d+):(%d+):([%d,]+)$')
  if not sw or tonumber(sw) ~= w then return redis.error_reply('TALLYFOREIGN 1 holds a string tally did not write with this bucket width') end
  newest = tonumber(sn)
  local n = 0
  for d in string.gmatch(list, '%d+') do
    n = n + 1
    if n > S then break end
    c[n] = tonumber(d)
    if c[n] >= 9007199254740992 then n = S + 1 break end
  end
  if n ~= S or newest >= 9007199254740992 then return redis.error_reply('TALLYFOREIGN 1 holds a ring of another size') end
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
             'PX', ttl(math.floor((S * w - e) / 1000000) + 2))
end
return out
)lua";

}  // namespace tally::redis::detail
