"""The deep dive's helpers (notebook 11b): the small worked cases, the log's gap split, the cost
model's constants, and the counters added for its readings (a host tier's kept pages, the most
requests a replica runs at once). Expected values are worked out by hand."""

from __future__ import annotations

from pagedkv.bench import tiers as bench_tiers
from pagedkv.labs import costs
from pagedkv.labs.block_costs import constants_text, prefill_work, prefill_work_text
from pagedkv.labs.experiments import popular_system_prompts
from pagedkv.labs.routing import RouterConfig, replica_counts
from pagedkv.labs.small_cases import buddy_case, buddy_text, host_tier_case, host_tier_text
from pagedkv.labs.startup_log import LOG_BLOCKS, gap_split, gap_split_text, log_capacity


def test_host_tier_case_moves_all_five_full_pages_to_the_host():
    case = host_tier_case()
    # 21 prompt tokens + 2 of 3 outputs have K/V: 23 tokens, 5 full pages of 4
    assert case["full"] == 5 and case["cached"] == 4 * 5
    assert (case["in_pool"], case["in_tier"]) == (0, 5)
    assert case["offloaded_pages"] == case["evicted"] == case["cached"] - case["still_cached"]
    back = case["tier"].load_prefix(case["A"])
    assert back["host_hit_tokens"] == 20 and back["gpu_hit_tokens"] == 0
    assert "0 of 5" in host_tier_text(case) and "5 of 5" in host_tier_text(case)


def test_buddy_case_rounds_to_powers_of_two_and_refuses_d():
    case = buddy_case()
    assert [(r.req_id, r.asked, r.length) for r in case["placed"]] == [
        ("A", 600, 1024),
        ("B", 300, 512),
        ("C", 100, 128),
    ]
    assert case["rounded_placed"] == 424 + 212 + 28 and case["b_rounded"] == 212
    assert case["rounded"] == 424 + 28
    assert sum(case["holes"]) == 2048 - 1024 - 128 and max(case["holes"]) < 1024
    assert case["refused"] and case["slots"]["free"] == 0
    assert case["slots"]["external_fragmentation"] == 452 + 896
    assert "refused" in buddy_text(case)


def test_gap_split_adds_up_to_the_log_terms_capacity():
    split = gap_split()
    assert split["pages"] == log_capacity()  # every term from the log, the other way round
    assert split["estimate"] + sum(split["moved"].values()) == split["pages"]
    assert split["estimate"] == costs.capacity("Llama-3-8B", "A100-40GB", 8192)["num_pages"]
    assert split["moved"]["act. GiB"] < 0 < split["moved"]["graphs GiB"]
    assert split["logged"] == LOG_BLOCKS and f"{split['pages']:,} pages" in gap_split_text(split)


def test_prefill_work_by_hand_equals_the_cost_models_recompute():
    work = prefill_work("Mistral-7B", "A100-40GB", 1024)
    m = costs.MODELS["Mistral-7B"]
    assert work["attention"] == 2 * 2 * m.head_dim * (1024 * 1025 // 2) * m.num_heads * m.num_layers
    recompute_ms = costs.preemption_costs("Mistral-7B", "A100-40GB", 1024)["recompute_s"] * 1e3
    assert abs(work["ms"] - recompute_ms) < 0.01  # the LM head's one token aside
    assert "= 81 ms" in prefill_work_text(work)
    assert "25 GB/s" in constants_text("A100-40GB") and "10 µs" in constants_text("A100-40GB")


def test_a_host_tier_copies_each_evicted_page_once_unless_it_dropped_it():
    reqs = popular_system_prompts(300, num_prompts=32, length=64)
    small, large = (bench_tiers.admit_all(reqs, 64, 16, n, "lru") for n in (64, 256))
    for run in (small, large):  # every pool eviction is either copied out or already held
        assert run["offload_pages"] + run["kept_pages"] == run["pool_evictions"]
    assert small["pool_evictions"] == large["pool_evictions"]
    assert large["kept_pages"] > small["kept_pages"] and large["dropped_pages"] < small["dropped_pages"]


def test_most_running_is_bounded_by_max_num_seqs():
    reqs = popular_system_prompts(60, num_prompts=8, length=64)
    out = replica_counts(
        reqs,
        2,
        64,
        config=RouterConfig("round_robin"),
        num_pages=64,
        page_size=16,
        max_num_seqs=4,
        arrival_rate=1.0,
    )
    assert len(out["most_running"]) == 2 and all(1 <= n <= 4 for n in out["most_running"])
