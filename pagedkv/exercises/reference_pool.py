"""A plain reference model of the page-pool rules in docs/design.md, written independently of pagedkv.

It uses no hashing at all: a full block is named by the whole token prefix it ends
(plus the extra key), which is what a chained hash stands for, minus collisions. Pages are
dicts, the free list is a set, the eviction order a Python list. Slow and obvious on
purpose: it is the oracle the state-machine test holds the real pool to.
"""

from __future__ import annotations


class OutOfPages(Exception):
    pass


class ReferencePool:
    def __init__(self, num_pages: int, page_size: int, caching: bool = True, policy: str = "lru"):
        self.num_pages, self.page_size, self.caching, self.policy = num_pages, page_size, caching, policy
        self.ref = [0] * num_pages
        self.tokens: list[list[int]] = [[] for _ in range(num_pages)]
        self.key: list[tuple | None] = [None] * num_pages  # prefix a full page ends
        self.free = set(range(num_pages))
        self.evictable: list[int] = []  # release order, oldest first
        self.index: dict[tuple, int] = {}
        self.tables: dict[object, list[int]] = {}
        self.seq_tokens: dict[object, list[int]] = {}
        self.extra: dict[object, object] = {}
        self.cow_log: list[tuple[int, int]] = []
        self.stats = dict(allocations=0, evictions=0, prefix_queries=0, prefix_hits=0, cow_copies=0)

    # -- helpers ---------------------------------------------------------------------------
    def state(self, pid: int) -> str:
        if pid in self.free:
            return "FREE"
        return "ACTIVE" if self.ref[pid] else "CACHED"

    def eviction_order(self) -> list[int]:
        return list(self.evictable) if self.policy == "lru" else list(reversed(self.evictable))

    def _take_page(self) -> int:
        if self.free:
            pid = min(self.free)
            self.free.remove(pid)
        else:
            pid = self.evictable.pop(0) if self.policy == "lru" else self.evictable.pop()
            key = self.key[pid]
            assert key is not None  # an evictable page is full, so it has a key
            del self.index[key]
            self.key[pid] = None
            self.tokens[pid] = []
            self.stats["evictions"] += 1
        self.ref[pid] = 1
        self.stats["allocations"] += 1
        return pid

    def _seal(self, pid: int, extra: object, prefix: list[int]) -> None:
        """A page just became full: name it by its prefix and index it unless taken."""
        if self.caching:
            key = (extra, tuple(prefix))
            self.key[pid] = key
            self.index.setdefault(key, pid)

    # -- operations ------------------------------------------------------------------------
    def add(self, seq, tokens: list[int], extra=None) -> int:
        ps = self.page_size
        hits: list[int] = []
        if self.caching:
            for i in range((len(tokens) - 1) // ps):
                pid = self.index.get((extra, tuple(tokens[: (i + 1) * ps])))
                if pid is None:
                    break
                hits.append(pid)
        need = -(-len(tokens) // ps) - len(hits)
        revived = sum(1 for p in hits if self.state(p) == "CACHED")
        if need > len(self.free) + len(self.evictable) - revived:
            raise OutOfPages
        for pid in hits:
            if self.state(pid) == "CACHED":
                self.evictable.remove(pid)
            self.ref[pid] += 1
        # All pages are taken (evicting as needed) before any is written, as vLLM allocates
        # a request's blocks and only then caches the full ones.
        table = list(hits) + [self._take_page() for _ in range(need)]
        for i in range(len(hits), len(table)):
            pid = table[i]
            self.tokens[pid] = tokens[i * ps : (i + 1) * ps]
            if len(self.tokens[pid]) == ps:
                self._seal(pid, extra, tokens[: (i + 1) * ps])
        self.tables[seq], self.seq_tokens[seq], self.extra[seq] = table, list(tokens), extra
        if self.caching:
            self.stats["prefix_queries"] += len(tokens)
            self.stats["prefix_hits"] += len(hits) * ps
        return len(hits) * ps

    def append(self, seq, token: int) -> None:
        ps, table, toks = self.page_size, self.tables[seq], self.seq_tokens[seq]
        full = len(toks) % ps == 0
        shared = not full and self.ref[table[-1]] > 1
        if (full or shared) and not (self.free or self.evictable):
            raise OutOfPages
        if full:
            table.append(self._take_page())
        elif shared:
            old = table[-1]
            new = self._take_page()
            self.tokens[new] = list(self.tokens[old])
            self.ref[old] -= 1
            table[-1] = new
            self.cow_log.append((old, new))
            self.stats["cow_copies"] += 1
        toks.append(token)
        self.tokens[table[-1]].append(token)
        if len(self.tokens[table[-1]]) == ps:
            self._seal(table[-1], self.extra[seq], toks)

    def fork(self, parent, child) -> None:
        for pid in self.tables[parent]:
            self.ref[pid] += 1
        self.tables[child] = list(self.tables[parent])
        self.seq_tokens[child] = list(self.seq_tokens[parent])
        self.extra[child] = self.extra[parent]

    def free_seq(self, seq) -> None:
        for pid in reversed(self.tables.pop(seq)):
            self.ref[pid] -= 1
            if self.ref[pid]:
                continue
            key = self.key[pid]
            if key is not None and self.index.get(key) == pid:
                self.evictable.append(pid)
            else:
                self.key[pid] = None
                self.tokens[pid] = []
                self.free.add(pid)
        del self.seq_tokens[seq], self.extra[seq]
