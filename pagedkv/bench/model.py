"""bench model: how well the shipped TinyLM weights predict and continue the project's prose.

Two measurements of `TinyLM.pretrained()`, both through code a learner runs:

- **bits per byte** on the held-out paragraphs of the corpus (every tenth one; the model
  never trained on them), from the numpy no-cache forward over windows of `CONTEXT`
  bytes, next to the uniform baseline (8 bits: every byte equally likely) and a unigram
  baseline (each byte's frequency in the training paragraphs, add-one smoothed). A
  language model earns its place by the gap to the unigram line.
- **continuations**: for the prompts the notebooks, scenarios and demo use, the tokens
  `TinyLM.generate` produces through a paged cache (greedy by default), and the share of
  their letters that form words of the corpus vocabulary (`corpus.word_share`). Letter
  loops or invented words score low; the target is >= 80 %.

Published byte-level models report bits per byte the same way (e.g. enwik8, ~1 bit for
large transformers); this model is small and its corpus ~130 KB, so expect ~2 bits.
Leaves out: perplexity on text the project did not write, human ratings.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from pagedkv.bench import Report
from pagedkv.core.pool import KVCachePool
from pagedkv.core.sequence import SequenceManager
from pagedkv.model import corpus
from pagedkv.model.tinylm import TinyLM

HELP = "held-out bits per byte of the shipped TinyLM vs uniform and unigram, and its continuations"
CONTEXT = 256  # bytes per evaluation window (the training context)
PROMPTS = [  # what learners type or see in notebooks 00-07, the demo and the scenarios
    "The KV cache holds",
    "Paged attention reads K/V through the block table",
    "A page is",
    "Prefix caching",
    "Copy-on-write",
    "Preemption frees",
    "The scheduler",
    "Pages fill up",
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-new-tokens", type=int, default=48, help="tokens generated per prompt")
    parser.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")


def bits_per_byte(model: TinyLM, text: str, max_windows: int | None = None) -> float:
    """Mean -log2 p(byte | earlier bytes of its window) over every byte but each window's first."""
    data = model.encode(text)
    total, count = 0.0, 0
    for k, start in enumerate(range(0, len(data) - 1, CONTEXT)):
        if max_windows is not None and k == max_windows:
            break
        window = data[start : start + CONTEXT + 1]
        logits = model.forward_reference(window[:-1]).astype(np.float64)
        logits -= logits.max(axis=-1, keepdims=True)
        log_p = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
        total -= log_p[np.arange(len(window) - 1), window[1:]].sum()
        count += len(window) - 1
    return total / count / math.log(2)


def unigram_bits_per_byte(train: str, held_out: str) -> float:
    """Cross-entropy of held-out bytes under the training bytes' frequencies (add-one)."""
    counts = np.bincount(np.frombuffer(train.encode(), np.uint8), minlength=256) + 1.0
    log_p = np.log2(counts / counts.sum())
    return float(-log_p[np.frombuffer(held_out.encode(), np.uint8)].mean())


def continuations(model: TinyLM, prompts: list[str], max_new_tokens: int, temperature: float, seed: int):
    """{prompt: generated text}, all prompts in one batch through a paged cache."""
    longest = max(len(p) for p in prompts) + max_new_tokens
    num_pages = len(prompts) * (-(-longest // 16) + 1)
    seqs = SequenceManager(KVCachePool(model.cache_config(num_pages, 16)))
    ids = [f"p{i}" for i in range(len(prompts))]
    out = model.generate(seqs, prompts, max_new_tokens, seq_ids=ids, temperature=temperature, seed=seed)
    return {p: model.decode(out[i]) for p, i in zip(prompts, ids)}


def run(*, quick: bool = False, seed: int = 0, max_new_tokens: int = 48, temperature: float = 0.0) -> Report:
    model = TinyLM.pretrained()
    train, held_out = corpus.split()
    windows = 4 if quick else None
    prompts = PROMPTS[:3] if quick else PROMPTS
    bpb = {
        "uniform": 8.0,
        "unigram": unigram_bits_per_byte(train, held_out),
        "TinyLM": bits_per_byte(model, held_out, windows),
    }
    texts = continuations(model, prompts, max_new_tokens, temperature, seed)
    shares = {p: corpus.word_share(t) for p, t in texts.items()}
    overall = sum(shares[p] * len(t) for p, t in texts.items()) / sum(len(t) for t in texts.values())
    how = "greedy" if temperature == 0 else f"temperature {temperature}, seed {seed}"
    scope = f"the first {windows} windows of" if quick else "all of"
    return Report(
        title=f"bench model: TinyLM.pretrained(), {max_new_tokens} new tokens per prompt ({how})",
        columns=["prompt", "continuation", "corpus words %"],
        rows=[[p, repr(t), round(100 * shares[p], 1)] for p, t in texts.items()],
        notes=[
            f"held-out bits per byte ({scope} {len(held_out):,} bytes): TinyLM {bpb['TinyLM']:.3f}, "
            f"unigram {bpb['unigram']:.3f}, uniform {bpb['uniform']:.0f}",
            f"letters of the continuations in corpus words: {100 * overall:.1f} % (target >= 80 %)",
        ],
        data={"bits_per_byte": bpb, "continuations": texts, "word_share": shares, "overall_share": overall},
    )


def figure(report: Report):
    """Bits per byte of the three models, lower is better."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 3.2))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    bpb = report.data["bits_per_byte"]
    names = list(bpb)
    ax.barh(names, [bpb[n] for n in names], color=["#999999", "#E69F00", "#0072B2"])
    for i, n in enumerate(names):
        ax.text(bpb[n] + 0.1, i, f"{bpb[n]:.2f}", va="center", fontsize=12)
    ax.set_xlim(0, 9)
    ax.set_xlabel("held-out bits per byte (lower is better)", fontsize=12)
    ax.tick_params(labelsize=12)
    ax.set_title("How well each model predicts the next byte of unseen project prose", fontsize=13)
    fig.tight_layout()
    return fig
