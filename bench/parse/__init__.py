"""The parse benchmark's scenarios (bench/bench_parse.py runs them): parsing in this process
against raw pymupdf and one parse launched alone (`in_process`), jobs through a stack
(`through_stack`), memory of replicas and parse children (`memory`), Redis commands per job
(`redis_commands`) and the printed report (`report`)."""
