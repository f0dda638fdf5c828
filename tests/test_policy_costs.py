"""`policy_costs.bookkeeping` against oracles that count the calls a pool makes."""

from pagedkv import LRUEvictionPolicy
from pagedkv.core.sequence import SequenceManager
from pagedkv.labs.hit_rate_lab import lab_pool, make_policy, most_reused_pages, replay, serve_one_at_a_time
from pagedkv.labs.lab_workloads import lab_workload
from pagedkv.labs.policy_costs import bookkeeping


class _CallCountingLRU(LRUEvictionPolicy):
    """LRU that counts pages added, revived and evicted once a pool has attached it."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[int] | None = None  # None until attached: check_policy's runs do not count

    def attach(self, num_pages, content_key):
        self.calls = [0]

    def _note(self, n: int) -> None:
        if self.calls is not None:
            self.calls[0] += n

    def add(self, page_id):
        self._note(1)
        super().add(page_id)

    def add_all(self, page_ids):
        self._note(len(page_ids))
        super().add_all(page_ids)

    def remove(self, page_id):
        self._note(1)
        super().remove(page_id)

    def pop_victims(self, n):
        self._note(n)
        return super().pop_victims(n)


def test_lru_writes_are_one_per_page_added_revived_or_evicted():
    """Each LRU call moves one page in or out of its one list: writes = pages handled."""
    stream = lab_workload("zipf")
    pool = lab_pool(stream, 2048, _CallCountingLRU(), 16)  # installs a copy, then attaches it
    serve_one_at_a_time(SequenceManager(pool), stream)
    assert pool.eviction.calls is not None
    cost = bookkeeping(stream, 2048, "lru")
    assert cost["list writes"] == pool.eviction.calls[0]
    assert cost["victims"] == replay(stream, 2048).evictions
    assert (cost["hashes held"], cost["pages skipped"]) == (0, 0)


def test_pins_and_ghosts_are_bounded_as_the_policies_promise():
    stream = lab_workload("scan")
    pages = 2048 // 16
    pin = bookkeeping(stream, 2048, "lru+pin")
    assert pin["hashes held"] == len(most_reused_pages(stream, pages // 4))  # the pin list
    assert pin["victims"] == replay(stream, 2048, make_policy("lru+pin", stream, 2048, 16)).evictions
    assert pin["pages skipped"] > 0  # pinned pages sit at LRU's head during the bursts
    arc = bookkeeping(stream, 2048, "arc")
    assert 0 < arc["hashes held"] <= 2 * pages  # B1 and B2 keep at most c hashes each
    s3 = bookkeeping(stream, 2048, "s3fifo")
    assert 0 < s3["hashes held"] <= pages  # G keeps no more hashes than M holds pages
    lru = bookkeeping(stream, 2048, "lru")
    assert min(arc["list writes"], s3["list writes"]) > lru["list writes"]
