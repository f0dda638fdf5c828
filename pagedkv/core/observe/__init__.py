"""Views of the core for tests and pictures: snapshots, the invariant checker, the page
lifecycle table (a first reading may skip them)."""
