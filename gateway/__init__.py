"""gateway: the stateless gRPC front door in front of parser_svc replicas."""
