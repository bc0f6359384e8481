"""Job state in Redis, and the one door to it: the store, its keys, the Lua scripts, the
connections (single, Sentinel, Cluster), pub/sub events, pipelined reads, the tenant index.
"""
