"""Running jobs: the durable queue, the workers that claim and run them, progress writes, the
sweeper, the blob store, job tracing, the writes that end a job (terminal_writes).
"""
