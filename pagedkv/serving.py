"""placeholder"""

from __future__ import annotations

import numpy as np


def poisson_arrivals(num_requests: int, arrival_rate: float, seed: int = 0) -> np.ndarray:
    """Arrival times of a Poisson process of `arrival_rate` requests per unit of time
    (exponential gaps, the first request at its first gap): float64 [num_requests], sorted."""
    if isinstance(arrival_rate, bool) or not isinstance(arrival_rate, (int, float)):
        raise TypeError(f"arrival_rate must be a number, got {arrival_rate!r}")
    if not 0 < arrival_rate < float("inf"):
        raise ValueError(f"arrival_rate must be a finite number > 0, got {arrival_rate!r}")
    gaps = np.random.default_rng([seed, 3]).exponential(1 / arrival_rate, num_requests)
    return np.cumsum(gaps)
