"""Native code of the parse child, compiled at setup against the installed pymupdf's mupdf
(`python -m parser_svc.parsers.native.build`). Everything here has a pure-Python fallback."""
