-- wrk script for bench/run: POST /ids with one id per request, {"id":"<id>"},
-- ids uniform in [BG_ID_LO, BG_ID_HI], from a pool of BG_POOL requests
-- formatted up front (bench/wrkpool.lua).  bench/run sends ids already in the
-- table, so the filter (at capacity) stays the same for the rounds that
-- follow; the insert path is the same either way.
local bench = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "wrkpool.lua")
local n = tonumber(os.getenv("BG_POOL") or "131072")
local headers = { ["Content-Type"] = "application/json" }
local pick

setup = bench.setup

function init(args)
    bench.seed()
    pick = bench.pool(n, function()
        return wrk.format("POST", "/ids", headers, '{"id":"' .. bench.id() .. '"}')
    end)
end

function request()
    return pick()
end
