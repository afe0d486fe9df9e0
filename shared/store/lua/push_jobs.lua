-- Push jobs from outside any other write (a tool worker forwarding a job to the worker that
-- holds its session, the gateway's file requests), routed as the commits route theirs.
-- ARGV: store db, broker db, then (queue, sticky session key or '', message) triples
push_jobs(ARGV[1], ARGV[2], {unpack(ARGV, 3)})
return 1
