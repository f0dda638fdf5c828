"""ways_back_by_block against hand arithmetic for OPT-13B on an A100-40GB (800 KiB per token,
40 layers, a 25 GB/s host link each way, 10 µs per copy call)."""

import pytest

from pagedkv.labs.block_costs import ways_back_by_block, ways_back_text


def test_swap_times_by_hand():
    r = ways_back_by_block("OPT-13B", "A100-40GB", 1024, blocks=(1, 256))
    kv = 1024 * 800 * 1024  # bytes each way
    link_ms = 2 * kv / 25e9 * 1e3  # out and back in
    assert r["link_ms"] == pytest.approx(link_ms) and round(link_ms, 1) == 67.1
    assert r["mib"] == 800
    # 256-token blocks: 4 blocks x 40 layers x K and V = 320 calls each way, 640 in all
    assert r["copy_ms"] == pytest.approx(640 * 10e-3)
    # 1-token blocks: 1,024 x 40 x 2 = 81,920 calls each way
    assert r["ms"][0][1] == round(link_ms + 2 * 81_920 * 10e-3)
    assert r["ms"][0][0] == r["ms"][1][0]  # recompute does not depend on the block size


def test_what_the_paper_ratio_needs():
    r = ways_back_by_block(paper_ratio=1.2)
    rec = r["ms"][-1][0]
    swap = 67.108864 + 640 * 10e-3  # ms before rounding: link + copy calls, 73.5
    assert r["swap_for_paper"] == pytest.approx(rec / 1.2)
    assert r["faster"] == pytest.approx(rec / (1.2 * swap))
    # the link part of the paper's swap moves the same bytes: speed scales inversely with time
    assert r["link_needed"] == pytest.approx(25 * r["link_ms"] / (rec / 1.2 - r["copy_ms"]))
    text = ways_back_text(r)
    assert "tokens per block" in text and "swap 73.5 ms; ratio 1.95" in text  # not 143 / 74 = 1.93


def test_swap_crossover_is_where_swap_stops_beating_recompute():
    from pagedkv.labs import costs
    from pagedkv.labs.block_costs import swap_crossover

    # Mistral-7B: 128 KiB per token, 32 layers, 16-token blocks, 25 GB/s, 10 µs per copy call
    def swap_by_hand(tokens):
        blocks = -(-tokens // 16)
        return 2 * (tokens * 128 * 1024 / 25e9 + blocks * 32 * 2 * 10e-6)

    for tokens in (192, 208):
        got = costs.preemption_costs("Mistral-7B", "A100-40GB", tokens)["swap_s"]
        assert got == pytest.approx(swap_by_hand(tokens))
    # every length, one token at a time, with the swap by hand
    wins = [
        t
        for t in range(1, 2049)
        if swap_by_hand(t) < costs.preemption_costs("Mistral-7B", "A100-40GB", t)["recompute_s"]
    ]
    assert swap_crossover("Mistral-7B") == max(wins) == 192
    assert len(wins) > 170  # most shorter requests swap faster too
    assert swap_crossover("Mistral-7B", longest=100) == 100  # stops at `longest`


def test_swap_crossover_text_names_the_last_length_where_swap_wins():
    import re

    from pagedkv.labs import costs
    from pagedkv.labs.block_costs import swap_crossover_text

    text = swap_crossover_text("Mistral-7B")
    longest = int(re.search(r"at most (\d+) tokens", text.replace("\n", " ")).group(1))
    at = {n: costs.preemption_costs("Mistral-7B", "A100-40GB", n) for n in (longest, longest + 16, 1024)}
    assert at[longest]["swap_s"] < at[longest]["recompute_s"]  # swap still wins there
    assert at[longest + 16]["swap_s"] > at[longest + 16]["recompute_s"]  # one block more: it loses
    assert at[1024]["swap_s"] > at[1024]["recompute_s"]
    assert all(len(line) <= 80 for line in text.splitlines())


def test_copy_calls_text_splits_a_reload_into_calls_and_bytes():
    import re

    from pagedkv.labs import costs
    from pagedkv.labs.block_costs import copy_calls_text

    text = copy_calls_text("Mistral-7B")
    PARTS = r"= ([\d,]+) copy calls x 10 µs = ([\d.]+) ms.*its (\d+) MiB.* in ([\d.]+) ms"
    calls, calls_ms, mib, link_ms = (float(x.replace(",", "")) for x in re.search(PARTS, text, re.S).groups())
    assert calls == 1024 // 16 * 32 * 2 and calls_ms == 41.0  # 4,096 calls at 10 µs, by hand
    assert mib == 128 and link_ms == round(128 * 2**20 / 25e9 * 1e3, 1)
    reload_ms = costs.preemption_costs("Mistral-7B", "A100-40GB", 1024)["reload_s"] * 1e3
    assert abs(calls_ms + link_ms - reload_ms) < 0.1  # the two parts are the whole reload
    call_kib = float(re.search(r"one call moves only ([\d.]+) KiB", text).group(1))
    assert call_kib == 16 * 128 / (32 * 2)  # 16 tokens x 128 KiB over 32 layers x K and V
    assert "gathered" not in text  # notebook 05's lines
    gathered = float(
        re.search(r"a swap would take about ([\d.]+) ms", copy_calls_text("Mistral-7B", gathered=True)).group(
            1
        )
    )
    assert gathered == round(2 * 128 * 2**20 / 25e9 * 1e3, 1)  # its bytes out and back, no call costs
    recompute_ms = costs.preemption_costs("Mistral-7B", "A100-40GB", 1024)["recompute_s"] * 1e3
    assert gathered < recompute_ms and f"less than\n  recompute's {recompute_ms:.1f} ms" in copy_calls_text(
        "Mistral-7B", gathered=True
    )  # gathered, a swap beats recompute: the order holds only for the 10 µs a call
    assert all(len(line) <= 90 for line in text.splitlines())


def test_swap_sum_text_adds_both_directions_to_the_swap_total():
    """05b's learner had to work out 2 x (41 + 5.4) = 93 ms by hand: the line says it."""
    import re

    from pagedkv.labs import costs
    from pagedkv.labs.block_costs import swap_sum_text

    text = swap_sum_text("Mistral-7B")
    parts = re.fullmatch(
        r"swap = out \(([\d.]+) \+ ([\d.]+)\) \+ back \(([\d.]+) \+ ([\d.]+)\) = (\d+) ms .*", text
    )
    out_calls, out_bytes, back_calls, back_bytes, total = (float(x) for x in parts.groups())
    assert out_calls == back_calls == round(64 * 32 * 2 * 10e-3, 1)  # 4,096 calls at 10 µs, by hand
    assert back_bytes == round(2**27 / 25e9 * 1e3, 1)  # 128 MiB over the 25 GB/s link
    swap_ms = costs.preemption_costs("Mistral-7B", "A100-40GB", 1024)["swap_s"] * 1e3
    assert total == round(swap_ms) and abs(out_calls + out_bytes + back_calls + back_bytes - swap_ms) < 0.2
