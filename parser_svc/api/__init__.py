"""The gRPC API: the servicer and the handling of each call (submit, batches, uploads,
listings, watches, status answers, callers).
"""
