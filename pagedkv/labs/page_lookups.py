"""Block-table entries against prefix reuse, per page size: the numbers of notebook 01's
note on SGLang's pages of 1.

A prompt of n tokens needs ceil(n / page_size) block-table entries, each read for every
layer at every decode step. A cached prefix is reused only in whole pages: of s shared
tokens, (s // page_size) * page_size. Pages of 1 pay one entry per token and reuse every
shared token. Leaves out: the rule that a hit never covers a prompt's last token.
"""

from __future__ import annotations

from pagedkv.core.slot_mapping import num_blocks


def entries_and_reuse(
    prompt: int, shared: int, page_sizes: tuple[int, ...] = (1, 16)
) -> dict[int, tuple[int, int]]:
    """page_size -> (block-table entries of a `prompt`-token prompt, tokens of its `shared`
    cached prefix reused in whole pages). Example: entries_and_reuse(300, 250)[16] == (19, 240)."""
    if not 0 <= shared <= prompt or min(page_sizes, default=1) < 1:
        raise ValueError(f"need 0 <= shared <= prompt, page sizes >= 1: {shared}, {prompt}, {page_sizes}")
    return {p: (num_blocks(prompt, p), shared // p * p) for p in page_sizes}


def entries_and_reuse_text(
    prompt: int = 300, shared: int = 250, page_sizes: tuple[int, ...] = (1, 16)
) -> str:
    """`entries_and_reuse` as a small table, one row per page size."""
    lines = [
        f"a {prompt}-token prompt whose first {shared} tokens are cached:",
        "page_size  block-table entries  cached tokens reused",
    ]
    for p, (entries, reused) in entries_and_reuse(prompt, shared, page_sizes).items():
        lines.append(f"{p:9d}  {entries:19d}  {reused:20d}")
    return "\n".join(lines)
