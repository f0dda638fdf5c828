"""Your own actions on the dashboard when a scheduler runs the scenario (`preempt`, `chunked`).

The scheduler owns its requests: Fork and Finish never offer one, Decode all never runs a
scheduler step while the scenario has steps left (Step does that), and the caption says what a
press did. Oracles: the pool and scheduler state of the run before the press, read directly.
"""

from __future__ import annotations

import re

import pytest

from pagedkv.viz import Dashboard
from pagedkv.viz.dashboard_text import SCHEDULER_NOTE


@pytest.fixture
def chunked():
    dash = Dashboard("chunked")
    dash.goto(4)  # long is running: two chunks of its prompt computed
    return dash


def test_the_schedulers_requests_are_not_yours_to_fork_finish_or_decode(chunked):
    dash = chunked
    assert "long" in dash.run.seqs and dash.run.scheduler.request("long").status == "running"
    assert list(dash.seq_picker.options) == [] and dash.seq_picker.value is None
    assert dash.fork_button.disabled and dash.finish_button.disabled and dash.decode_button.disabled
    assert SCHEDULER_NOTE in dash.actions_note.value and "Only Step runs the scheduler" in SCHEDULER_NOTE
    tokens, history = dash.run.seqs.get("long").num_tokens, list(dash.run.history)
    dash.decode_button.click()  # pressed anyway (a click a browser would not deliver)
    assert dash.run.history == history and dash.run.seqs.get("long").num_tokens == tokens
    assert "no sequence you added (Step runs the scheduler) to decode" in dash.caption.value
    dash.fork()
    assert "no sequence you added (Step runs the scheduler) to fork" in dash.caption.value
    assert dash.run.history == history


def test_decode_all_decodes_only_what_you_added_and_the_caption_says_so(chunked):
    dash = chunked
    dash.prompt.value = "mine"
    dash.add_button.click()
    assert [value for _, value in dash.seq_picker.options] == ["yours1"]
    assert [value for _, value in dash.prefix_picker.options] == ["", "long", "yours1"]
    assert not dash.decode_button.disabled and not dash.fork_button.disabled
    mine, long = dash.run.seqs.get("yours1").num_tokens, dash.run.seqs.get("long").num_tokens
    scheduler_steps, cursor = dash.run.scheduler.stats.steps, dash.run.cursor
    dash.decode_button.click()
    assert dash.run.seqs.get("yours1").num_tokens == mine + 1
    assert dash.run.seqs.get("long").num_tokens == long  # the scheduler's request did not move
    assert dash.run.scheduler.stats.steps == scheduler_steps and dash.run.cursor == cursor
    said = "your action: you decoded one token for each sequence you added (Step moves the scheduler"
    assert said in dash.caption.value
    dash.fork_button.click()  # forks yours1, the one picked
    assert dash.run.seqs.block_table("yours1.f1") == dash.run.seqs.block_table("yours1")
    assert "your action: you forked yours1" in dash.caption.value


def test_once_done_decode_all_runs_the_scheduler_work_your_actions_left():
    dash = Dashboard("chunked")
    dash.prompt.value = "x" * 90  # 23 of the 24 pages: long's first chunk finds no room
    dash.add_button.click()
    while not dash.run.done:
        dash.step_button.click()
    assert dash.run.scheduler.has_unfinished and "long" not in dash.run.seqs
    left = [r for r, state in dash.run.scheduler.requests.items() if state.status != "finished"]
    assert left == ["long", "chat_again"]  # the short chat turn queued later waits too
    said = "done, but long, chat_again are unfinished: Finish your sequence yours1, then press Decode all"
    assert said in dash.caption.value
    dash.finish_button.click()  # your request goes: the pool is free for the scheduler
    said = "done, but long, chat_again are unfinished: press Decode all to run the scheduler on"
    assert said in dash.caption.value
    dash.step_button.click()  # refused: the caption says what is left to press
    assert said in dash.caption.value
    steps = dash.run.scheduler.stats.steps
    dash.decode_button.click()
    assert dash.run.scheduler.stats.steps == steps + 1 and "long" in dash.run.seqs
    said = "the scenario is done: one more scheduler step — scheduler: prefill long"
    assert said in dash.caption.value and "your action:" not in dash.caption.value


def test_scheduler_steps_past_the_end_are_not_counted_as_yours():
    """Decode all, once the scenario is done and none of yours is left, runs a scheduler step:
    the scheduler chose it, so the header's "your actions: n" counts only the presses that acted on
    your sequences. Oracle: the learner's presses, counted here as they are made."""
    dash = Dashboard("preempt")
    dash.goto(3)
    presses = 0
    dash.prompt.value = "Hi there"  # 2 pages: the scheduler's requests still run, later
    dash.add_button.click()
    presses += 1
    dash.goto(40)
    dash.decode_button.click()  # one token for yours1: an action of yours
    presses += 1
    dash.seq_picker.value = "yours1"
    dash.finish_button.click()
    presses += 1
    extra = 0
    while dash.run.can_decode_all:  # now each press is one more scheduler step
        dash.decode_button.click()
        extra += 1
    assert extra > 0 and not dash.run.scheduler.has_unfinished
    assert dash.run.own_actions == presses and dash.run.steps_past_end == extra
    counter = re.sub(r"<[^>]+>", "", dash.step_counter.value)
    # the step's role moves to the tooltip once your actions are counted (a learner saw this
    # header cut off at 1280 px with the role in it); the header says the rest
    assert counter == f"step 40 of 40 · your actions: {presses} · +{extra} past the end · done"
    assert "step 40 · scheduler step 37" in dash.step_counter.value  # the tooltip
    assert f"your actions: {presses}" in dash.status.value
    log = dash.event_log.value
    assert "scheduler step past the end (after scenario step 40)" in log
    dash.back_button.click()
    assert "Back undid a scheduler step past the end" in dash.caption.value
    assert dash.run.own_actions == presses and dash.run.steps_past_end == extra - 1


def test_requests_starved_by_your_sequence_say_so_and_finish_after_it_goes():
    """A learner's request takes the pages the scheduler's requests need: the scheduler cannot
    preempt it, so its steps run nothing. Each such step names the waiting requests and what
    holds their pages; the end says how to go on; Finish, then Decode all, finishes them."""
    dash = Dashboard("preempt")
    dash.reset()
    dash.goto(12)
    dash.add_button.click()  # "Hello, pages!": 13 tokens, 4 pages
    assert dash.run.own_sequences == ["yours1"] and len(dash.run.seqs.block_table("yours1")) == 4
    while not dash.run.done:
        dash.step_button.click()
    stalled = [r for r in dash.run.records if r.action.op == "schedule" and not r.tokens and not r.events]
    assert stalled and "idle" not in " ".join(r.note for r in dash.run.records)
    waiting = [r for r, state in dash.run.scheduler.requests.items() if state.status != "finished"]
    assert waiting and all(dash.run.scheduler.request(r).status != "running" for r in waiting)
    names = ", ".join(waiting)
    said = f"scheduler: {names} wait for pages your sequence yours1 holds (Finish it)"
    assert all(r.note == said for r in stalled) and said in dash.caption.value
    assert f"done, but {names} are unfinished: Finish your sequence yours1, then" in dash.caption.value
    assert dash.step_button.disabled and not dash.decode_button.disabled
    dash.finish_button.click()
    assert f"done, but {names} are unfinished: press Decode all" in dash.caption.value
    for _ in range(100):
        if dash.decode_button.disabled:
            break
        dash.decode_button.click()
    assert not dash.run.unfinished_requests and not dash.run.scheduler.has_unfinished
    statuses = {r: dash.run.scheduler.request(r).status for r in ("req1", "req2", "req3")}
    assert set(statuses.values()) == {"finished"}
    assert "The scenario has ended. Press Reset to start again." in dash.caption.value
    history = list(dash.run.history)  # replayable: Back undoes the last press exactly
    dash.back_button.click()
    assert dash.run.history == history[:-1] and dash.run.unfinished_requests


def test_reselecting_the_scenario_shown_asks_nothing_and_keeps_your_actions():
    dash = Dashboard("preempt")
    dash.goto(3)
    dash.add_button.click()
    history = list(dash.run.history)
    dash.scenario_picker.value = "chunked"  # another scenario: asked first
    assert dash.confirm.layout.display == "flex" and "lose your 1 action" in dash.confirm_text.value
    assert dash.scenario_picker.value == "preempt"  # the picker names the one still running
    dash.stay_button.click()  # stay: the question goes
    assert dash.confirm.layout.display == "none" and dash.run.history == history
    dash.scenario_picker.value = "preempt"  # unchanged: no event, nothing asked
    assert dash.confirm.layout.display == "none" and dash.run.scenario.name == "preempt"


def test_without_a_scheduler_every_live_sequence_is_yours():
    dash = Dashboard("walkthrough")
    dash.step_button.click()
    assert [value for _, value in dash.seq_picker.options] == ["request_A"]
    assert SCHEDULER_NOTE not in dash.actions_note.value
    dash.decode_button.click()
    assert "your action: you decoded one token for everyone" in dash.caption.value


def test_the_header_says_done_only_once_every_request_has_finished():
    """At the scenario's last step with a request unfinished, the header says which request is
    unfinished; "done" alone only once the scheduler has nothing left. Oracle: the scheduler's
    own requests, read here one by one."""
    dash = Dashboard("preempt")
    dash.goto(3)
    dash.prompt.value = "Hi there"
    dash.add_button.click()
    dash.goto(40)
    left = [r for r, s in dash.run.scheduler.requests.items() if s.status != "finished"]
    counter = re.sub(r"<[^>]+>", "", dash.step_counter.value)
    assert left == ["req3"] and counter.endswith(" · req3 unfinished")
    assert not counter.endswith(" · done")
    alone = Dashboard("preempt")
    alone.goto(40)
    assert re.sub(r"<[^>]+>", "", alone.step_counter.value) == "step 40 of 40 · scheduler step 37 · done"


def test_the_headers_steps_done_part_may_wrap_whole_onto_a_second_line():
    """A learner saw "... · +1 past the end · steps done, req3 ur" cut off at 1280 px, the
    scenario picker squeezed: the counter's first part stays one line, and the "unfinished"
    part wraps as one piece (never cut inside) when it does not fit beside it."""
    dash = Dashboard("preempt")
    dash.add_request()
    dash.goto(40)
    value = dash.step_counter.value
    assert "white-space:nowrap' title" not in value  # the whole counter may wrap
    first, done = re.match(r"<span[^>]*><b style='white-space:nowrap'>(.*?)</b>(.*)</span>$", value).groups()
    assert first.startswith("step 40 of 40") and "unfinished" not in first
    assert "display:inline-block;white-space:nowrap'><b>req2, req3 unfinished</b></span>" in done


def test_a_resumed_request_waits_for_its_prompt_and_generated_tokens_not_a_prompt_of_them():
    """A learner read "req3 waits: prompt of 19 tokens" of a 15-token prompt: a resumed
    request's tokens are split into prompt and generated ones, and one page is "1 new page".
    Oracle: the scenario's own requests, their prompt and output lengths."""
    from pagedkv.scenarios import ScenarioRun

    run = ScenarioRun("preempt")
    while run.can_step:
        run.step()
    waits = {r.step: r.waits for r in run.records if r.waits}
    req3 = run.scheduler.request("req3")
    assert len(req3.prompt_token_ids) == 15
    assert waits[25].startswith("req3 waits: 19 tokens (15 prompt + 4 generated) needs 1 new page;")
    assert waits[28].startswith("req3 waits: 19 tokens (15 prompt + 4 generated) needs 2 new pages;")
    # not yet run; checked after step 4 admitted req1 and req2, as the line says
    checked = "req3 waits (checked after this step's admissions): "
    assert waits[4].startswith(checked + "prompt of 15 tokens needs 4 new pages;")
    assert not any("needs 1 new pages" in w for w in waits.values())


def test_the_log_key_names_resume_and_abort_only_with_a_scheduler():
    def key(dash):  # the colour key, in the log's folded note, above its explanation
        return dash.event_log.value.split("<details")[1].split("inside a step")[0]

    assert all(f">{k}</span>" in key(Dashboard("preempt")) for k in ("preempt", "resume", "abort"))
    assert not any(f">{k}</span>" in key(Dashboard("parallel")) for k in ("preempt", "resume", "abort"))


def test_reset_says_so_in_a_few_words_and_keeps_the_pool_size():
    dash = Dashboard("preempt")
    dash.goto(5)
    dash.reset()
    assert "Reset: step 0, same pool size" in dash.caption.value and dash.run.cursor == 0


def test_a_long_log_says_it_scrolls_and_where_it_ends():
    """Oracle: the number of log entries, counted here; a short log has no scroll line."""
    dash = Dashboard("parallel")
    assert "scroll for older steps" not in dash.event_log.value  # no step yet
    dash.goto(5)
    entries = sum(len(r.entries()) for r in dash.run.records)
    assert entries > 15 and "scroll for older steps" in dash.event_log.value
    assert "end of the log" in dash.event_log.value


def test_the_block_tables_tab_shows_the_waiting_queue_front_first():
    dash = Dashboard("preempt")
    for _ in range(11):
        dash.step_button.click()
    events = dash.run.events
    preempted = [e.seq_id for e in events if e.kind == "preempt"]
    admitted = {e.seq_id for e in events if e.kind == "allocate"}
    assert preempted == ["req2"] and "req3" not in admitted  # req2 sent back; req3 never ran
    assert "waiting queue</b>, front first: req2 (preempted), req3" in dash.status.value
    assert "waiting queue" not in Dashboard("walkthrough").status.value  # no scheduler, no queue


def test_a_refused_add_request_says_why_beside_the_buttons_and_in_the_log():
    dash = Dashboard("preempt")
    dash.goto(4)  # req1 and req2 admitted: the pool has few pages left
    pool, size = dash.run.pool, dash.run.page_size
    need = -(-len(dash.run.model.encode(dash.prompt.value)) // size)  # no page CACHED: no hit
    free, cached = pool.num_free_pages, pool.num_cached_pages
    have = free + cached
    assert cached == 0 and need > have  # the oracle: the pool's own counts
    history = list(dash.run.history)
    dash.add_request()
    why = f"Add request refused: prompt of {len(dash.run.model.encode(dash.prompt.value))} tokens"
    why += f" needs {need} new pages; {free} FREE + {cached} evictable CACHED"
    assert why in dash.actions_note.value and "#B91C1C" in dash.actions_note.value
    assert "refused" in dash.caption.value and f"needs {need} new pages" in dash.caption.value
    log = re.sub("<[^>]+>", " ", dash.event_log.value)
    assert "your action, refused," in log and f"needs {need} new pages" in log
    assert dash.seq_picker.value is None and dash.finish_button.disabled  # nothing was added
    assert len(dash.run.history) == len(history) + 1 and pool.num_free_pages == have
    dash.step()  # the next step: the note says again what the buttons act on
    assert SCHEDULER_NOTE in dash.actions_note.value and "refused" not in dash.actions_note.value


def test_a_step_that_preempts_says_the_waiting_queue_was_not_tried():
    """A learner read that a step that preempts admits nobody, but the step-11 log just left
    req3 out. Oracle: the steps whose scheduler record preempted while requests waited."""
    from pagedkv.scenarios import ScenarioRun

    run = ScenarioRun("preempt")
    while run.can_step:
        run.step()
    said = {r.step: r.waits for r in run.records if "not tried" in r.waits}
    assert said == {
        11: "req2, req3 not tried: a step that preempts admits nobody",
        24: "req3 not tried: a step that preempts admits nobody",
    }
    preempting = [r.step for r in run.records if any(e.kind == "preempt" for e in r.events)]
    assert sorted(said) == preempting


def test_a_waiting_request_short_of_pages_names_the_cached_pages_that_are_its_own_hits():
    """A learner read "0 FREE + 0 evictable CACHED" at steps 12-19 while the heatmap showed
    CACHED pages: req2's own hits. Oracle: the pool's CACHED count and req2's prefix lookup."""
    from pagedkv.scenarios import ScenarioRun

    run = ScenarioRun("preempt")
    run.goto(14)
    refusal = run.scheduler.head_refused
    tokens = run.scheduler.request("req2").token_ids
    own = len(run.seqs.plan_add("probe", tokens).hits)
    cached = run.pool.num_cached_pages
    assert refusal.req_id == "req2" and own == cached > 0 and run.pool.num_free_pages == 0
    assert f"0 FREE + 0 evictable CACHED (+ {own} CACHED that are its own hits)" in refusal.reason
    # the same numbers as fields: nothing to parse
    assert (refusal.free, refusal.evictable, refusal.own_hits) == (0, 0, own)


def test_past_the_end_the_caption_says_once_what_is_left():
    """The 4a replay of notebook 05b: yours added at step 0, finished at step 36, then Decode all
    after step 40. The caption says the scenario is done once, then the short line. Oracle: the
    05b text (req3 is unfinished after step 40)."""
    dash = Dashboard("preempt")
    dash.add_button.click()
    dash.goto(36)
    dash.finish_button.click()
    dash.goto(40)
    dash.decode_button.click()
    caption = dash.caption.value
    assert "req3 unfinished: Decode all runs one more step." in caption
    assert caption.count("done") == 1 and "The scenario is done, but" not in caption
