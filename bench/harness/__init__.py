"""What the benchmarks share: local stacks (`stacks`), CPU and memory from /proc (`procfs`),
percentiles (`stats`), paced operations (`timing`), the benchmark's own child processes
(`children`), input documents (`documents`), jobs through a stack (`jobs`) and where results go
(`output`)."""
