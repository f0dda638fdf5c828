"""What the dashboard shows of a fork and of your own actions. A fork child's pages are shared
by reference, not prefix hits: the block-table pictures frame only the pages a sequence found
in the prefix index at its own admission. The event log heads an action of your own in words.

Oracle: the pool's `prefix_hit` events, which name every page a sequence took from the
prefix index and the sequence that took it (a fork emits `fork` events instead).
"""

from __future__ import annotations

import re

from matplotlib.colors import to_rgb

from pagedkv import KVCachePool, SequenceManager, TinyLM
from pagedkv.viz import block_table_html, plot_block_tables
from pagedkv.viz.block_table import HIT_BORDER
from pagedkv.viz.palette import HIT_COLOR

MODEL = TinyLM.pretrained()


def _forked_after_a_hit():
    """user's prompt hits 4 pages of first's; user.f is a fork of user."""
    pool = KVCachePool(MODEL.cache_config(num_pages=16, page_size=4))
    seqs = SequenceManager(pool)
    events: list = []
    pool.add_listener(events.append)
    prompt = MODEL.encode("sixteen tokens!!")
    seqs.add("first", prompt + MODEL.encode("?"))
    seqs.add("user", prompt + MODEL.encode(" more"))
    seqs.fork("user", "user.f")
    return seqs, events


def _hit_pages(events, seq_id) -> list[int]:
    return [e.page_id for e in events if e.kind == "prefix_hit" and e.seq_id == seq_id]


def test_the_html_frames_the_hits_of_the_admission_and_none_of_the_fork():
    seqs, events = _forked_after_a_hit()
    assert _hit_pages(events, "user") == [0, 1, 2, 3] and _hit_pages(events, "user.f") == []
    rows = block_table_html(seqs.snapshot(), events=events).split("</table>")[0].split("<tr>")[1:]
    by_seq = {row.split("</th>")[0].rsplit(">", 1)[1]: row for row in rows}
    assert by_seq["user"].count(HIT_BORDER) == 4
    assert by_seq["first"].count(HIT_BORDER) == 0 and by_seq["user.f"].count(HIT_BORDER) == 0
    assert by_seq["user.f"].count("×2") + by_seq["user.f"].count("×3") == len(seqs.block_table("user.f"))


def test_the_figure_frames_the_hits_of_the_admission_and_none_of_the_fork():
    seqs, events = _forked_after_a_hit()
    snap = seqs.snapshot()
    patches = iter(plot_block_tables(snap, events=events).axes[0].patches)
    framed = {
        seq_id: [
            page
            for page in snap.block_tables[seq_id]
            if to_rgb(next(patches).get_edgecolor()) == to_rgb(HIT_COLOR)
        ]
        for seq_id in snap.seq_ids
    }
    assert framed == {s: _hit_pages(events, s) for s in snap.seq_ids}


def test_a_forked_id_admitted_again_with_a_hit_is_framed_again():
    seqs, events = _forked_after_a_hit()
    seqs.free("user.f")
    seqs.add("user.f", MODEL.encode("sixteen tokens!! again"))  # a new admission: hits 4 pages
    snap = seqs.snapshot()
    rows = block_table_html(snap, events=events).split("</table>")[0].split("<tr>")[1:]
    assert rows[-1].count(HIT_BORDER) == snap.num_cached_tokens["user.f"] // 4 == 4


def test_the_event_log_heads_an_action_of_your_own_in_words():
    from pagedkv.scenarios import ScenarioRun
    from pagedkv.scenarios.actions import Action
    from pagedkv.viz.dashboard_text import log_html

    run = ScenarioRun("prefix")
    for _ in range(6):
        run.step()
    run.apply(Action("fork", "user2.f", parent="user2"))
    headings = re.findall(r"pagedkv-log-step[^>]*><b>([^<]*)</b>", log_html(run.records, 3))
    assert headings == ["your action (after scenario step 6)", "step 6", "step 5"]
    # the fork is no prefix hit: user2's 7 hit pages are framed, its child's are not
    table = block_table_html(run.seqs.snapshot(), events=run.events).split("</table>")[0]
    rows = {row.split("</th>")[0].rsplit(">", 1)[1]: row for row in table.split("<tr>")[1:]}
    assert rows["user2"].count(HIT_BORDER) == 7 and rows["user2.f"].count(HIT_BORDER) == 0


def test_a_copy_on_write_cell_names_the_page_it_was_copied_from():
    seqs = SequenceManager(KVCachePool(MODEL.cache_config(num_pages=8, page_size=4)))
    seqs.add("a", [1, 2, 3, 4, 5, 6])  # page 1 half full: a fork shares it
    seqs.fork("a", "a.f")
    source = seqs.block_table("a")[1]
    seqs.append_slot("a.f", 7)  # the child writes into the shared page: copy-on-write
    copy = seqs.block_table("a.f")[1]
    assert copy != source
    table = block_table_html(seqs.snapshot()).split("</table>")[0]
    rows = {row.split("</th>")[0].rsplit(">", 1)[1]: row for row in table.split("<tr>")[1:]}
    assert f">{copy}←{source}</td>" in rows["a.f"]
    assert "←" not in rows["a"]
