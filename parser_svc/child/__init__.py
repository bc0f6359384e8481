"""The process that runs parsers: the sandbox that runs one parse under its limits (sandbox),
the limits a parse process sets on itself (confinement), the fork server (zygote, and the
worker's side of it: fork_server), the parse child (parse_child) and the siblings that read a
long PDF's page ranges beside it (page_siblings)."""
