"""pagedkv.labs.costs against numbers worked out by hand and published elsewhere.

docs/calibration.md's rows (published measurements) are checked in tests/test_calibration.py;
this file checks the arithmetic term by term."""

from __future__ import annotations

import pytest

from pagedkv.labs import costs
from pagedkv.labs.specs import GPUS, MODELS

GIB = 2**30


def test_bytes_per_token_matches_published_figures():
    # The vLLM paper (Kwon et al. 2023, Sec. 3): OPT-13B holds 800 KB of K/V per token.
    assert costs.bytes_per_token("OPT-13B") == 2 * 40 * 5120 * 2 == 819_200
    # GQA: 8 of 32 heads carry K/V, so a quarter of the multi-head footprint.
    assert costs.bytes_per_token("Llama-3-8B") == 2 * 32 * 4096 * 2 // 4 == 131_072
    assert costs.bytes_per_token("Llama-2-7B") == 2 * 32 * 4096 * 2 == 512 * 1024  # MHA 7B
    assert costs.bytes_per_token("Qwen2.5-7B") == 2 * 28 * 4 * 128 * 2


@pytest.mark.parametrize("model", list(MODELS))
def test_linear_parameters_are_most_of_the_model(model):
    # The linear layers plus embedding and LM head (tied for OPT) come within 2 % of the
    # published parameter count (norms and biases are the rest).
    m = MODELS[model]
    embeddings = (1 if model == "OPT-13B" else 2) * m.vocab_size * m.hidden_size
    assert costs.linear_params(model) + embeddings == pytest.approx(m.num_params, rel=0.02)


def test_capacity_subtracts_every_term_from_the_reported_memory():
    assume = costs.Assumptions()
    cap = costs.capacity("Mistral-7B", "A100-40GB", 2048, assume)
    activation = 8192 * (2 * 4096 + 3 * 14336) * 2 + 256 * 32000 * (2 + 4 + 4)
    budget = 39.39 * GIB * 0.9 - 7.24e9 * 2 - activation - 0.3 * GIB - 0.5 * GIB
    assert cap["kv_budget_bytes"] == pytest.approx(budget)
    assert cap["token_slots"] % assume.page_size == 0
    assert cap["token_slots"] * 131_072 <= budget < (cap["token_slots"] + 16) * 131_072
    assert cap["requests"] == cap["token_slots"] // 2048


def test_the_paper_engine_profiles_fewer_tokens_and_no_graphs():
    new, old = costs.Assumptions(), costs.Assumptions.vllm_2023()
    assert costs.activation_bytes("OPT-13B", old) < costs.activation_bytes("OPT-13B", new)
    terms = {name: value for name, value, _ in costs.capacity_terms("OPT-13B", "A100-40GB", old)}
    assert terms["CUDA-graph reserve"] == terms["non-torch memory"] == 0


def test_an_activation_peak_read_from_a_log_replaces_the_formula():
    given = costs.Assumptions(activation_gib=9.37)
    terms = {
        name: (value, source)
        for name, value, source in costs.capacity_terms("Llama-3-8B", "A100-40GB", given)
    }
    assert terms["activation peak at 8,192 tokens"] == (9.37 * GIB, "your value")
    default = costs.capacity("Llama-3-8B", "A100-40GB", 2048)["kv_budget_bytes"]
    budget = costs.capacity("Llama-3-8B", "A100-40GB", 2048, given)["kv_budget_bytes"]
    assert default - budget == pytest.approx(9.37 * GIB - costs.activation_bytes("Llama-3-8B"))


def test_calculator_prints_every_term_with_its_source():
    text = costs.calculator_text("Llama-3-8B", "H100-80GB", 2048)
    for name, value, source in costs.capacity_terms("Llama-3-8B", "H100-80GB"):
        assert f"{value / GIB:.2f} GiB" in text and source in text and name in text
    assert "GPU KV cache size" in text and "pagedkv's estimate" in text


def test_step_time_is_the_sum_of_its_operator_classes():
    terms = costs.step_terms("Llama-3-8B", "A100-40GB", 2048, 0, prefill_lens=(2048,))
    linear = 2 * 6_979_321_856 * 2048 / (312e12 * 0.60)  # Q, K, V, O, gate, up, down
    attention = 2 * 32 * 32 * 128 * 2048 * 2049 / (312e12 * 0.50)  # causal QK^T and PV
    assert terms["linear"] == pytest.approx(linear)
    assert terms["attention_prefill"] == pytest.approx(attention)
    assert terms["attention_decode"] == 0 and terms["cpu"] == 0.003
    assert costs.prefill_seconds("Llama-3-8B", "A100-40GB", 2048) == pytest.approx(sum(terms.values()))


def test_a_decode_step_reads_the_weights_and_the_context():
    terms = costs.step_terms("OPT-13B", "A100-40GB", 8, 8000, num_seqs=8)
    hbm = 1555e9 * 0.70
    assert terms["linear"] == pytest.approx(12.9e9 * 2 / hbm)  # memory-bound: the weights once
    assert terms["attention_decode"] == pytest.approx(8000 * 819_200 / hbm)


def test_swap_pays_each_direction_of_the_link_and_each_copy():
    assume = costs.Assumptions(page_size=16)
    cost = costs.preemption_costs("Llama-3-8B", "H100-80GB", 1024, assume)
    copies = 64 * 32 * 2  # blocks x layers x (K, V)
    kv = 1024 * 131_072
    assert cost["reload_s"] == pytest.approx(kv / 35e9 + copies * 10e-6)  # host -> GPU
    assert cost["swap_s"] == pytest.approx(kv / 53e9 + kv / 35e9 + 2 * copies * 10e-6)
    bigger = costs.preemption_costs("Llama-3-8B", "H100-80GB", 1024, costs.Assumptions(page_size=256))
    assert bigger["swap_s"] < cost["swap_s"] and bigger["recompute_s"] == cost["recompute_s"]


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
        (lambda: costs.Assumptions(gpu_memory_utilization=0), "gpu_memory_utilization"),
        (lambda: costs.Assumptions(max_num_batched_tokens=0), "max_num_batched_tokens"),
        (lambda: costs.Assumptions(activation_gib=-1.0), "activation_gib"),
        (lambda: costs.capacity("Llama-3-70B", "A100-40GB", 10), "does not fit"),
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
        (lambda: costs.Assumptions(non_torch_gib="high"), "non_torch_gib must be a number"),
        (lambda: costs.Assumptions(page_size=16.0), "page_size must be an int"),
    ],
)
def test_a_wrong_kind_is_a_type_error(call, word):
    with pytest.raises(TypeError, match=word):
        call()


@pytest.mark.parametrize(
    ("tokens", "context", "prompts", "seqs"),
    [(1, 0, (), 1), (2048, 0, (2048,), 1), (300, 91_000, (100, 7), 250)],
)
def test_step_seconds_is_the_sum_of_its_terms(tokens, context, prompts, seqs):
    for model, gpu in [("OPT-13B", "A100-40GB"), ("Llama-3-8B", "H100-80GB")]:
        terms = costs.step_terms(model, gpu, tokens, context, prefill_lens=prompts, num_seqs=seqs)
        got = costs.step_seconds(model, gpu, tokens, context, prefill_lens=prompts, num_seqs=seqs)
        assert got == sum(terms.values())  # the same float: the serving run's clock is this sum


def test_calculator_sources_say_your_value_for_typed_numbers_and_nest_no_parentheses():
    from pagedkv.viz.capacity import calculator_answer

    usual = costs.calculator_text("Mistral-7B", "A100-40GB", 1024)
    typed = calculator_answer("Mistral-7B", "A100-40GB", 1024, memory_gib=39.5, activation_gib=1.0)
    assert "39.39 GiB reported x 0.9" in usual and "CUDA's figure for this GPU" in usual
    first = typed.splitlines()[1]
    assert "39.50 GiB reported x 0.9" in first and first.endswith("(your value)")
    assert "activation peak at 8,192 tokens    1.00 GiB  (your value)" in typed
    # the untouched terms keep their sources
    assert "CUDA's figure for this GPU" not in typed and "pagedkv's estimate" in typed
    for text in (usual, typed):
        for line in text.splitlines():
            depth = 0
            for char in line:
                depth += {"(": 1, ")": -1}.get(char, 0)
                assert depth <= 1, line
