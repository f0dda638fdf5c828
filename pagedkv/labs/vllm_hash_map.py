"""A small model of vLLM v1's prefix index beside pagedkv's, for notebook 09b, section 1.

vLLM v1 keeps its cached blocks in a `BlockHashToBlockMap`: a block hash maps to a dict of
block ids, so two blocks with the same hash (a recomputed copy and its original) are both
indexed, and evicting one leaves the hash reachable through the other. pagedkv's hash chain
keeps one page per hash: a second page with a known hash stays out of the index.

`HashToPages` models both (`every_page=True` is vLLM v1's way). It is a model, not vLLM's
code: it keeps only the map, a block's hash is stood in for by the tuple of every token up
to the end of that block (equal exactly when two chained hashes are equal), and the caller
says which pages fill and which are evicted. `replay_corner` feeds it section 4's corner.
"""

from __future__ import annotations

from collections.abc import Sequence

Key = tuple[int, ...]  # the tokens from the start of the prompt to the end of a block


class HashToPages:
    """Block hash -> the pages indexed under it: all of them (`every_page=True`, as vLLM v1's
    `BlockHashToBlockMap`), or only the first (pagedkv's hash chain)."""

    def __init__(self, every_page: bool, page_size: int) -> None:
        self.every_page, self.page_size = every_page, page_size
        self.pages: dict[Key, dict[int, None]] = {}

    def insert(self, key: Key, page: int) -> bool:
        """Index a page that just filled; False when the index keeps it out."""
        held = self.pages.setdefault(key, {})
        if held and not self.every_page:
            return False
        held[page] = None
        return True

    def evict(self, page: int) -> None:
        """The page leaves the index (the pool reuses it)."""
        for key in [k for k, held in self.pages.items() if page in held]:
            del self.pages[key][page]
            if not self.pages[key]:
                del self.pages[key]

    def lookup(self, tokens: Sequence[int]) -> list[int]:
        """The pages of the prompt's longest cached prefix, one per block: walk the blocks
        from the first, stop at the first hash with no page."""
        found = []
        for end in range(self.page_size, len(tokens) + 1, self.page_size):
            held = self.pages.get(tuple(tokens[:end]))
            if not held:
                break
            found.append(next(iter(held)))
        return found

    def orphans(self) -> list[int]:
        """Indexed pages no lookup reaches, lowest id first: the lookup of the tokens a page
        ends stops before the page's block."""
        out: set[int] = set()
        for key, held in self.pages.items():
            if len(self.lookup(key)) < len(key) // self.page_size:
                out.update(held)
        return sorted(out)


def replay_corner(every_page: bool) -> dict:
    """Notebook 09, section 4's corner with pages of 2 tokens, in `HashToPages`:

    1. `first` writes [1, 2] into page 0, which fills and is indexed;
    2. `second`, the same prompt, recomputes it into page 1 (the last-token rule), then
       writes 3, 4 into page 2;
    3. page 0 is evicted;
    4. `third`, the prompt [1, 2, 3, 4, 5], looks up its whole pages but for the last
       token's: [1, 2, 3, 4].

    Returns the index after step 3 ({tokens: pages}), its orphans, and the pages step 4
    finds."""
    index = HashToPages(every_page, page_size=2)
    index.insert((1, 2), 0)
    index.insert((1, 2), 1)  # the copy
    index.insert((1, 2, 3, 4), 2)
    index.evict(0)
    return {
        "index": {key: list(held) for key, held in index.pages.items()},
        "orphans": index.orphans(),
        "third_finds": index.lookup([1, 2, 3, 4]),
    }
