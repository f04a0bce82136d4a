-- wrk script for bench/run: POST /exists with BG_BATCH random ids per
-- request, ids uniform in [BG_ID_LO, BG_ID_HI]; as JSON {"ids":["...", ...]}
-- or, with BG_BATCH_FORMAT=text, one id per line (text/plain).
local bench = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "wrkpool.lua")
local n = tonumber(os.getenv("BG_BATCH") or "1000")
local text = os.getenv("BG_BATCH_FORMAT") == "text"
local headers = { ["Content-Type"] = text and "text/plain" or "application/json" }

setup = bench.setup

function init(args)
    bench.seed()
end

function request()
    local ids = {}
    local body
    if text then
        for i = 1, n do
            ids[i] = bench.id()
        end
        body = table.concat(ids, "\n")
    else
        for i = 1, n do
            ids[i] = '"' .. bench.id() .. '"'
        end
        body = '{"ids":[' .. table.concat(ids, ",") .. ']}'
    end
    return wrk.format("POST", "/exists", headers, body)
end
