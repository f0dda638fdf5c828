"""bench tiers: what a host-memory tier under the pool buys — hit rate per tier, bytes moved.

Alpaca-like requests after one of `--num-prompts` Zipf-popular system prompts
(`pagedkv.labs.experiments.popular_system_prompts`) are admitted one after another into a pool of
`--num-pages` pages (bookkeeping only, as in notebook 03's hit-rate experiment), without a
second tier and with a `HostTier` of each size in `--host-pages` (`pagedkv.labs.tiers`). Reported
per configuration: the share of prompt tokens served by the pool's own prefix cache, by the
host tier, the bytes offloaded per request (over all requests), the number of requests that
reloaded pages, and per such reload its bytes, its time over `--gpu`'s host link and the time
to recompute the same tokens instead — counted in pages, shown in bytes of `--model` (its K/V
per token, `pagedkv.labs.costs`).

A last row runs TinyLM through a small two-tier cache and checks that every generated
token equals `TinyLM.generate_reference` (recomputing without a cache).
"""

from __future__ import annotations

import argparse

import numpy as np
from tqdm import tqdm

from pagedkv.bench import Report
from pagedkv.core.config import CacheConfig
from pagedkv.core.pool import KVCachePool
from pagedkv.core.sequence import SequenceManager
from pagedkv.labs import costs
from pagedkv.labs.experiments import popular_system_prompts
from pagedkv.labs.tiers import HostTier
from pagedkv.model.tinylm import TinyLM

# the table's floats: MiB with two decimals, milliseconds with one
DIGITS = {"offload MiB": 2, "MiB/reload": 2, "reload ms": 1, "recompute ms": 1}
HELP = "a host-memory second tier: prefix hit rate per tier and bytes moved per request"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--num-pages", type=int, default=64, help="pages in the pool (GPU tier)")
    parser.add_argument("--host-pages", default="64,256", help="host tier sizes in pages, comma-separated")
    parser.add_argument("--page-size", type=int, default=16)
    parser.add_argument("--num-prompts", type=int, default=32, help="distinct system prompts")
    parser.add_argument("--prompt-length", type=int, default=64, help="tokens per system prompt")
    parser.add_argument("--policy", default="lru", choices=["lru", "mru"], help="the host tier's policy")
    parser.add_argument("--model", default="Llama-3-8B", help="bytes per token of this model")
    parser.add_argument("--gpu", default="A100-40GB", help="host link and FLOP/s of this GPU")


def admit_all(requests, num_pages: int, page_size: int, host_pages: int, policy: str) -> dict:
    """Admit and free each request in turn through a pool (and a host tier if host_pages)."""
    pool = KVCachePool(CacheConfig.bookkeeping(num_pages, page_size))
    seqs = SequenceManager(pool)
    tier = HostTier(pool, host_pages * pool.config.kv_bytes // num_pages, policy) if host_pages else None
    reloads: dict[int, int] = {}  # pages reloaded by one request -> requests that reloaded that many
    after_pool_hit = 0  # reloads whose prompt's first pages were still in the pool (a pool hit)
    for r in requests:
        if tier is not None:
            got = tier.load_prefix(r.prompt_token_ids)
            pages = got["reload_bytes"] // tier.page_bytes
            if pages:
                reloads[pages] = reloads.get(pages, 0) + 1
                after_pool_hit += got["gpu_hit_tokens"] > 0
        seqs.add(r.req_id, r.prompt_token_ids)
        seqs.free(r.req_id)
    seqs.check_invariants()
    queried = sum(r.prompt_len for r in requests)
    host = tier.stats if tier is not None else None
    host_tokens = host.host_hit_tokens if host else 0
    return {
        "host_pages": host_pages,
        "gpu_hit_rate": (pool.stats.prefix_hits - host_tokens) / queried,
        "host_hit_rate": host_tokens / queried,
        "offload_pages": host.offloaded_pages if host else 0,
        "reload_pages": host.reload_bytes // tier.page_bytes if tier is not None and host else 0,
        "dropped_pages": host.dropped_pages if host else 0,
        "kept_pages": host.kept_pages if host else 0,
        "pool_evictions": pool.stats.evictions,
        "reloads": {str(k): reloads[k] for k in sorted(reloads)},
        "reloads_after_pool_hit": after_pool_hit,
    }


def exact_check(seed: int) -> bool:
    """TinyLM through an 8-page pool and a 16-page host tier equals the reference, token for token."""
    model = TinyLM()
    pool = KVCachePool(model.cache_config(8, 4))
    seqs, tier = SequenceManager(pool), HostTier(pool, 16 * pool.config.kv_bytes // 8)
    rng = np.random.default_rng(seed)
    prefixes = [rng.integers(0, 256, 8).tolist() for _ in range(3)]
    prompts = [prefixes[i % 3] + rng.integers(0, 256, 3).tolist() for i in range(9)]
    same = True
    for i, prompt in enumerate(prompts):
        tier.load_prefix(prompt)
        out = model.generate(seqs, [prompt], 4, seq_ids=[i])[i]
        same &= out == model.generate_reference(prompt, 4)
    return bool(same and tier.stats.host_hit_tokens > 0)


def _row(
    size: int, out: dict, page_size: int, page_bytes: float, requests: int, model: str, gpu: str
) -> list[object]:
    """One configuration: hit rates, MiB offloaded per request (all `requests`), the requests
    that reloaded pages, and per such reload: MiB, and the time to reload or to recompute its
    tokens on `model` and `gpu` (each reload costed on its own, then averaged)."""
    by_pages = {int(k): n for k, n in out["reloads"].items()}
    reloads = sum(by_pages.values())

    def per_reload(key: str) -> float:
        total = sum(n * costs.preemption_costs(model, gpu, p * page_size)[key] for p, n in by_pages.items())
        return round(1e3 * total / reloads, 2) if reloads else 0.0

    return [
        f"{size} host pages" if size else "pool only",
        round(100 * out["gpu_hit_rate"], 1),
        round(100 * out["host_hit_rate"], 1),
        round(out["offload_pages"] * page_bytes / requests / 2**20, 2),
        reloads,
        round(out["reload_pages"] * page_bytes / reloads / 2**20, 2) if reloads else 0.0,
        per_reload("reload_s"),
        per_reload("recompute_s"),
    ]


def run(
    *,
    quick: bool = False,
    seed: int = 0,
    requests: int = 1000,
    num_pages: int = 64,
    host_pages: str = "64,256",
    page_size: int = 16,
    num_prompts: int = 32,
    prompt_length: int = 64,
    policy: str = "lru",
    model: str = "Llama-3-8B",
    gpu: str = "A100-40GB",
) -> Report:
    if quick:
        requests = 300
    sizes = [0, *(int(x) for x in str(host_pages).split(","))]
    page_bytes = page_size * costs.bytes_per_token(model)  # ValueError for an unknown model
    costs.gpu_spec(gpu)
    workload = popular_system_prompts(requests, num_prompts, prompt_length, seed)
    data = {
        size: admit_all(workload, num_pages, page_size, size, policy)
        for size in tqdm(sizes, desc="tiers", disable=None)
    }
    exact = exact_check(seed)
    return Report(
        title=(
            f"bench tiers: {requests} requests after {num_prompts} Zipf-popular system prompts of "
            f"{prompt_length} tokens;\n  pool of {num_pages} pages x {page_size}; host tier {policy}; "
            f"MiB for {model}, ms on {gpu}"
        ),
        columns=[
            "tiers",
            "pool hit %",
            "host hit %",
            "offload MiB/req",
            "reloads",
            "MiB/reload",
            "reload ms/reload",
            "recompute ms same tokens",
        ],
        rows=[_row(size, out, page_size, page_bytes, requests, model, gpu) for size, out in data.items()],
        notes=[
            f"generation through a two-tier cache equals TinyLM.generate_reference: {exact}",
            f"/req: over all {requests} requests; reloads: requests that copied at least one page\n"
            "  back; /reload: averaged over those requests",
            "reload ms: a request's reloaded pages over the host link; recompute ms: the same\n"
            "  tokens as a prefill alone, which reads every weight once (pagedkv.labs.costs)",
        ],
        data={
            "runs": {str(k): v for k, v in data.items()},
            "exact": exact,
            "requests": requests,
        },
        plotter=figure,
        digits=DIGITS,
    )


def figure(report: Report):
    """Stacked bars per configuration: prompt tokens served by the pool and by the host tier."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    runs = report.data["runs"]
    labels = [("pool only" if k == "0" else f"+ host {k} pages") for k in runs]
    gpu = np.array([100 * v["gpu_hit_rate"] for v in runs.values()])
    host = np.array([100 * v["host_hit_rate"] for v in runs.values()])
    fig = Figure(
        figsize=(8.5, 3.3), dpi=100
    )  # 850 px, not shrunk in a cell; short: with its table, one screen
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    ax.bar(labels, gpu, color="#0072B2", label="hit in the pool (GPU)")
    ax.bar(labels, host, bottom=gpu, color="#E69F00", label="hit in the host tier (copied back)")
    for x, (g, h) in enumerate(zip(gpu, host)):
        ax.text(x, g + h + 1, f"{g + h:.0f}%", ha="center", fontsize=12)
    ax.set_ylabel("% of prompt tokens", fontsize=12)
    ax.set_ylim(0, 100)
    ax.tick_params(labelsize=12)
    ax.legend(fontsize=12, loc="upper left")
    ax.set_title("A second memory tier: prefix hits the pool alone would have lost", fontsize=13)
    fig.tight_layout()
    return fig


def hits_text(runs: dict, width: int = 90) -> str:
    """What the runs' hit rates show, in two sentences: the pool's own hit rate in each run
    (one number when the tier leaves it unchanged), then the host tier's hits on top and the
    two together. `runs` is a report's data["runs"] (keys: host pages, "0" without a tier)."""
    import textwrap

    pool = {k: 100 * v["gpu_hit_rate"] for k, v in runs.items()}
    tiers = [k for k in runs if k != "0"]
    if len({round(v, 9) for v in pool.values()}) == 1:
        first = (
            f"The pool hits {pool['0']:.0f} % of prompt tokens in all {len(runs)} runs,"
            " with or without a tier."
        )
    else:
        first = "The pool hits " + ", ".join(f"{v:.0f} % with {k} host pages" for k, v in pool.items()) + "."
    host = " and ".join(f"{100 * runs[k]['host_hit_rate']:.1f} % with {k} host pages" for k in tiers)
    total = " and ".join(f"{pool[k] + 100 * runs[k]['host_hit_rate']:.0f} %" for k in tiers)
    second = f"The tier's hits come on top: {host}, so {total} in all."
    return textwrap.fill(f"{first} {second}", width)
