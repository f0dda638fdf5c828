"""The eviction lab's printouts: each takes numbers a notebook cell computed (or computes
them with the lab's own functions) and returns the lines the cell prints, so that the cell
stays a few lines long.

Leaves out: any number of its own; every rate comes from `replay` or the bench report.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pagedkv.labs.hit_rate_lab import hit_rates_by, make_policy, replay
from pagedkv.labs.lab_workloads import LabRequest, mixed_traffic, multi_turn_chat, scan_mix
from pagedkv.labs.pin_coverage import PinCoverage
from pagedkv.labs.policy_check import SECTION_4, RevivedLast
from pagedkv.labs.seed_check import call_winner, seed_rates, verdict

Table = dict[str, dict[str, float]]


def gains_over_lru(table: Table) -> tuple[Table, Table]:
    """Each rate in percent with one decimal (as the table prints it), and each policy's
    points over LRU, the difference of those printed rates."""
    pct = {w: {p: round(100 * r, 1) for p, r in rates.items()} for w, rates in table.items()}
    gain = {w: {p: round(pct[w][p] - pct[w]["lru"], 1) for p in rates} for w, rates in pct.items()}
    return pct, gain


def tokens_saved(requests: Sequence[LabRequest], cache_tokens: int, policy: str) -> int:
    """Prompt tokens `policy` serves from the cache beyond what LRU serves."""
    return replay(requests, cache_tokens, policy).hit_tokens - replay(requests, cache_tokens).hit_tokens


def gains_text(pct: Table, gain: Table, saved: int, scan_tokens: int) -> str:
    """Each stream's LRU rate and the points ARC, S3-FIFO and LFU gain over it; then what
    ARC's points on the scan are in tokens."""
    lines = [
        f"{w:5s} LRU {pct[w]['lru']:5.1f}%   points over LRU: arc {gain[w]['arc']:+5.1f}"
        f"  s3fifo {gain[w]['s3fifo']:+5.1f}  lfu {gain[w]['lfu']:+5.1f}"
        for w in pct
    ]
    lines.append(
        "a point = 10 of every 1,000 prompt tokens served, not prefilled: on the scan, ARC's"
        f" {gain['scan']['arc']:+.1f}\n  points are {saved:,} fewer tokens to prefill"
        f" of its {scan_tokens:,} prompt tokens"
    )
    return "\n".join(lines)


def mix_rates(mix: Sequence[LabRequest], chat: Sequence[LabRequest], cache_tokens: int) -> dict[str, Any]:
    """The mix replayed with six policies ("rates"), LRU and ARC on seeds 0, 1 and 2 in
    percent ("seeds"), chat's share of the mix's prompt tokens ("chat share") and the hit
    rate of chat's requests in the mix under LRU and ARC ("chat in mix")."""
    policies = ("lru", "fifo", "lfu", "arc", "s3fifo", "lru+pin")
    rates = {p: replay(mix, cache_tokens, make_policy(p, mix, cache_tokens, 16)).hit_rate for p in policies}
    later = seed_rates(["mix"], [cache_tokens], seeds=(1, 2), policies=("lru", "arc"))
    seeds = [{p: round(100 * rates[p], 1) for p in ("lru", "arc")}, *later["mix", cache_tokens]]
    tokens = sum(len(r.prompt_token_ids) for r in chat) / sum(len(r.prompt_token_ids) for r in mix)
    in_mix = {p: hit_rates_by(mix, cache_tokens, policy=p)["chat"] for p in ("lru", "arc")}
    return {"requests": len(mix), "rates": rates, "seeds": seeds, "chat share": tokens, "chat in mix": in_mix}


def chat_share_sweep(
    cache_tokens: int, scan_requests: Sequence[int] = (300, 96, 36), seeds: Sequence[int] = (0, 1, 2)
) -> list[tuple[float, list[dict[str, float]]]]:
    """For each length of the mix's scan part (shorter: more chat), chat's share of the mix's
    prompt tokens on seed 0 and LRU's and ARC's hit rates in percent on each seed."""
    rows = []
    for n in scan_requests:
        mixes = [mixed_traffic(seed, scan_requests=n) for seed in seeds]
        chat = [r for r in mixes[0] if r.req_id.startswith("chat")]
        share = sum(len(r.prompt_token_ids) for r in chat) / sum(len(r.prompt_token_ids) for r in mixes[0])
        rate = {
            (i, p): replay(m, cache_tokens, p).hit_rate for i, m in enumerate(mixes) for p in ("lru", "arc")
        }
        runs = [{p: round(100 * rate[i, p], 1) for p in ("lru", "arc")} for i in range(len(mixes))]
        rows.append((share, runs))
    return rows


def sweep_text(rows: list[tuple[float, list[dict[str, float]]]], scan_requests: Sequence[int] = ()) -> str:
    """`chat_share_sweep`'s rows: chat's share, ARC minus LRU on each seed, the verdict; with
    `scan_requests` (as passed to the sweep), a last line per row counts the mix's requests."""
    lines = ["chat's share   arc minus lru on seeds 0, 1, 2 (points)   verdict, LRU vs ARC only"]
    for share, runs in rows:
        gaps = "".join(f"{r['arc'] - r['lru']:+6.1f}" for r in runs)
        lines.append(f"  {share:10.0%}   {gaps:38s}  {verdict(call_winner(runs))}")
    counts = [len(scan_mix(n, seed=0)) for n in scan_requests]
    if counts:
        chat = len(multi_turn_chat(seed=0))
        lines.append("requests per mix, by row: " + ", ".join(f"{chat} chat + {c} scan" for c in counts))
    return "\n".join(lines)


def mix_text(m: dict[str, Any], chat_alone: float) -> str:
    """`mix_rates`'s numbers as lines, LRU and ARC on each seed as a table with ARC's gap;
    `chat_alone` is LRU's rate on chat alone."""
    seeds = [
        f"  {seed:4d} {r['lru']:5.1f}% {r['arc']:5.1f}% {r['arc'] - r['lru']:+6.1f}"
        for seed, r in enumerate(m["seeds"])
    ]
    in_mix = m["chat in mix"]
    return "\n".join(
        [
            f"mix: {m['requests']} requests, hit rate at 2,048 tokens:",
            "  " + "  ".join(f"{p} {r:.1%}" for p, r in m["rates"].items()),
            "  seed    lru    arc    gap (points)",
            *seeds,
            f"chat's share of the mix's prompt tokens: {m['chat share']:.0%}",
            f"chat's requests in the mix (seed 0): LRU {in_mix['lru']:.1%}, ARC {in_mix['arc']:.1%}"
            f" (chat alone: LRU {chat_alone:.1%})",
        ]
    )


def pin_margins(
    runs: dict[tuple[str, int], list[dict[str, float]]], sizes: Sequence[int]
) -> tuple[dict, dict]:
    """On chat at each size: lru+pin minus LRU (points) on each seed, and their mean."""
    margins = {s: [round(r["lru+pin"] - r["lru"], 1) for r in runs["chat", s]] for s in sizes}
    return margins, {s: round(sum(m) / len(m), 1) for s, m in margins.items()}


def pins_text(table: Table, pins: dict[str, int]) -> str:
    """Per stream: LRU, lru+pin, S3-FIFO, ARC and LFU's rates, the pins and two gains."""
    lines = ["stream    lru  lru+pin  s3fifo     arc     lfu  lru+pin gain  ARC gain"]
    for w in table:
        t = {p: round(100 * table[w][p], 1) for p in ("lru", "lru+pin", "s3fifo", "arc", "lfu")}
        lines.append(
            f"{w:5s} {t['lru']:5.1f}% {t['lru+pin']:7.1f}% {t['s3fifo']:6.1f}% {t['arc']:6.1f}%"
            f" {t['lfu']:6.1f}% {t['lru+pin'] - t['lru']:+13.1f} {t['arc'] - t['lru']:+9.1f}"
        )
    pinned = sorted(set(pins.values()))
    lines += [
        f"pinned: {', '.join(map(str, pinned))} pages on every stream's pin list (at most a quarter of 128)",
        "gains: points over LRU, the difference of the rates printed",
    ]
    return "\n".join(lines)


def pin_seed_text(runs: dict, sizes: Sequence[int]) -> str:
    """Chat's pin margins (lru+pin minus LRU) per seed, their mean and the rule's verdict at
    each size, one line per size."""
    lines = ["chat, lru+pin minus lru (points) on seeds 0, 1, 2, their mean, and the rule's verdict:"]
    margins, means = pin_margins(runs, sizes)
    for s in sizes:
        lines.append(
            f"  {s:5,d} " + " ".join(f"{d:+5.1f}" for d in margins[s])
            + f"   mean {means[s]:+.1f}   {verdict(call_winner(runs['chat', s]))}"
        )  # fmt: skip
    return "\n".join(lines)


def pin_split(requests: Sequence[LabRequest], cache_tokens: int, group: Callable) -> tuple[dict, dict]:
    """Prompt-token hit rate of each `group` under LRU, lru+pin and ARC, and with a cache
    that never evicts."""
    split = {
        p: hit_rates_by(requests, cache_tokens, group, make_policy(p, requests, cache_tokens, 16))
        for p in ("lru", "lru+pin", "arc")
    }
    return split, hit_rates_by(requests, 1 << 16, group)


def coverage_text(cover: PinCoverage, pinned: int, requests: int, split: dict, never: dict) -> str:
    """What `pinned` pins hold of zipf's prompts, and `pin_split`'s rates, as lines."""
    whole = len(cover.whole)
    lines = [
        f"{requests} requests use {len(cover.rank)} of the 24 system prompts; {pinned} pinned"
        f" pages hold {whole} of them whole ({6 * whole} pages),"
    ]
    for k, pages in cover.partly.items():
        lines.append(
            f"  and the first {len(pages)} of the 6 pages of the prompt ranked {cover.place(k)} by use"
        )
    lines += [
        f"{cover.whole_users} of the {requests} requests use a pinned prompt;"
        f" {requests - cover.whole_users} use one of the {len(cover.rank) - whole} other prompts",
        "prompt-token hit rate of the requests with a pinned prompt, and with an other prompt:",
    ]
    for name, rates in (*split.items(), ("no eviction", never)):
        lines.append(
            f"  {name:11s} pinned prompts {rates['pinned']:6.1%}   other prompts {rates['others']:6.1%}"
        )
    return "\n".join(lines)


def cost_text(costs: dict[str, dict[str, int]], gain: dict[str, float]) -> str:
    """`bookkeeping`'s counts per policy as a table, with each policy's points over LRU."""
    lines = ["scan, 2,048  pts over LRU  hashes held  list writes  writes/request  pins passed/victim"]
    for p, c in costs.items():
        lines.append(
            f"  {p:8s} {gain[p]:+15.1f} {c['hashes held']:12d} {c['list writes']:12,d}"
            f" {c['list writes'] / c['requests']:15.1f} {c['pages skipped'] / c['victims']:19.1f}"
        )
    return "\n".join(lines)


def reference_rates(streams: dict[str, Sequence[LabRequest]], cache_tokens: int) -> dict[str, float]:
    """What the reference answer `RevivedLast` serves on each of `streams` at `cache_tokens`."""
    return {w: replay(streams[w], cache_tokens, RevivedLast()).hit_rate for w in streams}


def reference_text(
    yours: dict[str, float], streams: dict[str, Sequence[LabRequest]], cache_tokens: int
) -> str:
    """Whether `yours` (hit rate per stream) equals, rate for rate, what the reference answer
    `RevivedLast` serves on `streams` at `cache_tokens`: "matches the reference (chat 46.1 /
    zipf 68.9 / ...)" in the streams' order, else the streams where it differs."""
    order = list(streams)
    ref = reference_rates(streams, cache_tokens)
    differ = [w for w in order if yours.get(w) != ref[w]]
    if differ:
        return f"differs from the reference solution ({SECTION_4}) on: " + ", ".join(differ)
    rates = " / ".join(f"{w} {100 * ref[w]:.1f}" for w in order)
    return f"matches the reference ({rates})"


def mine_box_pending() -> str:
    """The line the check cell prints while the learner's Mine differs from the reference. It
    names no stream: where the finished Mine beats LRU is the answer of a prediction that may
    still be open, and the box that says it opens only once that prediction is answered."""
    return (
        "The box on why the finished Mine wins where it does opens once your rates match the"
        " reference and you have answered the prediction above."
    )


def arc_tally_text(by_group: dict[str, Any], tally: dict[str, int]) -> str:
    """`arc_tally_by`'s counts as lines: ARC's victims and how many left T1; then, for the
    requests with a pinned prompt (one of those section 3's pins hold whole; ARC pins nothing)
    and with an other prompt, the pages hits revived and how many of them sat in T2."""
    victims = tally["evicted from T1"] + tally["evicted from T2"]
    lines = [f"ARC's victims: {victims}, of them {tally['evicted from T1']} from T1 (seen once)"]
    label = {"pinned": "the pinned prompts", "others": "the other prompts"}
    for g in ("pinned", "others"):
        revived = by_group[g]["revived from T1"] + by_group[g]["revived from T2"]
        lines.append(
            f"pages revived by a prefix hit for {label[g]:18s} {revived:4d},"
            f" of them {by_group[g]['revived from T2']:4d} sitting in T2"
        )
    return "\n".join(lines)


def streams_summary(curves: dict[str, dict[str, list[float]]]) -> str:
    """One line on where LRU's line sits in each panel of the eviction figure, over all its
    cache sizes: on top on a stream where no other policy is above it at any size; else how
    many of the other policies stay above it at every size, which are at or below it at every
    size, and which cross it (streams alike are named together). leaf-lru is left out (it is
    LRU, number for number), e.g. "LRU's line (black), leaf-lru not counted: on top on chat;
    under 4 of the 5 others on zipf, rag and scan at every size (fifo is at or below it at
    every size)"."""
    said: dict[str, list[str]] = {}
    for w, by_policy in curves.items():
        lru = by_policy["lru"]
        others = [p for p in by_policy if p not in ("lru", "leaf-lru")]
        rows = {p: list(zip(by_policy[p], lru, strict=True)) for p in others}
        above = [p for p in others if all(r > x for r, x in rows[p])]
        under = [p for p in others if all(r <= x for r, x in rows[p])]
        cross = [p for p in others if p not in above and p not in under]
        if not any(r > x for p in others for r, x in rows[p]):
            key = "on top on {}"
        else:
            parts = []
            if under:
                parts.append(f"{_names(under)} {_verb(under, 'is', 'are')} at or below it at every size")
            if cross:
                parts.append(f"{_names(cross)} {_verb(cross, 'crosses', 'cross')} it")
            why = f" ({'; '.join(parts)})" if parts else ""
            key = f"under {len(above)} of the {len(others)} others on {{}} at every size{why}"
        said.setdefault(key, []).append(w)
    streams = {k: _names(ws) for k, ws in said.items()}
    left_out = ", leaf-lru not counted" if any("leaf-lru" in c for c in curves.values()) else ""
    return f"LRU's line (black){left_out}: " + "; ".join(k.format(streams[k]) for k in said)


def _names(names: Sequence[str]) -> str:
    """ "a", "a and b", "a, b and c"."""
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]


def _verb(names: Sequence[str], one: str, many: str) -> str:
    return one if len(names) == 1 else many
