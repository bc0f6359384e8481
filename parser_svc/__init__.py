"""parser_svc: the replicated parse service (API + queue workers + parse subprocesses)."""
