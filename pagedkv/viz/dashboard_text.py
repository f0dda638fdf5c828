"""The dashboard's text views: the status line and the event log, as HTML.

`status_html` sums up the pool (page and token usage, prefix hits, evictions, copy-on-write)
and shows the dashboard's last message; `log_html` lists a run's records newest step first,
each entry coloured by its kind (`pagedkv.viz.palette.EVENT_COLORS`), the scheduler's
decision then cause before effect inside a step.

Leaves out: filtering the log by kind or by request.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

import numpy as np

from pagedkv.core.page import PageState
from pagedkv.core.plumbing.words import count
from pagedkv.scenarios import ScenarioRun
from pagedkv.scenarios.text import slot_words, step_role_at
from pagedkv.viz.palette import EVENT_COLORS

__all__ = [
    "actions_note",
    "add_refusal",
    "counter_html",
    "counter_text",
    "end_message",
    "fills_at",
    "fills_text",
    "log_html",
    "scrolls",
    "status_html",
]

LOG_KINDS = ("allocate", "prefix_hit", "fork", "evict", "cow", "cache", "free", "append")
SCHEDULER_KINDS = ("preempt", "resume", "abort")  # in the key only when a scheduler runs
KEY_WORDS = {"prefix_hit": "prefix hit", "fork": "fork shares"}  # the key says them as the log does


ACTIONS_NOTE = "These are not scenario steps: Step goes on from the pool they leave."
SCHEDULER_NOTE = (  # or ACTIONS_NOTE
    "Only Step runs the scheduler's requests (after the last step, Decode all does); "
    "these buttons act on yours."
)
NOTE_STYLE = "font-size:13px;line-height:1.35;color:#444"  # the actions' note, beside their buttons
HITS_TIP = (
    "Counted at every admission, a resume after preemption included: the tokens a request is "
    "admitted with are looked up (its whole prompt; with a scheduler, the tokens its first "
    "prefill step computes plus its prefix hits). Hits: the tokens found in full pages already "
    "in the pool."
)
SCROLL_NOTE_PX = 24  # the Block tables tab's line under its scrolling box (shown when it may scroll)
VIEW_HEIGHT_PX = 330  # a view's picture is shown at most this tall: the dashboard's cell, code line
# to your actions, fits JupyterLab's 600-px notebook view at 1280x720
# the Block tables' scrolling box: its tab may be taller than the others, so that with 4 or 5
# block tables above it 2-3 rows of tokens by page still show (a learner saw half a row)
TOKENS_ROOM_PX = 96
VIEW_BOX_PX = VIEW_HEIGHT_PX - SCROLL_NOTE_PX + TOKENS_ROOM_PX
SCROLL_NOTE = (
    "<div style='font-size:13px;color:#444'>↕ The box above scrolls: a row cut at its lower edge "
    "goes on below it; scroll to see it whole.</div>"
)


def scrolls(snap, token_ids: dict) -> bool:
    """Whether the Block tables tab's content (status, a table row and a tokens-by-page line
    per sequence) may be taller than its box, so its note says it scrolls. An estimate that
    errs towards saying so: 3 lines of status, a 26 px row per sequence, keys and headings
    120 px, and a 40 px line for every 640 px of token boxes (9 px a character, 8 a page)."""
    lines = sum(-(-(9 * len(t) + 8 * len(snap.block_tables[s])) // 640) for s, t in token_ids.items())
    return 60 + 120 + 26 * len(snap.seq_ids) + 40 * lines > VIEW_BOX_PX


HOW_TO_READ = (  # the log's folded note: its colours, its order, its counting and its kinds
    # the log's colours name kinds of event, not requests (a learner read allocate's blue as a request's)
    "<details style='font-size:13px;color:#444'><summary>colour = kind of event; how to read it</summary>"
    "{key}<br>inside a step, "
    "cause before effect: a scheduler's decision first, then each eviction, the allocation "
    "it made room for and the token; a finish or a refusal last. Tokens count from 1 in each "
    "sequence; slots and places count from 0. A slot is a token's place in the pool, page × page "
    "size + its place in the page: “in slot 13 (page 3, place 1)” is the second place of page 3. "
    "<b>append</b>: a token written into its slot; "
    "<b>allocate</b>: FREE (or evicted) pages taken; <b>prefix hit</b>: cached pages reused; "
    "<b>fork shares</b>: a new sequence holds its parent's pages "
    "(notebook 04); <b>evict</b>: a CACHED page taken back; <b>cow</b>: a shared page "
    "copied before a write (notebook 04); <b>cache</b>: a released full page kept, CACHED; "
    "<b>free</b>: a released page emptied, FREE"
)


def fills_at(run: ScenarioRun) -> tuple[int | None, int | None]:
    """On `run`'s pool geometry, the scenario's own steps alone (a dry run, without your
    actions): the first step after which no page is FREE, and the first refused step (None
    where it never happens)."""
    dry = ScenarioRun(run.scenario, run.num_pages, run.page_size, run.model)
    dry.goto(len(dry.steps))
    full = (i for i, snap in enumerate(dry.snapshots) if PageState.FREE not in snap.state)
    refused = (i for i, record in enumerate(dry.records, 1) if record.refused)
    return next(full, None), next(refused, None)


def fills_text(run: ScenarioRun) -> str:
    """One sentence: when the scenario's own steps use up the FREE pages on this pool (a dry
    run: the learner's own actions do not move it)."""
    full, refused = fills_at(run)
    if full is None:
        return (
            f"On this pool the scenario's {len(run.steps)} steps never use up the FREE pages"
            " (your own actions not counted)."
        )
    said = (
        "On this pool, in the scenario's own steps (your actions not counted), "
        f"the last FREE page goes at step {full} of {len(run.steps)}"
    )
    return said + (f"; the first refused step is {refused}." if refused else "; no step is refused.")


def geometry_html(run: ScenarioRun) -> str:
    """The Pool size tab's note: the pool the pictures show, when its FREE pages run out, and
    what a slider does."""
    return (
        f"<div style='font-size:14px;line-height:1.5'>The pool now: <b>{run.num_pages} pages × "
        f"{run.page_size} slots</b>. <b>{html.escape(fills_text(run))}</b> "
        "Moving a slider rebuilds the pool at once and replays "
        "everything done so far on it (after a move, the line under the buttons says so); the other tabs "
        "show the new pool. Rebuilding runs the same steps with another number or size of pages: "
        "a smaller pool runs out of FREE pages sooner, and larger pages leave more empty slots.<br>"
        "<b>Play speed</b>, below, sets how fast ▶ steps the story (slow: 1.5 s a step, "
        "normal: 0.8 s, fast: 0.3 s).</div>"
    )


def add_refusal(run: ScenarioRun) -> str:
    """Why the last action, an Add request, was refused ("" if it was not one), for the line
    beside the buttons: the refusal as the log says it (a prompt too big for the FREE and
    evictable CACHED pages: the new pages it needs and those there were)."""
    last = run.records[-1] if run.records else None
    if last is None or not (last.yours and last.refused and last.action.op == "add"):
        return ""
    return f"Add request refused: {last.note.removeprefix('refused: ')}"


def actions_note(run: ScenarioRun) -> str:
    """The note beside your actions (HTML): in red, why the last action, an Add request, was
    refused (`add_refusal`); else what the buttons act on."""
    refusal = add_refusal(run)
    note = refusal or (SCHEDULER_NOTE if run.scheduler is not None else ACTIONS_NOTE)
    red = ";color:#B91C1C" if refusal else ""
    return f"<div style='{NOTE_STYLE}{red}'>{html.escape(note, quote=False)}</div>"


def end_message(run: ScenarioRun) -> str:
    """What the dashboard says once every step of the scenario has run. With a scheduler and
    requests left unfinished (your own sequences held their pages), it says how to go on:
    Decode all runs one more scheduler step a press once no sequence of yours is left."""
    waiting = run.unfinished_requests
    if waiting:
        names = ", ".join(map(str, waiting))
        if run.steps_past_end and not run.own_sequences:  # said in full at the end: now short
            return f"{names} unfinished: Decode all runs one more step."
        text = f"The scenario is done, but {names} {'is' if len(waiting) == 1 else 'are'} unfinished: "
        mine = ", ".join(map(str, run.own_sequences))
        if mine:
            text += f"Finish your {'sequence' if len(run.own_sequences) == 1 else 'sequences'} {mine}, then "
        return text + "press Decode all to run the scheduler on (one step a press), or Reset to start again."
    text = "The scenario has ended. Press Reset to start again"
    if run.can_decode_all:  # a sequence of the run's own can go on
        whose = "every live sequence" if run.scheduler is None else "each sequence you added"
        text += f", or Decode all to give {whose} one more token"
    return text + "."


def status_html(run: ScenarioRun, snap, message: str = "") -> str:
    """The pool of `run` at `snap` in 2 lines (pages; tokens), then your actions and the waiting
    queue (if any), then `message` (if any) in red."""
    counts = np.bincount(snap.state, minlength=3)
    stats = snap.stats
    queries = stats["prefix_queries"]
    rate = f"{stats['prefix_hits'] / queries:.0%}" if queries else "n/a"
    items = (  # one line per subject: the pages, the tokens; an item never breaks inside
        (f"<b>{run.scenario.title}</b> — {run.num_pages} pages × {run.page_size} slots",
         f"ACTIVE <b>{counts[PageState.ACTIVE]}</b> of {run.num_pages} pages (<b>{snap.usage:.0%}</b>)",
         f"CACHED {counts[PageState.CACHED]} (reusable or evictable)", f"FREE {counts[PageState.FREE]}"),
        (f"filled slots in ACTIVE pages: <b>{snap.token_usage:.0%}</b> of all slots",
         f"<span title='{html.escape(HITS_TIP)}' style='text-decoration:underline dotted'>prefix hits "
         f"{stats['prefix_hits']} of {queries} tokens looked up at admission</span>"
         f" ({rate})",
         f"evictions {stats['evictions']}", f"copy-on-write {stats['cow_copies']}"),
    )  # fmt: skip
    text = "<br>".join(
        " · ".join(f"<span style='white-space:nowrap'>{i}</span>" for i in line) for line in items
    )
    more = [your_actions(run)] if run.own_actions else []  # as the header says it
    if run.scheduler is not None:  # the queue the scheduler admits from, front first
        queue = [
            f"{s.req_id} (preempted)" if s.status == "preempted" else str(s.req_id)
            for s in run.scheduler.waiting
        ]
        more.append(f"<b>waiting queue</b>, front first: {html.escape(', '.join(queue) or 'empty')}")
    if more:
        text += "<br>" + " · ".join(more)
    if message:
        text += f"<br><span style='color:#B91C1C'>{html.escape(message)}</span>"
    return f"<div style='font-size:14px;line-height:1.4'>{text}</div>"


def own_done(run: ScenarioRun) -> int:
    """Your own actions that did something (not refused): the scenario switch's count."""
    return sum(1 for r in run.records if r.yours and not r.refused)


def your_actions(run: ScenarioRun) -> str:
    """Your own actions, every press counted, refused ones too: "your actions: 2 (1 refused)"
    (the header's and the status line's one format)."""
    refused = sum(1 for r in run.records if r.yours and r.refused)
    total = own_done(run) + refused
    if refused:
        return f"your actions: {total} ({refused} refused)"
    return f"your actions: {total}"


def counter_text(run: ScenarioRun) -> str:
    """The header's counter as plain text (see `counter_html`), e.g.
    "step 40 of 40 · your actions: 1 · req3 unfinished"."""
    return re.sub(r"<[^>]+>", "", counter_html(run))


def step_role(run: ScenarioRun) -> str:
    """With a scheduler, what the step shown does: " · scheduler step k" when it ran the
    scheduler (the k-th such step), else e.g. " · queues req3"; "" without a scheduler
    (the words of `step_role_at`)."""
    if run.scheduler is None:
        return ""
    role = step_role_at(run.steps, run.cursor)
    return f" · {role}" if role else ""


def counter_html(run: ScenarioRun) -> str:
    """The header's one counter: "step k of N" (with a scheduler, then what the step does,
    see `step_role`, unless your actions or steps past the end are counted: then the tooltip
    says it), then "your actions: n (r refused)" (once you
    have pressed one; refused ones changed nothing) and "+m past the end" (scheduler
    steps Decode all ran once the scenario was done), then, at the scenario's last step,
    "done" when every request has finished, or the requests still
    unfinished. Short, and one unbreakable line (the scenario picker narrows first); when the
    scenario's steps are done with a request unfinished, that part may wrap, whole, onto a
    second line (at 1280 px it did not fit beside the scenario picker). The tooltip says it in full."""
    own, refused = own_done(run), sum(1 for r in run.records if r.yours and r.refused)
    extra = run.steps_past_end
    role, busy = step_role(run), bool(own + refused or extra)  # busy: the role goes to the tooltip
    text, tips = f"step {run.cursor} of {len(run.steps)}", []
    if not busy:
        text += role
    elif role:  # the header stays one line: the role goes to the tooltip
        tips.append(f"step {run.cursor}{role}")
    if own + refused:
        text += f" · {your_actions(run)}"
        tips.append(f"{count(own + refused, 'action')} of your own; they move no scenario step")
    if refused:
        tips.append(f"{refused} of them refused (the log says why); they changed nothing")
    if extra:
        text += f" · +{extra} past the end"
        tips.append(f"{count(extra, 'scheduler step')} that Decode all ran after the scenario's last step")
    waiting = run.unfinished_requests if run.done else []
    if run.done and not waiting:  # inside the nowrap part: "· done" never wraps alone
        text += " · done"
    done = ""
    if waiting:  # the steps are used up, not the requests: say which are left
        left = f"<b>{', '.join(map(str, waiting))} unfinished</b>"  # short: one line at 1280 px
        done = f" · <span style='display:inline-block;white-space:nowrap'>{left}</span>"  # wraps whole
        tips.append("the scenario's steps are used up; Decode all runs the scheduler on")
    span = f"<span style='font-size:16px' title='{html.escape('; '.join(tips))}'>"
    return f"{span}<b style='white-space:nowrap'>{text}</b>{done}</span>"


# An entry's wrapped lines start further in than its first line (a hanging indent), so a
# narrow log still reads one entry from the next.
ENTRY_STYLE = "padding-left:1.6em;text-indent:-0.8em"


# Fixed at the box's bottom over a fade while older steps are below; at the log's end an
# opaque line (after it, so drawn on top) covers it and says the end is reached.
LOG_MORE_HTML = (
    "<div class='pagedkv-log-more' style='position:sticky;bottom:-4px;height:34px;"
    "box-sizing:border-box;margin:0 -6px;padding:14px 6px 0;text-align:right;font-size:13px;"
    "color:#444;background:linear-gradient(rgba(255,255,255,0),#fff 55%)'>"
    "▼ scroll for older steps</div><div style='position:relative;height:34px;box-sizing:"
    "border-box;margin:-34px -6px 0;padding:14px 6px 0;text-align:right;font-size:13px;"
    "color:#444;background:#fff'>end of the log</div>"
)


def log_html(
    records: Sequence,
    steps: int,
    height_px: int = 420,
    scheduled: bool = False,
    page_size: int | None = None,
    actions: Sequence = (),
) -> str:
    """The last `steps` records of a run as the event log (newest step first), at most
    `height_px` tall (it scrolls): a heading per step ("step 4", or "your action (after
    scenario step 4)" for an action of your own), then its entries, each wrapped between
    words under its first line. The key names the entries' kinds by colour (with a scheduler,
    `scheduled`, also preempt, resume and abort). When the entries are longer than the box, a
    line fixed at its bottom, over a fade, says older steps are further down (until the end).
    Given `page_size`, a token's slot also names its page and place: "in slot 17 (page 4, place 1)".
    Given the run's `actions` (with a scheduler), a heading also says what the step did, as the
    header does: "step 11 (scheduler step 8)", "step 2 (queues req2)"."""
    lines, chars = [], 0
    for record in reversed(records[-steps:]):  # newest step first
        mine = f"your action{', refused,' * record.refused} (after scenario step {record.step})"
        role = step_role_at(actions, record.step) if actions else ""
        label = mine if record.yours else f"step {record.step}" + (f" ({role})" if role else "")
        if record.own and not record.yours:  # run by Decode all once the scenario is done
            label = f"scheduler step past the end (after scenario step {record.step})"
        lines.append(f"<div class='pagedkv-log-step' style='margin-top:4px'><b>{label}</b></div>")
        for kind, text in record.entries(grouped=True):  # inside a step: cause before effect
            color = EVENT_COLORS.get(kind, "#111111")
            style = f"color:{color};{ENTRY_STYLE}"
            text = slot_words(text, page_size)
            lines.append(f"<div class='pagedkv-log-{kind}' style='{style}'>{html.escape(text)}</div>")
            chars += len(text)
    body = "\n".join(lines) or "<i>no step yet: press Step</i>"  # as plain text: one entry a line
    kinds = LOG_KINDS + SCHEDULER_KINDS if scheduled else LOG_KINDS
    key = " · ".join(f"<span style='color:{EVENT_COLORS[k]}'>{KEY_WORDS.get(k, k)}</span>" for k in kinds)
    # ~34 characters a line in the log's third of an 850 px cell, a line 19 px tall
    rows = 3 + len(lines) + chars // 34
    more = LOG_MORE_HTML if rows * 19 > height_px else ""
    return (
        f"<div style='max-height:{height_px}px;box-sizing:border-box;overflow-y:auto;overflow-x:hidden;"
        "font-size:14px;line-height:1.35;border:1px solid #ccc;padding:4px 6px;overflow-wrap:anywhere'>"
        "<div><b>event log</b>, newest step first; tokens count from 1, slots from 0</div>\n"
        + HOW_TO_READ.format(key=key)
        + (
            "; <b>preempt</b>: a request sent back to wait (notebook 05); <b>resume</b>: a "
            "preempted request admitted again; <b>abort</b>: a request dropped before it "
            "finished, its pages released as by a finish"
        )
        * scheduled
        + f"</details>\n{body}{more}</div>"
    )
