"""Results people can use: to_frame, plot, labels, no intervals after biased post-processing."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest

from ldpkit import Encoder, heavy_hitters
from ldpkit.consistency import norm_sub
from ldpkit.estimate import IntervalWarning
from ldpkit.frequency import GRR
from ldpkit.numeric import HierarchicalHistogram, PiecewiseMechanism


@pytest.fixture(scope="module")
def labelled():
    words = ["z"] * 500 + ["y"] * 300 + ["x"] * 150 + ["w"] * 50
    enc = Encoder.from_values(words)
    spec = GRR(epsilon=2.0, domain_size=enc.domain_size)
    return enc.label(spec.run(enc.encode(words * 20), rng=0))


def test_frequency_frame_has_labels_as_index_and_chosen_alpha(labelled) -> None:
    frame = labelled.to_frame(alpha=0.1)
    assert list(frame.index) == ["z", "y", "x", "w"] and frame.index.name == "label"
    lo, hi = labelled.confidence_interval(0.1)
    np.testing.assert_array_equal(frame.ci_low, lo)
    np.testing.assert_array_equal(frame.ci_high, hi)
    assert list(frame.item) == [0, 1, 2, 3]
    wider = labelled.to_frame(alpha=0.01)
    assert np.all(wider.ci_low < frame.ci_low) and np.all(wider.ci_high > frame.ci_high)
    plain = labelled.replace(labels=None).to_frame()
    assert plain.index.name == "item" and list(plain.index) == [0, 1, 2, 3]


def test_top_and_heavy_hitters_return_labels(labelled) -> None:
    assert labelled.top(2) == ["z", "y"]
    assert labelled.top(2, indices=True).tolist() == [0, 1]
    assert heavy_hitters(labelled, 0.05)[:2] == ["z", "y"]
    assert heavy_hitters(labelled, 0.05, indices=True)[:2].tolist() == [0, 1]
    assert labelled.replace(labels=None).top(1).tolist() == [0]


def test_intervals_are_nan_after_norm_sub(labelled) -> None:
    post = norm_sub(labelled)
    with pytest.warns(IntervalWarning, match="norm_sub"):
        lo, hi = post.confidence_interval(0.05)
    assert np.all(np.isnan(lo)) and np.all(np.isnan(hi))
    with pytest.warns(IntervalWarning):
        frame = post.to_frame()
    assert frame.ci_low.isna().all() and not frame.frequency.isna().any()


def test_plots_return_axes(labelled) -> None:
    ax = labelled.plot(top=3)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["z", "y", "x"]
    assert len(ax.patches) == 3
    plt.close("all")
    values = np.random.default_rng(0).beta(5, 2, size=20_000)
    dist = HierarchicalHistogram(epsilon=1.0, buckets=16).run(values, rng=1)
    ax = dist.plot()
    assert len(ax.patches) == 16
    ax = dist.plot(kind="cdf")
    assert len(ax.collections) == 1  # the shaded band
    with pytest.raises(ValueError, match="kind"):
        dist.plot(kind="pie")
    mean = PiecewiseMechanism(epsilon=1.0, low=0.0, high=1.0).run(values, rng=2)
    ax = mean.plot()
    assert ax.get_ylabel() == "estimate"
    plt.close("all")


def test_distribution_and_mean_frames() -> None:
    values = np.random.default_rng(0).beta(5, 2, size=20_000)
    dist = HierarchicalHistogram(epsilon=1.0, buckets=16).run(values, rng=1)
    frame = dist.to_frame(alpha=0.05)
    assert len(frame) == 16 and frame.index[0].left == 0.0
    assert np.all(frame.prob_low <= frame.prob_high)
    cdf = frame.cdf.clip(0.0, 1.0)  # the plain (signed) CDF may dip below 0; bounds not
    assert np.all((frame.cdf_low <= cdf) & (cdf <= frame.cdf_high))
    with pytest.warns(IntervalWarning):
        assert dist.postprocess("cdf").to_frame().cdf_low.isna().all()
    mean = PiecewiseMechanism(epsilon=1.0, low=0.0, high=1.0).run(values, rng=2)
    mframe = mean.to_frame(alpha=0.1)
    lo, hi = mean.mean_interval(0.1)
    assert mframe.ci_low.iloc[0] == lo and mframe.ci_high.iloc[0] == hi
    assert lo < mean.mean < hi and mframe.n.iloc[0] == 20_000
    # default: the empirical variance; the worst case is wider (a safe bound)
    wlo, whi = mean.mean_interval(0.1, empirical=False)
    assert whi - wlo > hi - lo
