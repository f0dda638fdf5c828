"""What each beam step of a finished run did, in words: forks (and from which beam), drops and
copy-on-write copies. Notebook 04 prints it under the `beam` scenario."""

from __future__ import annotations

from collections.abc import Hashable

from pagedkv.scenarios.run import ScenarioRun


def describe_steps(run: ScenarioRun) -> str:
    """One block per step that forked, dropped or copied: "step k:" then one line per move.

    A drop is a sequence in the block tables before the step and not after it; a fork's
    parent is the sequence whose block table (before the step) equals the pages it shares.
    """
    out = []
    for record in run.records:
        before = run.snapshots[record.step - 1].block_tables
        after = run.snapshots[record.step].block_tables
        shared: dict[Hashable, list[int]] = {}  # fork: child -> the pages it shares
        for e in record.events:
            if e.kind == "fork":
                shared.setdefault(e.seq_id, []).append(e.page_id)
        moves = [f"{s} dropped, holding {list(before[s])}" for s in before if s not in after]
        for child, pages in shared.items():
            parent = next((s for s, table in before.items() if list(table) == pages), "another sequence")
            moves.append(f"{child} forked from {parent}, sharing {pages}")
        moves += [f"{e.seq_id} {e.detail} to page {e.page_id}" for e in record.events if e.kind == "cow"]
        if moves:
            out.append("\n  ".join([f"step {record.step}:", *moves]))
    return "\n".join(out)
