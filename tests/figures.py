"""Figures compared: a compared cell's fresh plot must look like the one stored in the notebook.

nbval compares only a plot's text (`<Figure size 780x260 with 3 Axes>`), so a chart whose bars
change would pass. The root conftest hands every compared cell's fresh outputs to
`figure_differences`, which decodes each PNG and measures the root-mean-square difference of
the pixels with matplotlib's own `calculate_rms` (what `matplotlib.testing.compare` uses). The
tolerance lets anti-aliasing and font hinting differ (a changed bar moves thousands of pixels,
RMS tens); cells marked NBVAL_IGNORE_OUTPUT (hardware-dependent plots) are not compared.
"""

from __future__ import annotations

import base64
import io

import numpy as np
from matplotlib.image import imread
from matplotlib.testing.compare import calculate_rms

PNG = "image/png"
# RMS over 0-255 channel values. The same notebook re-run gives 0; two rows more in one bar of
# notebook 05's chart give about 10.
TOLERANCE = 2.0


def png_pixels(data: str | bytes) -> np.ndarray:
    """A stored or fresh `image/png` output (base64 text) as 0-255 RGB values."""
    raw = base64.b64decode(data) if isinstance(data, str) else data
    pixels = imread(io.BytesIO(raw), format="png")
    return np.round(pixels[..., :3] * 255).astype(np.int16)


def figure_differences(stored: list[dict], fresh: list[dict], tolerance: float = TOLERANCE) -> list[str]:
    """How the fresh PNG outputs of a cell differ from the stored ones ([]: they look the same)."""
    old = [out["data"][PNG] for out in stored if PNG in out.get("data", {})]
    new = [out["data"][PNG] for out in fresh if PNG in out.get("data", {})]
    if len(old) != len(new):
        return [f"the cell shows {len(new)} figures, the notebook stores {len(old)}"]
    problems = []
    for number, (before, after) in enumerate(zip(old, new, strict=True), 1):
        expected, actual = png_pixels(before), png_pixels(after)
        if expected.shape != actual.shape:
            problems.append(
                f"figure {number} is {actual.shape[1]}x{actual.shape[0]} px, stored "
                f"{expected.shape[1]}x{expected.shape[0]}"
            )
            continue
        rms = calculate_rms(expected, actual)
        if rms > tolerance:
            problems.append(
                f"figure {number} differs from the stored one (RMS {rms:.1f} > {tolerance} over 0-255): "
                "what it plots changed; regenerate the notebook if that is meant"
            )
    return problems
