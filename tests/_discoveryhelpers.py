"""Shared set-up of the discovery tests: planted strings over a long tail of rare ones."""

from __future__ import annotations

import numpy as np


def planted_population(
    n: int,
    rng: np.random.Generator,
    planted: dict[str, float],
    alphabet: str = "abcdefghij",
    length: int = 4,
) -> np.ndarray:
    """``n`` strings: each planted one with its probability, the rest random strings.

    The others are ``length`` symbols drawn uniformly from ``alphabet``, so each is rare.
    """
    names = [*planted, "other"]
    probs = [*planted.values(), 1 - sum(planted.values())]
    draws = rng.choice(len(names), size=n, p=probs)
    out = np.array(names, dtype=object)[draws]
    tail = draws == len(names) - 1
    symbols = np.array(list(alphabet))
    noise = symbols[rng.integers(0, len(alphabet), size=(int(tail.sum()), length))]
    out[tail] = ["".join(row) for row in noise]  # a long tail of rare strings
    return out
