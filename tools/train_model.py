"""Train the TinyLM weights shipped in pagedkv/data/ (`make train-model`).

PyTorch trains a mirror of `pagedkv.model.tinylm.TinyLM` (same RMSNorm, interleaved RoPE,
grouped-query attention, SwiGLU, byte vocabulary, weights stored [in, out] so `x @ W`
reads the same in both) on the frozen corpus `pagedkv/data/corpus.txt` from a fixed seed,
prints the loss curve, then writes float16 weights (`tinylm.npz`) and their card
(`tinylm.json`: shape, sha256 and size of the file, corpus, steps, time, bits per byte).
Before writing it checks that the numpy forward with the exported weights gives the same
float32 logits as the torch mirror (max |difference| printed).

Needs the `train` extra (torch, CPU) and runs on one thread, so a rebuild gives the same
weights. `--rebuild-corpus` first re-freezes the corpus from the repository's own prose
(a fixed list of files); the default trains on the committed corpus.

Leaves out: mixed precision, data parallelism, checkpoints mid-run, hyperparameter search.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import re
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pagedkv import corpus  # noqa: E402
from pagedkv.model.tinylm import TinyLM  # noqa: E402
from pagedkv.model.weights import WEIGHTS_FILE, save_weights  # noqa: E402

SHAPE = {"num_layers": 4, "num_heads": 4, "num_kv_heads": 2, "head_dim": 32, "ffn_dim": 384}
SEED, STEPS, BATCH, CONTEXT, LR, DROPOUT = 0, 1000, 24, 256, 3e-3, 0.1
CORPUS_FILES = ["README.md", "notebooks/README.md", "notebooks/0*.ipynb", "docs/*.md", "pagedkv/**/*.py"]
ASCII = {"\u2014": " - ", "\u2013": "-", "\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"',
         "\u2192": "->", "\u2190": "<-", "\u00d7": "x", "\u2264": "<=", "\u2265": ">=", "\u2026": "...",
         "\u2248": "~", "\u2260": "!=", "\u00b5": "u", "\u2022": "-", "\u00b7": "."}  # fmt: skip


# ---- the corpus ----------------------------------------------------------------------------


def _prose(path: Path) -> list[str]:
    """Markdown of a notebook, a README or the docstrings of a module, as raw text blocks."""
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text())["cells"]
        return ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]
    if path.suffix == ".py":
        tree = ast.parse(path.read_text())
        nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef)))]
        return [d for n in nodes if (d := ast.get_docstring(n))]
    return [path.read_text()]


def _paragraphs(block: str) -> list[str]:
    block = re.sub(r"```.*?```", "", block, flags=re.S)  # code is not prose
    block = re.sub(r"<[^>]+>|!\[[^\]]*\]\([^)]*\)", "", block)  # HTML tags, images
    block = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", block)  # links keep their text
    for char, ascii_text in ASCII.items():
        block = block.replace(char, ascii_text)
    out = []
    for para in re.split(r"\n\s*\n", block):
        lines = [ln.strip().lstrip("#>").strip() for ln in para.splitlines()]
        text = " ".join(ln for ln in lines if ln and not ln.startswith("|"))
        text = re.sub(r"\*\*|__|[^\x20-\x7e]", "", text)
        text = re.sub(r" +", " ", text).strip()
        if len(text) >= 20:
            out.append(text)
    return out


def rebuild_corpus() -> None:
    files = [p for pattern in CORPUS_FILES for p in sorted(ROOT.glob(pattern))]
    paras = [p for f in files for block in _prose(f) for p in _paragraphs(block)]
    paras = list(dict.fromkeys(paras))  # the same docstring twice is one paragraph
    out = ROOT / "pagedkv/data/corpus.txt"
    out.write_text("\n".join(paras) + "\n", encoding="ascii")
    print(f"corpus: {len(paras)} paragraphs, {out.stat().st_size:,} bytes from {len(files)} files -> {out}")


# ---- the mirror of TinyLM ------------------------------------------------------------------


class TorchTinyLM(torch.nn.Module):
    """TinyLM's forward in torch; parameter names and shapes are those of the numpy model."""

    def __init__(self, num_layers: int, num_heads: int, num_kv_heads: int, head_dim: int, ffn_dim: int):
        super().__init__()
        self.h, self.kv, self.hd = num_heads, num_kv_heads, head_dim
        d = num_heads * head_dim
        g = torch.Generator().manual_seed(SEED)

        def w(n_in: int, n_out: int, scale: float = 1.0) -> torch.nn.Parameter:
            return torch.nn.Parameter(torch.randn(n_in, n_out, generator=g) * scale / math.sqrt(n_in))

        out_scale = 1 / math.sqrt(2 * num_layers)  # residual branches start small (GPT-2)
        self.embed = torch.nn.Parameter(torch.randn(256, d, generator=g))
        self.blocks = torch.nn.ModuleList()
        for _ in range(num_layers):
            block = torch.nn.ParameterDict(
                {
                    "attn_norm": torch.nn.Parameter(torch.ones(d)),
                    "wq": w(d, num_heads * head_dim),
                    "wk": w(d, num_kv_heads * head_dim),
                    "wv": w(d, num_kv_heads * head_dim),
                    "wo": w(num_heads * head_dim, d, out_scale),
                    "mlp_norm": torch.nn.Parameter(torch.ones(d)),
                    "w_gate": w(d, ffn_dim),
                    "w_up": w(d, ffn_dim),
                    "w_down": w(ffn_dim, d, out_scale),
                }
            )
            self.blocks.append(block)
        self.final_norm = torch.nn.Parameter(torch.ones(d))
        self.lm_head = w(d, 256)
        self.lm_bias = torch.nn.Parameter(torch.zeros(256))
        self.register_buffer("inv_freq", 1.0 / (10000.0 ** (torch.arange(0, head_dim, 2) / head_dim)))

    @staticmethod
    def _norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-6) * weight

    def _rope(self, x: torch.Tensor) -> torch.Tensor:  # x [B, T, heads, D]
        angles = torch.arange(x.shape[1], dtype=torch.float64)[:, None] * self.inv_freq.double()[None]
        cos, sin = angles.cos().float()[:, None, :], angles.sin().float()[:, None, :]
        even, odd = x[..., 0::2], x[..., 1::2]
        return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)

    def forward(self, tokens: torch.Tensor, dropout: float = 0.0) -> torch.Tensor:  # [B, T] -> [B, T, 256]
        b, t = tokens.shape
        x = self.embed[tokens]
        for w in self.blocks:
            h = self._norm(x, w["attn_norm"])
            q = self._rope((h @ w["wq"]).view(b, t, self.h, self.hd)).transpose(1, 2)
            k = self._rope((h @ w["wk"]).view(b, t, self.kv, self.hd)).transpose(1, 2)
            v = (h @ w["wv"]).view(b, t, self.kv, self.hd).transpose(1, 2)
            group = self.h // self.kv  # query head i reads K/V head i // group
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
            attn = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, -1)
            x = x + F.dropout(attn @ w["wo"], dropout, self.training)
            h = self._norm(x, w["mlp_norm"])
            x = x + F.dropout(
                (F.silu(h @ w["w_gate"]) * (h @ w["w_up"])) @ w["w_down"], dropout, self.training
            )
        return self._norm(x, self.final_norm) @ self.lm_head + self.lm_bias

    def to_numpy(self) -> TinyLM:
        """The numpy TinyLM holding these weights (float32)."""
        model = TinyLM(**SHAPE, seed=0)
        p = {k: v.detach().numpy().astype(np.float32) for k, v in self.named_parameters()}
        model.load_state_dict({k.replace("blocks.", "layers."): v for k, v in p.items()})
        return model


# ---- training --------------------------------------------------------------------------------


def bits_per_byte(net: TorchTinyLM, data: torch.Tensor) -> float:
    """Mean cross-entropy in bits of each byte after the first of every CONTEXT-byte window."""
    net.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for start in range(0, len(data) - 1, CONTEXT):
            chunk = data[start : start + CONTEXT + 1]
            logits = net(chunk[None, :-1])[0]
            total += F.cross_entropy(logits, chunk[1:], reduction="sum").item()
            count += len(chunk) - 1
    net.train()
    return total / count / math.log(2)


def train(steps: int) -> tuple[TorchTinyLM, list[tuple[int, float, float]], float]:
    torch.manual_seed(SEED)
    train_text, held_text = corpus.split()
    data = torch.tensor(list(train_text.encode("ascii")), dtype=torch.long)
    held = torch.tensor(list(held_text.encode("ascii")), dtype=torch.long)
    net = TorchTinyLM(**SHAPE)
    matrices = [p for p in net.parameters() if p.ndim == 2]
    vectors = [p for p in net.parameters() if p.ndim < 2]
    opt = torch.optim.AdamW(
        [{"params": matrices, "weight_decay": 0.1}, {"params": vectors, "weight_decay": 0.0}],
        lr=LR, betas=(0.9, 0.95),
    )  # fmt: skip
    warmup = 100
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps))
    )
    g = torch.Generator().manual_seed(SEED)
    curve, running, start = [], None, time.perf_counter()
    print(f"{'step':>6} {'train loss':>10} {'held-out bits/byte':>18} {'seconds':>8}")
    for step in range(1, steps + 1):
        at = torch.randint(0, len(data) - CONTEXT - 1, (BATCH,), generator=g)
        x = torch.stack([data[i : i + CONTEXT + 1] for i in at.tolist()])
        loss = F.cross_entropy(net(x[:, :-1], DROPOUT).reshape(-1, 256), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        sched.step()
        running = loss.item() if running is None else 0.95 * running + 0.05 * loss.item()
        if step % 100 == 0 or step == steps:
            bpb = bits_per_byte(net, held)
            curve.append((step, running, bpb))
            print(f"{step:6d} {running:10.3f} {bpb:18.3f} {time.perf_counter() - start:8.0f}", flush=True)
    return net, curve, time.perf_counter() - start


def check_numpy_matches(net: TorchTinyLM) -> float:
    """Max |logit difference| of the numpy no-cache forward vs the torch mirror (float32)."""
    text = corpus.split()[1][:200]
    tokens = list(text.encode("ascii"))
    net.eval()
    with torch.no_grad():
        ref = net(torch.tensor([tokens]))[0].numpy()
    return float(np.abs(net.to_numpy().forward_reference(tokens) - ref).max())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--rebuild-corpus", action="store_true", help="re-freeze pagedkv/data/corpus.txt first"
    )
    parser.add_argument("--steps", type=int, default=STEPS, help=f"training steps (default {STEPS})")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1 gives repeatable weights)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.rebuild_corpus:
        rebuild_corpus()
    net, curve, seconds = train(args.steps)
    diff = check_numpy_matches(net)
    print(f"numpy no-cache forward vs torch, float32 logits: max |difference| {diff:.2e}")
    if diff > 1e-4:
        raise SystemExit("the numpy forward does not mirror the torch model; weights not written")
    card = {
        "shape": SHAPE,
        "corpus": "pagedkv/data/corpus.txt (pagedkv's own README, notebook prose and docstrings; MIT)",
        "corpus_bytes": len(corpus.corpus_text()),
        "held_out": f"every {corpus.HELD_OUT_EVERY}th paragraph",
        "seed": SEED, "steps": args.steps, "batch": BATCH, "context": CONTEXT,
        "learning_rate": LR, "dropout": DROPOUT, "threads": args.threads,
        "training_seconds": round(seconds),
        "loss_curve": [{"step": s, "train_loss": round(loss, 4), "held_out_bpb": round(b, 4)}
                       for s, loss, b in curve],
    }  # fmt: skip
    path = save_weights(net.to_numpy().state_dict(), card)
    size = path.stat().st_size
    print(f"wrote {path.relative_to(ROOT)} ({size:,} bytes) and {WEIGHTS_FILE.replace('.npz', '.json')}")
    print("run `python -m pagedkv bench model` for bits per byte and continuations of the shipped weights")


if __name__ == "__main__":
    main()
