"""K/V checksums: how recovery finds pages whose K/V are not the ones the log vouches for.

Under fsync "batch N" or "never", kv.bin is flushed only at a checkpoint and at close
(durable.py). After a power loss, a record that reached the disk may vouch for K/V that did
not; and K/V written for records that were lost may have reached the disk, over a page the
surviving state still caches. Either way a prefix hit on that page would read wrong K/V.

So each `computed` record carries `kv_crc`: for each page its newly computed tokens fall in,
`[page, slots, crc32]`, the CRC-32 (8 hex digits: `page_crc`) of that page's K/V in slots 0
to slots - 1 (every layer, K and V); an `append` that copies on write carries the copy's.
The manager keeps the newest entry per page (`DurableSequenceManager.kv_crc`; checkpoints
keep them too), and forgets a page's entry when the page is handed out again. At the end of
recovery `failed_pages` recomputes the CRC of every page that is not FREE and has an entry,
from kv.bin; `drop_failed` then makes sure no such page is served:

- a CACHED page turns FREE (it leaves the prefix index);
- each sequence holding an ACTIVE one goes back to "computed up to the page's first token",
  so that page's tokens, and the ones after, are computed again before it is served
  (`ServiceEngine` does this at start-up, before it answers anything).

Under fsync "always", K/V are flushed before the record vouching for them, so a page fails
only if the disk itself damaged it. PostgreSQL's page checksums (`initdb --data-checksums`)
catch damaged pages the same way, on read. Leaves out: checking pages during replay (kv.bin
holds the K/V as of the crash, not as of each record) and repairing a page from elsewhere.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable

import numpy as np

CACHED_STATE = 2  # PageState.CACHED, as export_state writes it


def page_crc(kv: np.ndarray, page: int, slots: int) -> str:
    """CRC-32 of a page's K/V in slots 0..slots-1 (kv: [layers, 2, pages, page_size, ...]), as
    8 hex digits. Example: a CRC of 0x1f -> "0000001f".

    NOTE: fixed width, not a JSON number: K/V are floats whose last bits differ between
    machines (BLAS kernels), so their CRC does too, and a number's length would make every
    record's length, and so every log offset, depend on the machine."""
    return f"{zlib.crc32(np.ascontiguousarray(kv[:, :, page, :slots]).tobytes()):08x}"


def computed_entries(
    kv: np.ndarray, block_table: list[int], old: int, new: int, page_size: int
) -> list[list]:
    """[page, slots, crc] for each page holding a token in old..new-1, which were just
    computed; `slots` counts the page's computed tokens (all of them up to `new`)."""
    if new <= old:
        return []
    entries = []
    for index in range(old // page_size, (new - 1) // page_size + 1):
        page, slots = block_table[index], min(new - index * page_size, page_size)
        entries.append([page, slots, page_crc(kv, page, slots)])
    return entries


def copy_entries(kv: np.ndarray, cow: list[int], slots: int) -> list[list]:
    """[[copy, slots, crc]] for a copy-on-write [source, copy] of `slots` slots: the copy's
    K/V will be the source's, so their CRC is known before the copy is made."""
    return [[cow[1], slots, page_crc(kv, cow[0], slots)]]


def note(kv_crc: dict[int, list], handed_out: Iterable[int], entries: Iterable[list]) -> None:
    """Update the entries (page -> [slots, crc]): forget pages handed out again (their K/V
    will change), then keep the new `entries` ([page, slots, crc] each)."""
    for page in handed_out:
        kv_crc.pop(page, None)
    kv_crc.update((page, [slots, crc]) for page, slots, crc in entries)


def still_matching(kv: np.ndarray, payloads: Iterable[dict], pages: Iterable[int]) -> list[int]:
    """Those of `pages` whose K/V in `kv` still match the newest CRC that the record
    `payloads` (in log order) leave for them, kept as a live manager keeps them (`note`).
    Recovery never asks this of pages a cut-off transaction was given (recovery.py); notebook
    07b asks it to show what a checksum alone would have kept."""
    entries: dict[int, list] = {}
    for payload in payloads:
        note(entries, payload.get("alloc") or (), payload.get("kv_crc") or ())
    return sorted(p for p in set(pages) if p in entries and page_crc(kv, p, entries[p][0]) == entries[p][1])


def failed_pages(state: dict, kv: np.ndarray) -> list[int]:
    """Pages that are not FREE whose K/V in `kv` differ from their entry in `state["kv_crc"]`."""
    failed = []
    for page, slots, crc in state.get("kv_crc", []):
        if state["pages"][page][0] != 0 and page_crc(kv, page, slots) != crc:  # 0: FREE
            failed.append(page)
    return sorted(failed)


def free_cached(state: dict, pages: list[int]) -> list[int]:
    """Turn FREE those of `pages` that are CACHED in `state`; returns their ids, sorted."""
    dropped = sorted(p for p in set(pages) if state["pages"][p][0] == CACHED_STATE)
    for page_id in dropped:
        state["pages"][page_id] = [0, 0, [], None, False, state["pages"][page_id][5]]
    state["release_order"] = [p for p in state["release_order"] if p not in dropped]
    return dropped


def drop_failed(state: dict, failed: list[int], page_size: int) -> None:
    """Serve none of the `failed` pages: CACHED ones turn FREE; a sequence holding an ACTIVE
    one is computed again from that page's first token (state["sequences"][i][5])."""
    free_cached(state, failed)
    bad = set(failed)
    for seq in state["sequences"]:
        table = seq[2]
        first = next((i for i, page in enumerate(table) if page in bad), None)
        if first is not None:
            seq[5] = min(seq[5], first * page_size)
    state["kv_crc"] = [entry for entry in state.get("kv_crc", []) if entry[0] not in bad]
