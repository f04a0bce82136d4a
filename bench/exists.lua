-- wrk script for bench/run: GET <BG_PATH><id> with ids uniform in
-- [BG_ID_LO, BG_ID_HI]; BG_FIXED=1 sends BG_PATH alone (e.g. /healthz).
-- Each thread picks every request from BG_POOL requests formatted up front
-- (bench/wrkpool.lua).
local bench = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "wrkpool.lua")
local path = os.getenv("BG_PATH") or "/exists/"
local n = tonumber(os.getenv("BG_POOL") or "131072")
local fixed = os.getenv("BG_FIXED") == "1"
local pick

setup = bench.setup

function init(args)
    bench.seed()
    if fixed then
        pick = bench.pool(1, function() return wrk.format("GET", path) end)
        return
    end
    pick = bench.pool(n, function() return wrk.format("GET", path .. bench.id()) end)
end

function request()
    return pick()
end
