"""parser_svc: the replicated parse service (API + queue workers + parse subprocesses)."""

# The version of the parsers, written into every reading package (`parser_version`) and part
# of the dedupe key: a new parser does not answer with packages made by an old one. It is the
# server's own, not the client package's (a new SDK release does not invalidate any result).
# 0.1.1: PDF text boxes are mupdf's own character boxes in every process (they depended on
# what the process had imported; production packages had pymupdf's stretched ones).
# 0.2.0: PDF structure: blocks in reading order (columns), list items, headings with levels,
# the title and page furniture (headers, footers) marked.
PARSER_VERSION = "0.2.0"
