"""Benchmarks: every subcommand runs in --quick mode and writes valid JSON; the programs
they time compute what they claim (paged attention across chunk boundaries equals dense)."""

from __future__ import annotations

import argparse
import copy
import importlib
import inspect
import io
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from pagedkv import (
    CacheConfig,
    KVCachePool,
    SequenceManager,
    cli,
    dense_attention,
)
from pagedkv import bench as bench_package
from pagedkv.bench import BENCHMARKS, Report, memory, page_size
from pagedkv.engine.scheduler import Scheduler
from pagedkv.exercises.reference_pool import ReferencePool
from pagedkv.labs.workloads import ops_trace, sharegpt_like, with_system_prompt
from pagedkv.model import attention_tiled as attention
from pagedkv.model.attention_tiled import TiledAttentionEngine

TOL = {"float64": 1e-12, "float32": 1e-5}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("page_size", [1, 3, 16])
@pytest.mark.parametrize("heads,kv_heads", [(4, 2), (8, 1), (3, 3)])
@pytest.mark.parametrize("chunk_bytes", [1, 700, 1 << 20])
def test_chunked_paged_attention_equals_dense(monkeypatch, dtype, page_size, heads, kv_heads, chunk_bytes):
    # Tiny chunks force many chunks (and a short last one) through the online softmax;
    # lengths shorter than later chunks exercise fully masked chunks.
    monkeypatch.setattr(attention, "CHUNK_BYTES", chunk_bytes)
    rng = np.random.default_rng(page_size * 31 + heads)
    lengths = [1, 2, 17, 40, 95, 64]
    cfg = CacheConfig(
        num_pages=400,
        page_size=page_size,
        num_layers=2,
        num_kv_heads=kv_heads,
        head_dim=8,
        dtype=dtype,
        enable_prefix_caching=False,
    )
    pool = KVCachePool(cfg)
    seqs, engine, kept = SequenceManager(pool), TiledAttentionEngine(pool), []
    for i, n in enumerate(lengths):
        seqs.add(i, rng.integers(0, 50, n).tolist())
        kv = rng.standard_normal((2, n, kv_heads, 8)).astype(dtype) * 3
        engine.write(1, seqs.slot_mapping(i), kv[0], kv[1])
        kept.append(kv)
    q = rng.standard_normal((len(lengths), heads, 8)).astype(dtype)
    got = engine.paged_attention_batch(1, q, [seqs.block_table(i) for i in range(6)], lengths)
    assert got.dtype == np.dtype(dtype)
    for b, kv in enumerate(kept):
        want = dense_attention(q[b : b + 1], kv[0], kv[1])[0]
        np.testing.assert_allclose(got[b], want, rtol=0, atol=TOL[dtype])


def test_paged_attention_refuses_page_ids_outside_the_pool():
    cfg = CacheConfig(num_pages=4, page_size=2, num_layers=1, num_kv_heads=1, head_dim=2)
    engine = TiledAttentionEngine(KVCachePool(cfg))
    with pytest.raises(ValueError, match=r"page ids in \[0, 3\]"):
        engine.paged_attention_batch(0, np.zeros((1, 1, 2), np.float32), [[0, 4]], [3])


# ---- every subcommand, --quick, in-process through the real command line -------------------

PNG = b"\x89PNG\r\n\x1a\n"


def bench(tmp_path, capsys, name: str, *extra: str) -> dict:
    json_path, png_path = tmp_path / f"{name}.json", tmp_path / f"{name}.png"
    argv = ["bench", name, "--quick", "--json", str(json_path), "--plot", str(png_path), *extra]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    report = json.loads(json_path.read_text())
    assert " ".join(report["title"].split()) in " ".join(out.split()) and report["rows"]  # wrapped
    assert all(len(line) <= 95 for line in out.splitlines() if " " in line.strip())
    assert set(report) == {"title", "rows", "notes", "data"}
    assert png_path.read_bytes()[:8] == PNG
    return report


def test_every_benchmark_module_is_registered_and_keyword_style():
    # Oracle: the files in pagedkv/bench/, not a list typed here.
    folder = Path(bench_package.__file__).parent
    files = {f"pagedkv.bench.{p.stem}" for p in folder.glob("*.py") if p.stem != "__init__"}
    assert set(BENCHMARKS.values()) == files
    for module_name in files:
        module = importlib.import_module(module_name)
        params = inspect.signature(module.run).parameters
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params.values()), module_name
        assert {"quick", "seed"} <= set(params)
        parser = argparse.ArgumentParser()
        module.add_arguments(parser)
        dests = {a.dest for a in parser._actions} - {"help"}  # noqa: SLF001 - argparse has no public list
        assert dests | {"quick", "seed"} == set(params), module_name
        assert isinstance(module.HELP, str) and module.HELP


def _modules_loaded_by(call: str, prefixes: str) -> str:
    """What a fresh interpreter prints after `call`: the loaded modules that start with one
    of the comma-separated prefixes, sorted."""
    code = (
        "import sys\n"
        "from pagedkv import cli\n"
        f"{call}\n"
        f"print(sorted(m for m in sys.modules if m.startswith(tuple({prefixes.split(',')!r}))))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()[-1]


def test_demo_imports_no_widget_library_and_no_benchmark():
    loaded = _modules_loaded_by("assert cli.main(['demo']) == 0", "ipywidgets,traitlets,pagedkv.bench.")
    assert loaded == "[]"


def test_a_benchmark_subcommand_imports_only_its_module():
    loaded = _modules_loaded_by("cli.build_parser(['bench', 'scale', '--quick'])", "pagedkv.bench.")
    assert loaded == "['pagedkv.bench.scale']"


@pytest.mark.slow
def test_ui_quick_fills_every_pool():
    from pagedkv.bench import ui

    report = ui.run(quick=True)
    data = report.data
    assert set(data) == {"64", "256"}
    for pages in data.values():  # every pool is timed with each tab open
        assert set(pages) == set(ui.TABS)
    assert 0 < data["64"]["More views"]["live_sequences"] < data["256"]["More views"]["live_sequences"]
    assert [row[:2] for row in report.rows] == [[p, t] for p in (64, 256) for t in ui.TABS]


def test_wal_quick_logs_one_record_per_operation_and_fsyncs_by_policy(tmp_path):
    from pagedkv.bench import wal

    report = wal.run(quick=True, dir=str(tmp_path))
    data, ops = report.data, report.rows[0][1]
    assert all(data[p]["records"] == ops for p in wal.POLICIES)
    assert data["always"]["fsyncs"] == ops and data["never"]["fsyncs"] == 1  # the final one, as at close
    assert data["batch 8"]["fsyncs"] == -(-ops // 8) and data["batch 64"]["fsyncs"] == -(-ops // 64)
    assert data["recovery"]["records"] == ops  # recovery replays every record


def test_wal_counts_the_calls_its_trace_makes():
    from pagedkv.bench import wal

    calls = Counter()

    class Counting(SequenceManager):  # the oracle: every call the trace makes, counted here
        def add(self, *args, **kwargs):
            calls["add"] += 1
            return super().add(*args, **kwargs)

        def append_slot(self, *args, **kwargs):
            calls["append"] += 1
            return super().append_slot(*args, **kwargs)

        def free(self, *args, **kwargs):
            calls["free"] += 1
            return super().free(*args, **kwargs)

    assert wal._trace(Counting(KVCachePool(wal.CONFIG)), 300, 0) == sum(calls.values())  # noqa: SLF001
    assert calls == {"add": 300, "append": 300 * 8, "free": 300 - 16}  # the last 16 stay live
    assert wal.count_operations() == sum(calls.values()) == 2984  # notebook 07b, section 5
    with pytest.raises(ValueError, match="sequences"):
        wal.count_operations(0)


@pytest.mark.slow
def test_api_quick_serves_every_request():
    from pagedkv.bench import api

    data = api.run(quick=True).data  # asserts the server's invariants itself
    for server in ("no WAL", "WAL, fsync always"):
        assert data[f"{server}/health"]["requests"] == 80
        assert data[f"{server}/create+free"]["requests"] == 160


@pytest.mark.slow
def test_memory(tmp_path, capsys):
    data = bench(tmp_path, capsys, "memory")["data"]
    for systems in data.values():
        for result in systems.values():
            total = sum(
                result[c]
                for c in (
                    "token_states",
                    "reserved",
                    "internal_fragmentation",
                    "external_fragmentation",
                    "free",
                )
            )
            assert total == pytest.approx(100.0, abs=1e-9)
    sg = data["sharegpt"]
    assert sg["max"]["token_states"] < sg["pow2"]["token_states"] < sg["oracle"]["token_states"]
    assert sg["paged"]["token_states"] > 90 > sg["oracle"]["token_states"]
    assert sg["paged"]["reserved"] == 0 and sg["paged"]["external_fragmentation"] == 0
    assert sg["oracle"]["internal_fragmentation"] == 0  # it reserves exactly the final length
    assert sg["paged"]["mean_batch"] > sg["oracle"]["mean_batch"] > sg["max"]["mean_batch"]


@pytest.mark.slow
def test_sharing(tmp_path, capsys):
    data = bench(tmp_path, capsys, "sharing")["data"]
    for mode in ("parallel sampling", "beam search"):
        savings = [data[mode][w]["saving_pct"] for w in ("2", "4", "6")]  # JSON keys are str
        assert 0 < savings[0] < savings[1] < savings[2] < 100
    for w in ("2", "4", "6"):
        assert data["beam search"][w]["saving_pct"] > data["parallel sampling"][w]["saving_pct"]
        assert data["parallel sampling"][w]["cow_copies"] > 0


def png(fig) -> bytes:
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=50)
    return out.getvalue()


def test_memory_figure_outlines_the_free_share():
    shares = {
        "token_states": 96.6,
        "reserved": 0.0,
        "internal_fragmentation": 2.0,
        "external_fragmentation": 0.0,
        "free": 1.4,
    }
    fig = memory.figure(Report("memory", [], [], data={"sharegpt": {"paged": shares}}))
    patches = fig.axes[0].patches
    free = patches[-1]  # stacked last, in the order of CATEGORIES
    assert free.get_height() == pytest.approx(1.4)
    edge = free.get_edgecolor()
    assert free.get_linewidth() > 0 and edge[3] > 0 and edge[:3] != free.get_facecolor()[:3]


def test_memory_figure_writes_the_thin_shares_above_their_bar():
    paged = {
        "token_states": 96.6,
        "reserved": 0.0,
        "internal_fragmentation": 2.0,
        "external_fragmentation": 0.0,
        "free": 1.4,
    }
    oracle = {  # every share 0 or wide enough to read off the bar: no label
        "token_states": 48.6,
        "reserved": 35.3,
        "internal_fragmentation": 0.0,
        "external_fragmentation": 16.1,
        "free": 0.0,
    }
    fig = memory.figure(Report("memory", [], [], data={"sharegpt": {"oracle": oracle, "paged": paged}}))
    (ax,) = fig.axes
    notes = [(t.get_position()[0], t.get_text()) for t in ax.texts if t.get_gid() == "sliver"]
    assert notes == [(1, "internal 2.0%\nfree 1.4%")]  # over the paged bar (x = 1), two lines
    assert ax.get_ylim()[1] > 100 and max(ax.get_yticks()) == 100


def test_memory_figure_labels_token_states_to_one_decimal_as_printed():
    shares = {"token_states": 96.6, "reserved": 0.0, "internal_fragmentation": 2.0,
              "external_fragmentation": 0.0, "free": 1.4}  # fmt: skip
    fig = memory.figure(Report("memory", [], [], data={"sharegpt": {"paged": shares}}))
    labels = [t.get_text() for t in fig.axes[0].texts if t.get_gid() == "token_states"]
    assert labels == ["96.6%"]  # the printed table's 96.6 %, not a rounded 97 %


def test_page_size_figure_draws_the_hit_rate_from_0_to_100():
    points = [
        {
            "capacity": 8192,
            "page_size": size,
            "slot_utilisation_pct": util,
            "prefix_hit_rate_pct": hits,
            "tokens_per_s": 1.0,
            "allocations": allocs,
            "tokens": 2000,
        }
        for size, util, hits, allocs in [(4, 99.0, 55.0, 500), (256, 84.0, 17.0, 10)]
    ]
    fig = page_size.figure(Report("page size", [], [], data={"points": points}), timing=False)
    hit_axes = next(ax for ax in fig.axes if ax.get_title().startswith("prefix hits, all"))
    assert hit_axes.get_ylim() == (0.0, 100.0)
    # slot util from 70, the ten below its lowest point (84), so the fall is visible
    assert fig.axes[0].get_ylim() == (70.0, 100.0)
    # allocations per 1,000 tokens: 500 and 10 pages for 2,000 tokens, on a log axis
    (line,) = fig.axes[2].get_lines()
    assert list(line.get_ydata()) == [250.0, 5.0] and fig.axes[2].get_yscale() == "log"


def test_page_size_splits_lookups_into_first_admissions_and_readmissions():
    report = page_size.run(requests=20, page_sizes="16,256", capacities="4096")
    for point in report.data["points"]:
        (first, first_hits), (again, again_hits) = (point["first_lookups"], point["readmission_lookups"])
        # every request but the first finds the 200-token system prompt's full pages
        assert first_hits == 19 * (200 // point["page_size"]) * point["page_size"]
        assert point["preemptions"] > 0 and again > 0
        rate = 100 * (first_hits + again_hits) / (first + again)
        assert rate == pytest.approx(point["prefix_hit_rate_pct"])


def test_page_size_rates_each_kind_of_lookup_over_its_own_lookups():
    trace = with_system_prompt(sharegpt_like(40, 0), 200)
    for slots in (32768, 8192):  # no preemption, then many
        # the independent count: a plain SequenceManager, read through the pool's PoolStats
        pool = KVCachePool(CacheConfig.bookkeeping(slots // 16, 16))
        sched = Scheduler(SequenceManager(pool), max_num_seqs=128, max_num_batched_tokens=4096)
        sched.add_requests(trace)
        while sched.has_unfinished:
            sched.step()
        point = page_size.simulate(trace, slots, 16, 128)
        (first, first_hit), (again, again_hit) = point["first_lookups"], point["readmission_lookups"]
        assert first_hit == 39 * 192  # every request but the first: the prompt's 12 full pages
        assert (first + again, first_hit + again_hit) == (pool.stats.prefix_queries, pool.stats.prefix_hits)
        assert point["first_hit_rate_pct"] == pytest.approx(100 * 39 * 192 / first)
        if slots == 32768:  # nothing re-admitted: every lookup is a first admission's
            assert point["preemptions"] == again == 0 and point["readmission_hit_rate_pct"] == 0.0
            assert point["first_hit_rate_pct"] == pytest.approx(100 * pool.stats.hit_rate)
        else:
            assert point["preemptions"] > 0
            rate = (pool.stats.prefix_hits - 39 * 192) / (pool.stats.prefix_queries - first)
            assert point["readmission_hit_rate_pct"] == pytest.approx(100 * rate)


def test_page_size_splits_computed_tokens_into_prefill_and_decode():
    report = page_size.run(requests=20, page_sizes="16,256", capacities="4096")
    trace = with_system_prompt(sharegpt_like(20, 0), 200)
    outputs = sum(r.max_new_tokens for r in trace)
    for point in report.data["points"]:
        assert point["prefill_tokens"] + point["decode_tokens"] == point["tokens"]
        # each request samples its first token at the end of a prefill, and again after every
        # recompute preemption: every other output token is one decode token
        assert point["decode_tokens"] == outputs - len(trace) - point["preemptions"]
        (_, first_hits), (again, again_hits) = point["first_lookups"], point["readmission_lookups"]
        # prefill: every prompt once, every re-admission's tokens again, less the prefix hits
        assert point["prompt_tokens"] == sum(r.prompt_len for r in trace)
        assert point["prefill_tokens"] == point["prompt_tokens"] + again - first_hits - again_hits


@pytest.mark.slow
def test_page_size(tmp_path, capsys):
    report = bench(tmp_path, capsys, "page-size")
    points = {p["page_size"]: p for p in report["data"]["points"]}
    assert points[1]["slot_utilisation_pct"] == 100.0
    assert points[1]["slot_utilisation_pct"] > points[16]["slot_utilisation_pct"]
    assert points[16]["slot_utilisation_pct"] > points[256]["slot_utilisation_pct"]
    # a 200-token system prompt fills 12 pages of 16 but no page of 256
    assert points[16]["prefix_hit_rate_pct"] > points[256]["prefix_hit_rate_pct"]
    # Without timing the figure does not depend on wall times (notebooks compare it).
    rebuilt = Report(report["title"], [], [], data=copy.deepcopy(report["data"]))
    assert len(page_size.figure(rebuilt).axes) == 4
    deterministic = png(page_size.figure(rebuilt, timing=False))
    for point in rebuilt.data["points"]:
        point["tokens_per_s"] *= 3
    assert len(page_size.figure(rebuilt, timing=False).axes) == 3
    assert png(page_size.figure(rebuilt, timing=False)) == deterministic


@pytest.mark.slow
def test_preempt(tmp_path, capsys):
    data = bench(tmp_path, capsys, "preempt")["data"]
    assert all(run["identical_to_reference"] for run in data.values())
    assert data["no pressure"]["preemptions"] == 0
    rc, sw = data["recompute"], data["swap"]
    assert rc["preemptions"] > 0 and rc["recomputed_tokens"] > 0 and rc["swap_out_bytes"] == 0
    assert sw["preemptions"] > 0 and sw["recomputed_tokens"] == 0 and sw["swap_in_bytes"] > 0
    # a swapped-in sequence computes only the token it was about to decode: no extra work
    total = {k: v["prefill_tokens"] + v["decode_tokens"] for k, v in data.items()}
    assert total["swap"] == total["no pressure"] < total["recompute"]


@pytest.mark.slow
@pytest.mark.parametrize("layout,cache", [("scattered", "shared"), ("runs", "warm"), ("scattered", "cold")])
def test_attention(tmp_path, capsys, layout, cache):
    report = bench(tmp_path, capsys, "attention", "--layout", layout, "--cache", cache)
    data = report["data"]
    assert (data["layout"], data["cache"]) == (layout, cache) and layout in report["title"]
    assert {"paged ms", "dense ms", "gather ms", "paged K/V GB/s", "of bandwidth"} <= set(report["rows"][0])
    assert len(data["points"]) == 4 and data["bandwidth_bytes_per_s"] > 0
    for point in data["points"]:
        assert point["max_abs_diff"] < 1e-5 and point["ratio"] > 0
        # K and V of every context: 2 x B x L x 4 K/V heads x 64 dims x 4 bytes (float32 defaults)
        assert point["kv_bytes"] == 2 * point["batch"] * point["context"] * 4 * 64 * 4
        assert point["paged_kv_bytes_per_s"] * point["paged_s"] == pytest.approx(point["kv_bytes"])
        share = point["paged_kv_bytes_per_s"] / data["bandwidth_bytes_per_s"]
        # a share, not a speed: above 0, and caches are not 16x faster than a memory copy
        assert point["bandwidth_share"] == pytest.approx(share) and 0 < share <= 16
        dense = {name: s for name, s in point["program_s"].items() if name.startswith("dense")}
        assert point["dense_s"] == min(dense.values()) and point["dense_program"] in dense


@pytest.mark.slow
def test_scale(tmp_path, capsys):
    data = bench(tmp_path, capsys, "scale")["data"]
    runs = data["runs"]
    assert [r["requests"] for r in runs] == [100, 300]  # one row per size
    for r in runs:
        requests = sharegpt_like(r["requests"], 0)
        assert r["finished"] == len(requests) and r["aborted"] == 0
        # Oracle: the workload itself. Every prompt token and every generated token but the
        # last is computed once, plus what preemptions by recompute compute again.
        workload = sum(q.prompt_len + q.max_new_tokens - 1 for q in requests)
        assert r["tokens"] - r["recomputed_tokens"] == workload
        # every token after the first is a decode, except the one a resumed request computes
        # in its re-prefill (once per preemption)
        assert r["preemptions"] > 0
        assert r["decode_tokens"] + r["preemptions"] == sum(q.max_new_tokens - 1 for q in requests)
        assert max(r["running"]) <= 256 and len(r["running"]) == r["steps"]
        assert r["seconds"] > 0
    assert data["steps"] == runs[-1]["steps"]  # the top level is the largest run (the figure's)
    meta = data["metadata"]
    assert meta["bytes_per_page"] > 0 and meta["bytes_per_sequence"] > 0
    # 32 layers x 2 (K, V) x 32 heads x 128 dims x 2 bytes x 16 tokens
    assert meta["kv_bytes_per_page"] == 32 * 2 * 32 * 128 * 2 * 16


def test_ops(tmp_path, capsys):
    data = bench(tmp_path, capsys, "ops")["data"]
    # The quick trace replayed through the plain reference model of the pool rules.
    reference = ReferencePool(num_pages=2048, page_size=16)
    prompts = [p.tolist() for p in ops_trace(200, 512, 256, 0)]
    for start in range(0, len(prompts), 64):
        wave = range(start, min(start + 64, len(prompts)))
        for i in wave:
            reference.add(i, prompts[i])
        for i in wave:
            reference.free_seq(i)
    hit_blocks = reference.stats["prefix_hits"] // 16
    assert hit_blocks > 0 and reference.stats["evictions"] > 0
    for mode in ("hashing", "hashing_xxhash"):  # the block hash changes names, not hits
        assert data[mode]["prefix_hit_blocks"] == hit_blocks
        assert data[mode]["evictions"] == reference.stats["evictions"]
    assert data["no_hashing"]["prefix_hit_blocks"] == 0 == data["no_hashing"]["evictions"]


@pytest.mark.slow
def test_bench_runs_as_a_subprocess_with_json(tmp_path):
    path = tmp_path / "sharing.json"
    done = subprocess.run(
        [sys.executable, "-m", "pagedkv", "bench", "sharing", "--quick", "--json", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "saving %" in done.stdout and json.loads(path.read_text())["rows"]


@pytest.mark.slow
def test_notebooks_bench_runs_each_notebook_beside_a_bare_kernel(tmp_path):
    """The table's shape, never a time: one row per notebook (exercises/ included), its Run
    All seconds, the bare kernel's start-up, their ratio and the verdict; a failing cell is
    reported, not raised."""
    import nbformat

    from pagedkv.bench import notebooks

    def write(path: Path, source: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)]), path)

    write(tmp_path / "00_ok.ipynb", "x = 1")
    write(tmp_path / "01_fails.ipynb", "raise ValueError('broken on purpose')")
    write(tmp_path / "exercises" / "ex.ipynb", "y = 2")
    report = notebooks.run(directory=str(tmp_path), timeout=120)
    assert [row[0] for row in report.rows] == ["00_ok.ipynb", "01_fails.ipynb", "exercises/ex.ipynb"]
    for name, seconds, kernel, ratio, verdict, *_ in report.rows:
        assert seconds > 0 and kernel > 0 and ratio == pytest.approx(seconds / kernel)
        assert verdict in ("met", "NOT met") or name == "01_fails.ipynb"
    assert report.rows[1][4].startswith("error:") and "broken on purpose" in report.rows[1][4]
    assert "01_fails.ipynb" in report.notes[-1]
    assert [r[0] for r in notebooks.run(directory=str(tmp_path), only=["ex"]).rows] == ["exercises/ex.ipynb"]
    with pytest.raises(ValueError, match="no notebook"):
        notebooks.run(directory=str(tmp_path), only=["zz"])
    with pytest.raises(ValueError, match="folder of notebooks"):
        notebooks.run(directory=str(tmp_path / "missing"))


def test_notebooks_bench_counts_the_core_path_a_reader_meets():
    """Words and code cells, of the whole notebook and of the cells shown before a folded
    Optional section is opened, counted by hand on a small notebook."""
    import nbformat

    from pagedkv.bench.notebooks import FOLDED, reading_size

    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    cells = [
        md("## One two"),  # 2 words, core
        code("x = 1"),  # core
        md("### Optional: three four five", metadata={FOLDED: True}),  # 4 words, core
        md("six seven"),  # folded
        code("y = 2"),  # folded
        md("#### deeper"),  # folded: a deeper heading does not end the fold
        md("### Back"),  # ends the fold: 1 word, core
        code("z = 3"),  # core
    ]
    assert reading_size(cells) == {
        "all_words": 10,
        "all_code_cells": 3,
        "all_minutes": 3,  # 10 words / 100 a minute + 3 code cells, rounded
        "core_words": 7,
        "core_code_cells": 2,
        "core_minutes": 2,
    }


def test_format_table_prints_percentage_columns_as_percentages():
    # A column whose name ends in "%" holds percentages: 58.5 reads "58.5%", never "58.500";
    # other numbers keep their format.
    from pagedkv.bench import format_table

    rows = [["lru", 58.5, 1.25, 1200], ["arc", 100.0, 0.5, 7]]
    text = format_table(["policy", "chat %", "ratio", "requests"], rows)
    lines = text.splitlines()
    assert lines[0].split() == ["policy", "chat", "%", "ratio", "requests"]
    assert lines[2].split() == ["lru", "58.5%", "1.250", "1,200"]
    assert lines[3].split() == ["arc", "100.0%", "0.500", "7"]
    assert "58.500" not in text


def test_a_wide_report_prints_in_lines_of_95_characters_broken_between_words():
    from pagedkv.bench import Report

    columns = ["name", "a long column name of many words %", "another long name, in words", "third name", "n"]
    columns[-1] = "external+free % n"  # a long word stays whole
    rows = [["first", 12.5, 3.25, "x" * 20, 7], ["second", 100.0, 0.5, "y", 1200]]
    note = "word " * 40 + "fragmentation"
    text = Report("title " * 30, columns, rows, notes=[note, "  rate  max\n  0.500  0.038"]).table()
    lines = text.splitlines()
    assert all(len(line) <= 95 for line in lines)
    assert " ".join(text.split()).startswith(" ".join(["title"] * 30))  # every word, in order
    assert "fragmentation" in lines[-3].split()  # a word is never cut
    assert lines[-2:] == ["  rate  max", "  0.500  0.038"]  # short lines keep their spaces
    head = [line for line in lines if line.startswith("---")][0]
    header = lines[2 : lines.index(head)]  # after the title's two lines
    assert len(header) > 1 and header[-1].split()[:2] == ["name", "words"]
    assert " ".join(" ".join(line.split()) for line in header).count("long") == 2
    assert "external+free %" in " ".join(header)
    first = lines[lines.index(head) + 1].split()
    assert first == ["first", "12.5%", "3.250", "x" * 20, "7"]


def test_preempt_figure_draws_swap_out_and_in_side_by_side_each_labelled():
    from pagedkv.bench import preempt

    runs = {"no pressure": (0, 0), "recompute": (0, 0), "swap": (28_672, 20_480)}
    data = {
        name: {"prefill_tokens": 50, "decode_tokens": 50, "recomputed_tokens": 0}
        | {"swap_out_bytes": out, "swap_in_bytes": back}
        for name, (out, back) in runs.items()
    }
    fig = preempt.figure(Report("preempt", [], [], data=data))
    right = fig.axes[1]
    bars = [(p.get_y(), p.get_height()) for p in right.patches if p.get_height() > 0]
    # both start at 0 (not stacked on each other) and are as tall as their own bytes
    assert sorted(bars) == [(0, 20_480), (0, 28_672)]
    labels = [t.get_text() for t in right.texts]
    assert {"28,672", "20,480"} <= set(labels)
    # a run that copied nothing gets one "0" at its place (a 05b learner read no bar as missing)
    zeros = [t.get_position()[0] for t in right.texts if t.get_text() == "0"]
    assert zeros == [0, 1]
    # every value label sits inside the axes, at the size the notebook shows it (projector)
    from pagedkv.viz import projector

    projector(fig)
    fig.canvas.draw()
    box = right.get_window_extent()
    for text in right.texts:
        inner = text.get_window_extent()
        assert box.x0 <= inner.x0 and inner.x1 <= box.x1, text.get_text()


def test_page_size_one_run_shares_only_whole_pages_of_the_system_prompt():
    # a pool large enough that nothing is preempted: every request after the first finds the
    # system prompt's full pages CACHED or ACTIVE, and nothing else of its own prompt
    for size, shared in [(16, 192), (64, 192), (256, 0)]:  # 200 tokens, in whole pages
        point = page_size.one_run(size, slots=32768, requests=12)
        assert point["preemptions"] == 0
        assert point["first_lookups"][1] == 11 * shared
        assert f"system prompt shared: {shared} tokens" in page_size.describe(point)


def test_page_size_one_run_repeats_the_sweeps_point():
    point = page_size.one_run(64, slots=8192, requests=20)
    (swept,) = page_size.run(requests=20, page_sizes="64", capacities="8192").data["points"]
    timing = {"tokens_per_s"}
    assert {k: v for k, v in point.items() if k not in timing | {"requests", "system_prompt"}} == {
        k: v for k, v in swept.items() if k not in timing
    }
    with pytest.raises(ValueError):
        page_size.one_run(16, slots=8)  # a pool smaller than a page


def test_page_size_figure_has_one_legend_for_every_panel():
    report = page_size.run(requests=10, page_sizes="4,16", capacities="4096,8192")
    fig = page_size.figure(report, timing=False)
    assert [ax.get_legend() for ax in fig.axes] == [None, None, None]
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == ["pool of 4,096 slots", "pool of 8,192 slots"]
    assert fig.axes[1].get_ylim() == (0.0, 100.0) and fig.axes[0].get_ylim()[1] == 100.0


def test_page_size_figure_with_one_pool_names_it_in_a_title_without_a_legend():
    report = page_size.run(requests=10, page_sizes="4,16", capacities="8192")
    fig = page_size.figure(report, timing=False)
    assert fig.legends == [] and [ax.get_legend() for ax in fig.axes] == [None, None, None]
    assert fig.get_suptitle() == "pool of 8,192 slots"


def test_scale_prefill_is_the_prompts_plus_what_readmissions_compute_again():
    from pagedkv.bench import scale

    run = scale.simulate(100, 0, 256, 16, 256, 4096)
    prompts = sum(r.prompt_len for r in sharegpt_like(100, 0))  # the trace, generated again
    assert run["prompt_tokens"] == prompts and run["preemptions"] > 0
    # a re-admission computes again what it had computed, plus its newest sampled token
    assert run["prefill_tokens"] == prompts + run["recomputed_tokens"] + run["preemptions"]


def test_runs_figure_draws_one_range_bar_set_per_lock_and_mix():
    from pagedkv.bench.threads import DESIGNS, MIXES, recorded_runs, runs_figure, spread

    runs = recorded_runs()
    fig = runs_figure(runs)
    assert len(fig.axes) == len(MIXES)
    assert all(len(ax.collections) == len(DESIGNS) for ax in fig.axes)
    for ax, mix in zip(fig.axes, MIXES, strict=True):
        # each panel's y-axis spans its own data, not from 0, so every range shows
        values = [v for d in DESIGNS for n in (1, 2, 4, 8) for v in spread(runs, d, mix, n, 0)]
        bottom, top = ax.get_ylim()
        assert 0 < bottom < min(values) and max(values) < top < 1.2 * max(values)
        # one dashed line per lock, at its lowest 1-thread rate
        assert sorted(line.get_ydata()[0] for line in ax.lines) == sorted(
            spread(runs, d, mix, 1, 0)[0] for d in DESIGNS
        )
