-- wrk script for bench/run: POST /ids with one new random id per request,
-- {"id":"<BG_PREFIX><random>"}.
local prefix = os.getenv("BG_PREFIX") or "ins-"
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
    local body = '{"id":"' .. prefix .. math.random(1, 2147483647) .. '"}'
    return wrk.format("POST", "/ids", headers, body)
end
