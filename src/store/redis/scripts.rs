//! The Lua scripts: every write (with the others of its batch) is one
//! script call, so it runs atomically on the server; a read that walks an
//! index examines a bounded number of members a call (the listings, the
//! claims and the operator's counts go on in further calls), so that no
//! call holds the server for an index's length. `redis::Script` runs them by
//! `EVALSHA` and loads them again when the server answers `NOSCRIPT` (after
//! a restart or a failover).
//!
//! A task is the hash `<prefix>:task:{<id>}`: `v` (version), `rec` (the
//! record's JSON), `exp` (`expires_at_ms`, or empty), `lease` (the lease
//! end of a `working` task, or empty), `st` (status), `upd`
//! (`updated_at_ms`), `hold` (the lease holder of a `working` task, or
//! empty), `lk`/`lm`, its list index and member there, and `tk`, its
//! tool's index. The same member is in `<prefix>:ops:st:<status>` and in
//! `<prefix>:ops:tool:<tool>` (`tk`), the operator's indexes (every task
//! is in one status index, so the five of them are the index of every
//! task; `<prefix>:ops:all` holds only what versions before that wrote);
//! an ended task's id is in `<prefix>:ops:ended` by the time it ended.

use redis::Script;

/// The most index entries one call of a walking script examines, live or
/// not (`list`, `orphans`, `claim_runnable` take it as an argument): dead
/// entries (expired tasks, or ones Redis deleted by their key's TTL) cost a
/// call as much as live ones, so a call stops here however many lie ahead.
pub(super) const SCAN_CAP: usize = 1_000;

/// Every create and compare-and-set of a task: a batch of them, each
/// applied as if alone, in order (`batch.rs` groups the writes callers
/// make at the same time). ARGV: the expiry, leases and ended keys,
/// the channel, the status index head, then for each write
/// [`WRITE_ARGS`] values: `c` to create, or the expected version; the
/// task's key, its list index, id, version, record, exp, lease, status,
/// updated, list member, key TTL in ms (or empty), the lease holder (or
/// empty), the tool's index.
///
/// One answer per write: a create 1 if created, 0 if the id exists; a
/// replace 0 if no such task, 1 if at another version, 2 if replaced; or
/// the error of that write, as text (each runs under `pcall`, so one failing write
/// does not stop the others, nor hide what they did).
///
/// `<prefix>:ops:all` is no longer written (one command fewer per task):
/// the status indexes, one of which holds each task, list every task.
///
/// A create is announced only for a task queued for a worker (its lease
/// ended before it was made), so idle workers wake at once, as
/// PostgreSQL's migration 5 does. A replace is announced as `<version>
/// <status> <id>`: every write a client can see; not a lease renewal (a
/// write that moves the lease and keeps status and `updated_at_ms`), as
/// PostgreSQL's trigger decides. A replace sets the fields of the task's
/// hash that changed (version, record, lease and holder always) and adds
/// to the indexes only what changed; a record without `tk` (stored by a
/// version before the tool indexes, and maybe before the operator's) is
/// put in every index. The key's TTL is set by the create and by a write
/// that changes the expiry (the time left by the record's clock then, and
/// a margin): the same deadline for as long as the expiry stays, so a
/// write that keeps it (a claim, a renewal, a result) leaves it.
const WRITE: &str = r"
local expiry, leases, ended, channel, sh = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local function is_end(st) return st == 'completed' or st == 'failed' or st == 'cancelled' end
local function create(i)
    local key, list, id, v, exp, lease, st, upd, m, ttl, tool =
        ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 6], ARGV[i + 7],
        ARGV[i + 8], ARGV[i + 9], ARGV[i + 10], ARGV[i + 11], ARGV[i + 13]
    if redis.call('EXISTS', key) == 1 then return 0 end
    redis.call('HSET', key, 'v', v, 'rec', ARGV[i + 5], 'exp', exp, 'lease', lease, 'st', st,
        'upd', upd, 'lk', list, 'lm', m, 'hold', ARGV[i + 12], 'tk', tool)
    if exp ~= '' then redis.call('ZADD', expiry, exp, id) end
    if lease ~= '' then redis.call('ZADD', leases, lease, id) end
    redis.call('ZADD', list, 0, m)
    redis.call('ZADD', tool, 0, m)
    redis.call('ZADD', sh .. st, 0, m)
    if is_end(st) then redis.call('ZADD', ended, upd, id) end
    if ttl ~= '' then redis.call('PEXPIRE', key, ttl) end
    if lease ~= '' and tonumber(lease) < tonumber(upd) then
        redis.call('PUBLISH', channel, v .. ' ' .. st .. ' ' .. id)
    end
    return 1
end
local function replace(i)
    local key, list, id, v, exp, lease, st, upd, m, ttl, tool =
        ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 6], ARGV[i + 7],
        ARGV[i + 8], ARGV[i + 9], ARGV[i + 10], ARGV[i + 11], ARGV[i + 13]
    local old = redis.call('HMGET', key, 'v', 'st', 'upd', 'lease', 'lk', 'lm', 'tk', 'exp')
    if not old[1] then return 0 end
    if old[1] ~= ARGV[i] then return 1 end
    local set = { 'v', v, 'rec', ARGV[i + 5], 'lease', lease, 'hold', ARGV[i + 12] }
    local function changed(f, was, now)
        if was ~= now then set[#set + 1] = f; set[#set + 1] = now end
    end
    changed('exp', old[8], exp); changed('st', old[2], st); changed('upd', old[3], upd)
    changed('lk', old[5], list); changed('lm', old[6], m); changed('tk', old[7], tool)
    redis.call('HSET', key, unpack(set))
    local known = old[7] and old[6] == m
    if not old[7] then redis.call('ZADD', tool, 0, m) end
    if old[5] ~= list or old[6] ~= m then
        if old[5] then redis.call('ZREM', old[5], old[6]) end
        redis.call('ZADD', list, 0, m)
    end
    if old[2] ~= st or not known then
        if old[2] ~= st and old[6] then redis.call('ZREM', sh .. old[2], old[6]) end
        redis.call('ZADD', sh .. st, 0, m)
    end
    if is_end(st) and (old[2] ~= st or old[3] ~= upd) then redis.call('ZADD', ended, upd, id) end
    if exp ~= old[8] or not known then
        if exp ~= '' then redis.call('ZADD', expiry, exp, id)
        else redis.call('ZREM', expiry, id) end
    end
    if lease ~= '' then redis.call('ZADD', leases, lease, id)
    else redis.call('ZREM', leases, id) end
    if exp ~= old[8] or not known then
        if ttl ~= '' then redis.call('PEXPIRE', key, ttl)
        else redis.call('PERSIST', key) end
    end
    if old[2] ~= st or old[3] ~= upd or old[4] == lease then
        redis.call('PUBLISH', channel, v .. ' ' .. st .. ' ' .. id)
    end
    return 2
end
local out = {}
for i = 6, #ARGV, 14 do
    local write = ARGV[i] == 'c' and create or replace
    local ok, n = pcall(write, i)
    if ok then out[#out + 1] = n
    else out[#out + 1] = type(n) == 'table' and tostring(n.err) or tostring(n) end
end
return out
";

/// How many values each write of a `WRITE` batch takes.
pub(super) const WRITE_ARGS: usize = 14;

/// Delete task `id` (its key is `head .. id .. '}'`) and its index
/// entries. KEYS: expiry, leases, all, ended; `sh`: the status index head.
/// The shared body of `REAP` and `PURGE`.
const DELETE: &str = r"
local function delete(head, id, sh)
    local key = head .. id .. '}'
    local index = redis.call('HMGET', key, 'lk', 'lm', 'st', 'tk')
    if index[1] then
        redis.call('ZREM', index[1], index[2])
        redis.call('ZREM', KEYS[3], index[2])
        redis.call('ZREM', sh .. index[3], index[2])
        if index[4] then redis.call('ZREM', index[4], index[2]) end
    end
    redis.call('DEL', key)
    redis.call('ZREM', KEYS[1], id)
    redis.call('ZREM', KEYS[2], id)
    redis.call('ZREM', KEYS[4], id)
    return index
end
";

/// `delete_expired`. KEYS: expiry, leases, all, ended. ARGV: now, limit, the task
/// key head, the status index head. The ids deleted: the whole batch is one
/// script, so replicas reaping at once take disjoint batches.
const REAP: &str = r"
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
for _, id in ipairs(ids) do delete(ARGV[3], id, ARGV[4]) end
return ids
";

/// An operator's purge. KEYS: expiry, leases, all, ended. ARGV: the task key
/// head, the status index head, then the ids. Deletes those still stored
/// and terminal; how many.
const PURGE: &str = r"
local n = 0
for i = 3, #ARGV do
    local st = redis.call('HGET', ARGV[1] .. ARGV[i] .. '}', 'st')
    if st == 'completed' or st == 'failed' or st == 'cancelled' then
        delete(ARGV[1], ARGV[i], ARGV[2])
        n = n + 1
    end
end
return n
";

/// The operator's reads below walk an index by rank, a chunk a call
/// (`redis/chunks.rs`): ARGV's last two are the chunk's first rank within
/// the range read and its length, and the answer's first element is how
/// many members the call read.
///
/// `expired`. KEYS: expiry. ARGV: now, the task key head, first, length.
/// The expired ids' statuses, as status and count pairs. Ranks count from
/// the newest expired id down: the reaper deletes from the oldest end,
/// which moves no rank still to read.
const EXPIRED: &str = r"
local now, first, n = tonumber(ARGV[1]), tonumber(ARGV[3]), tonumber(ARGV[4])
local top = redis.call('ZCOUNT', KEYS[1], '-inf', now) - 1 - first
local ids, counts, out = {}, {}, {}
if top >= 0 then ids = redis.call('ZRANGE', KEYS[1], math.max(0, top - n + 1), top) end
for _, id in ipairs(ids) do
    local st = redis.call('HGET', ARGV[2] .. id .. '}', 'st')
    if st then counts[st] = (counts[st] or 0) + 1 end
end
out[1] = tostring(#ids)
for st, c in pairs(counts) do out[#out + 1] = st; out[#out + 1] = tostring(c) end
return out
";

/// `waiting`. KEYS: the `input_required` status index. ARGV: now, the task
/// key head, first, length. The id and `updated_at_ms` of each live task.
const WAITING: &str = r"
local now, first, n = tonumber(ARGV[1]), tonumber(ARGV[3]), tonumber(ARGV[4])
local ms = redis.call('ZRANGE', KEYS[1], first, first + n - 1)
local out = { tostring(#ms) }
for _, m in ipairs(ms) do
    local id = string.sub(m, 22)
    local r = redis.call('HMGET', ARGV[2] .. id .. '}', 'upd', 'exp')
    if r[1] and (r[2] == '' or tonumber(r[2]) > now) then
        out[#out + 1] = id; out[#out + 1] = r[1]
    end
end
return out
";

/// `fleet`: an operator's view of the fleet, from the `working` tasks
/// under a lease. KEYS: leases. ARGV: now, the task key head, the queue's
/// holder name, first, length. The number queued, the id and lease end of
/// the one queued first (or two empty strings), then a holder and its
/// count of tasks under a live lease, for each holder.
const FLEET: &str = r"
local now, queued, first, first_at, first_text, running = tonumber(ARGV[1]), 0, '', nil, '', {}
local ids = redis.call('ZRANGE', KEYS[1], tonumber(ARGV[4]), tonumber(ARGV[4]) + tonumber(ARGV[5]) - 1)
for _, id in ipairs(ids) do
    local r = redis.call('HMGET', ARGV[2] .. id .. '}', 'hold', 'lease', 'exp', 'st')
    if r[4] == 'working' and r[2] and r[2] ~= '' and (r[3] == '' or tonumber(r[3]) > now) then
        local lease = tonumber(r[2])
        if r[1] == ARGV[3] then
            queued = queued + 1
            if not first_at or lease < first_at or (lease == first_at and id < first) then
                first, first_at, first_text = id, lease, r[2]
            end
        elseif lease >= now then
            local holder = r[1] or ''
            running[holder] = (running[holder] or 0) + 1
        end
    end
end
local out = {tostring(#ids), tostring(queued), first, first_text}
for holder, n in pairs(running) do
    out[#out + 1] = holder
    out[#out + 1] = tostring(n)
end
return out
";

/// `list`. KEYS: the list index (or an operator's), or several indexes
/// read as one (an operator's status indexes, merged: the walk's position
/// is a member, shared by them all, so a task whose status changes
/// meanwhile is read once at most, whichever index holds it). ARGV: now,
/// limit, the exclusive upper bound (`+` or `(<member>`), the task key
/// head, the inclusive lower bound (`-` for none), and the most members
/// this call examines. Newest first across the indexes (their members
/// merged in byte order, the order of one index; a member in two of them
/// is taken once), at most `limit` live records, skipping expired ones;
/// members whose task is gone (deleted by the key TTL) are dropped from
/// their index. Answers `{records, last member examined (or ''), members
/// examined, 1 if every index was read to its end}`: a call stops at the
/// cap however many dead members lie ahead, and the caller goes on below
/// the last member or stops there.
const LIST: &str = r"
local out, now, limit, min, cap = {}, tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[5], tonumber(ARGV[6])
local function before(a, b)
    for i = 1, math.min(#a, #b) do
        local x, y = string.byte(a, i), string.byte(b, i)
        if x ~= y then return x < y end
    end
    return #a < #b
end
local heads, seen, last, done = {}, 0, '', 0
for i, key in ipairs(KEYS) do heads[i] = { key = key, max = ARGV[3], buf = {}, pos = 1 } end
while #out < limit and seen < cap do
    local best
    for _, h in ipairs(heads) do
        if not h.done and h.pos > #h.buf then
            local n = math.min(limit - #out, cap - seen)
            h.buf, h.pos = redis.call('ZREVRANGEBYLEX', h.key, h.max, min, 'LIMIT', 0, n), 1
            h.done = #h.buf == 0
        end
        if not h.done and (not best or before(best.buf[best.pos], h.buf[h.pos])) then best = h end
    end
    if not best then done = 1 break end
    local m, from = best.buf[best.pos], {}
    for _, h in ipairs(heads) do
        if not h.done and h.buf[h.pos] == m then
            h.pos, h.max, from[#from + 1] = h.pos + 1, '(' .. m, h.key
        end
    end
    seen, last = seen + 1, m
    local r = redis.call('HMGET', ARGV[4] .. string.sub(m, 22) .. '}', 'rec', 'exp')
    if not r[1] then for _, key in ipairs(from) do redis.call('ZREM', key, m) end
    elseif r[2] == '' or tonumber(r[2]) > now then out[#out + 1] = r[1] end
end
return { out, last, seen, done }
";

/// `orphans`. KEYS: leases. ARGV: now, limit, the task key head, the most
/// entries to examine ([`SCAN_CAP`]). `working` records whose lease ended
/// before `now`, oldest lease first, skipping expired ones; the entries of
/// tasks that are gone (deleted by their key's TTL) dropped.
const ORPHANS: &str = r"
local out, now, limit, offset, seen = {}, tonumber(ARGV[1]), tonumber(ARGV[2]), 0, 0
local cap = tonumber(ARGV[4])
while #out < limit and seen < cap do
    local batch = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1], 'LIMIT', offset, limit)
    if #batch == 0 then break end
    for _, id in ipairs(batch) do
        seen = seen + 1
        local r = redis.call('HMGET', ARGV[3] .. id .. '}', 'rec', 'exp', 'st')
        if not r[1] then
            redis.call('ZREM', KEYS[1], id)
        else
            offset = offset + 1
            if r[3] == 'working' and (r[2] == '' or tonumber(r[2]) > now) then
                out[#out + 1] = r[1]
                if #out == limit then break end
            end
        end
    end
end
return out
";

/// `claim_runnable`. KEYS: leases. ARGV: now, limit, the task key head,
/// the end of the hold, the most entries to examine ([`SCAN_CAP`]), then
/// the claimer's holder (or empty), the same as JSON text, its lease end,
/// and the ids it runs. What `ORPHANS` would answer, as
/// pairs: `c` and the record this script claimed, or `h` and a record held
/// for the caller to claim or pass by.
///
/// A queued record (its holder `~queued`) whose JSON ends in its version
/// and lease (`TaskRecord`'s last fields), with no sealed fields, not one
/// the claimer runs, is claimed here when a holder is given: version + 1,
/// the lease `{holder, fence + 1, lease end}` written over that end of the
/// JSON, the hash's version, lease and holder set and its `leases` entry
/// moved to the lease end, as `WRITE` would (a claim changes neither the
/// status nor `updated_at_ms`: no announcement, the key's TTL kept). Any
/// other record is held: its lease entry moves to the hold's end, past
/// `now`, so that a claim at the same time reads the ones after it; the
/// claimer writes its claims (`WRITE`, which puts the entry at the new
/// lease's end) and gives back the ones it passed by (`RELEASE`); a
/// claimer that dies in between holds them until the hold ends. At most
/// [`SCAN_CAP`] entries are examined a call (expired tasks wait for the reaper);
/// the entries of tasks that are gone (deleted by their key's TTL) are
/// dropped.
const CLAIM: &str = r#"
local out, now, limit, offset, n, seen = {}, tonumber(ARGV[1]), tonumber(ARGV[2]), 0, 0, 0
local cap, holder, quoted, lease_end, skip = tonumber(ARGV[5]), ARGV[6], ARGV[7], ARGV[8], {}
for i = 9, #ARGV do skip[ARGV[i]] = true end
if holder ~= '' and tonumber(lease_end) <= now then holder = '' end
local tail = ',"version":(%d+),"lease":{"holder":"~queued","fence":(%d+),"until_ms":%-?%d+}}$'
while n < limit and seen < cap do
    local batch = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1], 'LIMIT', offset, limit - n)
    if #batch == 0 then break end
    for _, id in ipairs(batch) do
        seen = seen + 1
        local key = ARGV[3] .. id .. '}'
        local r = redis.call('HMGET', key, 'rec', 'exp', 'st', 'v', 'hold')
        if not r[1] then
            redis.call('ZREM', KEYS[1], id)
        elseif r[3] == 'working' and (r[2] == '' or tonumber(r[2]) > now) then
            local rec, at, v, fence = r[1], nil, nil, nil
            if holder ~= '' and r[5] == '~queued' and not skip[id]
                and not string.find(rec, ',"sealed":', 1, true) then
                local found = { string.find(rec, tail, math.max(1, #rec - 160)) }
                at, v, fence = found[1], found[3], found[4]
            end
            if at and v == r[4] then
                v = string.format('%.0f', tonumber(v) + 1)
                rec = string.sub(rec, 1, at - 1) .. ',"version":' .. v .. ',"lease":{"holder":'
                    .. quoted .. ',"fence":' .. string.format('%.0f', tonumber(fence) + 1)
                    .. ',"until_ms":' .. lease_end .. '}}'
                redis.call('HSET', key, 'v', v, 'rec', rec, 'lease', lease_end,
                    'hold', holder)
                redis.call('ZADD', KEYS[1], lease_end, id)
                out[#out + 1] = 'c'
            else
                redis.call('ZADD', KEYS[1], ARGV[4], id)
                out[#out + 1] = 'h'
            end
            out[#out + 1] = rec
            n = n + 1
        else
            offset = offset + 1
        end
    end
end
return out
"#;

/// Give back records a claim held and passed by. KEYS: leases. ARGV: the
/// task key head, then id and version of each. A record still at that
/// version goes back to its lease's end; one written since is where that
/// write put it.
const RELEASE: &str = r"
for i = 2, #ARGV, 2 do
    local r = redis.call('HMGET', ARGV[1] .. ARGV[i] .. '}', 'v', 'lease')
    if r[1] == ARGV[i + 1] and r[2] and r[2] ~= '' then
        redis.call('ZADD', KEYS[1], r[2], ARGV[i])
    end
end
return 0
";

/// `ended`: an operator's count of ended tasks. KEYS: ended. ARGV: since
/// (inclusive), now (exclusive), the task key head, first, length (ranks
/// counted from the first task that ended at `since` or later). Status
/// and end of each live task that ended between them, flat.
const ENDED: &str = r"
local now, first, n = tonumber(ARGV[2]), tonumber(ARGV[4]), tonumber(ARGV[5])
local base = redis.call('ZCOUNT', KEYS[1], '-inf', '(' .. ARGV[1])
local last = math.min(base + first + n, redis.call('ZCOUNT', KEYS[1], '-inf', '(' .. ARGV[2])) - 1
local ids = {}
if last >= base + first then ids = redis.call('ZRANGE', KEYS[1], base + first, last, 'WITHSCORES') end
local out = { tostring(math.floor(#ids / 2)) }
for i = 1, #ids, 2 do
    local r = redis.call('HMGET', ARGV[3] .. ids[i] .. '}', 'st', 'exp')
    if r[1] and (r[2] == '' or tonumber(r[2]) > now) then
        out[#out + 1] = r[1]
        out[#out + 1] = ids[i + 1]
    end
end
return out
";

/// Put tasks stored before the tool indexes existed into them, a batch at
/// a time. KEYS: all. ARGV: the task key head, the tool index head, the
/// exclusive lower bound (`-` or `(<member>`), the batch size. The last
/// member read, or an empty string after the last batch.
const INDEX_TOOLS: &str = r"
local batch = redis.call('ZRANGEBYLEX', KEYS[1], ARGV[3], '+', 'LIMIT', 0, tonumber(ARGV[4]))
for _, m in ipairs(batch) do
    local key = ARGV[1] .. string.sub(m, 22) .. '}'
    local r = redis.call('HMGET', key, 'rec', 'tk')
    if r[1] and not r[2] then
        local ok, rec = pcall(cjson.decode, r[1])
        if ok and type(rec) == 'table' and type(rec.tool_name) == 'string' then
            local tk = ARGV[2] .. rec.tool_name
            redis.call('ZADD', tk, 0, m)
            redis.call('HSET', key, 'tk', tk)
        end
    end
end
if #batch < tonumber(ARGV[4]) then return '' end
return batch[#batch]
";

/// The scripts, hashed once per store.
#[derive(Debug)]
pub(super) struct Scripts {
    pub(super) write: Script,
    pub(super) reap: Script,
    pub(super) list: Script,
    pub(super) orphans: Script,
    pub(super) claim: Script,
    pub(super) release: Script,
    pub(super) purge: Script,
    pub(super) expired: Script,
    pub(super) waiting: Script,
    pub(super) fleet: Script,
    pub(super) ended: Script,
    pub(super) index_tools: Script,
}

impl Scripts {
    pub(super) fn new() -> Self {
        Scripts {
            write: Script::new(WRITE),
            reap: Script::new(&format!("{DELETE}{REAP}")),
            list: Script::new(LIST),
            orphans: Script::new(ORPHANS),
            claim: Script::new(CLAIM),
            release: Script::new(RELEASE),
            purge: Script::new(&format!("{DELETE}{PURGE}")),
            expired: Script::new(EXPIRED),
            waiting: Script::new(WAITING),
            fleet: Script::new(FLEET),
            ended: Script::new(ENDED),
            index_tools: Script::new(INDEX_TOOLS),
        }
    }

    /// All of them, to load at connect.
    pub(super) fn all(&self) -> [&Script; 12] {
        [
            &self.write,
            &self.reap,
            &self.list,
            &self.orphans,
            &self.claim,
            &self.release,
            &self.purge,
            &self.expired,
            &self.waiting,
            &self.fleet,
            &self.ended,
            &self.index_tools,
        ]
    }
}
