-- wrk script for scripts/bench.sh: counts non-2xx answers apart from throughput (wrk's own
-- "Requests/sec" counts every answer, and its "Non-2xx" line only statuses >= 400) and prints one
-- machine-readable line at the end:
--
--   BENCH requests=… ok=… non2xx=… codes=429:3,503:1 connect=… read=… write=… timeout=…
--         duration_us=… p50_us=… p99_us=… p999_us=… max_us=…
--
-- Environment:
--   BENCH_POST_SIZE  when set, POST a body of that many bytes shaped like mqtarget's payload
--                    (16 hex digits, a space, 19 decimal digits, a space, 'x' padding), as the
--                    anchor runs against nsqd's own /pub do; otherwise GET.
--
-- wrk -t2 -c50 -d8s -s scripts/wrk/bench.lua http://127.0.0.1:8080/send1

local post_size = tonumber(os.getenv("BENCH_POST_SIZE") or "")
if post_size then
   local header = "00c0ffee00000001 1796083200000000000 "
   local body = string.sub(header, 1, post_size)
   wrk.method = "POST"
   wrk.body = body .. string.rep("x", post_size - #body)
   wrk.headers["Content-Type"] = "application/octet-stream"
end

local threads = {}

function setup(thread)
   table.insert(threads, thread)
end

function init(args)
   non2xx = 0
   codes = {}
end

function response(status, headers, body)
   if status < 200 or status > 299 then
      non2xx = non2xx + 1
      codes[status] = (codes[status] or 0) + 1
   end
end

function done(summary, latency, requests)
   local n, merged = 0, {}
   for _, t in ipairs(threads) do
      n = n + t:get("non2xx")
      for code, c in pairs(t:get("codes")) do
         merged[code] = (merged[code] or 0) + c
      end
   end
   local list = {}
   for code, c in pairs(merged) do
      table.insert(list, code .. ":" .. c)
   end
   table.sort(list)
   local codes_text = table.concat(list, ",")
   if codes_text == "" then codes_text = "-" end
   local e = summary.errors
   io.write(string.format(
      "BENCH requests=%d ok=%d non2xx=%d codes=%s connect=%d read=%d write=%d timeout=%d duration_us=%d p50_us=%d p99_us=%d p999_us=%d max_us=%d\n",
      summary.requests, summary.requests - n, n, codes_text, e.connect, e.read, e.write, e.timeout,
      summary.duration, latency:percentile(50), latency:percentile(99), latency:percentile(99.9), latency.max))
end
