"""The small core: pages, block tables, prefix caching, eviction and copy-on-write.

Read it bottom-up (the order pyproject.toml's layers contract keeps): `hashing`, then
`page`, `free_queue`, `eviction` and `slot_mapping` (with `Sequence`), then
`prefix_index`, `config`, `pool` (vLLM's `BlockPool`) and `sequence` (its
`KVCacheManager`). `plumbing/` (argument checks, events) and `observe/` (snapshots, the
invariant checker, the lifecycle table) sit beside them and may be skipped at first.
"""
