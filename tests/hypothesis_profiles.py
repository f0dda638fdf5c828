"""Hypothesis profiles: `ci` (CI=true: every property test runs its full count) and `dev`
(otherwise: a fifth of it, for `make test-fast`).

A test states its count as CI runs it, `@settings(max_examples=examples(60))`, and the
profile scales it: `examples(60)` is 60 under `ci` and 12 under `dev`. (An explicit
`max_examples` in `@settings` overrides a profile's, so the profile cannot scale it alone.)
`pytest --hypothesis-profile=ci` runs the full counts without CI=true. No deadline in either:
under xdist the two workers share two cores with everything else, and a timing is no finding.
"""

from __future__ import annotations

import os

from hypothesis import settings

FULL = 100  # hypothesis's own default; a test without a count runs this many under `ci`
settings.register_profile("ci", max_examples=FULL, deadline=None, print_blob=True)
settings.register_profile("dev", max_examples=FULL // 5, deadline=None)
settings.load_profile("ci" if os.environ.get("CI", "").lower() == "true" else "dev")


def examples(ci_count: int) -> int:
    """`ci_count` scaled to the loaded profile (at least 5).

    Example: examples(60) -> 60 under `ci`, 12 under `dev`.
    """
    return max(5, ci_count * settings.default.max_examples // FULL)
