"""The notebooks' walkthroughs: answers hidden until asked, no cell pressing a learner's
widget, and sentences true to what the run does.

The oracle for the questions' answers is the run itself: each stored prediction's answer is
compared with what a fresh run's step really does, and 05's explanation with the step where
the scheduler really takes req1's next page.
"""

from __future__ import annotations

import ast
import json
import re
from html import escape
from pathlib import Path

import pytest

from pagedkv.scenarios import ScenarioRun
from pagedkv.viz import questions

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
WIDGETS = ("PredictStep", "Quiz", "Discuss")


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def _code(path: Path) -> list[str]:
    return ["".join(c["source"]) for c in _cells(path) if c["cell_type"] == "code"]


def _parse(source: str) -> ast.Module:
    """A code cell as Python (IPython magics and shell lines left out)."""
    return ast.parse(
        "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
    )


def _widget_calls(path: Path) -> list[tuple[str, ast.Call]]:
    calls = []
    for source in _code(path):
        for node in ast.walk(_parse(source)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in WIDGETS:
                calls.append((node.func.id, node))
    return calls


def _texts(path: Path) -> str:
    """Everything a reader of the notebook file sees: sources and stored outputs."""
    out = []
    for cell in _cells(path):
        out.append("".join(cell["source"]))
        for output in cell.get("outputs", []):
            out.append(json.dumps(output, ensure_ascii=False))
    return "\n".join(out)


def _explanations() -> list[str]:
    """Every explanation (with the predictions' longer after-answer texts) and discussion answer."""
    bank = questions.all_questions()
    found = [p.why for p in bank["predict"].values()]
    found += [part for p in bank["predict"].values() for part in re.split(r"\n\s*\n|\n- ", p.after) if part]
    found += [q.why for quiz in bank["quiz"].values() for q in quiz.questions]
    notes = json.loads((ROOT / "pagedkv" / "data" / "questions.json").read_text())["notes"]
    found += [  # the answer boxes' texts (a summary, an explanation), paragraph by paragraph
        part.strip()
        for qid in notes
        for part in re.split(r"\n\s*\n|\n- ", questions.note(qid).text)
        if part.strip()
    ]
    return found + [d.answer for d in bank["discussion"].values()]


def _answers() -> list[str]:
    """The quiz answers long enough to be recognisable: short ones such as "5" or "no" are
    options of other questions too. (The prose may say "its full pages"; a code cell may not.)"""
    bank = questions.all_questions()
    return [q.answer for quiz in bank["quiz"].values() for q in quiz.questions if len(q.answer) >= 12]


# ---- answers hidden until asked ----------------------------------------------------------------


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_notebook_shows_a_question_answer_or_explanation(path):
    text, code = _texts(path), "\n".join(_code(path))
    flat = " ".join(text.split())  # markdown wraps its lines anywhere
    for secret in _explanations():
        assert secret[:60] not in text, f"{path.name} shows {secret[:60]!r}"
        assert " ".join(secret.split())[:60] not in flat, f"{path.name} shows {secret[:60]!r}"
    for answer in _answers():
        assert repr(answer)[1:-1] not in code and answer not in code, f"{path.name}'s code holds {answer!r}"
    for name, call in _widget_calls(path):  # a question id only, never questions as literals
        first = call.args[0] if call.args else None
        assert isinstance(first, ast.Constant) and isinstance(first.value, str), f"{path.name}: {name}"
        assert len(call.args) <= 2 and not call.keywords, f"{path.name}: {name} is given more than an id"


def test_every_question_is_asked_in_its_own_notebook_and_every_asked_id_exists():
    bank = questions.all_questions()
    stored = {(kind, qid, x.notebook) for kind, items in bank.items() for qid, x in items.items()}
    kinds = {"PredictStep": "predict", "Quiz": "quiz", "Discuss": "discussion"}
    asked = {
        (kinds[name], call.args[0].value, path.name.split("_")[0])  # "10b" for a deep dive
        for path in NOTEBOOKS
        for name, call in _widget_calls(path)
    }
    assert asked == stored


@pytest.mark.parametrize("qid", sorted(questions.all_questions()["predict"]))
def test_each_predictions_answer_is_what_the_step_really_does(qid):
    p = questions.prediction(qid)
    run = p.start_run()
    assert p.read(run.step(), run) == p.answer


def _widget_text(widget) -> str:
    """Every string the widget tree would send to the browser."""
    import ipywidgets as widgets

    out = []
    for value in widget.get_state().values():
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, (list, tuple)):
            out += [str(v) for v in value]
    for child in getattr(widget, "children", ()):
        if isinstance(child, widgets.Widget):
            out.append(_widget_text(child))
    return "\n".join(out)


def test_widgets_hold_back_the_explanation_until_an_answer():
    from pagedkv.viz import Discuss, PredictStep, Quiz
    from pagedkv.viz.quiz import markdown_html

    ask = PredictStep("04-cow")
    assert escape(ask.data.why) not in _widget_text(ask)
    assert "three" not in _widget_text(ask) and "in place" not in _widget_text(ask)  # its after text
    assert ask.picture.layout.display == "none" and not ask.picture.value  # no broken-image icon
    assert ask.placeholder.layout.display != "none" and "appears here" in ask.placeholder.value
    ask.answer("0")  # a first wrong pick: a second try, nothing given away
    assert escape(ask.data.why) not in _widget_text(ask) and ask.picture.layout.display == "none"
    ask.answer("3")  # the second wrong pick settles it
    assert ask.placeholder.layout.display == "none"  # the picture takes its room
    assert escape(ask.data.why) in _widget_text(ask)
    assert "<b>three</b> copies" in ask.after.value and "writes in place" in ask.after.value
    assert ask.picture.layout.display != "none" and bytes(ask.picture.value).startswith(b"\x89PNG")
    assert "clock" not in ask._heatmap.suptitle  # noqa: SLF001 - one counter, as on the dashboard
    quiz = Quiz("05-check")
    whys = [escape(q.why) for q in quiz.questions]
    assert not any(why in _widget_text(quiz) for why in whys)
    quiz.check(1, quiz.questions[1].answer)
    assert whys[1] in _widget_text(quiz) and whys[0] not in _widget_text(quiz)
    talk = Discuss("05-reserve")
    assert markdown_html(talk.data.answer) not in _widget_text(talk)
    talk.button.click()
    assert markdown_html(talk.data.answer) in _widget_text(talk)
    shown = markdown_html("count the model's K/V heads (`num_key_value_heads`)")  # as code
    assert "<code>num_key_value_heads</code>" in shown and "`" not in shown


def test_a_predictions_lru_picture_names_the_last_holder_as_the_notebook_says():
    """00-evict's answer says each CACHED cell of the LRU picture names the sequence that last
    held it: the picture the prediction shows after its step does (the pool's events are passed)."""
    from pagedkv.viz import PredictStep

    ask = PredictStep("00-evict")
    ask.answer("8")
    labels = ask._heatmap.panels["lru"].labels  # noqa: SLF001 - the picture's cell texts
    cached = [p for p in range(ask.run.num_pages) if ask.run.pool.page(p).state.name == "CACHED"]
    assert cached and all(labels[p].endswith("\nrequest_A") for p in cached)
    text = " ".join(questions.all_questions()["predict"]["00-evict"].after.split())
    assert "naming the sequence that last held it" in text  # under the picture, once answered


def test_a_predictions_lru_caption_names_the_page_its_step_evicted():
    """After 00-evict's step the outlined page is the *next* victim; the page the step evicted
    is ACTIVE for request_B (a learner read the outline as the answer). The caption names it.
    Oracle: the pool's own state of that page and the step's evict events."""
    from pagedkv.viz import PredictStep

    ask = PredictStep("00-evict")
    ask.answer("8")
    gone = [e.page_id for e in ask._record.events if e.kind == "evict"]  # noqa: SLF001
    assert gone == [8] and ask.run.pool.page(8).state.name == "ACTIVE"
    assert (
        "This step evicted page 8" in ask.caption.value and "#1 (outlined) is the next" in ask.caption.value
    )
    several = PredictStep("03-evict")  # evicts three pages: the caption keeps their order
    several.answer(several.data.answer)
    order = [e.page_id for e in several._record.events if e.kind == "evict"]  # noqa: SLF001
    said = f"evicted pages {', '.join(map(str, order))}, in that order"
    assert len(order) == 3 and said in several.caption.value


def test_the_answer_key_in_docs_is_current():
    assert (ROOT / "docs" / "answer_key.md").read_text() == questions.answer_key_markdown()


# ---- no cell presses a learner's widget --------------------------------------------------------

PRESSES = {"click", "step", "back", "reset", "goto", "apply", "decode_all", "answer", "check", "reveal"}


def _presses_of_others(path: Path) -> list[str]:
    """Cells that press a widget (or step the run inside it) made by another cell."""
    found = []
    for k, source in enumerate(_code(path)):
        tree = _parse(source)
        made_here = {
            t.id
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
            and node.value.func.id in (*WIDGETS, "Dashboard")
            for t in node.targets
            if isinstance(t, ast.Name)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in PRESSES
            ):
                root = node.func.value
                while isinstance(root, ast.Attribute):
                    root = root.value
                if isinstance(root, ast.Name) and root.id in _widget_names(path) and root.id not in made_here:
                    found.append(f"{path.name} code cell {k}: {ast.unparse(node)}")
    return found


def _widget_names(path: Path) -> set[str]:
    names = set()
    for source in _code(path):
        for node in ast.walk(_parse(source)):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                func = node.value.func
                if isinstance(func, ast.Name) and func.id in (*WIDGETS, "Dashboard"):
                    names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_cell_presses_a_widget_it_did_not_make(path):
    assert _presses_of_others(path) == []


def test_the_press_finder_finds_a_press_of_another_cells_dashboard(tmp_path):
    nb = {
        "cells": [
            {"cell_type": "code", "source": ["dash = Dashboard('preempt')\n", "dash"]},
            {"cell_type": "code", "source": ["dash.step_button.click()"]},
            {"cell_type": "code", "source": ["mine = Dashboard('x')\n", "mine.run.step()"]},
        ]
    }
    path = tmp_path / "x.ipynb"
    path.write_text(json.dumps(nb))
    assert _presses_of_others(path) == ["x.ipynb code cell 1: dash.step_button.click()"]


# ---- 05: when the scheduler takes a page ------------------------------------------------------


def test_05_names_the_step_where_req1_takes_its_next_page():
    from pagedkv.viz import PredictStep

    run = ScenarioRun("preempt")
    preempted_at = allocated_at = None
    while run.can_step:
        record = run.step()
        kinds = [(e.kind, e.seq_id) for e in record.events]
        if preempted_at is None and ("preempt", "req2") in kinds:
            preempted_at = record.step
        elif preempted_at and ("allocate", "req1") in kinds:
            allocated_at, page = record.step, next(e.page_id for e in record.events if e.kind == "allocate")
            span = record.spans[page]
            break
    words = f"Step {allocated_at}: the scheduler takes page {page} for req1's tokens {span[0]}–{span[1]}"
    # said in the prediction's after text, on the core path, shown only once the learner answered
    path = next(p for p in NOTEBOOKS if p.name.startswith("05"))
    cells = json.loads(path.read_text())["cells"]
    assert not any(words in " ".join("".join(c["source"]).replace("**", "").split()) for c in cells)
    after = questions.prediction("05-preempt").after
    assert words in " ".join(after.replace("**", "").replace("`", "").split())
    ask = PredictStep("05-preempt")
    assert words not in " ".join(_widget_text(ask).replace("`", "").split())  # not shown before an answer
    ask.answer("req1")
    ask.answer("none")  # the second wrong pick shows the after text, steps 11 to 13 with it
    shown = " ".join(re.sub(r"<[^>]+>", "", ask.after.value).replace("**", "").replace("`", "").split())
    assert words in shown and "Step 11: req2 needs a page" in shown
    assert f"step {allocated_at}" in questions.prediction("05-preempt").why
    assert f"Step {preempted_at}" in questions.prediction("05-preempt").question
    assert re.search(rf"tokens {span[0]}–{span[1]}", questions.prediction("05-preempt").why)


def test_05_one_step_numbering_scheduler_records_and_the_dashboards_steps():
    """A learner found "step N" of a printed scheduler record at N+1 elsewhere: a scheduler's
    record numbers its step from 1 (as stats.steps after it), and on the `preempt` dashboard
    the scheduler's step k is step k + 3, after the three steps that queue req1 to req3."""
    run = ScenarioRun("preempt")
    queued = 0
    while run.can_step:
        record = run.step()
        if record.note.startswith("scheduler: "):
            assert record.step == run.scheduler.stats.steps + queued == len(run.records)
        else:
            queued += 1
    assert queued == 3
    preempt = [r.step for r in run.records if any(e.kind == "preempt" for e in r.events)]
    assert preempt[0] == 11  # the step 05 asks about, by the dashboard's counter


def test_05_hints_are_about_the_rule_and_nothing_below_the_discussion_answers_it():
    """A learner found the 05-preempt hint naming a token of one request, and the 05-reserve
    answer printed in the markdown cell under its button: hints name no request, and the step
    order (schedule() takes the pages, via allocate_slots) is told only in the answer."""
    for hint in questions.prediction("05-preempt").hints.values():
        assert not re.search(r"req\d|\d+(st|nd|rd|th) token", hint), hint
    cells = _cells(next(p for p in NOTEBOOKS if p.name.startswith("05")))
    (k,) = [i for i, c in enumerate(cells) if 'Discuss("05-reserve")' in "".join(c["source"])]
    below = " ".join("".join(c["source"]) for c in cells[k + 1 :] if c["cell_type"] == "markdown")
    assert "allocate_slots" in questions.discussion("05-reserve").answer
    assert "allocate_slots" not in below and "takes the pages for every token" not in below


# ---- the map to vLLM and SGLang ---------------------------------------------------------------


def test_the_name_map_is_linked_and_notebook_00s_table_agrees_with_it():
    full = (ROOT / "docs" / "vllm_map.md").read_text()
    for stem in ("00", "01", "02", "03", "04", "05", "09"):
        path = next(p for p in NOTEBOOKS if p.name.startswith(stem))
        assert "](../docs/vllm_map.md)" in _texts(path), f"{path.name} does not link the map"
    cell = next(
        t for t in map("".join, (c["source"] for c in _cells(NOTEBOOKS[0]))) if "| pagedkv | vLLM" in t
    )
    rows = [r for r in cell.splitlines() if r.startswith("| `")]
    assert len(rows) == 4  # pool, page_size, num_pages, page state; the map has the rest
    for row in rows:  # every name of the short table is in the full map
        for name in re.findall(r"`([^`]+)`", row):
            assert name.split("(")[0] in full, name


# ---- figures that say what they show -----------------------------------------------------------


def _figure_texts(fig) -> list[str]:
    return [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text")) if t.get_text()]


def test_the_kernel_figure_labels_one_score_per_token_not_per_page():
    from pagedkv.viz import plot_chunked_kernel

    texts = _figure_texts(plot_chunked_kernel([5, 2, 9], chunk=2, page_size=4))
    assert {"s0-3", "s4-7", "s8-11"} <= set(texts)
    assert not {"s0", "s1", "s2"} & set(texts)


def test_block_tables_titled_by_step_when_given_and_by_the_pools_clock_otherwise():
    from pagedkv.viz import plot_block_tables

    run = ScenarioRun("fill")
    run.goto(9)
    snap = run.seqs.snapshot()
    by_step = " ".join(_figure_texts(plot_block_tables(snap, step=run.cursor)))
    assert "block tables after step 9" in by_step and "clock" not in by_step
    assert f"block tables at pool clock {snap.clock}" in " ".join(_figure_texts(plot_block_tables(snap)))


def test_a_request_has_the_same_colour_on_the_dashboard_and_in_a_prediction():
    from pagedkv.viz import Dashboard, PredictStep
    from pagedkv.viz.palette import DEFAULT_PALETTE

    DEFAULT_PALETTE.color("someone drawn earlier in the notebook")  # must not shift anything
    ask = PredictStep("00-evict")  # starts at step 42: request_B is drawn first there
    dash = Dashboard("walkthrough")
    ask.answer("8")
    colours = {s: ask.palette.color(s) for s in ("request_A", "request_B")}
    assert colours == {s: dash.palette.color(s) for s in ("request_A", "request_B")}
    assert len(set(colours.values())) == 2
    dash.reset_button.click()
    assert {s: dash.palette.color(s) for s in colours} == colours


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_cell_has_a_unique_id(path):  # nbformat 4.5: a cell without one is invalid
    ids = [cell.get("id") for cell in _cells(path)]
    assert None not in ids and len(set(ids)) == len(ids)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_cell_keeps_the_wall_clock_times_of_its_last_run(path):
    # `make notebooks` runs with record_timing=False; times an older run stored would stay
    # in the file, and they differ on every machine and every run.
    timed = [cell.get("id") for cell in _cells(path) if "execution" in cell.get("metadata", {})]
    assert timed == []


# ---- 03: what doc_D takes, and what the LRU title says after it -------------------------------


def test_03_says_which_pages_doc_D_takes_and_the_lru_title_follows_the_release_order():
    from pagedkv.viz import plot_lru

    run = ScenarioRun("eviction")
    while run.next_action.seq_id != "doc_D":
        run.step()
    record = run.step()
    table = run.seqs.block_table("doc_D")
    evicted = [e.page_id for e in record.events if e.kind == "evict"]
    released: dict[int, str] = {}  # page -> who last released it, in release order
    for event in run.events[: -len(record.events)]:
        if event.kind == "cache":
            released.pop(event.page_id, None)
            released[event.page_id] = str(event.seq_id)
    holders = {released[p] for p in evicted}
    assert len(holders) == 1  # one sequence's pages, named in the text
    from pagedkv.viz.questions import note

    text = " ".join(
        "".join(c["source"]) for c in _cells(ROOT / "notebooks" / "03_prefix_caching_and_lru.ipynb")
    )
    text = " ".join([*text.split(), *note("03-evict-after").text.split()])  # the box after the prediction
    pages = " and ".join(map(str, evicted))
    assert f"pages {pages}, **`{holders.pop()}`'s pages**" in text
    assert f"block table is {table}" in text
    # the title's victim is the CACHED page released longest ago of those left
    snap = run.seqs.snapshot()
    left = [p for p in released if snap.lru_rank[p] >= 0]
    title = plot_lru(snap, run.events).panels["lru"].title
    assert f"page {left[0]} (#1) is evicted next" in title
    assert "released first" not in title and "released longest ago" in title
    assert f"page {left[0]} is the next victim (#1)" in text


# ---- 00: its 7B, and where grouped-query attention is counted ------------------------------------


def test_00_says_what_its_7b_keeps_per_token_and_points_to_notebook_11():
    from pagedkv import CacheConfig

    config = CacheConfig(
        num_pages=1, page_size=1, num_layers=32, num_kv_heads=32, head_dim=128, dtype="float16"
    )
    text = " ".join(_texts(NOTEBOOKS[0]).split())
    assert f"{config.bytes_per_token // 1024} KiB per token" in text
    kib = config.bytes_per_token // 1024
    assert f"{config.bytes_per_token:,} B = {kib} KiB per token," in text  # the printed line
    assert f"{config.bytes_per_token * 2048 // 2**30} GiB for one 2,048-token sequence" in text
    assert "grouped-query attention" in text and "notebook 11 counts" in text


def _sections(cells: list[dict]) -> list[list[dict]]:
    """`cells` cut at every markdown heading (a line starting with "#")."""
    sections: list[list[dict]] = [[]]
    for cell in cells:
        if cell["cell_type"] == "markdown" and re.search(r"^#", "".join(cell["source"]), re.MULTILINE):
            sections.append([])
        sections[-1].append(cell)
    return sections


def _plain(cell: dict) -> str:
    """A code cell's source and its printed text (stdout, a plain result), not its pictures."""
    out = ["".join(cell["source"])]
    for output in cell.get("outputs", []):
        out.append("".join(output.get("text", "")))
        data = output.get("data", {})
        if "application/vnd.jupyter.widget-view+json" not in data:
            out.append("".join(data.get("text/plain", "")))
    return "\n".join(out)


def _answers_in_sight(cells: list[dict]) -> list[tuple[str, str]]:
    """(question id, text) for each code cell in a prediction's section (up to the next
    heading) whose source or printed output names the prediction's answer."""
    found = []
    for section in _sections(cells):
        codes = [c for c in section if c["cell_type"] == "code"]
        sources = "".join("".join(c["source"]) for c in codes)
        for qid in re.findall(r'PredictStep\("([^"]+)"\)', sources):
            word = re.compile(rf"(?<![\w-]){re.escape(questions.prediction(qid).answer)}(?![\w-])")
            found += [(qid, t[:200]) for c in codes if word.search(t := _plain(c).replace(qid, ""))]
    return found


PREDICTING = [p.name for p in NOTEBOOKS if "PredictStep(" in "\n".join(_code(p))]


def test_the_notebooks_with_predictions_are_found():
    assert {"00", "01", "03", "04", "05"} <= {name[:2] for name in PREDICTING}


@pytest.mark.parametrize("path", PREDICTING)
def test_no_code_cell_near_a_prediction_prints_its_answer(path):
    """With Run All every output is on screen: the code cells of a prediction's section (up
    to the next heading, which asks to answer first) must not print or name its answer, as
    00 did ("block table [0, 1, 2, 3, 4]" under "How many pages...?"). Pictures are not
    read, nor markdown (its numbers are the question's own, e.g. the prompts' lengths)."""
    assert _answers_in_sight(_cells(ROOT / "notebooks" / path)) == []


def test_the_answer_check_sees_a_printed_answer():
    cells = [
        {"cell_type": "markdown", "source": ["## A section"]},
        {"cell_type": "code", "source": ['PredictStep("00-prompt-pages")'], "outputs": []},
        {"cell_type": "code", "source": ["print(n)"], "outputs": [{"text": ["pages taken: 5"]}]},
        {"cell_type": "markdown", "source": ["### Answer first, then read on"]},
        {"cell_type": "code", "source": ["print(n)"], "outputs": [{"text": ["pages taken: 5"]}]},
    ]
    assert [qid for qid, _ in _answers_in_sight(cells)] == ["00-prompt-pages"]  # once: not after the heading


def test_05_gives_the_extra_steps_of_the_quick_bench_to_the_pool_not_to_preemption():
    """A learner read "preemption made the run 44 % longer" beside a swap run that recomputes
    nothing yet takes as many steps: section 7 now names the pool, and the bench's own rows
    show why (same steps with and without recomputation)."""
    from pagedkv.bench import preempt

    data = preempt.run(quick=True).data
    assert data["swap"]["recomputed_tokens"] == 0 < data["recompute"]["recomputed_tokens"]
    assert data["swap"]["steps"] == data["recompute"]["steps"] > data["no pressure"]["steps"]
    text = " ".join(_texts(next(p for p in NOTEBOOKS if p.name.startswith("05"))).split())
    assert "preemption made the run" not in text
    assert "the small pool made the run longer, not the recomputation." in text.lower()
