-- wrk script for bench/run: GET <BG_PATH><random id>, ids uniform in
-- [BG_ID_LO, BG_ID_HI]; BG_FIXED=1 sends BG_PATH alone (e.g. /healthz).
local path = os.getenv("BG_PATH") or "/exists/"
local lo = tonumber(os.getenv("BG_ID_LO") or "1")
local hi = tonumber(os.getenv("BG_ID_HI") or "1000000")
local fixed = os.getenv("BG_FIXED") == "1"
local thread_no = 0

function setup(thread)
    thread_no = thread_no + 1
    thread:set("seed", thread_no)
end

function init(args)
    math.randomseed(os.time() * 1000 + (seed or 0))
    if fixed then
        fixed_req = wrk.format("GET", path)
    end
end

function request()
    if fixed_req then
        return fixed_req
    end
    return wrk.format("GET", path .. math.random(lo, hi))
end
