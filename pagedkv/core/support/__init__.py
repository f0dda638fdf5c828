"""core/support."""
