"""Sizes whose state would exceed the memory budget are refused when the spec is built,
with the estimate of what they would need."""

from __future__ import annotations

import numpy as np
import pytest

from ldpkit import GRR, OUE, SUE
from ldpkit._validation import MEMORY_BUDGET, check_memory
from ldpkit.frequency import THE, SubsetSelection


@pytest.mark.parametrize(
    ("build", "words"),
    [
        (lambda: SUE(epsilon=1.0, domain_size=2**32), "about 32 GiB"),
        (lambda: OUE(epsilon=1.0, domain_size=2**32), "about 32 GiB"),
        (lambda: THE(epsilon=1.0, domain_size=2**32), "about 32 GiB"),
        (lambda: SubsetSelection(epsilon=1.0, domain_size=2**31), "about 16 GiB"),
        (lambda: GRR(epsilon=1.0, domain_size=2**31), "about 16 GiB"),
    ],
)
def test_huge_sizes_are_refused_up_front(build, words):
    with pytest.raises(ValueError, match=rf"domain_size=\d+ must keep the state of .*{words}"):
        build()


def test_budget_edge():
    d = MEMORY_BUDGET // 8  # exactly the budget: accepted (nothing is allocated yet)
    assert GRR(epsilon=1.0, domain_size=d).domain_size == d
    with pytest.raises(ValueError, match="memory budget"):
        GRR(epsilon=1.0, domain_size=d + 1)
    check_memory(10.0, "x", "y", budget=10.0)
    with pytest.raises(ValueError, match="x must keep the state of y within"):
        check_memory(11.0, "x", "y", budget=10.0)


@pytest.mark.parametrize("cls", [OUE, SUE, THE])
def test_report_batches_beyond_the_budget_are_refused_before_sampling(cls):
    spec = cls(epsilon=1.0, domain_size=2**20)  # 128 KiB of packed bits per report
    values = np.zeros(40_000, dtype=np.int64)  # 40,000 reports: about 4.9 GiB
    with pytest.raises(ValueError, match=r"len\(values\)=40000 at domain_size=1048576 .*4\.88 GiB"):
        spec.randomize(values, rng=0)
    assert cls(epsilon=1.0, domain_size=64).randomize(values, rng=0).bits.shape == (40_000, 8)
