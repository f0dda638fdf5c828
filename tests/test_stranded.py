"""stranded: victims that leave a later page of the same prompt cached."""

from pagedkv.labs.lab_workloads import lab_workload
from pagedkv.labs.stranded import strand_count, strand_counts, strand_text


def test_lru_never_strands_and_fifo_does():
    """A request releases its pages tail first, so LRU's victim is never a page whose next page
    is still cached; FIFO evicts in caching order, a prompt's first page first, so it does."""
    zipf = lab_workload("zipf")
    victims, stranding = strand_count(zipf, 2048, "lru")
    assert victims > 0 and stranding == 0
    assert strand_count(zipf, 2048, "fifo")[1] > 0


def test_no_eviction_no_stranding_and_the_text_names_each_policy():
    chat = lab_workload("chat")
    counts = strand_counts({"chat": chat}, 1 << 16, ("lru", "arc"))
    assert counts == {"chat": {"lru": (0, 0), "arc": (0, 0)}}
    assert strand_text(counts, 1 << 16).splitlines()[1] == "  chat  lru  0 of     0  arc  0 of     0"
