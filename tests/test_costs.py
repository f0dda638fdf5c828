"""pagedkv.labs.costs against numbers worked out by hand and published elsewhere."""

from __future__ import annotations

import pytest

from pagedkv.labs import costs
from pagedkv.labs.specs import GPUS, MODELS


def test_bytes_per_token_matches_published_figures():
    # The vLLM paper (Kwon et al. 2023, Sec. 3): OPT-13B holds 800 KB of K/V per token.
    assert costs.bytes_per_token("OPT-13B") == 2 * 40 * 5120 * 2 == 819_200
    # GQA: 8 of 32 heads carry K/V, so a quarter of the multi-head footprint.
    assert costs.bytes_per_token("Llama-3-8B") == 2 * 32 * 4096 * 2 // 4 == 131_072
    assert costs.bytes_per_token("Qwen2.5-7B") == 2 * 28 * 4 * 128 * 2


def test_capacity_is_whole_pages_that_fit_the_budget():
    assume = costs.Assumptions()
    cap = costs.capacity("Mistral-7B", "A100-40GB", 2048, assume)
    budget = 40 * 2**30 * 0.9 - 7.24e9 * 2
    assert cap["kv_budget_bytes"] == pytest.approx(budget)
    assert cap["token_slots"] % assume.page_size == 0
    assert cap["token_slots"] * 131_072 <= budget < (cap["token_slots"] + 16) * 131_072
    assert cap["requests"] == cap["token_slots"] // 2048


def test_a_second_tier_reload_is_half_a_swap_and_recompute_grows_with_length():
    short = costs.preemption_costs("Llama-3-8B", "A100-40GB", 512)
    long = costs.preemption_costs("Llama-3-8B", "A100-40GB", 4096)
    assert short["reload_s"] == pytest.approx(short["swap_s"] / 2)
    assert long["kv_bytes"] == 8 * short["kv_bytes"]
    assert long["recompute_s"] > 8 * short["recompute_s"] * 0.9  # at least linear (+ attention)


def test_table_skips_models_whose_weights_do_not_fit():
    rows = costs.table()
    pairs = {(r["model"], r["gpu"]) for r in rows}
    assert ("Llama-3-70B", "A100-80GB") not in pairs  # 131 GiB of weights
    assert ("Mistral-7B", "L4") in pairs
    assert len(rows) < len(MODELS) * len(GPUS)


@pytest.mark.parametrize(
    "call, word",
    [
        (lambda: costs.capacity("GPT-5", "A100-40GB", 10), "model"),
        (lambda: costs.capacity("Mistral-7B", "TPU", 10), "gpu"),
        (lambda: costs.capacity("Mistral-7B", "A100-40GB", 0), "seq_len"),
        (lambda: costs.preemption_costs("Mistral-7B", "L4", -1), "num_tokens"),
        (lambda: costs.Assumptions(mfu=0), "mfu"),
        (lambda: costs.capacity("Llama-3-70B", "A100-40GB", 10), "do not fit"),
    ],
)
def test_bad_input_names_the_argument(call, word):
    with pytest.raises(ValueError, match=word):
        call()


@pytest.mark.parametrize(
    "call, word",
    [
        (lambda: costs.capacity("Mistral-7B", "A100-40GB", 10.0), "seq_len must be an int"),
        (lambda: costs.preemption_costs("Mistral-7B", "L4", "8"), "num_tokens must be an int"),
        (lambda: costs.Assumptions(mfu="high"), "mfu must be a number"),
        (lambda: costs.Assumptions(page_size=16.0), "page_size must be an int"),
    ],
)
def test_a_wrong_kind_is_a_type_error(call, word):
    with pytest.raises(TypeError, match=word):
        call()


def test_calculator_widget_updates_its_text():
    box = costs.calculator()
    out = box.children[-1]
    first = out.value
    box.children[0].children[1].value = "H100-80GB"
    assert "H100-80GB" in out.value and out.value != first
