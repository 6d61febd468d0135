"""Odd answers, as readers type them, that every exercise check must meet with "Not yet" and a hint."""

from __future__ import annotations

import numpy as np
import torch


class AlwaysEqual:
    """An answer whose `==` says True to everything: a check must look at its type first."""

    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False

    def __hash__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return "AlwaysEqual()"


def odd_answers() -> list[object]:
    """A NumPy array (ambiguous truth), a meta tensor (no values), unhashables, `==` always True."""
    return [np.array([1, 2]), torch.ones(2, device="meta"), [[1]], {"a": 1}, AlwaysEqual()]


def assert_not_yet(result: object, hint: str = "") -> None:
    """The verdict is "Not yet" and holds `hint`."""
    assert not result and str(result).startswith("Not yet: ") and hint in str(result), str(result)
