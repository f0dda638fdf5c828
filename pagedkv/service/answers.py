"""The JSON answers of the HTTP API: a sequence, and a pool snapshot (paged by sequence).

Plain dicts of JSON types built from the core's public objects (`Sequence`,
`PoolSnapshot`), so the engine, the idempotency store (which keeps answers in the log) and
the tests share one shape. vLLM's OpenAI server builds its pydantic response models the
same way. Leaves out: the K/V themselves (a snapshot describes pages, not their contents).
"""

from __future__ import annotations

from pagedkv.core.observe.snapshot import PoolSnapshot
from pagedkv.core.sequence import Sequence
from pagedkv.model.tinylm import TinyLM


def describe(seq: Sequence) -> dict:
    """A sequence as the API returns it."""
    return {
        "seq_id": seq.seq_id,
        "token_ids": list(seq.token_ids),
        "text": TinyLM.decode(seq.token_ids),
        "block_table": list(seq.block_table),
        "num_tokens": seq.num_tokens,
        "num_prompt_tokens": seq.num_prompt_tokens,
        "num_cached_tokens": seq.num_cached_tokens,
        "num_computed_tokens": seq.num_computed_tokens,
        "parent": seq.parent,
    }


def snapshot_json(snap: PoolSnapshot, offset: int = 0, limit: int | None = None) -> dict:
    """A PoolSnapshot as JSON-ready data (page arrays as lists; state codes FREE 0, ACTIVE 1,
    CACHED 2); block tables of sequences [offset, offset + limit) only, when limit is given."""
    seq_ids = list(snap.seq_ids)
    end = len(seq_ids) if limit is None else min(len(seq_ids), offset + limit)
    shown = seq_ids[offset:end]
    arrays = ("state", "fill", "ref_count", "owner", "lru_rank", "hashed", "last_access")
    return {
        "clock": snap.clock,
        "num_pages": snap.num_pages,
        "page_size": snap.page_size,
        **{name: getattr(snap, name).tolist() for name in arrays},
        "seq_ids": seq_ids,  # all of them: `owner` indexes into this list
        "num_sequences": len(seq_ids),
        "offset": offset,
        "next_offset": end if end < len(seq_ids) else None,
        "block_tables": {str(k): list(snap.block_tables[k]) for k in shown},
        "num_cached_tokens": {str(k): snap.num_cached_tokens[k] for k in shown},
        "cow_log": [list(pair) for pair in snap.cow_log],
        "stats": snap.stats,
        "usage": snap.usage,
        "token_usage": snap.token_usage,
    }


def describe_error(response: object, width: int = 88) -> str:
    """An error answer of the API as a reader sees it: the status line (status, `error`,
    Retry-After), the field a 422 names, then the message wrapped between words. `response`
    is an HTTP client's response (`status_code`, `reason_phrase`, `headers`, `json()`)."""
    import textwrap

    body = response.json()  # type: ignore[attr-defined]
    retry = response.headers.get("retry-after")  # type: ignore[attr-defined]
    lines = [
        f"HTTP {response.status_code} {response.reason_phrase} | error: {body['error']} "  # type: ignore[attr-defined]
        f"| Retry-After: {retry}"
    ]
    detail = body["detail"]
    if isinstance(detail, list):  # a 422 of a bad field names it
        lines.append(f"  loc: {detail[0]['loc']}")
        detail = detail[0]["msg"]
    lines.append(textwrap.fill(detail, width, initial_indent="  ", subsequent_indent="  "))
    return "\n".join(lines)
