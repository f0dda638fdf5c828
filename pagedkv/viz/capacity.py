"""The capacity calculator of notebook 11, and two pictures of what the KV cache costs.

`calculator()` is an ipywidgets form over `pagedkv.labs.costs`: every input vLLM's memory
profiler uses at start-up is a field, so a number from an engine's start-up log can be
typed in and the log's `# GPU blocks: N` (or `GPU KV cache size: N tokens`) reproduced:

- the GPU, and the memory the device reports (CUDA's total; the GPU's typical value is
  filled in when the GPU changes, and a log's `total_gpu_memory` can replace it);
- `gpu_memory_utilization` (vLLM's `--gpu-memory-utilization`), the profile run's tokens
  (`--max-num-batched-tokens`), its activation peak (0: pagedkv's formula), non-torch
  memory and the CUDA-graph pool (0 for engines that capture graphs after sizing the cache);
- `request tok`, the length of the requests counted in "requests of N tokens that fit" (the
  budget itself does not depend on it). The three ways back are left out: notebook 11 asks
  about them later (section 1.2), so the calculator must not give that answer first.

A box keeps what was typed: a value out of range (a `GPU GiB` of 0 or below, another GiB
below 0, a token count below 1, a `mem util` of 0 or above 1) shows an error that starts
with the box's label and the number the box holds, written short (`shown`: 0.0 as 0, 39.50
as 39.5; a number box keeps the number, not the text typed), instead of an answer.
A box emptied and left keeps its last number (ipywidgets' number boxes never send an empty
value); the note under the boxes says so. The answer follows every
keystroke. Choosing a model or a GPU resets the four boxes read from a log
(GPU GiB, act. GiB, non-torch GiB, graphs GiB), so an answer never mixes a log of one model
with another model.

`budget_text(...)` is `costs.calculator_text` in lines of at most 95 characters.
`calculator_answer(...)` is the calculator's answer without widgets; a bad field is a ValueError
that starts with the box's label (`FIELDS`), which the widget shows instead of an answer.

`plot_budget` draws the budget as one bar split into its terms; `plot_ways_back` draws the
three ways to bring back a request whose K/V left the GPU, against its length.
"""

from __future__ import annotations

import dataclasses
import html
import math
import textwrap

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from pagedkv.labs import costs
from pagedkv.labs.specs import GPUS, MODELS
from pagedkv.viz.projector import projector

DEFAULT = costs.Assumptions()  # vLLM's defaults and pagedkv's estimates
NARROW_IN = 9.0  # inches: 990 px at 110 dpi, shrunk less in an 848 px cell (text >= 15 px)
FIELDS = {  # calculator_answer's keyword -> the widget's label
    "memory_gib": "GPU GiB",
    "utilization": "mem util",
    "batched_tokens": "batched tok",
    "activation_gib": "act. GiB",
    "non_torch_gib": "non-torch GiB",
    "cuda_graph_gib": "graphs GiB",
}
# The boxes a model or GPU change resets (read from one engine's log), and their defaults
# (memory_gib's is the GPU's reported memory)
LOG_FIELDS = ("memory_gib", "activation_gib", "non_torch_gib", "cuda_graph_gib")
LOG_DEFAULTS = {"activation_gib": 0.0, "non_torch_gib": 0.3, "cuda_graph_gib": 0.5}
RESET_NOTE_LINES = (  # shown as two lines, each one line in the calculator's width
    "Choosing a model or a GPU resets GPU GiB, act. GiB, non-torch GiB and graphs GiB:",
    "choose them first, then type your log's numbers.",
)
RESET_NOTE = " ".join(RESET_NOTE_LINES)
# An emptied number box sends nothing to Python and shows its last number again when left
EMPTY_NOTE = "A box you empty goes back to its last number when you leave it: type a number."
NOTE_STYLE = "font-size:14px;line-height:1.4;margin:4px 0"  # the widget's own line height is 28 px
# What a box's label adds: act. GiB's 0 means pagedkv's formula; every other box means its value
ZERO_MEANS = {"activation_gib": " (0: estimate)"}
# Every box is the same kind: a number box drawn as a plain text box, with no spinner arrows
# (browsers draw them on some number boxes only, on hover or by width)
BOX_CLASS = "pagedkv-number"
BOX_STYLE = (
    f"<style>.{BOX_CLASS} input[type=number]{{-moz-appearance:textfield;appearance:textfield}}"
    f" .{BOX_CLASS} input[type=number]::-webkit-inner-spin-button,"
    f" .{BOX_CLASS} input[type=number]::-webkit-outer-spin-button{{-webkit-appearance:none;margin:0}}</style>"
)


def shown(value: object) -> str:
    """A box's number as the error names it: a whole float without ".0" (-1.0 -> "-1"), any
    other float in its shortest exact form (39.50 -> "39.5"), anything else as repr."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else repr(value)


def _number(name: str, value: object, low: float, high: float = math.inf, *, open_low: bool = False) -> float:
    """A finite number in [low, high] ((low, high] if open_low), else ValueError naming it."""
    number = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan
    inside = math.isfinite(number) and (number > low if open_low else number >= low) and number <= high
    if not inside:
        allowed = f"in {'(' if open_low else '['}{low:g}, {high:g}]" if high < math.inf else f">= {low:g}"
        if open_low and high == math.inf:
            allowed = f"> {low:g}"
        raise ValueError(f"{FIELDS.get(name, name)} {shown(value)} is out of range: type a number {allowed}")
    return number


def calculator_assumptions(
    *,
    utilization: float = 0.9,
    batched_tokens: int = 8192,
    activation_gib: float = 0.0,
    non_torch_gib: float = 0.3,
    cuda_graph_gib: float = 0.5,
) -> costs.Assumptions:
    """The calculator's fields as `costs.Assumptions` (activation_gib 0: pagedkv's formula)."""
    _number("utilization", utilization, 0.0, 1.0, open_low=True)
    if isinstance(batched_tokens, bool) or not isinstance(batched_tokens, int) or batched_tokens < 1:
        raise ValueError(f"batched tok {shown(batched_tokens)} is out of range: type a whole number >= 1")
    for name, value in (("activation_gib", activation_gib), ("non_torch_gib", non_torch_gib)):
        _number(name, value, 0.0)
    _number("cuda_graph_gib", cuda_graph_gib, 0.0)
    return costs.Assumptions(
        utilization,
        batched_tokens,
        non_torch_gib=non_torch_gib,
        cuda_graph_gib=cuda_graph_gib,
        activation_gib=activation_gib or None,
    )


def calculator_answer(model: str, gpu: str, tokens: int, *, memory_gib: float | None = None, **fields) -> str:
    """What the calculator shows: every term of the KV budget, the pages and token slots, and
    how many requests of `tokens` tokens fit. `memory_gib` is the memory
    the device reports (None: the GPU's typical value); `fields` are `calculator_assumptions`'s.

    Example: calculator_answer("Llama-3-8B", "A100-40GB", 8192, memory_gib=39.5,
    activation_gib=9.37, non_torch_gib=0.1, cuda_graph_gib=0.0) -> "... 5,694 pages of 16 ...".
    """
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
        raise ValueError(f"request tok {shown(tokens)} is out of range: type a whole number >= 1")
    spec = costs.gpu_spec(gpu)
    if memory_gib is not None:
        reported = _number("memory_gib", memory_gib, 0.0, open_low=True)
        if reported != spec.reported_gib:  # the header says the GPU is no longer the stock one
            spec = dataclasses.replace(spec, name=f"{spec.name} (your values)")
        spec = dataclasses.replace(spec, reported_gib=reported)
    text = costs.calculator_text(model, spec, tokens, calculator_assumptions(**fields), ways=False)
    return f"{text}\n{TP_POINTER}" if " does not fit on one " in text else text


def wrapped(text: str, width: int) -> str:
    """`text` with each line longer than `width` broken between words (the rest indented)."""
    lines = []
    for line in text.splitlines():
        pieces = textwrap.wrap(
            line, width, subsequent_indent="      ", break_long_words=False, break_on_hyphens=False
        )
        lines += pieces or [line]
    return "\n".join(lines)


def budget_text(model: str, gpu: str, tokens: int, width: int = 95) -> str:
    """`costs.calculator_text(model, gpu, tokens)` with each line longer than `width` broken
    between words (the rest indented), so a narrow notebook never cuts a word in two."""
    return wrapped(costs.calculator_text(model, gpu, tokens), width)


# The calculator's answer: lines broken between words to the width of its three columns of
# boxes; a narrower window wraps it again, still between words (JupyterLab's own style for
# <pre> breaks anywhere, hence word-break and overflow-wrap set back to normal).
ANSWER_WIDTH = 80
ANSWER_STYLE = "white-space:pre-wrap;word-break:normal;overflow-wrap:normal;line-height:1.3"
# An error in red, bold, with no blank space under it: the output shrinks to the error's lines
ERROR_STYLE = "color:#B00020;font-weight:bold;margin:0"
ERROR_HINT = "(no answer until the box holds a number in range)"
# Said under "does not fit": where the notebook splits such a model over several GPUs
TP_POINTER = "Split it over several GPUs: tensor parallelism, notebook 11b, section 2."


def error_html(error: str) -> str:
    """The calculator's output for a bad box: `error` in red and bold, then ERROR_HINT, in a
    <pre> only as tall as those lines."""
    text = html.escape(wrapped(error, ANSWER_WIDTH))
    return f"<pre style='{ANSWER_STYLE}'><span style='{ERROR_STYLE}'>{text}</span>\n{ERROR_HINT}</pre>"


def calculator(model: str = "Mistral-7B", gpu: str = "A100-40GB", tokens: int = 1024):
    """An ipywidgets form: pick a model and a GPU, type what your engine's start-up log says,
    read every term of the KV budget and what fits. `request tok` (`tokens`) is the request
    length of "requests of N tokens that fit"; the budget does not depend on it. Returns the box."""
    import ipywidgets as widgets

    costs.model_spec(model), costs.gpu_spec(gpu)  # ValueError naming the choices
    pick_model = widgets.Dropdown(options=list(MODELS), value=model, description="model")
    pick_gpu = widgets.Dropdown(options=list(GPUS), value=gpu, description="GPU")
    # Boxes that keep what was typed (no clamping: -5 stays -5 and the error names it) and
    # answer at every keystroke, not only when the box loses focus.
    gib = dict(continuous_update=True)
    length = widgets.IntText(tokens, description="request tok", continuous_update=True)
    boxes = {
        "memory_gib": widgets.FloatText(GPUS[gpu].reported_gib, **gib),
        "utilization": widgets.FloatText(0.9, **gib),
        "batched_tokens": widgets.IntText(8192, continuous_update=True),
        **{name: widgets.FloatText(LOG_DEFAULTS[name], **gib) for name in LOG_FIELDS[1:]},
    }
    for box in (length, *boxes.values()):  # labels shown whole, boxes in even columns
        box.style.description_width, box.layout.width = "100px", "240px"
        box.add_class(BOX_CLASS)  # no spinner arrows on any box
    for name, box in boxes.items():
        box.description = FIELDS[name] + ZERO_MEANS.get(name, "")
    for box in (boxes["memory_gib"], boxes["activation_gib"]):  # the first column: a longer label
        box.style.description_width, box.layout.width = "150px", "290px"
    out = widgets.HTML()

    def update(_=None) -> None:
        values = {name: box.value for name, box in boxes.items()}
        try:
            answer = calculator_answer(pick_model.value, pick_gpu.value, length.value, **values)
        except ValueError as error:
            out.value = error_html(str(error))
            return
        text = wrapped(answer, ANSWER_WIDTH)
        out.value = f"<pre style='{ANSWER_STYLE}'>{html.escape(text)}</pre>"

    def new_model_or_gpu(_=None) -> None:
        """The numbers read from one engine's log belong to its model and GPU: back to the
        GPU's reported memory and pagedkv's defaults, so no answer mixes old and new inputs."""
        for name in LOG_FIELDS:
            default = GPUS[pick_gpu.value].reported_gib if name == "memory_gib" else LOG_DEFAULTS[name]
            boxes[name].value = default  # each change redoes the answer
        update()

    for w in (pick_model, pick_gpu):
        w.observe(new_model_or_gpu, names="value")
    for w in (length, *boxes.values()):
        w.observe(update, names="value")
    update()
    lines = "<br>".join((*RESET_NOTE_LINES, EMPTY_NOTE))
    note = widgets.HTML(f"{BOX_STYLE}<div style='{NOTE_STYLE}'><i>{lines}</i></div>")
    rows = [widgets.HBox([pick_model, pick_gpu, length])]
    rows += [widgets.HBox([boxes[a], boxes[b], boxes[c]]) for a, b, c in (list(FIELDS)[:3], list(FIELDS)[3:])]
    return widgets.VBox([*rows, note, out])


def plot_budget(model: str, gpu: str, assume: costs.Assumptions = DEFAULT) -> Figure:
    """The GPU's memory as one bar: weights, the profile run's activation peak, non-torch
    memory, the CUDA-graph pool, the KV cache, and the share vLLM leaves unused."""
    terms = costs.capacity_terms(model, gpu, assume)
    usable = terms[0][1]
    parts = [(name, value) for name, value, _ in terms[1:]]  # the peak keeps "at N tokens"
    parts.append(("KV cache", usable - sum(v for _, v in parts)))
    free = usable / assume.gpu_memory_utilization - usable
    util = assume.gpu_memory_utilization
    parts.append((f"left free (gpu_memory_utilization {util:g})", free))
    fig = Figure(figsize=(11, 3.2), layout="constrained")  # callouts, bar and legend on one 720-px screen
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    colours = ("#999999", "#E69F00", "#56B4E9", "#CC79A7", "#009E73", "#FFFFFF")
    left = 0.0
    for (name, value), colour in zip(parts, colours):
        gib = value / costs.GIB
        ax.barh(0, gib, left=left, color=colour, edgecolor="black", label=f"{name}: {gib:.2f} GiB")
        left += gib
    _name_thin_slices(ax, parts, left)
    ax.set_yticks([])
    ax.set_xlabel("GiB of device memory")
    ax.set_title(f"{model} on {gpu}: where the memory goes", loc="left")
    ax.set_xlim(0, left)
    ax.spines[["top", "right"]].set_visible(False)
    fig.legend(loc="outside lower center", ncol=2, frameon=False)
    return projector(fig, width=NARROW_IN)


def _name_thin_slices(ax, parts: list[tuple[str, float]], total_gib: float) -> None:
    """A callout above the bar for each slice narrower than 5 % of it, so a 0.3 GiB slice can
    be found without the legend: its name and size, a line to its middle; the callouts stand
    side by side, a quarter of the bar apart, starting just right of the first thin slice."""
    left, thin = 0.0, []
    for name, value in parts:
        gib = value / costs.GIB
        if 0 < gib < 0.05 * total_gib:
            thin.append((name, gib, left + gib / 2))
        left += gib
    top = 0.62 + 0.3 * (len(thin) - 1)  # one text line (>= 12 px) apart
    for i, (name, gib, middle) in enumerate(thin):  # the leftmost slice's callout the highest
        ax.annotate(
            f"{name}: {gib:.2f} GiB",
            xy=(middle, 0.4),
            xytext=(thin[-1][2] + 0.04 * total_gib, top - 0.3 * i),
            ha="left",
            va="center",
            arrowprops=dict(arrowstyle="-", color="black", lw=1.2, shrinkA=2, shrinkB=0, relpos=(0, 0.5)),
        )
    ax.set_ylim(-0.45, top + 0.2 if thin else 0.5)


def plot_ways_back(
    model: str, gpu: str, lengths: list[int], assume: costs.Assumptions = DEFAULT, crossover: int = 0
) -> Figure:
    """Milliseconds to bring back a request of each length: recompute, swap, second-tier reload.
    The lengths on a log scale (base 2), each one a tick, so short requests do not bunch up.
    `crossover` (tokens, if > 0): one more point there, and a labelled dotted line, where swap
    stops beating recompute (lines drawn straight from tick to tick would cross elsewhere)."""
    points = sorted({*lengths, crossover} - {0})  # the crossover is drawn as a point too
    ways = [costs.preemption_costs(model, gpu, n, assume) for n in points]
    fig = Figure(figsize=(11, 3.1), layout="constrained")  # with its axis, on one 720-px screen
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for key, label, colour in (
        ("recompute_s", "recompute (a prefill)", "#D55E00"),
        ("swap_s", "swap out and back", "#0072B2"),
        ("reload_s", "second-tier reload", "#009E73"),
    ):
        ax.plot(points, [w[key] * 1e3 for w in ways], marker="o", lw=2.5, label=label, color=colour)
    if crossover > 0:
        ax.axvline(crossover, color="#555555", ls=":", lw=2)
        ax.annotate(
            f"swap = recompute: {crossover:,} tokens",
            (crossover, 0.97),
            xycoords=("data", "axes fraction"),
            xytext=(-6, 0),  # left of the line: the lines climb on its right
            textcoords="offset points",
            ha="right",
            va="top",
        )
    ax.set_xscale("log", base=2)
    ax.set_xticks(lengths, [f"{n:,}" for n in lengths])
    ax.minorticks_off()
    ax.set_xlabel("tokens of the request whose K/V left the GPU (log scale)")
    ax.set_ylabel("ms to bring it back")
    ax.set_title(f"{model} on {gpu}, blocks of {assume.page_size}", loc="left")
    ax.legend(loc="center left")  # above the flat lines, clear of the crossover label
    ax.grid(alpha=0.3)
    return projector(fig, width=NARROW_IN)
