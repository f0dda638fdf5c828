"""The shipped TinyLM weights: exact through the paged cache, readable, and checked on load.

Oracles: `forward_reference` / `generate_reference` (dense attention over the whole token
list, no pool) for every token and logit; hashlib for the stored checksum; the corpus's own
word list for readability. No test needs torch.
"""

from __future__ import annotations

import hashlib
import json
import shutil

import numpy as np
import pytest

from pagedkv import KVCachePool, Scheduler, SequenceManager, TinyLM
from pagedkv.bench import model as bench_model
from pagedkv.model import corpus
from pagedkv.model.weights import DATA_DIR, WEIGHTS_FILE, WeightsFileError, load_card


@pytest.fixture(scope="module")
def model():
    return TinyLM.pretrained()


@pytest.fixture(scope="module")
def model64():
    return TinyLM.pretrained(dtype="float64")


def test_float32_logits_match_the_no_cache_forward(model):
    seqs = SequenceManager(KVCachePool(model.cache_config(32, 4)))
    tokens = model.encode("The KV cache holds")
    seqs.add("a", tokens)
    logits = model.forward(seqs, ["a"])[0]
    for _ in range(24):
        np.testing.assert_allclose(logits, model.forward_reference(tokens)[-1], atol=1e-5, rtol=0)
        token = int(logits.argmax())
        tokens.append(token)
        seqs.append_slot("a", token)
        logits = model.forward(seqs, ["a"])[0]


@pytest.mark.parametrize("page_size", [1, 4, 16])
def test_batched_generation_matches_recompute(model, page_size):
    prompts = ["The KV cache holds", "Paged attention reads K/V through the block table", "A page"]
    seqs = SequenceManager(KVCachePool(model.cache_config(160, page_size)))
    out = model.generate(seqs, prompts, 12)
    for i, prompt in enumerate(prompts):
        assert out[f"req{i}"] == model.generate_reference(prompt, 12)


def test_prefix_hits_and_evictions_keep_tokens_identical(model):
    pool = KVCachePool(model.cache_config(14, 4))
    seqs = SequenceManager(pool)
    prompts = [
        "System: answer briefly. Q: what is a page?",
        "System: answer briefly. Q: why paging?",
        "Preemption frees the newest request",
        "System: answer briefly. Q: what is a page?",
    ]
    hits = []
    for i, prompt in enumerate(prompts):
        before = pool.stats.prefix_hits
        assert model.generate(seqs, [prompt], 10, seq_ids=[f"r{i}"])[f"r{i}"] == model.generate_reference(
            prompt, 10
        )
        hits.append(pool.stats.prefix_hits - before)
        seqs.check_invariants()
    assert hits[1] > 0 and pool.stats.evictions > 0


def test_parallel_samples_equal_independently_seeded_reference_runs(model):
    seqs = SequenceManager(KVCachePool(model.cache_config(64, 4)))
    prompt = "Copy-on-write"  # 13 tokens: 3 full pages the samples share, 1 each computes
    out = model.generate(seqs, [prompt], 12, n=3, temperature=0.8, top_k=20, seed=3, free=False)
    assert seqs.pool.stats.prefix_hits == 2 * 12  # samples 1 and 2 hit sample 0's full pages
    tables = [seqs.block_table(f"req0.{k}") for k in range(3)]
    assert tables[0][:3] == tables[1][:3] == tables[2][:3]
    for k in range(3):  # sample k draws from its own generator, seeded 3 + k (vLLM v1's n)
        assert out[f"req0.{k}"] == model.generate_reference(prompt, 12, 0.8, seed=3 + k, top_k=20)


@pytest.mark.parametrize("mode", ["recompute", "swap"])
@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_scheduler_preemption_is_token_identical(model64, mode, temperature):
    texts = ["The KV cache holds", "Pages fill up", "Tokens arrive", "Queues wait", "Batches grow"]
    pool = KVCachePool(model64.cache_config(num_pages=12, page_size=4))
    sched = Scheduler(
        SequenceManager(pool),
        model64,
        max_num_seqs=4,
        max_num_batched_tokens=64,
        preemption_mode=mode,
        swap_space_pages=32,
        temperature=temperature,
    )
    for i, text in enumerate(texts):
        sched.add_request(f"r{i}", model64.encode(text), 16, seed=10 + i)
    records = []
    while sched.has_unfinished and len(records) < 500:
        records.append(sched.step())
        sched.manager.check_invariants()
    assert {m for r in records for _, m in r.preempted} == {mode}
    for i, text in enumerate(texts):
        assert sched.outputs[f"r{i}"] == model64.generate_reference(text, 16, temperature, seed=10 + i)


def test_greedy_continuations_read_as_corpus_words(model):
    seqs = SequenceManager(KVCachePool(model.cache_config(64, 16)))
    prompts = ["The KV cache holds", "Paged attention reads K/V through the block table", "Preemption frees"]
    out = model.generate(seqs, prompts, 48)
    for i, prompt in enumerate(prompts):
        text = model.decode(out[f"req{i}"])
        assert corpus.word_share(text) >= 0.8, (prompt, text)


def test_bench_model_quick():
    report = bench_model.run(quick=True, max_new_tokens=32)
    bpb = report.data["bits_per_byte"]
    assert bpb["TinyLM"] < bpb["unigram"] - 1.0 < bpb["uniform"]
    assert report.data["overall_share"] >= 0.8
    assert len(report.rows) == 3 and all(len(t) == 32 for t in report.data["continuations"].values())


def test_word_share_counts_letters_of_corpus_words():
    words = frozenset({"the", "pages"})
    assert corpus.word_share("the pagse", words) == 3 / 8
    assert corpus.word_share("the pag", words) == 1.0  # cut off at the end: a prefix counts
    assert corpus.word_share("!!", words) == 0.0


def test_card_records_the_files_sha256_and_the_shape(model):
    data = (DATA_DIR / WEIGHTS_FILE).read_bytes()
    card = load_card()
    assert card["sha256"] == hashlib.sha256(data).hexdigest() and card["bytes"] == len(data) <= 5_000_000
    assert card["shape"] == {
        "num_layers": model.num_layers,
        "num_heads": model.num_heads,
        "num_kv_heads": model.num_kv_heads,
        "head_dim": model.head_dim,
        "ffn_dim": model.ffn_dim,
    }
    assert model.card == card and "pretrained" in repr(model)


@pytest.fixture
def copy(tmp_path):
    shutil.copy(DATA_DIR / WEIGHTS_FILE, tmp_path / WEIGHTS_FILE)
    shutil.copy(DATA_DIR / "tinylm.json", tmp_path / "tinylm.json")
    return tmp_path / WEIGHTS_FILE


def test_a_copy_loads_and_gives_the_same_logits(copy, model):
    tokens = model.encode("A page is")
    np.testing.assert_array_equal(
        TinyLM.load(copy).forward_reference(tokens), model.forward_reference(tokens)
    )


def _truncate(path):
    path.write_bytes(path.read_bytes()[:1000])


def _alter(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "damage, match",
    [
        (lambda p: p.unlink(), r"tinylm\.npz is missing"),
        (_truncate, r"tinylm\.npz is truncated: 1,000 bytes"),
        (_alter, r"tinylm\.npz was altered: its sha256 is"),
        (lambda p: p.write_bytes(p.read_bytes() + b"x"), r"tinylm\.npz was altered"),
        (lambda p: p.with_suffix(".json").unlink(), r"model card .*tinylm\.json is missing"),
        (lambda p: p.with_suffix(".json").write_text("{"), r"tinylm\.json is unreadable"),
    ],
    ids=["missing", "truncated", "altered", "appended", "card missing", "card unreadable"],
)
def test_damaged_weights_give_one_clear_error(copy, damage, match):
    damage(copy)
    with pytest.raises(WeightsFileError, match=match):
        TinyLM.load(copy)


def test_a_card_whose_shape_does_not_fit_the_arrays(copy):
    card = json.loads(copy.with_suffix(".json").read_text())
    card["shape"]["ffn_dim"] += 2
    copy.with_suffix(".json").write_text(json.dumps(card))
    with pytest.raises(WeightsFileError, match=r"tinylm\.npz does not fit its card's shape: weight 'layers"):
        TinyLM.load(copy)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"temperature": "hot"}, TypeError, "temperature must be a number"),
        ({"temperature": -1.0}, ValueError, "temperature must be a finite number >= 0"),
        ({"top_k": 0}, ValueError, "top_k must be >= 1"),
        ({"top_k": 2.5}, TypeError, "top_k must be an int"),
        ({"top_p": 0.0}, ValueError, r"top_p must be in \(0, 1\]"),
        ({"max_new_tokens": 2.0}, TypeError, "max_new_tokens must be an int"),
        ({"max_new_tokens": -1}, ValueError, "max_new_tokens must be in"),
    ],
)
def test_generate_validates_sampling_and_changes_nothing(model, kwargs, error, match):
    seqs = SequenceManager(KVCachePool(model.cache_config(8, 4)))
    before = seqs.snapshot()
    with pytest.raises(error, match=match):
        model.generate(seqs, ["abc"], **{"max_new_tokens": 4, **kwargs})
    assert seqs.snapshot() == before


def test_top_p_keeps_the_smallest_set_reaching_p(model):
    logits = np.log(np.array([[0.5, 0.3, 0.15, 0.05]]))
    draws = {model.sample(logits, 1.0, np.random.default_rng(s), top_p=0.75)[0] for s in range(200)}
    assert draws == {0, 1}  # 0.5 < 0.75 <= 0.5 + 0.3
    assert model.sample(logits, 5.0, np.random.default_rng(0), top_k=1) == [0]
