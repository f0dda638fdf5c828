"""The eviction lab's printouts: the numbers they derive, checked by hand."""

from pagedkv.labs.eviction_printouts import cost_text, gains_over_lru, pin_margins


def test_gains_over_lru_subtracts_the_printed_rates():
    table = {"w": {"lru": 0.18349, "arc": 0.31351}}  # printed 18.3 % and 31.4 %
    pct, gain = gains_over_lru(table)
    assert pct == {"w": {"lru": 18.3, "arc": 31.4}}
    assert gain == {"w": {"lru": 0.0, "arc": 13.1}}  # 31.4 - 18.3, not 13.0 of the raw rates


def test_pin_margins_per_seed_and_mean():
    runs = {
        ("chat", 2048): [
            {"lru": 58.5, "lru+pin": 57.4},
            {"lru": 50.0, "lru+pin": 52.3},
            {"lru": 60.0, "lru+pin": 59.5},
        ]
    }
    margins, means = pin_margins(runs, [2048])
    assert margins == {2048: [-1.1, 2.3, -0.5]}
    assert means == {2048: 0.2}  # (-1.1 + 2.3 - 0.5) / 3 = 0.233


def test_cost_text_divides_writes_by_requests_and_skips_by_victims():
    costs = {
        "lru+pin": {
            "hashes held": 32,
            "list writes": 9321,
            "requests": 400,
            "pages skipped": 27,
            "victims": 2,
        }
    }
    line = cost_text(costs, {"lru+pin": 8.5}).splitlines()[1].split()
    assert line == ["lru+pin", "+8.5", "32", "9,321", "23.3", "13.5"]  # 9321/400, 27/2
