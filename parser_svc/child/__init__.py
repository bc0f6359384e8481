"""The process that runs parsers: the sandbox (limits), the fork server, the parse child."""
