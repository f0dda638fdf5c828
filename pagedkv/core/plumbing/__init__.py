"""Plumbing the core stands on: argument checks and page events (a first reading may skip it)."""
