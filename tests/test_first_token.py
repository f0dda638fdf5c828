"""What a prefix hit is worth: per-request prefill tokens and the TTFT they cost."""

from pagedkv.labs.first_token import p90, prefill_per_request, source_means, ttft_rows, ttft_text
from pagedkv.labs.hit_rate_lab import replay
from pagedkv.labs.lab_workloads import lab_workload


def test_prefill_per_request_adds_up_to_replay() -> None:
    scan = lab_workload("scan")
    for policy in ("lru", "arc"):
        computed = prefill_per_request(scan, 2048, policy)
        result = replay(scan, 2048, policy)
        assert len(computed) == len(scan)
        assert sum(computed) == result.query_tokens - result.hit_tokens


def test_p90_nearest_rank() -> None:
    assert p90(list(range(1, 11))) == 9
    assert p90([5]) == 5
    assert p90([3, 1, 2, 4]) == 4


def test_scan_tail_is_the_one_off_prompts() -> None:
    streams = {"scan": lab_workload("scan")}
    rows = ttft_rows(streams, 2048, ("lru", "arc"))
    assert {r["p90 ms"] for r in rows["scan"].values()} == {38.4}  # 384 tokens x 0.1 ms
    assert rows["scan"]["arc"]["mean ms"] < rows["scan"]["lru"]["mean ms"]
    by = source_means(streams["scan"], 2048, "arc")
    assert by["scan"] == 38.4 and by["zipf"] < source_means(streams["scan"], 2048, "lru")["zipf"]
    assert "lru" in ttft_text(rows).splitlines()[1]


def test_weights_read_ms_is_one_read_of_the_weights() -> None:
    from pagedkv.labs.first_token import weights_read_ms

    assert weights_read_ms("Llama-2-7B", "A100-80GB") == 6.6  # 13.48 GB at 2,039 GB/s


def test_prefill_ms_is_a_roofline_short_and_long() -> None:
    from pagedkv.labs.first_token import prefill_ms

    # by hand, at 0.1 ms per token and a 6.6 ms weight read: a 40-token question computes
    # for 4.0 ms, hidden under the read (6.6 ms, not 4.0 + 6.6); 384 tokens compute for
    # 38.4 ms, and the read hides under the compute (38.4 ms, not 45.0)
    assert prefill_ms(40, 6.6) == 6.6
    assert round(prefill_ms(384, 6.6), 1) == 38.4
    assert prefill_ms(0, 6.6) == 6.6  # a full hit still runs one forward pass


def test_with_fixed_text_takes_the_roofline_per_prefill() -> None:
    from pagedkv.labs.first_token import mean_ms, with_fixed_text

    # LRU computes 40 and 384 tokens; ARC, hitting the short prompt whole, 0 and 384.
    # Per token: 21.2 -> 19.2 ms, 9 % less. Roofline: (6.6 + 38.4) / 2 = 22.5 ms for both,
    # 0 % less: the 4 ms ARC saves sits under the weight read.
    assert (mean_ms([40, 384]), mean_ms([0, 384])) == (21.2, 19.2)
    assert (mean_ms([40, 384], 6.6), mean_ms([0, 384], 6.6)) == (22.5, 22.5)
    line = with_fixed_text({"x": ([40, 384], [0, 384])}, 6.6).split("\n")[1]
    assert "21.2 ->  19.2 ms (9 % less)" in line
    assert line.endswith("22.5 ->  22.5 ms (0 % less)")


def test_sender_prefills_splits_by_source() -> None:
    from pagedkv.labs.first_token import mean_ms, sender_prefills

    scan = lab_workload("scan")
    by = sender_prefills(scan, 2048)
    assert set(by) == {"all requests", "zipf requests", "scan requests"}
    for i, policy in enumerate(("lru", "arc")):
        assert by["all requests"][i] == prefill_per_request(scan, 2048, policy)
        means = source_means(scan, 2048, policy)
        assert mean_ms(by["zipf requests"][i]) == means["zipf"]
        assert mean_ms(by["scan requests"][i]) == means["scan"]
