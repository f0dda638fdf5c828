"""bench radix: SGLang's radix tree beside vLLM's hash chain on one request stream.

One `pagedkv.labs.lab_workloads` stream is replayed one request at a time through three caches
of the same size (`pagedkv.labs.radix_vs_hash`): the pool with the hash-chain index, the pool with
the radix tree as its index, and a `RadixCache` driven as SGLang drives it (whole-leaf
eviction; prompt pages inserted after prefill, the rest at finish). The table gives, for each:
hit tokens (prompt tokens served from the cache), pages evicted, and the size of the index at
the end (block hashes for the chain, nodes for a tree) beside the pages it holds. Bookkeeping
only; seeded; the same numbers on every machine.
"""

from __future__ import annotations

import argparse

from pagedkv.bench import Report
from pagedkv.labs.lab_workloads import LAB_WORKLOADS, lab_workload
from pagedkv.labs.radix_vs_hash import compare_indexes
from pagedkv.viz.palette import SEQUENCE_COLORS

HELP = "radix tree vs hash chain on one stream: hit tokens, evictions, nodes vs pages"
# one colour per way, from the house palette: none a page state's (blue, orange, vermillion) nor
# the page chains' green ("reached") and salmon ("orphan") of notebook 09
COLORS = {"hash": SEQUENCE_COLORS[1], "radix": SEQUENCE_COLORS[5], "sglang": SEQUENCE_COLORS[6]}


def _fewer(difference: int) -> str:
    """A difference of hit tokens in words: '192 fewer', '12 more' or 'as many'."""
    if difference == 0:
        return "as many"
    return f"{abs(difference):,} {'fewer' if difference > 0 else 'more'}"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workload", default="chat", choices=sorted(LAB_WORKLOADS))
    parser.add_argument("--cache-tokens", type=int, default=2048)
    parser.add_argument("--page-size", type=int, default=16)


def run(
    *,
    quick: bool = False,
    seed: int = 0,
    workload: str = "chat",
    cache_tokens: int = 2048,
    page_size: int = 16,
) -> Report:
    requests = lab_workload(workload, seed=seed)
    if quick:
        requests = requests[:60]
    results = compare_indexes(requests, cache_tokens, page_size)
    rows = [
        [r.index, r.hit_tokens, round(100 * r.hit_rate, 1), r.evictions, r.entries, r.cached_pages]
        for r in results
    ]
    hashed, radix, sglang = results
    notes = [
        f"{len(requests)} {workload} requests, cache {cache_tokens} tokens "
        f"({cache_tokens // page_size} pages of {page_size}); index entries = block hashes "
        "(hash) or tree nodes (radix, sglang)",
        f"hash vs radix: {'same' if radix.hit_tokens == hashed.hit_tokens else 'different'} hit "
        f"tokens ({hashed.hit_tokens} / {radix.hit_tokens}), {hashed.evictions} / "
        f"{radix.evictions} evictions; the tree holds {radix.cached_pages} pages in "
        f"{radix.entries} nodes where the hash pool needs {hashed.entries} hashes",
        f"sglang (whole leaves evicted, prompt pages inserted after prefill): {sglang.evictions} "
        f"evictions against {hashed.evictions}, {_fewer(hashed.hit_tokens - sglang.hit_tokens)} "
        "hit tokens than the hash pool",
    ]
    return Report(
        title=f"bench radix: prefix index on the {workload} stream, seed {seed}",
        columns=["index", "hit tokens", "hit %", "evictions", "index entries", "cached pages"],
        rows=rows,
        notes=notes,
        data={
            "workload": workload,
            "cache_tokens": cache_tokens,
            "page_size": page_size,
            "requests": len(requests),
            "results": {
                r.index: {
                    "hit_tokens": r.hit_tokens,
                    "query_tokens": r.query_tokens,
                    "evictions": r.evictions,
                    "entries": r.entries,
                    "cached_pages": r.cached_pages,
                }
                for r in results
            },
        },
        plotter=figure,
    )


def figure(report: Report):
    """Three panels: hit tokens, evictions (each bar labelled with its value and, when it
    differs, its difference from the first index's), index entries against pages held."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    results = report.data["results"]
    names = list(results)
    fig = Figure(figsize=(8.5, 4.0))  # 850 x 400 px at 100 dpi: fits a 720-px screen with its title
    FigureCanvasAgg(fig)
    panels = [
        ("hit_tokens", "hit tokens"),
        ("evictions", "pages evicted"),
        ("entries", "index entries (coloured)\nbeside pages held (grey)"),
    ]
    for ax, (key, label) in zip(fig.subplots(1, 3), panels):
        values = [results[n][key] for n in names]
        if key == "entries":  # two bars per index, both numbered: entries, then pages held
            xs = range(len(names))
            bars = ax.bar([x - 0.21 for x in xs], values, 0.38, color=[COLORS[n] for n in names])
            held = [results[n]["cached_pages"] for n in names]
            grey = ax.bar([x + 0.21 for x in xs], held, 0.38, color="#BBBBBB")
            ax.bar_label(grey, label_type="center", rotation=90, fontsize=12)  # inside: no clash
            ax.set_xticks(list(xs), names)
            ax.bar_label(bars, fontsize=12)
            ax.set_ylim(0, 1.25 * max(held))  # room for the labels above the bars
        else:  # bars from 0 hide a small gap: each label says how far it is from the first bar
            bars = ax.bar(names, values, color=[COLORS[n] for n in names])
            gaps = [f"{v:,}" + (f"\n({v - values[0]:+,})" if v != values[0] else "") for v in values]
            ax.bar_label(bars, gaps, fontsize=12)
        ax.set_title(label, fontsize=12)
        ax.tick_params(labelsize=12)
        if key != "entries":
            ax.margins(y=0.25)
    fig.suptitle(
        f"Hash pool vs radix pool: {report.data['workload']} stream, "
        f"{report.data['cache_tokens']} tokens of cache",
        fontsize=12,
    )
    note = "bars start at 0: the labels give each difference from the hash bar"
    fig.text(0.5, 0.01, note, ha="center", fontsize=12)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return fig
