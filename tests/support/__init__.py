"""Helpers that start real services for the integration tests (on loopback, free ports)."""
