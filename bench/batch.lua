-- wrk script for bench/run: POST /exists with BG_BATCH random ids per
-- request, {"ids":["...", ...]}, ids uniform in [BG_ID_LO, BG_ID_HI].
local lo = tonumber(os.getenv("BG_ID_LO") or "1")
local hi = tonumber(os.getenv("BG_ID_HI") or "1000000")
local n = tonumber(os.getenv("BG_BATCH") or "1000")
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
    local ids = {}
    for i = 1, n do
        ids[i] = '"' .. math.random(lo, hi) .. '"'
    end
    local body = '{"ids":[' .. table.concat(ids, ",") .. ']}'
    return wrk.format("POST", "/exists", headers, body)
end
