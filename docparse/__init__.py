"""docparse: client SDK, CLI and generated API stubs for the docparse parse service."""

__version__ = "0.1.0"
