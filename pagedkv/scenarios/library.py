"""The named scenarios: small deterministic traces, each showing one idea page by page.

- `walkthrough`: request_A grows, finishes, and request_B reuses its pages (growth, CACHED
  pages, prefix hits, eviction); `fill`: sequences grow until no page is left; `prefix`: a
  shared system prompt; `eviction`: LRU victims, tail first; `parallel`: parallel sampling
  via fork and copy-on-write; `beam`: beam search via fork and free; `preempt`: the
  scheduler preempts the newest request (recompute) and resumes it; `chunked`: a long
  prompt is prefilled in chunks within the token budget, and a running request is aborted.

Each builder is called with the pool geometry (num_pages, page_size). Only `fill` uses it
(it decodes until that pool is full); the others are written for their default sizes and
give the same steps on any pool, where the story may change (a larger pool never evicts).
Leaves out: random workloads (`pagedkv.labs.workloads` generates those).
"""

from __future__ import annotations

from pagedkv.scenarios.actions import Action, Scenario

PROMPT_A = "The KV cache holds"  # 18 bytes: 4 full pages of 4 and half a page
PROMPT_B = PROMPT_A + " pages."
SYSTEM_PROMPT = "System: answer briefly. "  # 24 bytes: 6 full pages of 4
FILL_PROMPTS = {"alpha": "Pages fill", "bravo": "one slot", "charlie": "at a time"}
PREFIX_QUESTIONS = {
    "user1": "Q: what is a page?",
    "user2": "Q: why paging?",
    "user3": "Q: who evicts?",
    "user4": "Q: what is a hit?",
}
PREEMPT_REQUESTS = {
    "req1": "Preemption frees",
    "req2": "the newest request",
    "req3": "and requeues it",
}
PREEMPT_SCHEDULER = (
    ("max_num_seqs", 4),
    ("max_num_batched_tokens", 64),
    ("preemption_mode", "recompute"),
)
PREEMPT_NEW_TOKENS = 16
CHUNKED_PROMPT = "A long prompt is prefilled in chunks of 8."  # 42 bytes: six steps of 8
CHAT_PROMPT = "A short chat turn"  # 17 bytes: 4 full pages of 4 and one token
CHUNKED_SCHEDULER = (("max_num_seqs", 2), ("max_num_batched_tokens", 8))
N_SAMPLES = 4  # parallel sampling: n = 4, one of the sample counts (2, 4, 6) of the vLLM paper


def _add(seq_id: str, text: str, caption: str) -> Action:
    return Action("add", seq_id, text=text, caption=caption)


def _decode(caption: str, *seq_ids: str, temperature: float = 0.0) -> Action:
    return Action("decode", seq_ids=seq_ids, temperature=temperature, caption=caption)


def _free(seq_id: str, caption: str) -> Action:
    return Action("free", seq_id, caption=caption)


def _walkthrough(num_pages: int, page_size: int) -> list[Action]:
    grow_a = "request_A generates, one token per step: a page is taken only when the last is full"
    grow_b = "request_B generates until the pool has to evict CACHED pages, LRU victim first"
    return [
        _add("request_A", PROMPT_A, f"request_A arrives with a prompt of {len(PROMPT_A)} tokens"),
        *[_decode(grow_a, "request_A") for _ in range(20)],
        _free(
            "request_A",
            "request_A finishes: full pages stay CACHED (tail first in LRU "
            "order), the partial page becomes FREE",
        ),
        _add("request_B", PROMPT_B, "request_B starts with request_A's prompt: prefix hits"),
        *[_decode(grow_b, "request_B") for _ in range(36)],
    ]


def _fill(num_pages: int, page_size: int) -> list[Action]:
    steps = [_add(s, t, f"{s} arrives ({len(t)} prompt tokens)") for s, t in FILL_PROMPTS.items()]
    lengths = [len(t) for t in FILL_PROMPTS.values()]
    for k in range(1, 200):  # decode until a sequence needs a page the pool cannot give
        if sum(-(-(n + k) // page_size) for n in lengths) > num_pages:
            steps.append(_decode("the pool is full: a sequence needs a page and none is left"))
            break
        steps.append(_decode("every sequence generates one token"))
    return steps


def _prefix(num_pages: int, page_size: int) -> list[Action]:
    q = PREFIX_QUESTIONS
    hits = "arrives: the system prompt's full pages are prefix hits"
    return [
        _add("user1", SYSTEM_PROMPT + q["user1"], "user1 arrives: nothing is cached yet"),
        *[_decode("user1 generates", "user1") for _ in range(3)],
        _add("user2", SYSTEM_PROMPT + q["user2"], f"user2 {hits}"),
        _add("user3", SYSTEM_PROMPT + q["user3"], f"user3 {hits}"),
        *[_decode("every request generates") for _ in range(4)],
        _free("user1", "user1 finishes: the shared pages stay ACTIVE (user2 and user3 hold them)"),
        _free("user2", "user2 finishes: the shared pages stay ACTIVE (user3 still holds them)"),
        _free("user3", "user3 finishes, the last holder: its full pages go CACHED, its partial page FREE"),
        _add(
            "user4",
            SYSTEM_PROMPT + q["user4"],
            "user4 arrives later: CACHED system-prompt pages come back to life",
        ),
        *[_decode("user4 generates", "user4") for _ in range(3)],
        _free("user4", "user4 finishes"),
    ]


def _eviction(num_pages: int, page_size: int) -> list[Action]:
    steps = []
    for s, text in (("doc_A", "Alpha asks first"), ("doc_B", "Bravo is second!")):
        steps.append(_add(s, text, f"{s} arrives"))
        steps += [_decode(f"{s} generates", s) for _ in range(3)]
        steps.append(_free(s, f"{s} finishes: its full pages join the LRU order, tail page first"))
    grow = "doc_C and doc_D generate: each new page evicts the next LRU victim"
    return steps + [
        _add(
            "doc_C",
            "Charlie needs many pages now",
            "doc_C needs more pages than are FREE: LRU victims are evicted, doc_A's tail first",
        ),
        _add(
            "doc_D",
            "Alpha, again",
            "doc_D shares doc_A's first page, which survived because eviction takes tails first",
        ),
        *[_decode(grow) for _ in range(4)],
        _free("doc_C", "doc_C finishes"),
        _free("doc_D", "doc_D finishes"),
    ]


def _parallel(num_pages: int, page_size: int) -> list[Action]:
    first = (
        "each sample draws its own token and writes it into the cache; "
        "a sample whose last page is shared copies it first (copy-on-write)"
    )
    shares = "fork: the new sample shares every page, no page is copied"
    return [
        _add("sample.0", "Once upon a time, ", "the prompt is admitted once, as sample.0"),
        *[Action("fork", f"sample.{k}", parent="sample.0", caption=shares) for k in range(1, N_SAMPLES)],
        _decode(first, temperature=1.0),
        *[_decode("the samples grow apart", temperature=1.0) for _ in range(7)],
        *[_free(f"sample.{k}", f"sample.{k} finishes") for k in range(N_SAMPLES)],
    ]


def _beam_search(num_pages: int, page_size: int) -> list[Action]:
    step = "beam step: keep the 3 best continuations; forked beams share pages, dropped ones are freed"
    return [
        _add("beam.0", "Paged attention ", "the prompt becomes beam.0"),
        *[Action("beam", "beam", width=3, caption=step) for _ in range(8)],
    ]


def _preemption(num_pages: int, page_size: int) -> list[Action]:
    step = (
        "the scheduler runs one step: running requests decode, waiting ones are admitted; "
        "when a page is missing, a running request is preempted to free its pages"
    )
    n = PREEMPT_NEW_TOKENS
    queued = [
        Action(
            "request",
            s,
            text=t,
            width=n,
            caption=f"{s} is queued ({len(t)} prompt tokens, {n} to generate)",
        )
        for s, t in PREEMPT_REQUESTS.items()
    ]
    # One "schedule" step: the run repeats it until the scheduler has finished everything.
    return [*queued, Action("schedule", caption=step)]


def _chunked(num_pages: int, page_size: int) -> list[Action]:
    step = (
        "the scheduler runs one step of at most 8 tokens: a prompt that does not fit is "
        "prefilled in chunks, and samples only once it is all computed"
    )
    return [
        Action("request", "long", text=CHUNKED_PROMPT, width=4, caption="long is queued"),
        Action("request", "chat", text=CHAT_PROMPT, width=12, caption="chat is queued"),
        *[Action("schedule", caption=step) for _ in range(9)],
        Action("abort", "chat", caption="chat is aborted: its pages go as a finish releases them"),
        Action(
            "request",
            "chat_again",
            text=CHAT_PROMPT,
            width=4,
            caption="chat_again sends the same prompt: it waits, then hits chat's CACHED pages",
        ),
        Action("schedule", caption=step),
    ]


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            "walkthrough",
            "A request grows, finishes, and its pages are reused",
            "request_A grows token by token, finishes; request_B reuses its prefix and grows "
            "until the pool evicts.",
            16,
            4,
            _walkthrough,
        ),
        Scenario(
            "fill",
            "Sequences grow until the pool fills",
            "Three requests generate together; pages are taken only when the last one is "
            "full, until no page is left.",
            16,
            4,
            _fill,
        ),
        Scenario(
            "prefix",
            "A shared system prompt: prefix hits",
            "Requests that start with the same system prompt share its pages (ref count > 1) "
            "and later revive them from the CACHED state.",
            24,
            4,
            _prefix,
        ),
        Scenario(
            "eviction",
            "Eviction pressure: LRU victims, tail first",
            "Finished requests leave CACHED pages, released tail first; new ones evict the "
            "page released longest ago first.",
            12,
            4,
            _eviction,
        ),
        Scenario(
            "parallel",
            "Parallel sampling: fork and copy-on-write",
            "Four samples (n = 4) of one prompt share its pages; then each writes tokens of its "
            "own. Which pages must be copied?",
            20,
            4,
            _parallel,
            seed=1,
        ),
        Scenario(
            "beam",
            "Beam search: forked beams share pages",
            "Beams that survive are forked, beams that fall behind are freed; common prefixes stay shared.",
            24,
            4,
            _beam_search,
        ),
        Scenario(
            "preempt",
            "Preemption: three requests outgrow a small pool",
            "Three requests outgrow a small pool; each time a page is missing the scheduler "
            "preempts the most recently admitted one (recompute, twice in this run) and "
            "resumes it later, re-hitting its own CACHED prefix.",
            12,
            4,
            _preemption,
            scheduler=PREEMPT_SCHEDULER,
        ),
        Scenario(
            "chunked",
            "Chunked prefill and abort",
            "A 42-token prompt is prefilled 8 tokens a step next to a short request, which is "
            "then aborted; its full pages stay CACHED and a repeat of its prompt hits them.",
            24,
            4,
            _chunked,
            scheduler=CHUNKED_SCHEDULER,
        ),
    )
}


def get_scenario(name: str) -> Scenario:
    """The scenario with this name (ValueError naming the allowed names otherwise)."""
    if name not in SCENARIOS:
        raise ValueError(f"scenario must be one of {list(SCENARIOS)}, got {name!r}")
    return SCENARIOS[name]
