"""The eviction lab's printouts: the numbers they derive, checked by hand."""

from pagedkv.labs.eviction_printouts import cost_text, gains_over_lru, pin_margins


def test_gains_over_lru_subtracts_the_printed_rates():
    table = {"w": {"lru": 0.18349, "arc": 0.31351}}  # printed 18.3 % and 31.4 %
    pct, gain = gains_over_lru(table)
    assert pct == {"w": {"lru": 18.3, "arc": 31.4}}
    assert gain == {"w": {"lru": 0.0, "arc": 13.1}}  # 31.4 - 18.3, not 13.0 of the raw rates


def test_pin_margins_per_seed_and_mean():
    runs = {
        ("chat", 2048): [
            {"lru": 58.5, "lru+pin": 57.4},
            {"lru": 50.0, "lru+pin": 52.3},
            {"lru": 60.0, "lru+pin": 59.5},
        ]
    }
    margins, means = pin_margins(runs, [2048])
    assert margins == {2048: [-1.1, 2.3, -0.5]}
    assert means == {2048: 0.2}  # (-1.1 + 2.3 - 0.5) / 3 = 0.233


def test_cost_text_divides_writes_by_requests_and_skips_by_victims():
    costs = {
        "lru+pin": {
            "hashes held": 32,
            "list writes": 9321,
            "requests": 400,
            "pages skipped": 27,
            "victims": 2,
        }
    }
    line = cost_text(costs, {"lru+pin": 8.5}).splitlines()[1].split()
    assert line == ["lru+pin", "+8.5", "32", "9,321", "23.3", "13.5"]  # 9321/400, 27/2


def test_reference_text_says_match_only_for_the_reference_answers_rates():
    from pagedkv.labs.eviction_printouts import reference_text
    from pagedkv.labs.hit_rate_lab import replay
    from pagedkv.labs.lab_workloads import lab_workload
    from pagedkv.labs.policy_check import RevivedLast

    streams = {w: lab_workload(w)[:60] for w in ("zipf", "chat")}
    # the rates the text must print: a replay of the reference answer, made here
    ref = {w: replay(s, 1024, RevivedLast()).hit_rate for w, s in streams.items()}
    text = reference_text(ref, streams, 1024)
    assert text == f"matches the reference (zipf {100 * ref['zipf']:.1f} / chat {100 * ref['chat']:.1f})"
    lru = {w: replay(s, 1024).hit_rate for w, s in streams.items()}
    assert lru != ref
    differ = [w for w in streams if lru[w] != ref[w]]
    section = '10b, section 4, "Refused policies, newest first, and one way to write Mine"'
    assert reference_text(
        lru, streams, 1024
    ) == f"differs from the reference solution ({section}) on: " + ", ".join(
        w for w in ("zipf", "chat") if w in differ
    )


def test_mine_box_pending_names_no_stream_before_the_prediction_is_answered():
    from pagedkv.labs.eviction_printouts import mine_box_pending

    text = mine_box_pending()
    for w in ("chat", "zipf", "rag", "scan", "mix"):
        assert w not in text  # where Mine beats LRU is the open prediction's answer
    assert "answered the prediction" in text


def test_chat_share_sweep_shares_and_rates_from_the_two_streams():
    from pagedkv.labs.eviction_printouts import chat_share_sweep, sweep_text
    from pagedkv.labs.hit_rate_lab import replay
    from pagedkv.labs.lab_workloads import mixed_traffic, multi_turn_chat, scan_mix

    assert mixed_traffic(0, scan_requests=300) == mixed_traffic(0)  # the default mix
    rows = chat_share_sweep(2048, scan_requests=(300, 36), seeds=(0, 1))
    for (share, runs), n in zip(rows, (300, 36)):
        chat = sum(len(r.prompt_token_ids) for r in multi_turn_chat(seed=0))
        scan = sum(len(r.prompt_token_ids) for r in scan_mix(n, seed=0))
        assert share == chat / (chat + scan)  # the mix holds every request of both
        mix = mixed_traffic(1, scan_requests=n)
        assert runs[1]["arc"] == round(100 * replay(mix, 2048, "arc").hit_rate, 1)
    assert rows[0][0] < rows[1][0]  # a shorter scan part: more chat
    both = [{"lru": 20.0, "arc": 23.5}, {"lru": 30.0, "arc": 31.0}]  # ARC first on both, +2.25
    split = [{"lru": 20.0, "arc": 23.5}, {"lru": 30.0, "arc": 29.5}]  # LRU first on seed 1
    lines = sweep_text([(0.5, both), (0.75, split)]).splitlines()
    assert lines[0].endswith("verdict, LRU vs ARC only")  # only the two were replayed
    assert lines[1].split() == ["50%", "+3.5", "+1.0", "arc"]
    # arc: mean +1.5, but LRU is first on seed 1
    assert lines[2].split() == ["75%", "+3.5", "-0.5", "no", "clear", "winner:", "arc", "~", "lru"]
    counted = sweep_text([(0.5, both)], scan_requests=(300, 36)).splitlines()[-1]
    chat_n = len(multi_turn_chat(seed=0))  # the mix holds every chat request and the whole scan part
    assert counted.endswith(
        f"{chat_n} chat + {len(scan_mix(300, seed=0))} scan, {chat_n} chat + {len(scan_mix(36, seed=0))} scan"
    )


def test_arc_tally_text_names_each_group_and_sums_its_counts():
    from collections import Counter

    from pagedkv.labs.eviction_printouts import arc_tally_text

    by_group = {
        "pinned": Counter({"revived from T1": 3, "revived from T2": 7}),
        "others": Counter({"revived from T1": 1, "revived from T2": 4}),
    }
    lines = arc_tally_text(by_group, Counter({"evicted from T1": 9, "evicted from T2": 2})).splitlines()
    assert lines[0] == "ARC's victims: 11, of them 9 from T1 (seen once)"
    said = "pages revived by a prefix hit for"
    assert lines[1].split() == f"{said} the pinned prompts 10, of them 7 sitting in T2".split()
    assert lines[2].split() == f"{said} the other prompts 5, of them 4 sitting in T2".split()


def test_streams_summary_says_where_lru_sits_from_hand_made_curves():
    from pagedkv.labs.eviction_printouts import streams_summary

    curves = {
        "a": {"lru": [0.5, 0.6], "leaf-lru": [0.5, 0.6], "fifo": [0.4, 0.5], "arc": [0.45, 0.6]},
        "b": {"lru": [0.2, 0.3], "leaf-lru": [0.2, 0.3], "fifo": [0.1, 0.4], "arc": [0.3, 0.4]},
        "c": {"lru": [0.2, 0.3], "leaf-lru": [0.2, 0.3], "fifo": [0.25, 0.2], "arc": [0.3, 0.4]},
    }
    assert streams_summary(curves) == (
        "LRU's line (black), leaf-lru not counted: on top on a; under 1 of the 2 others on b and c"
        " at every size (fifo crosses it)"
    )
    curves["b"]["fifo"] = [0.2, 0.25]  # equal at one size, below at the other
    assert streams_summary(curves) == (
        "LRU's line (black), leaf-lru not counted: on top on a; under 1 of the 2 others on b"
        " at every size (fifo is at or below it at every size); under 1 of the 2 others on c"
        " at every size (fifo crosses it)"
    )
