"""parser_svc: the replicated parse service (API + queue workers + parse subprocesses)."""

# The version of the parsers, written into every reading package (`parser_version`) and part
# of the dedupe key: a new parser does not answer with packages made by an old one. It is the
# server's own, not the client package's (a new SDK release does not invalidate any result).
PARSER_VERSION = "0.1.0"
