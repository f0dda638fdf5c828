"""Pictures of the page pool and the classroom dashboard (they read `snapshot()` and events)."""

from .block_table import block_table_html, plot_block_tables
from .dashboard import Dashboard
from .fragmentation import compare_layouts, contiguous_replay, plot_paged_vs_contiguous
from .heatmap import VIEWS, PoolHeatmap, plot_lru, plot_pool
from .kernel import plot_chunked_kernel
from .lifecycle import glossary_markdown, lifecycle_png, plot_lifecycle
from .palette import SequencePalette
from .projector import projector
from .quiz import PredictStep, Question, Quiz
from .refusal import plot_refusal
from .tokens import plot_token_pages, token_ids_of, token_pages_html
from .usage import plot_series, plot_slots, plot_usage, sharing_savings, slot_usage

__all__ = [
    "VIEWS",
    "Dashboard",
    "PoolHeatmap",
    "PredictStep",
    "Question",
    "Quiz",
    "SequencePalette",
    "block_table_html",
    "compare_layouts",
    "contiguous_replay",
    "glossary_markdown",
    "lifecycle_png",
    "plot_block_tables",
    "plot_chunked_kernel",
    "plot_lifecycle",
    "plot_lru",
    "plot_paged_vs_contiguous",
    "plot_pool",
    "plot_refusal",
    "plot_series",
    "plot_slots",
    "plot_token_pages",
    "plot_usage",
    "projector",
    "sharing_savings",
    "slot_usage",
    "token_ids_of",
    "token_pages_html",
]
