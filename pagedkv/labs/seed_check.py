"""Is a policy's lead real, or noise of one seed? The eviction lab's winner rule.

The lab's streams are random, drawn from a seed. One policy may lead another on one seed
and trail it on the next. `seed_rates` replays each stream on several seeds at several cache
sizes; `call_winner` names a winner only when the lead holds on every seed and is larger
than `points` on average; otherwise there is no clear winner, and it names the policies
that could be first.

Leaves out: confidence intervals; three seeds are a quick check, not a statistical test.
"""

from __future__ import annotations

from collections.abc import Sequence

from pagedkv.labs.hit_rate_lab import make_policy, replay
from pagedkv.labs.lab_workloads import lab_workload

RIVALS = ("lru", "fifo", "lfu", "arc", "s3fifo", "lru+pin")


def seed_rates(
    streams: Sequence[str],
    sizes: Sequence[int],
    seeds: Sequence[int],
    policies: Sequence[str] = RIVALS,
    page_size: int = 16,
) -> dict[tuple[str, int], list[dict[str, float]]]:
    """For each (stream, cache size in tokens), one dict per seed: policy -> hit rate in
    percent, rounded to 0.1 as printed. Example: seed_rates(["rag"], [1024], [1, 2]) ->
    {("rag", 1024): [{"lru": 40.2, ...}, {"lru": 35.8, ...}]}."""
    rates: dict[tuple[str, int], list[dict[str, float]]] = {}
    for w in streams:
        for seed in seeds:
            requests = lab_workload(w, seed=seed)
            for size in sizes:
                run = {}
                for p in policies:
                    policy = make_policy(p, requests, size, page_size)
                    run[p] = round(100 * replay(requests, size, policy).hit_rate, 1)
                rates.setdefault((w, size), []).append(run)
    return rates


def seed_runs(
    curves: dict[str, dict[str, list[float]]],
    sizes: Sequence[int],
    rivals: dict[str, Sequence[str]],
    seeds: Sequence[int] = (1, 2),
) -> dict[tuple[str, int], list[dict[str, float]]]:
    """The runs the winner rule reads: for each stream of `rivals` (stream -> its policies)
    and each size, seed 0's rates from a report's `curves` (stream -> policy -> one hit rate
    per size, as fractions), then `seed_rates` on `seeds`; all in percent, rounded to 0.1.
    Example: seed_runs(curves, [2048], {"rag": ("lru", "lfu")})[("rag", 2048)] ->
    [{"lru": 50.3, "lfu": 58.4}, {...seed 1...}, {...seed 2...}]."""
    runs: dict[tuple[str, int], list[dict[str, float]]] = {}
    for w, policies in rivals.items():
        later = seed_rates([w], sizes, seeds=seeds, policies=policies)
        for i, size in enumerate(sizes):
            seed0 = {p: round(100 * curves[w][p][i], 1) for p in policies}
            runs[w, size] = [seed0, *later[w, size]]
    return runs


def firsts(runs: Sequence[dict[str, float]]) -> set[str]:
    """The policies with the highest rate on at least one run (all of them on a level)."""
    return {p for run in runs for p in run if run[p] == max(run.values())}


def call_winner(runs: Sequence[dict[str, float]], points: float = 1.0) -> list[str]:
    """The rule: a policy wins when it is first on every run and its mean rate is more
    than `points` above every other policy's mean. Returns [winner], or, with no clear winner, every
    policy first on some run or within `points` of the best mean, best mean first.
    Examples: [{"a": 60, "b": 58}, {"a": 61, "b": 59}] -> ["a"] (mean lead 2);
    [{"a": 60, "b": 59.5}, {"a": 61, "b": 60}] -> ["a", "b"] (mean lead 0.75);
    [{"a": 60, "b": 61}, {"a": 63, "b": 59}] -> ["a", "b"] (b is first on one run)."""
    mean = {p: sum(run[p] for run in runs) / len(runs) for p in runs[0]}
    top = max(mean.values())
    close = {p for p in mean if top - mean[p] <= points + 1e-9} | firsts(runs)
    return sorted(close, key=lambda p: (-mean[p], p))


def verdict(names: Sequence[str]) -> str:
    """ "arc" for a win; else "no clear winner: " and the names in the order given, which
    for `call_winner`'s list is best mean first ("no clear winner: lru+pin ~ lru": lru+pin's
    mean is higher)."""
    return names[0] if len(names) == 1 else "no clear winner: " + " ~ ".join(names)


def largest_reversed_lead(runs_by_case: dict[tuple[str, int], list[dict[str, float]]]) -> float:
    """The largest lead of a run's first policy over its second that another run of the same
    case reverses (its first is not first there): how big a one-seed lead noise can make."""
    largest = 0.0
    for runs in runs_by_case.values():
        if len(firsts(runs)) < 2:
            continue
        for run in runs:
            one, two = sorted(run.values(), reverse=True)[:2]
            largest = max(largest, round(one - two, 1))
    return largest


def seed_table(
    runs: dict[tuple[str, int], list[dict[str, float]]],
    rivals: dict[str, Sequence[str]],
    size: int,
    verdicts: dict[str, str] | None = None,
) -> str:
    """`runs` at one cache `size` as text: one line per (stream, policy), its rate on each
    seed (s0, s1, ...) and their mean (the one `call_winner` compares), the stream named on
    its first line only; with `verdicts` (stream -> verdict), a line "verdict: ..." under
    each stream's rows."""
    seeds = len(next(iter(runs.values())))
    lines = [f"{'':15s}" + "".join(f"{f's{i}':>6s}" for i in range(seeds)) + f"{'mean':>7s}"]
    for w, policies in rivals.items():
        for k, p in enumerate(policies):
            name = w if k == 0 else ""
            rates = [run[p] for run in runs[w, size]]
            mean = sum(rates) / len(rates)
            lines.append(f"{name:6s} {p:8s}" + "".join(f"{r:6.1f}" for r in rates) + f"{mean:7.1f}")
        if verdicts is not None:
            lines.append(f"{'':6s} verdict: {verdicts[w]}")
    return "\n".join(lines)


def verdict_grid(winners: dict[str, list[str]], sizes: Sequence[int]) -> str:
    """`verdict`'s strings (stream -> one per size in `sizes`), a line per stream and size,
    each verdict in full, as `verdict` and the text write it:
    "chat    1,024 tokens  no clear winner: lru ~ lru+pin", then "        2,048 tokens  lru"."""
    labels = [f"{s:,} tokens" for s in sizes]
    width = max(len(label) for label in labels) + 2
    lines = [f"{'stream':8s}{'cache':{width}s}verdict"]
    for w, vs in winners.items():
        for k, (label, v) in enumerate(zip(labels, vs, strict=True)):
            lines.append(f"{w if k == 0 else '':8s}{label:{width}s}{v}")
    return "\n".join(lines)
