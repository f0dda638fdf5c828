"""Which system prompts a pin list covers, on the zipf stream of `pagedkv.labs.lab_workloads`.

Each zipf request starts with one of its system prompts (its id ends in "-p<k>": prompt k),
`prompt_tokens` long. `pin_coverage` says which prompts have all their pages on a pin list,
which have only some of them, and how many requests use a wholly pinned prompt.
`pinned_or_others` splits the requests by that; `arc_tally_by` shows, per group, where ARC
kept the pages that prefix hits revived (T1 or T2). `pin_budget_rates` replays lru+pin with
pin lists of other sizes than its quarter of the cache.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from pagedkv.core.hashing import block_hashes
from pagedkv.core.sequence import SequenceManager
from pagedkv.labs.eviction_policies import ARCEvictionPolicy, PinnedLRUEvictionPolicy
from pagedkv.labs.hit_rate_lab import lab_pool, most_reused_pages, replay, serve_one_at_a_time
from pagedkv.labs.lab_workloads import LabRequest


@dataclass(frozen=True)
class PinCoverage:
    rank: list[str]  # the prompts, most used first
    whole: list[str]  # prompts with every page pinned, most used first
    partly: dict[str, list[int]]  # prompt -> its pinned pages (1 = its first), if not all
    whole_users: int  # requests whose prompt is wholly pinned
    pages_per_prompt: int

    def place(self, prompt: str) -> int:
        """The prompt's place by use: 1 for the most used."""
        return self.rank.index(prompt) + 1


def prompt_of(request: LabRequest) -> str:
    """The system prompt a zipf request starts with: "zipf3-p2" -> "2"."""
    return request.req_id.split("-p")[1]


def pin_coverage(
    requests: Sequence[LabRequest], pins: set[bytes], prompt_tokens: int = 96, page_size: int = 16
) -> PinCoverage:
    """How the pin list `pins` (block hashes) covers the system prompts of a zipf stream:
    each prompt's first `prompt_tokens // page_size` pages are its own. Example: with the 32
    pages `lru+pin` pins at 2,048 tokens, the 5 most used prompts whole and the first 2
    pages of the 6th."""
    per_prompt = prompt_tokens // page_size
    pages: dict[str, list[bytes]] = {}
    for r in requests:
        pages.setdefault(prompt_of(r), block_hashes(r.prompt_token_ids, page_size)[:per_prompt])
    uses = Counter(prompt_of(r) for r in requests)
    rank = sorted(pages, key=lambda k: -uses[k])  # stable: ties keep first-seen order
    on_list = {k: [i + 1 for i, h in enumerate(pages[k]) if h in pins] for k in rank}
    whole = [k for k in rank if len(on_list[k]) == per_prompt]
    partly = {k: on_list[k] for k in rank if 0 < len(on_list[k]) < per_prompt}
    return PinCoverage(rank, whole, partly, sum(uses[k] for k in whole), per_prompt)


def pinned_or_others(whole: Iterable[str]) -> Callable[[LabRequest], str]:
    """A key for `hit_rates_by`: "pinned" for a request whose system prompt is in `whole`
    (the prompts a pin list holds whole, `PinCoverage.whole`), "others" for the rest, a
    partly pinned prompt among them."""
    held = set(whole)
    return lambda request: "pinned" if prompt_of(request) in held else "others"


def arc_tally_by(
    requests: Sequence[LabRequest],
    cache_tokens: int,
    key: Callable[[LabRequest], str],
    page_size: int = 16,
) -> tuple[dict[str, Counter[str]], Counter[str]]:
    """Replay `requests` with ARC and split its `tally` by group: ({key(request): the
    revivals during that request's run, by list ("revived from T2": n, ...)}, the whole
    run's tally, victims by list included)."""
    pool = lab_pool(requests, cache_tokens, "arc", page_size)
    arc = pool.eviction
    assert isinstance(arc, ARCEvictionPolicy)
    seqs = SequenceManager(pool)
    by_group: dict[str, Counter[str]] = {}
    for request in requests:
        before = Counter(arc.tally)
        serve_one_at_a_time(seqs, [request])
        grown = Counter({k: n - before[k] for k, n in arc.tally.items() if k.startswith("revived")})
        by_group.setdefault(key(request), Counter()).update(+grown)
    return by_group, Counter(arc.tally)


def pin_budget_rates(
    requests: Sequence[LabRequest], cache_tokens: int, shares: Sequence[float], page_size: int = 16
) -> dict[float, float]:
    """lru+pin's hit rate with pin lists of other sizes: share of the cache's pages -> rate
    (the lab's `lru+pin` pins a quarter). The pins are still the most reused pages over the
    whole stream, chosen with foresight."""
    pages = cache_tokens // page_size
    rates = {}
    for share in shares:
        pins = most_reused_pages(requests, int(share * pages), page_size)
        rates[share] = replay(requests, cache_tokens, PinnedLRUEvictionPolicy(pins), page_size).hit_rate
    return rates
