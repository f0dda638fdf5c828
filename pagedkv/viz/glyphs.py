"""Text stamped onto heatmap pictures with Pillow, from glyph masks rendered once.

`stamp_text` paints a label at an anchor point; `fit_text` shortens a label in the middle to
fit a width; `wrap_text` breaks a title into lines that fit a width; `pack_rgba` turns
colours into the 32-bit pixels a picture is composed of. The font is DejaVu Sans, the one
matplotlib ships, so stamped text matches the axes text. Why: Pillow rasterises glyphs on
every call, and a heatmap repeats the same few hundred labels on every step; pasting a
cached mask costs microseconds.

Leaves out: text layout beyond one anchored line (`pagedkv.viz.heatmap` stacks the lines).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from matplotlib import font_manager
from PIL import Image, ImageDraw, ImageFont

__all__ = ["fit_text", "pack_rgba", "stamp_text", "wrap_text"]


@lru_cache(maxsize=16)
def _font(size_px: int) -> ImageFont.FreeTypeFont:
    """DejaVu Sans, the font matplotlib ships, so stamped text matches the axes text."""
    path = font_manager.findfont(font_manager.FontProperties(family="DejaVu Sans"))
    return ImageFont.truetype(path, size_px)


@lru_cache(maxsize=8192)
def _glyphs(text: str, size_px: int, anchor: str) -> tuple[Image.Image, tuple[int, int, int, int]]:
    """`text` rendered once as an 8-bit mask, with its box relative to the anchor point.

    Pillow rasterises glyphs on every `ImageDraw.text` call (about 1 ms for a short label
    on a busy machine); pasting a cached mask costs microseconds, and a heatmap repeats the
    same few hundred labels on every step."""
    font = _font(size_px)
    x0, y0, x1, y1 = (int(v) for v in font.getbbox(text, anchor=anchor))
    box = (x0, y0, x1, y1)
    mask = Image.new("L", (max(1, box[2] - box[0]), max(1, box[3] - box[1])), 0)
    ImageDraw.Draw(mask).text((-box[0], -box[1]), text, fill=255, font=font, anchor=anchor)
    return mask, box


@lru_cache(maxsize=4096)
def fit_text(text: str, size_px: int, width_px: float) -> str:
    """`text`, with "…" in place of middle characters if needed to be at most `width_px`
    wide at `size_px`. The middle goes first: ids like request_A and request_B differ at
    the end."""
    font = _font(size_px)
    head, tail = len(text) - len(text) // 2, len(text) // 2
    shown = text
    while head + tail > 1 and font.getlength(shown) > width_px:
        head, tail = (head - 1, tail) if head >= tail else (head, tail - 1)
        shown = text[:head] + "…" + (text[-tail:] if tail else "")
    return shown


def wrap_text(text: str, size_px: int, width_px: float) -> str:
    """`text` with each of its lines broken at spaces so that no line is wider than
    `width_px` at `size_px` (a single word wider than that stays whole on its own line)."""
    font, out = _font(size_px), []
    for line in text.split("\n"):
        current = ""
        for word in line.split(" "):
            joined = f"{current} {word}" if current else word
            if current and font.getlength(joined) > width_px:
                out.append(current)
                joined = word
            current = joined
        out.append(current)
    return "\n".join(out)


def stamp_text(
    image: Image.Image, xy: tuple[float, float], text: str, size_px: int, color: str, anchor: str
) -> None:
    """Paint `text` in `color` with its `anchor` point (Pillow anchors: "mm", "ls", ...) at xy."""
    mask, (x0, y0, _, _) = _glyphs(text, size_px, anchor)
    x, y = round(xy[0]), round(xy[1])
    image.paste(color, (x + x0, y + y0, x + x0 + mask.width, y + y0 + mask.height), mask)


def pack_rgba(rgba: np.ndarray) -> np.ndarray:
    """Float RGBA [..., 4] in [0, 1] -> one uint32 per colour (little-endian RGBA bytes)."""
    return np.ascontiguousarray(np.round(rgba * 255).astype(np.uint8)).view(np.uint32)[..., 0]
