-- wrk script: POST a fixed body, which mqtarget publishes verbatim.
-- wrk -t2 -c50 -d10s --latency -s scripts/wrk/post.lua http://127.0.0.1:8080/send1
wrk.method = "POST"
wrk.body = string.rep("x", tonumber(os.getenv("BODY_SIZE") or "100"))
wrk.headers["Content-Type"] = "application/octet-stream"
