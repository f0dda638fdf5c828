"""S3-FIFO's queues over time on a real stream, for the eviction lab's scan picture.

`s3fifo_timeline` replays a stream with S3-FIFO, one request at a time, and after each
request records the sizes of its queues S, M and G (from the policy's public `queues()`)
and how many victims that request's run took from S and from M. `plot_timeline` draws a
window of those rows: one bar per request for the victims, a line per queue size, and the
requests of the scan's one-off bursts shaded. `ghost_bound_rates` prices pagedkv's smaller
G against the paper's, in hit rate; `paper_ghost_seeds` does so on several seeds.

Leaves out: what happens inside a request (sizes are read once its pages are released).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from matplotlib.figure import Figure

from pagedkv.core.sequence import SequenceManager
from pagedkv.labs.eviction_policies import S3FIFOEvictionPolicy
from pagedkv.labs.hit_rate_lab import lab_pool, replay, serve_one_at_a_time, source
from pagedkv.labs.lab_workloads import LabRequest, lab_workload


def s3fifo_timeline(
    requests: Sequence[LabRequest], cache_tokens: int, page_size: int = 16
) -> list[dict[str, Any]]:
    """Replay `requests` with S3-FIFO; one row per request: its `source` ("zipf", "scan",
    ...), the sizes `S`, `M`, `G` after it, its victims `from S` and `from M`, and
    `cached`, the evictable pages the policy holds after it (S and M together)."""
    pool = lab_pool(requests, cache_tokens, "s3fifo", page_size)
    policy = pool.eviction
    assert isinstance(policy, S3FIFOEvictionPolicy)
    taken = {"S": 0, "M": 0}
    pop = policy.pop_victim

    def counted_pop() -> int:  # note which queue each victim leaves
        small = set(policy.queues()["S"])
        victim = pop()
        taken["S" if victim in small else "M"] += 1
        return victim

    policy.pop_victim = counted_pop  # type: ignore[method-assign]
    seqs, rows = SequenceManager(pool), []
    for request in requests:
        before = dict(taken)
        serve_one_at_a_time(seqs, [request])
        queues = policy.queues()
        rows.append(
            {
                "source": source(request),
                **{q: len(queues[q]) for q in ("S", "M", "G")},
                "from S": taken["S"] - before["S"],
                "from M": taken["M"] - before["M"],
                "cached": len(policy),
            }
        )
    return rows


S_GREY, M_GREY = "#404040", "#a6a6a6"  # queue S dark grey, M light grey: lines and victim bars


def plot_timeline(
    rows: list[dict[str, Any]],
    first: int,
    last: int,
    share: float,
    share_label: str | None = None,
    mark: tuple[int, str] | None = None,
) -> Figure:
    """Rows `first` to `last` (inclusive) of `s3fifo_timeline`: on top, S, M and G's sizes as
    lines (G's hollow rings around M's line, drawn on top, when they are equal) and S's share
    (`share` pages) as a dotted line labelled `share_label` under its right end; below, on its own
    axis, the victims from S and from M as bars per request. Scan requests shaded. `mark` (request, text)
    points an arrow at that request's M and labels it. 8.4 x 3.8 inches at 100 dpi; both
    panels carry request numbers on their x axis."""
    fig = Figure(figsize=(8.4, 3.8), dpi=100, layout="constrained")
    top, low = fig.subplots(2, 1, sharex=True, height_ratios=(2, 1))
    xs = list(range(first, last + 1))
    window = rows[first : last + 1]
    for ax in (top, low):
        for x, row in zip(xs, window, strict=True):
            if row["source"] == "scan":
                ax.axvspan(x - 0.5, x + 0.5, color="#fff0b3", lw=0)  # pale yellow: no queue grey
        ax.tick_params(labelsize=12)
        ax.grid(axis="y", alpha=0.3)
    # Greys for the queues, as no policy line in bench eviction's figure is grey (its leaf-lru band
    # lies under LRU's black line), so no queue reads as a policy; G a purple no policy uses.
    styles = {"S": (S_GREY, "-", "o", 5), "M": (M_GREY, "-", "s", 5), "G": ("#6a3d9a", ":", "o", 10)}
    for q, (colour, dash, marker, ms) in styles.items():
        sizes = [r[q] for r in window]
        hollow = {"mfc": "none", "mew": 1.5} if q == "G" else {}
        on_m = q == "G" and sizes == [r["M"] for r in window]
        ax_label = f"{'hashes' if q == 'G' else 'pages'} in {q}" + (" (rings on M's line)" if on_m else "")
        z = 3 if q == "M" else 2  # M's line drawn over G's rings, so both show
        top.plot(
            xs, sizes, color=colour, ls=dash, marker=marker, ms=ms, lw=2, label=ax_label, zorder=z, **hollow
        )
    top.axhline(share, color="#555555", ls=(0, (1, 3)), lw=1.5)
    # label under the line's right end, clear of the queues' lines (above the share in the scan)
    label = share_label or f"S's share ({share:g})"
    top.text(last, share - 1.5, label, fontsize=12, color="#333333", ha="right", va="top")
    top.set_ylim(0, max(max(r["S"], r["M"], r["G"]) for r in window) + 35)  # room for the legend
    top.set_ylabel("pages", fontsize=12)
    top.tick_params(labelbottom=True)  # request numbers on the top panel too
    # the legend in one row above S's line, clear of the lines and the marked request's arrow
    top.legend(fontsize=12, ncols=3, loc="upper center", framealpha=0.95)
    from_s = [r["from S"] for r in window]
    low.bar(xs, from_s, width=0.7, color=S_GREY, label="victims from S")
    from_m = [r["from M"] for r in window]
    low.bar(xs, from_m, width=0.7, bottom=from_s, color=M_GREY, label="victims from M")
    low.set_ylabel("victims", fontsize=12)
    low.legend(fontsize=12, ncols=2, loc="upper center", framealpha=0.95)
    low.set_ylim(0, max(r["from S"] + r["from M"] for r in window) * 2.6)  # the legend above the bars
    low.set_xlim(first - 0.5, last + 0.5)
    low.set_xlabel("request (shaded: a one-off prompt)", fontsize=12)
    if mark is not None:
        x, text = mark
        arrow = {"arrowstyle": "->", "color": "#333333", "lw": 1.5, "relpos": (0, 0)}
        top.annotate(text, (x, rows[x]["M"]), (x + 1.5, 72), fontsize=12, arrowprops=arrow)
    top.set_title("S3-FIFO's queues after each request of the scan stream", fontsize=13)
    return fig


def ghost_bound_rates(
    streams: dict[str, Sequence[LabRequest]], cache_tokens: int, page_size: int = 16
) -> dict[str, dict[str, float]]:
    """Each stream's S3-FIFO hit rate with G's two bounds: "pagedkv" (G keeps at most as many
    hashes as M holds pages now, at least one) and "paper" (up to M's capacity, 90 % of the
    pool, as in the paper's Algorithm 1)."""
    return {
        name: {
            "pagedkv": replay(requests, cache_tokens, S3FIFOEvictionPolicy(), page_size).hit_rate,
            "paper": _paper_bound_rate(requests, cache_tokens, page_size),
        }
        for name, requests in streams.items()
    }


def _paper_bound_rate(requests: Sequence[LabRequest], cache_tokens: int, page_size: int) -> float:
    """S3-FIFO's hit rate with the paper's G bound: up to M's capacity, 90 % of the pool."""
    policy = S3FIFOEvictionPolicy(1 - S3FIFOEvictionPolicy.SMALL_SHARE)
    return replay(requests, cache_tokens, policy, page_size).hit_rate


def paper_ghost_seeds(
    stream: str, cache_tokens: int, seeds: Sequence[int] = (0, 1, 2), page_size: int = 16
) -> list[float]:
    """S3-FIFO's hit rate with the paper's G bound (90 % of the pool) on each seed of `stream`,
    in percent, rounded to 0.1 as the winner rule reads it. Example:
    paper_ghost_seeds("scan", 2048) -> [31.5, 30.6, 31.7]."""
    return [
        round(100 * _paper_bound_rate(lab_workload(stream, seed=s), cache_tokens, page_size), 1)
        for s in seeds
    ]
