"""The capacity benchmark's scenarios (bench.bench_capacity): per-job costs through a stack,
and the validation of the model (bench.capacity) against a measured run."""
