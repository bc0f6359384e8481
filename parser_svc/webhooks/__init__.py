"""Webhooks: callbacks registered at submit, the outbox in Redis, the dispatcher, SSRF-safe
egress, signatures.
"""
