"""Pictures of the page pool and the classroom dashboard (they read `snapshot()` and events).

The widget classes (`Dashboard`, `PredictStep`, `Quiz`, `Discuss`) are imported on first use,
so the pictures (and `python -m pagedkv demo`) never load ipywidgets.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from pagedkv.scenarios.text import token_ids_of
from pagedkv.viz.block_table import block_table_html, plot_block_tables
from pagedkv.viz.fragmentation import plot_paged_vs_contiguous
from pagedkv.viz.heatmap import VIEWS, PoolHeatmap, plot_lru, plot_pool
from pagedkv.viz.kernel import plot_chunked_kernel, plot_query_outputs
from pagedkv.viz.lifecycle import glossary_markdown, lifecycle_png, plot_lifecycle
from pagedkv.viz.palette import SequencePalette
from pagedkv.viz.projector import projector
from pagedkv.viz.refusal import plot_refusal
from pagedkv.viz.slot_layout import compare_layouts, contiguous_replay
from pagedkv.viz.tokens import plot_token_pages, token_pages_html
from pagedkv.viz.usage import (
    plot_page_states,
    plot_series,
    plot_slots,
    plot_usage,
    sharing_savings,
    slot_usage,
)

if TYPE_CHECKING:
    from pagedkv.viz.dashboard import Dashboard
    from pagedkv.viz.discuss import Discuss
    from pagedkv.viz.quiz import PredictStep, Quiz

_WIDGETS = {"Dashboard": ".dashboard", "Discuss": ".discuss", "PredictStep": ".quiz", "Quiz": ".quiz"}


def __getattr__(name: str) -> object:
    if name in _WIDGETS:
        return getattr(import_module(_WIDGETS[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "VIEWS",
    "Dashboard",
    "Discuss",
    "PoolHeatmap",
    "PredictStep",
    "Quiz",
    "SequencePalette",
    "block_table_html",
    "compare_layouts",
    "contiguous_replay",
    "glossary_markdown",
    "lifecycle_png",
    "plot_block_tables",
    "plot_chunked_kernel",
    "plot_query_outputs",
    "plot_lifecycle",
    "plot_lru",
    "plot_paged_vs_contiguous",
    "plot_pool",
    "plot_refusal",
    "plot_series",
    "plot_slots",
    "plot_token_pages",
    "plot_page_states",
    "plot_usage",
    "projector",
    "sharing_savings",
    "slot_usage",
    "token_ids_of",
    "token_pages_html",
]
