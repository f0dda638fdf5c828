"""Plumbing the core stands on: argument checks, page events and counts in words (a first
reading may skip it)."""
