-- wrk script for bench/run: POST /ids with one random id per request,
-- {"id":"<id>"}, ids uniform in [BG_ID_LO, BG_ID_HI].  bench/run sends ids
-- already in the table, so the filter (at capacity) stays the same for the
-- rounds that follow; the insert path is the same either way.
local lo = tonumber(os.getenv("BG_ID_LO") or "1")
local hi = tonumber(os.getenv("BG_ID_HI") or "1000000")
local headers = { ["Content-Type"] = "application/json" }
local thread_no = 0

function setup(thread)
    thread_no = thread_no + 1
    thread:set("seed", thread_no)
end

function init(args)
    math.randomseed(os.time() * 1000 + (seed or 0))
end

function request()
    local body = '{"id":"' .. math.random(lo, hi) .. '"}'
    return wrk.format("POST", "/ids", headers, body)
end
