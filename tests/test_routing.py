"""Routing across replicas: the router's rules on hand-built states, and the quick bench."""

from __future__ import annotations

import pytest

from pagedkv.bench import routing as bench_routing
from pagedkv.labs import routing
from pagedkv.labs.workloads import Request


def _request(req_id: str, tokens: list[int]) -> Request:
    return Request(req_id, tokens, 4)


def _warm(replica: routing.Replica, tokens: list[int]) -> None:
    replica.seqs.add("warm", tokens)
    replica.seqs.free("warm")  # its full pages stay CACHED


def test_prefix_aware_follows_the_cache_until_the_load_is_imbalanced():
    replicas = [routing.Replica(16, 4, 8) for _ in range(3)]
    shared = list(range(100, 116))  # 4 full pages
    _warm(replicas[2], shared)
    request = _request("r", shared + [1, 2])
    aware = routing.RouterConfig("prefix_aware", balance_abs_threshold=2)
    assert replicas[2].cached_prefix_tokens(routing.block_hashes(request.prompt_token_ids, 4)) == 16
    assert routing.choose(replicas, request, aware, 0) == 2
    for i in range(3):  # replica 2 now has 3 more requests in flight than the others
        replicas[2].scheduler.add_request(f"busy{i}", [7, 8], 2)
    assert routing.choose(replicas, request, aware, 0) == 0  # least loaded, lowest index
    assert routing.choose(replicas, request, routing.RouterConfig("round_robin"), 4) == 1


def test_prefix_aware_without_a_match_picks_the_replica_with_most_free_pages():
    replicas = [routing.Replica(16, 4, 8) for _ in range(2)]
    _warm(replicas[0], list(range(50, 62)))  # 3 CACHED pages: fewer FREE pages on replica 0
    request = _request("r", [9] * 10)
    assert routing.choose(replicas, request, routing.RouterConfig("prefix_aware"), 0) == 1


def test_by_valve_counts_the_requests_routed_while_the_loads_differ_by_more_than_the_threshold(monkeypatch):
    """The count is checked against the loads each routing decision saw, recorded apart."""
    from pagedkv.labs.experiments import popular_system_prompts

    seen: list[list[int]] = []
    real_route = routing.route

    def recording(replicas, request, config, counter):
        seen.append([len(r.scheduler.running) + len(r.scheduler.waiting) for r in replicas])
        return real_route(replicas, request, config, counter)

    monkeypatch.setattr(routing, "route", recording)
    workload = popular_system_prompts(60, 8, 64, 0)
    options = dict(num_pages=32, page_size=16, max_num_seqs=4, arrival_rate=1.0)
    for threshold in (2, 1000):
        seen.clear()
        out = routing.simulate(
            workload, 3, routing.RouterConfig("prefix_aware", balance_abs_threshold=threshold), **options
        )
        expected = sum(
            max(loads) - min(loads) > threshold and max(loads) > 1.0001 * min(loads) for loads in seen
        )
        assert len(seen) == 60 and out["by_valve"] == expected
        assert (expected > 0) == (threshold == 2)  # the small threshold opens the valve, the large never
    plain = routing.simulate(workload, 3, routing.RouterConfig("least_loaded"), **options)
    assert plain["by_valve"] == 0  # only prefix-aware routing has a valve


@pytest.mark.slow
def test_quick_bench_prefix_aware_raises_hits_and_least_loaded_balances():
    report = bench_routing.run(quick=True, replicas="4")
    by = {router: d[4] for router, d in report.data.items()}
    assert all(sum(d["routed"]) == 200 for d in by.values())
    assert by["prefix_aware"]["hit_rate"] > by["round_robin"]["hit_rate"] + 0.05
    assert by["least_loaded"]["imbalance"] <= by["round_robin"]["imbalance"]
    assert by["least_loaded"]["imbalance"] < by["prefix_aware"]["imbalance"]
    assert report.figure() is not None


def test_the_runs_give_the_same_results_in_two_processes_as_in_one(monkeypatch):
    """`--quick` runs its simulations on both cores; each is the same computation."""
    two = bench_routing.run(quick=True, replicas="2")
    monkeypatch.setattr(bench_routing, "QUICK_WORKERS", 1)
    one = bench_routing.run(quick=True, replicas="2")
    assert two.rows == one.rows and two.data == one.data


@pytest.mark.parametrize(
    "call, word",
    [
        (lambda: routing.RouterConfig("random"), "router"),
        (lambda: routing.simulate([_request("a", [1])], 0), "num_replicas"),
        (lambda: routing.simulate([_request("a", [1])], 2, arrival_rate=-1.0), "arrival_rate"),
        (lambda: bench_routing.run(quick=True, replicas="0"), "num_replicas"),
    ],
)
def test_bad_input_names_the_argument(call, word):
    with pytest.raises(ValueError, match=word):
        call()


@pytest.mark.slow
def test_cli_prints_the_table_and_writes_json(tmp_path, capsys):
    import json

    from pagedkv import cli

    path = tmp_path / "routing.json"
    assert cli.main(["bench", "routing", "--quick", "--replicas", "2", "--json", str(path)]) == 0
    assert "prefix_aware" in capsys.readouterr().out
    assert {row["router"] for row in json.loads(path.read_text())["rows"]} == set(routing.ROUTERS)


def test_the_figure_keys_both_panels_lines_by_router_in_one_legend():
    """One legend for the figure, none per panel: it names the routers in the colours both
    panels draw them in."""
    from pagedkv.bench import Report

    data = {
        r: {n: {"hit_rate": 0.5, "imbalance": 1.0 + i / 10} for n in (2, 4)}
        for i, r in enumerate(routing.ROUTERS)
    }
    fig = bench_routing.figure(Report("routing", [], [], data=data))
    assert [ax.get_legend() for ax in fig.axes] == [None, None]
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == list(routing.ROUTERS)
    keyed = [h.get_color() for h in legend.legend_handles]
    for ax in fig.axes:
        assert keyed == [line.get_color() for line in ax.get_lines()[: len(routing.ROUTERS)]]


def test_prompts_seen_is_the_quick_runs_routing():
    """prompts_seen replays run(quick=True) request for request: under prefix-aware routing
    over 8 replicas, each replica is sent only a few system prompts; round-robin many more."""
    seen = bench_routing.prompts_seen("prefix_aware", 8)
    assert len(seen) == 8 and max(seen) <= 5
    assert min(bench_routing.prompts_seen("round_robin", 8)) >= 12
