"""The capacity calculator of notebook 11 (pagedkv.viz.capacity): every input of vLLM's memory
profiler is a field, so a published start-up log can be reproduced from the widget.

The log (docs/calibration.md, row L2 and "Reproducing row L2 by hand and in the calculator"):
Llama-3-8B on an A100-40GB at gpu_memory_utilization 0.9 reports 39.50 GiB of device memory,
0.10 GiB of non-torch memory, an activation peak of 9.37 GiB and no CUDA-graph pool, and keeps
5,691 blocks of 16 tokens.
"""

from __future__ import annotations

import html
import re

import pytest

from pagedkv.labs import costs
from pagedkv.labs.specs import size_text
from pagedkv.viz.capacity import (
    ANSWER_STYLE,
    BOX_CLASS,
    ERROR_HINT,
    ERROR_STYLE,
    RESET_NOTE,
    RESET_NOTE_LINES,
    budget_text,
    calculator,
    calculator_answer,
    plot_budget,
    wrapped,
)

GIB = 2**30
LOG = {"memory_gib": 39.50, "activation_gib": 9.37, "non_torch_gib": 0.10, "cuda_graph_gib": 0.0}


def blocks_by_hand() -> int:
    """docs/calibration.md's formula with Llama-3-8B's published numbers, no pagedkv call:
    blocks = floor((39.50 x 0.9 - weights - 9.37 - 0.10) GiB / (16 tokens x bytes per token))."""
    weights = 8.03e9 * 2  # parameters x bf16 bytes
    per_token = 2 * 32 * 8 * 128 * 2  # K and V x layers x K/V heads x head size x bf16 bytes
    budget = 39.50 * 0.9 * GIB - weights - 9.37 * GIB - 0.10 * GIB
    return int(budget // (16 * per_token))


def pages_in(text: str) -> int:
    return int(re.search(r"= ([\d,]+) pages of 16", text).group(1).replace(",", ""))


def test_the_documented_log_gives_5694_blocks():
    assert blocks_by_hand() == 5694  # the log itself printed 5,691
    text = calculator_answer("Llama-3-8B", "A100-40GB", 8192, **LOG)
    assert pages_in(text) == blocks_by_hand()
    assert "(your value)" in text


def test_the_widget_reproduces_the_log_when_its_fields_are_typed_in():
    box = calculator()
    out = box.children[-1]
    assert "Mistral-7B on A100-40GB" in out.value  # the model and GPU the notebook discusses
    assert "requests of 1,024 tokens" in out.value
    # the ways back are section 1.2's question, asked after the calculator: not shown here
    assert "bring one back" not in out.value and "recompute" not in out.value
    top = box.children[0].children
    top[0].value, top[2].value = "Llama-3-8B", 8192
    fields = {w.description: w for row in box.children[1:3] for w in row.children}
    fields["GPU GiB"].value = 39.50
    fields["act. GiB (0: estimate)"].value = 9.37
    fields["non-torch GiB"].value = 0.10
    fields["graphs GiB"].value = 0.0
    assert pages_in(out.value) == blocks_by_hand()


def test_choosing_a_gpu_fills_in_the_memory_it_reports():
    box = calculator()
    memory = box.children[1].children[0]
    box.children[0].children[1].value = "H100-80GB"
    assert memory.value == 79.2 and "H100-80GB" in box.children[-1].value


@pytest.mark.parametrize(
    "field, value, words",
    [
        ("memory_gib", -1.0, "GPU GiB -1 is out of range: type a number > 0"),
        ("utilization", 1.2, "mem util 1.2 is out of range: type a number in (0, 1]"),
        ("utilization", 0.0, "mem util 0 is out of range: type a number in (0, 1]"),
        ("batched_tokens", 0, "batched tok 0 is out of range: type a whole number >= 1"),
        ("non_torch_gib", float("nan"), "non-torch GiB nan is out of range: type a number >= 0"),
        ("activation_gib", -2.0, "act. GiB -2 is out of range: type a number >= 0"),
        ("cuda_graph_gib", -0.5, "graphs GiB -0.5 is out of range: type a number >= 0"),
    ],
)
def test_a_bad_field_is_named_with_its_value_and_what_is_allowed(field, value, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        calculator_answer("Mistral-7B", "A100-40GB", 2048, **{field: value})


def test_an_error_writes_the_number_short_as_a_learner_would_type_it():
    # A number box holds a float, not the typed text: 0 arrives as 0.0 and 39.50 as 39.5.
    box = calculator()
    memory = box.children[1].children[0]
    memory.value = 0.0
    assert "GPU GiB 0 is out of range: type a number &gt; 0" in box.children[-1].value
    memory.value = -0.25
    assert "GPU GiB -0.25 is out of range" in box.children[-1].value
    with pytest.raises(ValueError, match=re.escape("non-torch GiB -1 is out of range")):
        calculator_answer("Mistral-7B", "A100-40GB", 2048, non_torch_gib=-1.0)
    with pytest.raises(ValueError, match=re.escape("mem util 1.05 is out of range")):
        calculator_answer("Mistral-7B", "A100-40GB", 2048, utilization=1.05)


def test_the_widget_shows_a_bad_field_instead_of_an_answer_and_recovers():
    box = calculator()
    out = box.children[-1]
    util = box.children[1].children[1]
    util.value = 1.5
    assert "mem util 1.5 is out of range: type a number in (0, 1]" in out.value
    assert ERROR_STYLE in out.value and ERROR_HINT in out.value  # red, and what to do
    assert "min-height" not in out.value  # no blank space kept under the error
    assert out.value.count("\n") == 1  # the error's line and the hint's: nothing more
    util.value = 0.9
    assert "token slots" in out.value


def test_a_box_keeps_what_was_typed_and_the_answer_follows_every_keystroke():
    # A box is not clamped: -5 typed stays -5 and the error names it (a clamped box would show
    # 0 and an error about 0). The answer is redone at each change, not when focus leaves.
    box = calculator()
    out = box.children[-1]
    inputs = [w for row in box.children[:3] for w in row.children if hasattr(w, "continuous_update")]
    assert len(inputs) == 7 and all(w.continuous_update for w in inputs)
    fields = {w.description: w for w in inputs}
    fields["GPU GiB"].value = -5.0
    assert fields["GPU GiB"].value == -5.0
    assert "GPU GiB -5 is out of range: type a number &gt; 0" in out.value
    fields["GPU GiB"].value = 39.39
    fields["graphs GiB"].value = -1.0
    assert fields["graphs GiB"].value == -1.0 and "graphs GiB -1 is out of range" in out.value
    fields["graphs GiB"].value = 0.0
    assert "CUDA-graph reserve                 0.00 GiB" in out.value
    fields["request tok"].value = 1024
    answer = calculator_answer("Mistral-7B", "A100-40GB", 1024, cuda_graph_gib=0.0)
    assert html.unescape(out.value) == f"<pre style='{ANSWER_STYLE}'>{wrapped(answer, 80)}</pre>"
    assert "word-break:normal" in ANSWER_STYLE and "overflow-wrap:normal" in ANSWER_STYLE
    shown = html.unescape(out.value).split(">", 1)[1].rsplit("<", 1)[0]
    assert max(len(line) for line in shown.splitlines()) <= 80 and shown.split() == answer.split()
    assert "requests of 1,024 tokens that fit: 166" in out.value  # 2,048 tokens: 83


def test_budget_text_fits_80_characters_and_wraps_between_words():
    from pagedkv.labs import costs

    whole = costs.calculator_text("Mistral-7B", "A100-40GB", 2048)
    assert max(len(line) for line in whole.splitlines()) <= 80  # the calculator's width: no wrap
    assert budget_text("Mistral-7B", "A100-40GB", 2048) == whole
    text = budget_text("Mistral-7B", "A100-40GB", 2048, width=60)
    assert max(len(line) for line in whole.splitlines()) > 60  # so there is something to break
    assert max(len(line) for line in text.splitlines()) <= 60
    assert text.split() == whole.split()  # the same words, none cut


def test_weights_that_do_not_fit_are_said_so():
    text = calculator_answer("Llama-3-70B", "A100-40GB", 2048)
    assert "does not fit" in text
    text = calculator_answer("Llama-3-70B", "L4", 2048)
    assert text.startswith("Llama-3-70B does not fit on one L4:")
    assert "more than 90% of the 22.00 GiB reported (19.80 GiB)" in text  # 0.9 x 22 GiB
    assert max(len(line) for line in text.splitlines()) <= 80  # one line each in the calculator
    assert text.endswith("tensor parallelism, notebook 11b, section 2.")  # where to go next
    assert "tensor parallelism" not in calculator_answer(
        "Llama-3-8B", "L4", 2048
    )  # only when it does not fit


def test_a_new_model_or_gpu_resets_the_numbers_read_from_a_log():
    box = calculator()
    out = box.children[-1]
    note = box.children[3].value
    assert "<br>".join(RESET_NOTE_LINES) in note and RESET_NOTE == " ".join(RESET_NOTE_LINES)
    assert "line-height:1.4" in note  # not the widget's 28 px lines
    top = box.children[0].children
    fields = {w.description: w for row in box.children[1:3] for w in row.children}
    fields["act. GiB (0: estimate)"].value, fields["non-torch GiB"].value = 9.37, 0.1
    fields["GPU GiB"].value, fields["mem util"].value = 39.5, 0.8
    assert "(your value)" in out.value
    top[0].value = "Llama-3-8B"  # another model: the log's numbers are gone, settings stay
    answer = calculator_answer("Llama-3-8B", "A100-40GB", 1024, utilization=0.8)
    assert html.unescape(out.value) == f"<pre style='{ANSWER_STYLE}'>{wrapped(answer, 80)}</pre>"
    assert fields["GPU GiB"].value == 39.39 and fields["act. GiB (0: estimate)"].value == 0.0
    fields["graphs GiB"].value = 0.0
    top[1].value = "H100-80GB"
    assert fields["GPU GiB"].value == 79.2 and fields["graphs GiB"].value == 0.5


def test_zero_request_tokens_is_an_error_and_small_sizes_keep_their_unit():
    words = "request tok 0 is out of range: type a whole number >= 1"
    with pytest.raises(ValueError, match=re.escape(words)):
        calculator_answer("Mistral-7B", "A100-40GB", 0)
    box = calculator()
    box.children[0].children[2].value = 0
    assert "request tok 0 is out of range: type a whole number &gt;= 1" in box.children[-1].value
    box.children[0].children[2].value = 1
    assert "requests of 1 tokens that fit" in box.children[-1].value
    # one token of Mistral-7B: 128 KiB, not "0 MiB" (section 1.2's box, after its question)
    assert "bring one back on Mistral-7B, 128 KiB of K/V" in costs.calculator_text(
        "Mistral-7B", "A100-40GB", 1
    )
    assert [size_text(n) for n in (512, 1536, 2**27, 3 * 2**29)] == [
        "512 bytes",
        "1.5 KiB",
        "128 MiB",
        "1.5 GiB",
    ]


def test_the_budget_picture_names_the_share_gpu_memory_utilization_leaves_free():
    """The white bar is what the setting leaves: 39.39 GiB x (1 - 0.9), named by the setting."""
    fig = plot_budget("Mistral-7B", "A100-40GB")
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels[-1] == f"left free (gpu_memory_utilization 0.9): {39.39 * 0.1:.2f} GiB"


def test_the_thin_slices_of_the_budget_are_named_on_the_picture():
    """Slices of 0.3-0.9 GiB are a few px wide: each has a callout with its name and size."""
    fig = plot_budget("Mistral-7B", "A100-40GB")
    callouts = [t.get_text() for t in fig.axes[0].texts]
    names = [
        "activation peak at 8,192 tokens: 0.86 GiB",
        "non-torch memory: 0.30 GiB",
        "CUDA-graph reserve: 0.50 GiB",
    ]
    assert callouts == names


def test_the_note_says_an_emptied_box_keeps_its_last_number():
    from pagedkv.viz.capacity import EMPTY_NOTE

    assert EMPTY_NOTE in calculator().children[3].value


def test_the_budget_line_agrees_with_the_terms_printed_above_it_or_says_why_not():
    """A learner adds the printed terms by hand: the budget equals their sum, or a line says
    the budget comes from the exact terms and what the rounded ones give."""
    import re

    from pagedkv.labs import costs

    for model, gpu in (
        ("Mistral-7B", "A100-40GB"),
        ("Llama-3-8B", "A100-40GB"),
        ("Qwen2.5-7B", "L4"),
        ("OPT-13B", "A100-40GB"),
    ):
        text = costs.calculator_text(model, gpu, 1024)
        if "does not fit" in text:
            continue
        terms = [float(v) for v in re.findall(r"^\s+(?:-\s+)?.*?\s(\d+\.\d\d) GiB  \(", text, re.M)]
        budget = re.search(r"= KV budget (\d+\.\d\d) GiB", text).group(1)
        by_hand = f"{terms[0] - sum(terms[1:]):.2f}"
        assert (
            by_hand == budget or f"(from the exact terms; the rounded ones above add up to {by_hand})" in text
        ), (model, gpu, text)


def test_every_box_is_the_same_kind_of_box_with_no_spinner_arrows():
    # act. GiB was the one box drawn with spinner arrows: all seven now share one class, and
    # the style shipped with the widget hides the arrows of every number box of that class
    box = calculator()
    inputs = [w for row in box.children[:3] for w in row.children if hasattr(w, "continuous_update")]
    assert len(inputs) == 7 and len({type(w).__name__ for w in inputs} - {"FloatText", "IntText"}) == 0
    assert all(BOX_CLASS in w.get_state()["_dom_classes"] for w in inputs)
    note = box.children[3].value
    assert f".{BOX_CLASS} input[type=number]" in note and "-webkit-inner-spin-button" in note
    assert "appearance:textfield" in note


def test_vllm_line_uses_vllm_v1_graph_term_zero():
    """vLLM v1 records CUDA graphs outside the 0.9 (docs/vllm_map.md), so the line to compare
    with its log drops pagedkv's 0.5 GiB graph reserve: 0.5 GiB / 128 KiB = 4,096 more tokens."""
    from pagedkv.labs import costs

    text = costs.calculator_text("Mistral-7B", "A100-40GB", 1024)
    assert "= 166,352 token slots" in text  # pagedkv's budget, with its 0.5 GiB reserve
    assert "with graphs GiB 0, as vLLM v1 by default: 10,653 pages, logged as" in text
    assert "'GPU KV cache size: 170,448 tokens'" in text and 166_352 + 512 * 1024 // 128 == 170_448
    zero = costs.calculator_text("Mistral-7B", "A100-40GB", 1024, costs.Assumptions(cuda_graph_gib=0.0))
    assert "= 170,448 token slots" in zero and "with graphs GiB 0" not in zero
