"""Job state in Redis, and the one door to it: the store, its keys, the Lua scripts, the
connections (single, Sentinel, Cluster), pub/sub events, pipelined reads, the tenant index,
and the Redis side of the rooms above (the webhook outbox, the sweeper's reads, BullMQ's
queue and workers). Nothing outside this package holds a connection or imports redis.
"""
