"""The spine benchmark's scenarios (bench/bench_spine.py runs them): GetStatus load against
bare grpc.aio, parser_svc and the gateway (`get_status`, summarized in `summary`), WatchJob
delivery (`watch`) next to raw Redis pub/sub (`pubsub`), and the printed report (`report`)."""
