import numpy as np
import pytest

from ldpkit import GRR
from ldpkit.io import load_reports, load_stats, save_reports, save_stats


def test_reports_and_stats_round_trip(tmp_path):
    spec = GRR(epsilon=1.0, domain_size=300)
    r = spec.randomize(np.arange(300), rng=0)
    load = load_reports(save_reports(r, tmp_path / "r.npz"), expected=spec)
    assert load.equals(r) and load.values.dtype == np.uint16
    s = spec.aggregate(r)
    assert load_stats(save_stats(s, tmp_path / "s.json"), expected=spec) == s
    with pytest.raises(ValueError, match="reports must come from"):
        load_reports(tmp_path / "r.npz", expected=GRR(epsilon=2.0, domain_size=300))
    with pytest.raises(ValueError, match="stats must come from"):
        load_stats(tmp_path / "s.json", expected=GRR(epsilon=2.0, domain_size=300))
    np.savez(tmp_path / "plain.npz", values=np.arange(3))
    with pytest.raises(ValueError, match="ldpkit reports file"):
        load_reports(tmp_path / "plain.npz")
