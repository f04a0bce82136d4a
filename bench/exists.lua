-- wrk script for bench/run: GET <BG_PATH><id> with ids uniform in
-- [BG_ID_LO, BG_ID_HI]; BG_FIXED=1 sends BG_PATH alone (e.g. /healthz).
-- The client shares one core with nothing but itself and is the first thing
-- to run out of CPU, so each thread formats BG_POOL random requests up front
-- (before wrk's clock starts) and every request picks one of them at random.
local path = os.getenv("BG_PATH") or "/exists/"
local lo = tonumber(os.getenv("BG_ID_LO") or "1")
local hi = tonumber(os.getenv("BG_ID_HI") or "1000000")
local n = tonumber(os.getenv("BG_POOL") or "131072")
local fixed = os.getenv("BG_FIXED") == "1"
local pool = {}
local thread_no = 0

function setup(thread)
    thread_no = thread_no + 1
    thread:set("seed", thread_no)
end

function init(args)
    math.randomseed(os.time() * 1000 + (seed or 0))
    if fixed then
        n = 1
        pool[1] = wrk.format("GET", path)
        return
    end
    for i = 1, n do
        pool[i] = wrk.format("GET", path .. math.random(lo, hi))
    end
end

function request()
    return pool[math.random(n)]
end
