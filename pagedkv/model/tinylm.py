"""TinyLM: a tiny decoder-only transformer in numpy, so "token generation" is real.

Shaped like the models serving engines run — pre-norm RMSNorm blocks, rotary position
embeddings (RoPE), grouped-query attention, a SwiGLU MLP — but with a byte vocabulary (256
tokens, so any text is a prompt). `TinyLM.pretrained()` loads the weights shipped in
`pagedkv/data/` (trained on the project's own prose by `make train-model`; its card is
`model.card` and the README's "Model card"), so it continues "The KV cache holds" in words;
`TinyLM(seed=...)` builds seeded random weights of any shape, for tests.

`compute(context, pool)` is the model proper, a pure function of a prepared context (token
ids, positions, slot mapping, block tables, context lengths; pagedkv.engine.context) and
the pool's K/V store: layer by layer it writes the new tokens' K/V at the slot mapping and
attends through the block tables, as a model under nano-vllm's or vLLM's model runner
does. It never sees a sequence. The conveniences a notebook calls go through the engine's
one loop: `forward(manager, seq_ids)` is `ModelRunner.forward` (prepare, compute, mark
computed), `generate` is pagedkv.engine.generation's (the Scheduler's loop).

`forward_reference` recomputes everything from the token ids with dense attention and no
cache: the oracle the paged path must match, token for token.

Leaves out: training in numpy (tools/train_model.py trains a torch mirror), tokenizers
beyond bytes, batching of different sampling settings in one step.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Hashable
from collections.abc import Sequence as SequenceLike
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import ThreadpoolController  # type: ignore[import-untyped]  # ships no stubs or py.typed

from pagedkv.core.config import CacheConfig
from pagedkv.core.plumbing.validation import check_int, check_vocab
from pagedkv.core.pool import KVCachePool
from pagedkv.core.sequence import SequenceManager
from pagedkv.engine import generation
from pagedkv.engine.context import ForwardContext
from pagedkv.engine.runner import ModelRunner
from pagedkv.engine.sampling import sample
from pagedkv.model.attention import dense_attention
from pagedkv.model.attention_tiled import TiledAttentionEngine
from pagedkv.model.weights import DATA_DIR, WEIGHTS_FILE, WeightsFileError, check_state, read_weights

VOCAB_SIZE = 256
_BLAS: list[ThreadpoolController] = []  # made on first use, once numpy's BLAS is loaded


def _one_blas_thread(method: Callable) -> Callable:
    """Run `method` with BLAS on one thread.

    NOTE: TinyLM's matrices are too small to gain from threads, and on a busy machine (a
    shared classroom server, Binder) multithreaded BLAS made a 40-token generation 15x
    slower, its threads waiting on each other. The limit is set and restored per call (~25 us).
    """

    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        if not _BLAS:
            _BLAS.append(ThreadpoolController())
        with _BLAS[0].limit(limits=1, user_api="blas"):
            return method(*args, **kwargs)

    return wrapper


def _rms_norm(x: np.ndarray, weight: np.ndarray) -> np.ndarray:
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6) * weight


class TinyLM:
    """A decoder-only transformer over bytes: trained (`pretrained()`) or seeded random."""

    def __init__(
        self,
        num_layers: int = 2,
        num_heads: int = 4,
        num_kv_heads: int = 2,
        head_dim: int = 8,
        ffn_dim: int = 64,
        seed: int = 0,
        dtype: str = "float32",
    ) -> None:
        for name, value in (
            ("num_layers", num_layers),
            ("num_heads", num_heads),
            ("num_kv_heads", num_kv_heads),
            ("head_dim", head_dim),
            ("ffn_dim", ffn_dim),
        ):
            check_int(name, value, 1, 4096)
        if num_heads % num_kv_heads:
            raise ValueError(f"num_heads ({num_heads}) must be a multiple of num_kv_heads ({num_kv_heads})")
        if head_dim % 2:
            raise ValueError(f"head_dim must be even for rotary embeddings, got {head_dim}")
        if dtype not in ("float32", "float64"):
            raise ValueError(f"dtype must be 'float32' or 'float64', got {dtype!r}")
        self.num_layers, self.num_heads, self.num_kv_heads = num_layers, num_heads, num_kv_heads
        self.head_dim, self.ffn_dim, self.seed, self.dtype = head_dim, ffn_dim, seed, dtype
        self.vocab_size = VOCAB_SIZE
        d = self.d_model = num_heads * head_dim
        rng = np.random.default_rng(seed)

        def weight(*shape: int) -> np.ndarray:
            return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(dtype)

        self.embed = (rng.standard_normal((VOCAB_SIZE, d))).astype(dtype)  # [vocab, d]
        self.layers = [
            {
                "attn_norm": np.ones(d, dtype),
                "wq": weight(d, num_heads * head_dim),
                "wk": weight(d, num_kv_heads * head_dim),
                "wv": weight(d, num_kv_heads * head_dim),
                "wo": weight(num_heads * head_dim, d),
                "mlp_norm": np.ones(d, dtype),
                "w_gate": weight(d, ffn_dim),
                "w_up": weight(d, ffn_dim),
                "w_down": weight(ffn_dim, d),
            }
            for _ in range(num_layers)
        ]
        self.final_norm = np.ones(d, dtype)
        self.lm_head = weight(d, VOCAB_SIZE)  # [d, vocab]
        self.lm_bias = np.zeros(VOCAB_SIZE, dtype)
        self.lm_bias[list(b" abcdefghijklmnopqrstuvwxyz")] = 2.0  # readable output
        self.inv_freq = 1.0 / (10000.0 ** (np.arange(0, head_dim, 2) / head_dim))  # [D/2]
        # One engine per pool, kept while the pool lives, so its work arrays are reused.
        self._engines: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.card: dict | None = None  # the model card of loaded weights (None: random weights)

    @classmethod
    def pretrained(cls, dtype: str = "float32") -> TinyLM:
        """The shipped trained weights (pagedkv/data/tinylm.npz), checked against their sha256.

        Model card (README "Model card"; `model.card` holds the training run): 4 layers, 4
        query heads over 2 K/V heads of 32 (d_model 128), SwiGLU 384, 853,376 parameters;
        2,048 bytes of K/V per token in float32; trained by `make train-model` for 1,000 steps
        on the project's own prose (pagedkv/data/corpus.txt, MIT); held-out 2.11 bits per
        byte (unigram 4.74, uniform 8). A missing, truncated or altered file raises
        `pagedkv.model.weights.WeightsFileError`.
        """
        return cls.load(dtype=dtype)

    @classmethod
    def load(cls, path: Path | str | None = None, dtype: str = "float32") -> TinyLM:
        """A TinyLM holding the weights of `path` (default: the shipped file), checked first
        against its card (pagedkv.model.weights)."""
        card, state = read_weights(path)
        try:
            model = cls(**card["shape"], seed=0, dtype=dtype)
            model.load_state_dict(state)
        except (TypeError, ValueError) as err:
            name = path or DATA_DIR / WEIGHTS_FILE
            raise WeightsFileError(f"weights file {name} does not fit its card's shape: {err}") from None
        model.card = card
        return model

    def state_dict(self) -> dict[str, np.ndarray]:
        """Every weight by name: "embed", "layers.{i}.wq", ..., "final_norm", "lm_head", "lm_bias"."""
        out = {"embed": self.embed, "final_norm": self.final_norm, "lm_head": self.lm_head}
        out["lm_bias"] = self.lm_bias
        for i, w in enumerate(self.layers):
            out.update({f"layers.{i}.{k}": v for k, v in w.items()})
        return out

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        """Replace every weight by `state`'s (names and shapes as `state_dict`), cast to the dtype."""
        check_state(state, self.state_dict())
        cast = {k: np.ascontiguousarray(v, dtype=self.dtype) for k, v in state.items()}
        self.embed, self.final_norm, self.lm_head = cast["embed"], cast["final_norm"], cast["lm_head"]
        self.lm_bias = cast["lm_bias"]
        for i, w in enumerate(self.layers):
            for k in w:
                w[k] = cast[f"layers.{i}.{k}"]

    def __repr__(self) -> str:
        if self.card is not None:
            return (
                f"TinyLM.pretrained(): {self.num_layers} layers, {self.num_heads} heads, "
                f"{self.num_kv_heads} K/V heads of {self.head_dim} dims, ffn_dim={self.ffn_dim}, "
                f"dtype={self.dtype!r}"
            )
        return (
            f"TinyLM(num_layers={self.num_layers}, num_heads={self.num_heads}, "
            f"num_kv_heads={self.num_kv_heads}, head_dim={self.head_dim}, "
            f"ffn_dim={self.ffn_dim}, seed={self.seed}, dtype={self.dtype!r})"
        )

    # ---- text --------------------------------------------------------------------------------

    @staticmethod
    def encode(text: str) -> list[int]:
        """Token ids of a text: its UTF-8 bytes."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        return list(text.encode("utf-8"))

    @staticmethod
    def decode(token_ids: SequenceLike[int]) -> str:
        """Text of byte token ids (invalid UTF-8 shows as U+FFFD)."""
        return bytes(token_ids).decode("utf-8", errors="replace")

    def cache_config(self, num_pages: int, page_size: int = 16, **options: Any) -> CacheConfig:
        """A CacheConfig whose K/V shape fits this model; `options` are the other CacheConfig
        fields (dtype, enable_prefix_caching, eviction_policy, prefix_index,
        prefix_caching_hash_algo), which CacheConfig checks."""
        return CacheConfig(
            num_pages=num_pages,
            page_size=page_size,
            num_layers=self.num_layers,
            num_kv_heads=self.num_kv_heads,
            head_dim=self.head_dim,
            dtype=options.pop("dtype", self.dtype),
            **options,
        )

    # ---- the transformer -----------------------------------------------------------------

    def _rope(self, x: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """Rotate pairs (x[2i], x[2i+1]) of x [N, heads, D] by position * inv_freq[i]."""
        angles = positions[:, None] * self.inv_freq[None, :]  # [N, D/2]
        cos = np.cos(angles)[:, None, :].astype(x.dtype)
        sin = np.sin(angles)[:, None, :].astype(x.dtype)
        even, odd = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = even * cos - odd * sin
        out[..., 1::2] = even * sin + odd * cos
        return out

    def _qkv(self, w: dict, x: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, ...]:
        h = _rms_norm(x, w["attn_norm"])
        n = x.shape[0]
        q = (h @ w["wq"]).reshape(n, self.num_heads, self.head_dim)
        k = (h @ w["wk"]).reshape(n, self.num_kv_heads, self.head_dim)
        v = (h @ w["wv"]).reshape(n, self.num_kv_heads, self.head_dim)
        return self._rope(q, positions), self._rope(k, positions), v

    def _mlp(self, w: dict, x: np.ndarray) -> np.ndarray:
        h = _rms_norm(x, w["mlp_norm"])
        gate = h @ w["w_gate"]
        return (gate / (1.0 + np.exp(-gate)) * (h @ w["w_up"])) @ w["w_down"]

    def _logits(self, x: np.ndarray) -> np.ndarray:
        return _rms_norm(x, self.final_norm) @ self.lm_head + self.lm_bias

    @_one_blas_thread
    def forward_reference(self, token_ids: SequenceLike[int]) -> np.ndarray:
        """Logits [T, vocab] for every position, recomputed from scratch with dense attention."""
        tokens = list(token_ids)
        if not tokens:
            raise ValueError("token_ids must not be empty")
        check_vocab("token_ids", tokens, VOCAB_SIZE)
        positions = np.arange(len(tokens))
        x = self.embed[tokens]
        for w in self.layers:
            q, k, v = self._qkv(w, x, positions)
            attn = dense_attention(q, k, v, causal=True)
            x = x + attn.reshape(len(tokens), -1) @ w["wo"]
            x = x + self._mlp(w, x)
        return self._logits(x)

    @_one_blas_thread
    def compute(self, context: ForwardContext, pool: KVCachePool) -> np.ndarray:
        """Logits [B, vocab] at each sequence's last token of a prepared context.

        Layer by layer, K/V of every token are written at `context.slot_mapping` before
        any sequence attends (as in vLLM's model runner), so a sequence may hit pages
        another one fills in the same step. A step of decodes only (one token each) runs
        the batched decode kernel; otherwise each sequence attends over its block table."""
        engine = self._engines.get(pool)
        if engine is None:  # one per pool, kept while the pool lives: its work arrays are reused
            engine = self._engines[pool] = TiledAttentionEngine(pool)
        x = self.embed[context.token_ids]  # [N, d]
        for layer, w in enumerate(self.layers):
            q, k, v = self._qkv(w, x, context.positions)
            engine.write(layer, context.slot_mapping, k, v)
            x = x + self._attend(engine, layer, q, context).reshape(len(x), -1) @ w["wo"]
            x = x + self._mlp(w, x)
        return self._logits(x[context.last_rows])

    @staticmethod
    def _attend(
        engine: TiledAttentionEngine, layer: int, q: np.ndarray, context: ForwardContext
    ) -> np.ndarray:
        """Attention of q [N, H, D] through the context's block tables: [N, H, D]."""
        if context.is_decode:
            return engine.paged_attention_batch(layer, q, context.block_tables, context.context_lens)
        starts = context.query_start_loc.tolist()
        rows = zip(starts[:-1], starts[1:], context.block_tables, context.context_lens.tolist())
        return np.concatenate([engine.paged_attention(layer, q[a:b], t, n) for a, b, t, n in rows])

    def forward(self, manager: SequenceManager, seq_ids: SequenceLike[Hashable]) -> np.ndarray:
        """Run every not-yet-computed token of each sequence through the paged cache; logits
        [B, vocab] at each sequence's last position (`ModelRunner.forward`: prepare, compute,
        mark the tokens computed)."""
        return ModelRunner(self, manager).forward(seq_ids)

    # ---- generation ------------------------------------------------------------------------

    # One token per row: argmax at temperature 0, else a seeded draw (pagedkv.engine.sampling).
    sample = staticmethod(sample)

    def generate(
        self,
        manager: SequenceManager,
        prompts: SequenceLike[SequenceLike[int] | str],
        max_new_tokens: int,
        *,
        seq_ids: SequenceLike[Hashable] | None = None,
        n: int = 1,
        temperature: float = 0.0,
        seed: int = 0,
        top_k: int | None = None,
        top_p: float | None = None,
        free: bool = True,
    ) -> dict[Hashable, list[int]]:
        """Generate through the paged cache; returns new tokens per sequence id (see
        `pagedkv.engine.generation.generate`: the Scheduler's loop)."""
        return generation.generate(
            self, manager, prompts, max_new_tokens, seq_ids=seq_ids, n=n, temperature=temperature,
            seed=seed, top_k=top_k, top_p=top_p, free=free,
        )  # fmt: skip

    def generate_reference(
        self,
        prompt: SequenceLike[int] | str,
        max_new_tokens: int,
        temperature: float = 0.0,
        seed: int = 0,
        top_k: int | None = None,
        top_p: float | None = None,
    ) -> list[int]:
        """Greedy/sampled generation by recomputing the whole context every step (no cache)."""
        return generation.generate_reference(self, prompt, max_new_tokens, temperature, seed, top_k, top_p)
