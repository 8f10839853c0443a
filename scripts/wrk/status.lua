-- wrk script for any URL: counts the answers by HTTP status and prints them at the end, with the rate
-- of 2xx answers beside wrk's "Requests/sec" (which counts every answer, errors included: an endpoint
-- answering 400 or 503 fast looks faster than one that works).
--
--   wrk -t2 -c50 -d10s --latency -s scripts/wrk/status.lua 'http://127.0.0.1:8080/send1?size=1024'
--
-- Environment:
--   BODY_SIZE   when set, POST a body of that many bytes (mqtarget publishes it as the payload).
--
-- Output after wrk's own:
--   status  answers   share
--   200       81234   99.98%
--   503          17    0.02%
--   2xx/s   8123.4 of 8125.1 answers/s; socket errors: connect 0, read 0, write 0, timeout 0

local body_size = tonumber(os.getenv("BODY_SIZE") or "")
if body_size then
   wrk.method = "POST"
   wrk.body = string.rep("x", body_size)
   wrk.headers["Content-Type"] = "application/octet-stream"
end

local threads = {}

function setup(thread)
   table.insert(threads, thread)
end

function init(args)
   codes = {}
end

function response(status, headers, body)
   codes[status] = (codes[status] or 0) + 1
end

function done(summary, latency, requests)
   local merged, total, ok = {}, 0, 0
   for _, t in ipairs(threads) do
      for code, n in pairs(t:get("codes")) do
         merged[code] = (merged[code] or 0) + n
      end
   end
   local list = {}
   for code, n in pairs(merged) do
      table.insert(list, code)
      total = total + n
      if code >= 200 and code <= 299 then ok = ok + n end
   end
   table.sort(list)
   io.write(string.format("%-7s %9s %8s\n", "status", "answers", "share"))
   for _, code in ipairs(list) do
      io.write(string.format("%-7d %9d %7.2f%%\n", code, merged[code], 100 * merged[code] / total))
   end
   if total == 0 then io.write("(no answers)\n") end
   local secs = summary.duration / 1e6
   local e = summary.errors
   io.write(string.format("2xx/s   %.1f of %.1f answers/s; socket errors: connect %d, read %d, write %d, timeout %d\n",
      ok / secs, total / secs, e.connect, e.read, e.write, e.timeout))
end
