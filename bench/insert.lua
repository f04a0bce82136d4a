-- wrk script for bench/run: POST /ids with one id per request, {"id":"<id>"},
-- ids uniform in [BG_ID_LO, BG_ID_HI], from a pool of BG_POOL requests
-- formatted up front as in exists.lua.  bench/run sends ids already in the
-- table, so the filter (at capacity) stays the same for the rounds that
-- follow; the insert path is the same either way.
local lo = tonumber(os.getenv("BG_ID_LO") or "1")
local hi = tonumber(os.getenv("BG_ID_HI") or "1000000")
local n = tonumber(os.getenv("BG_POOL") or "131072")
local headers = { ["Content-Type"] = "application/json" }
local pool = {}
local thread_no = 0

function setup(thread)
    thread_no = thread_no + 1
    thread:set("seed", thread_no)
end

function init(args)
    math.randomseed(os.time() * 1000 + (seed or 0))
    for i = 1, n do
        local body = '{"id":"' .. math.random(lo, hi) .. '"}'
        pool[i] = wrk.format("POST", "/ids", headers, body)
    end
end

function request()
    return pool[math.random(n)]
end
