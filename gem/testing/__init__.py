"""Reusable test machinery (needs the `test` extra: hypothesis)."""
