"""Why AutoDistribution has no interior-atom candidate: what an oracle atom set
would gain, and what two detectors find from the reports.

Run: ``nice python studies/auto_atoms_probe.py [--reps 3]``. For a few WAV25 cells (the
benchmark's seeds, so the same Square Wave reports as benchmarks/auto_distribution.py's first
repetitions) it prints, averaged over the repetitions:

* W1 and KS of AutoDistribution, SW + EM, SW + EMS and of EMS-type fits (strength s) with an
  ORACLE atom set left out of the smoothing (the buckets holding more than 1 % or 0.3 % of the
  true values; :func:`ldpkit.numeric._kernels_auto._masked_smooth`);
* on the first training fold (K = 2, as the estimator splits), the largest gradient z over
  the interior buckets: the directional derivative of the log-likelihood towards a point
  mass at bucket i at the best smoothed fit, ``g_i = sum_y n_y M_yi / (M theta)_y / N``
  (Lindsay 1983, the vertex-direction test for adding a support point), in standard errors of
  its mean over the reports; the held-out log-likelihood gain of the oracle set over the
  best plain candidate; and the training log-likelihood gain of concentrating the smoothed
  fit's mass within +-8 buckets into one bucket, at the oracle's buckets and elsewhere. Planted heaps on Beta(5, 2) (1-10 % of the values at 0.3) follow.

``--large``: the same statistics on weeks worked resampled to n = 1e6 (SW reports only).
Nothing here is timed.
"""

from __future__ import annotations

import argparse

import numpy as np

from ldpkit.experiments.numeric import grid_errors
from ldpkit.numeric import AutoDistribution, Distribution
from ldpkit.numeric.auto import _TINY, _em_matrix, _Fitter, _split
from ldpkit.reproduce import wav25

CELLS = (
    ("weeks worked", 2.0),
    ("weeks worked", 2.5),
    ("salaries", 1.5),
    ("salaries", 2.5),
    ("CPSSW8 earnings", 2.0),
    ("flights dep. time", 2.0),
)


def gradient_z(matrix: np.ndarray, counts: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """z of ``g_i - 1`` per input bucket (dense products: a probe, not the estimator)."""
    n = counts.sum()
    mt = np.maximum(matrix @ theta, _TINY)
    g = (matrix.T @ (counts / mt)) / n
    var = ((matrix * matrix).T @ (counts / mt**2)) / n - g**2
    return (g - 1.0) / np.sqrt(np.maximum(var, 1e-300) / n)


def concentration_gain(
    matrix: np.ndarray, counts: np.ndarray, theta: np.ndarray, w: int = 8
) -> np.ndarray:
    """Per bucket i, the largest log-likelihood gain of moving a share t in {0.1, 0.25,
    0.5, 0.75, 1} of ``theta``'s mass on buckets i - w..i + w into bucket i (the exact
    change, dense products)."""
    d = theta.size
    mt = np.maximum(matrix @ theta, _TINY)
    weighted = np.concatenate([np.zeros((matrix.shape[0], 1)), np.cumsum(matrix * theta, 1)], 1)
    lo, hi = np.clip(np.arange(d) - w, 0, d), np.clip(np.arange(d) + w + 1, 0, d)
    prefix = np.concatenate([[0.0], np.cumsum(theta)])
    move = (matrix * (prefix[hi] - prefix[lo]) - (weighted[:, hi] - weighted[:, lo])) / mt[:, None]
    best = np.zeros(d)
    for t in (0.1, 0.25, 0.5, 0.75, 1.0):
        best = np.maximum(best, counts @ np.log(np.maximum(1.0 + t * move, 1e-300)))
    return best


def fold_probe(
    spec: AutoDistribution, counts: np.ndarray, atoms: np.ndarray | None
) -> tuple[float, float, float, float]:
    """(max interior gradient z at the best smoothed fit, held-out gain of ``atoms``,
    largest concentration gain on the training fold at ``atoms`` and elsewhere)."""
    matrix = _em_matrix(spec)
    part = _split(counts.astype(np.int64), 2, np.random.default_rng(0))[0].astype(float)
    train = counts - part
    fitter = _Fitter(matrix, train)

    def score(theta: np.ndarray) -> float:
        return float(part @ np.log(np.maximum(fitter.predict(theta), _TINY)))

    fits: dict[float, np.ndarray] = {}
    theta = None
    for s in (8.0, 2.0, 0.5):
        theta, _ = fitter.fit(s, 5e-4, 1000, theta)
        fits[s] = theta
    best_s = max(fits, key=lambda s: score(fits[s]))
    best = max(score(f) for f in fits.values())
    on, done = fits[best_s], 0
    for budget in (10, 30, 100, 300):
        on, _ = fitter.fit(0.0, 0.0, budget - done, on)
        done = budget
        best = max(best, score(on))
    em, _ = fitter.fit(0.0, 5e-4 * np.exp(spec.epsilon), 1000, fits[best_s])
    best = max(best, score(em))
    z = gradient_z(matrix, train, fits[best_s])
    gain, at_atoms, elsewhere = np.nan, np.nan, np.nan
    if atoms is not None and atoms.any():
        fit_a, _ = fitter.fit(best_s, 5e-4, 1000, fits[best_s], atoms)
        gain = score(fit_a) - best
        conc = concentration_gain(matrix, train, fits[best_s])[3:-3]  # off the end atoms
        inner = atoms[3:-3]
        at_atoms = float(conc[inner].max()) if inner.any() else np.nan
        elsewhere = float(conc[~inner].max())
    return float(z[1:-1].max()), gain, at_atoms, elsewhere


def large_probe() -> None:
    """Weeks worked resampled to n = 1e6 (as benchmarks/auto_distribution.py does), SW
    reports only: the detectors' statistics at the heavy buckets and elsewhere, and KS of
    Auto against the oracle set at s = 0.5."""
    bench = wav25.load_bench("weeks worked", wav25.FULL, 0)
    values = np.random.default_rng([0, 17]).choice(bench.values, size=1_000_000, replace=True)
    srt, d = np.sort(values), 1024
    share = np.bincount(np.minimum((values * d).astype(int), d - 1), minlength=d) / values.size
    heavy = share > 0.003
    inner, other = heavy.copy(), ~heavy
    for arr in (inner, other):
        arr[:3] = arr[-3:] = False  # off the end atoms
    for eps in (1.0, 2.0):
        auto = AutoDistribution(epsilon=eps, expected_n=values.size, hh_share=0.0)
        seed_r = np.random.SeedSequence([0, 0, int(eps * 100)])
        stats = auto.aggregate(auto.randomize(values, rng=seed_r))
        counts, matrix = np.asarray(stats.counts, dtype=float), _em_matrix(auto)
        part = _split(counts.astype(np.int64), 2, np.random.default_rng(0))[0].astype(float)
        fitter = _Fitter(matrix, counts - part)
        theta = None
        for s in (8.0, 2.0, 0.5):
            theta, _ = fitter.fit(s, 5e-4, 1000, theta)
        assert theta is not None
        z = gradient_z(matrix, counts - part, theta)
        conc = concentration_gain(matrix, counts - part, theta)
        em, _ = fitter.fit(0.0, 5e-4 * np.exp(eps), 1000, theta)
        atoms_fit, _ = fitter.fit(0.5, 5e-4, 1000, theta, heavy)
        held = [float(part @ np.log(np.maximum(fitter.predict(t), _TINY))) for t in (em, atoms_fit)]
        full = _Fitter(matrix, counts)
        start, _ = full.fit(0.5, 1e-3, 10_000, None)
        oracle, _ = full.fit(0.5, 1e-3, 10_000, start, heavy)
        ks_auto = grid_errors(auto.estimate(stats), srt)[1]
        ks_oracle = grid_errors(Distribution(oracle, 0.0, 1.0, n=stats.n, spec=auto), srt)[1]
        print(f"weeks worked n = 1e6, eps {eps:g}: gradient z heavy max {z[inner].max():.1f}, "
              f"elsewhere {z[other].max():.1f}; concentration gain heavy max "
              f"{conc[inner].max():.1f}, elsewhere {conc[other].max():.1f}; oracle held-out "
              f"{held[1] - held[0]:+.0f} nats over plain EM; KS Auto "
              f"{ks_auto:.4f}, oracle {ks_oracle:.4f}", flush=True)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--large", action="store_true", help="only the n = 1e6 weeks worked part")
    args = ap.parse_args()
    if args.large:
        large_probe()
        return
    d = 1024
    for name, eps in CELLS:
        bench = wav25.load_bench(name, wav25.FULL, 0)
        srt = np.sort(bench.values)
        share = np.bincount(np.minimum((bench.values * d).astype(int), d - 1), minlength=d)
        share = share / bench.n
        rows: dict[str, list[tuple[float, float]]] = {}
        probes = []
        for r in range(args.reps):
            auto = AutoDistribution(epsilon=eps, expected_n=bench.n)
            seed_r = np.random.SeedSequence([0, r, int(eps * 100)])
            stats = auto.aggregate(auto.randomize(bench.values, rng=seed_r))
            counts = np.asarray(stats.counts, dtype=float)
            fitter = _Fitter(_em_matrix(auto), counts)

            def err(theta: np.ndarray, stats=stats, auto=auto, srt=srt) -> tuple[float, float]:
                return grid_errors(Distribution(theta, 0.0, 1.0, n=stats.n, spec=auto), srt)

            rows.setdefault("Auto", []).append(grid_errors(auto.estimate(stats), srt))
            em, _ = fitter.fit(0.0, 1e-3 * np.exp(eps), 10_000, None)
            rows.setdefault("SW-EM", []).append(err(em))
            ems, _ = fitter.fit(0.5, 1e-3, 10_000, None)
            rows.setdefault("SW-EMS", []).append(err(ems))
            for thr in (0.01, 0.003):
                atoms = share > thr
                for s in (0.5, 2.0, 8.0):
                    start, _ = fitter.fit(s, 1e-3, 10_000, None)
                    fit, _ = fitter.fit(s, 1e-3, 10_000, start, atoms)
                    key = f"oracle >{thr:g} ({int(atoms.sum())}) s={s:g}"
                    rows.setdefault(key, []).append(err(fit))
            probes.append(fold_probe(auto, counts, share > 0.003))
        print(f"{name}, eps {eps:g} ({args.reps} reps)")
        for key, vals in rows.items():
            w1, ks = np.mean(vals, axis=0)
            print(f"  {key:28s} W1 {w1:.5f}  KS {ks:.5f}")
        zs, gains, conc_at, conc_else = zip(*probes, strict=True)
        print(f"  fold: max interior gradient z {np.round(zs, 1)}; oracle held-out gain "
              f"{np.round(gains, 0)} nats; concentration gain (training) at the heavy "
              f"buckets up to {np.round(conc_at, 1)}, elsewhere up to {np.round(conc_else, 1)}",
              flush=True)  # fmt: skip
    gen = np.random.default_rng(5)
    for n in (100_000, 1_000_000):
        for heap in (0.01, 0.03, 0.1):
            values = gen.beta(5.0, 2.0, n)
            values[gen.random(n) < heap] = 0.3001
            atoms = np.zeros(d, dtype=np.bool_)
            atoms[int(0.3001 * d)] = True
            for eps in (1.0, 2.0):
                auto = AutoDistribution(epsilon=eps, expected_n=n)
                stats = auto.aggregate(auto.randomize(values, rng=1))
                z, gain, _, _ = fold_probe(auto, np.asarray(stats.counts, dtype=float), atoms)
                print(f"planted heap {heap:.0%} at 0.3, n {n:.0e}, eps {eps:g}: max interior "
                      f"z {z:.1f}, oracle atom held-out gain {gain:+.0f} nats", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
