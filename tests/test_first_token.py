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


def test_with_fixed_text_adds_the_fixed_cost_to_both_means() -> None:
    from pagedkv.labs.first_token import with_fixed_text

    lines = with_fixed_text({"x": (7.1, 4.0)}, 6.6).split("\n")
    assert lines[1].endswith("13.7 ->  10.6 ms (23 % less)")
    assert "(44 % less)" in lines[1]
