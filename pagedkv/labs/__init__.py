"""labs."""
