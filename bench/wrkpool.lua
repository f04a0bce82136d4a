-- What the wrk scripts of bench/run (exists.lua, insert.lua, batch.lua)
-- share: the id range from BG_ID_LO/BG_ID_HI, one random seed per thread,
-- and the pool of requests formatted up front (before wrk's clock starts),
-- since the client, not the server, is the first to run out of CPU.
-- Loaded with dofile from the script's own directory.
local M = {}

M.lo = tonumber(os.getenv("BG_ID_LO") or "1")
M.hi = tonumber(os.getenv("BG_ID_HI") or "1000000")

local thread_no = 0

-- wrk's setup(thread), in the main state: a distinct seed for each thread.
function M.setup(thread)
    thread_no = thread_no + 1
    thread:set("seed", thread_no)
end

-- Seed this thread's generator (from init); `seed` is the global setup set.
-- BG_SEED fixes the stream: two runs with the same BG_SEED send the same
-- ids in the same order (bench/run's on/off comparisons of one daemon
-- against its twin, which must not differ by the ids they were asked).
function M.seed()
    local fixed = tonumber(os.getenv("BG_SEED") or "")
    math.randomseed((fixed or os.time()) * 1000 + (seed or 0))
end

-- A random id in [BG_ID_LO, BG_ID_HI].
function M.id()
    return math.random(M.lo, M.hi)
end

-- n requests made by make(i), formatted now; returns a function that
-- returns one of them at random.
function M.pool(n, make)
    local pool = {}
    for i = 1, n do
        pool[i] = make(i)
    end
    return function()
        return pool[math.random(n)]
    end
end

return M
