-- wrk script for bench/run: POST /exists with BG_BATCH random ids per
-- request, ids uniform in [BG_ID_LO, BG_ID_HI]; as JSON {"ids":["...", ...]}
-- or, with BG_BATCH_FORMAT=text, one id per line (text/plain).
local lo = tonumber(os.getenv("BG_ID_LO") or "1")
local hi = tonumber(os.getenv("BG_ID_HI") or "1000000")
local n = tonumber(os.getenv("BG_BATCH") or "1000")
local text = os.getenv("BG_BATCH_FORMAT") == "text"
local headers = { ["Content-Type"] = text and "text/plain" or "application/json" }
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
    local body
    if text then
        for i = 1, n do
            ids[i] = math.random(lo, hi)
        end
        body = table.concat(ids, "\n")
    else
        for i = 1, n do
            ids[i] = '"' .. math.random(lo, hi) .. '"'
        end
        body = '{"ids":[' .. table.concat(ids, ",") .. ']}'
    end
    return wrk.format("POST", "/exists", headers, body)
end
