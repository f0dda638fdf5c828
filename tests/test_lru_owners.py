"""plot_lru(owners=True) names each ACTIVE page's owner; event_list names evicted pages."""

from pagedkv import KVCachePool, SequenceManager, TinyLM
from pagedkv.scenarios import ScenarioRun
from pagedkv.viz import plot_lru
from pagedkv.viz.event_list import event_list


def test_owners_label_every_active_page_with_the_sequence_holding_it():
    model = TinyLM.pretrained()
    pool = KVCachePool(model.cache_config(num_pages=6, page_size=4))
    seqs = SequenceManager(pool)
    seqs.add("A", list(range(9)))  # 3 pages
    seqs.add("B", list(range(100, 104)))  # 1 page
    snap = seqs.snapshot()
    owned = {p: "A" for p in seqs.block_table("A")} | {p: "B" for p in seqs.block_table("B")}
    labels = plot_lru(snap, owners=True).panels["lru"].labels
    for page, owner in owned.items():  # the oracle: each block table, read directly
        assert labels[page] == f"{page}\n{owner}"
    assert plot_lru(snap).panels["lru"].labels[next(iter(owned))] == str(next(iter(owned)))


def test_event_list_names_evicted_pages_when_several_are_taken():
    run = ScenarioRun("preempt")
    while run.can_step:
        run.step()
    lines = event_list(run, 20, 20)
    admitted = [line for line in lines if "req3 admitted" in line]
    evicts = [e.page_id for r in run.records if r.step == 20 for e in r.events
              if e.kind == "evict" and e.seq_id == "req3"]  # fmt: skip
    assert len(admitted) == 1 and evicts == [9, 3, 2, 1]
    assert "pages [9, 3, 2, 1] (all evicted)" in admitted[0]
