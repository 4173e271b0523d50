import math

import numpy as np
import pytest

from ldpkit import privacy_loss, split_budget


def test_privacy_loss_of_matrices():
    e = math.exp(0.7)
    m = np.array([[e, 1.0], [1.0, e]]) / (e + 1)
    assert privacy_loss(m) == pytest.approx(0.7, rel=1e-12)
    assert privacy_loss(np.array([[1.0, 0.0], [0.5, 0.5]])) == math.inf
    assert privacy_loss(np.array([[0.5, 0.5, 0.0], [0.5, 0.5, 0.0]])) == 0.0
    with pytest.raises(ValueError, match="sum to 1"):
        privacy_loss(np.array([[0.5, 0.6], [0.5, 0.5]]))


def test_split_budget():
    assert split_budget(1.0, 4) == [0.25] * 4
    assert split_budget(3.0, [1, 2]) == pytest.approx([1.0, 2.0])
    with pytest.raises(ValueError, match="parts must be"):
        split_budget(1.0, [1, -1])
