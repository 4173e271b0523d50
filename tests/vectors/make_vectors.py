"""Write the shared test vectors of the JavaScript client (clients/js) from the Python side.

Run ``python tests/vectors/make_vectors.py`` after changing a randomizer, the hash family,
the bit packing or the JSON wire format; ``tests/test_js_client.py`` fails while the files
are stale. Each file holds inputs and what the Python implementation makes of them:

- ``hashing.json``: OLH's hash parameters and hashes of given seeds and items, and
  ``optimal_hash_range`` at given epsilons;
- ``unary.json``: OUE's integer thresholds at given epsilons and ``np.packbits`` rows;
- ``bodies.json``: per mechanism, values and fixed coins (uniform doubles, 64-bit words) and
  the JSON body (``ldpkit.io.reports_to_dict``, seeds as decimal strings) those coins give.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ldpkit.frequency import GRR, OLH, OUE, HadamardResponse
from ldpkit.frequency.grr import grr_perturb
from ldpkit.frequency.hashing import hash_parameters, local_hash, optimal_hash_range
from ldpkit.io import reports_to_dict
from ldpkit.spec import Reports

HERE = Path(__file__).resolve().parent
_U64 = np.iinfo(np.uint64).max


class _FixedUniforms:
    """Stands in for a Generator whose ``random(n)`` returns the given doubles in order."""

    def __init__(self, coins: list[float]) -> None:
        self.coins = coins

    def random(self, n: int) -> np.ndarray:
        out, self.coins = self.coins[:n], self.coins[n:]
        return np.array(out, dtype=np.float64)


def _hashing() -> dict[str, Any]:
    rng = np.random.default_rng(20261123)
    seeds = np.concatenate(
        [
            np.array([0, 1, 2, 3, _U64, 1 << 63], dtype=np.uint64),
            rng.integers(0, _U64, 10, dtype=np.uint64, endpoint=True),
        ]
    )
    items = [0, 1, 7, 1000, (1 << 32) - 1]
    ranges = [2, 3, 4, 56, 1000, (1 << 32) - 5, 1 << 32]
    a, b = hash_parameters(seeds)
    hashes = [
        {"range": g, "hashes": local_hash(seeds[:, None], np.array(items)[None, :], g).tolist()}
        for g in ranges
    ]
    eps = [0.1, 0.38, 0.5, 1.0, 2.0, 4.0, 8.0, 22.0, 23.0]
    return {
        "seeds": [str(s) for s in seeds.tolist()],
        "a": [str(x) for x in a.tolist()],
        "b": [str(x) for x in b.tolist()],
        "items": items,
        "cases": hashes,
        "optimal_hash_range": [{"epsilon": e, "g": optimal_hash_range(e)} for e in eps],
    }


def _unary() -> dict[str, Any]:
    eps = [0.01, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 25.0, 30.0]
    thresholds = []
    for e in eps:
        big, small = OUE(epsilon=e, domain_size=4)._thresholds()
        thresholds.append({"epsilon": e, "true": str(big), "other": str(small)})
    rng = np.random.default_rng(7)
    rows = [rng.integers(0, 2, d).tolist() for d in (1, 7, 8, 9, 16, 23)]
    packed = [np.packbits(np.array(r, dtype=np.uint8)).tolist() for r in rows]
    return {"thresholds": thresholds, "rows": rows, "packed": packed}


def _body(reports: Reports) -> dict[str, Any]:
    body = reports_to_dict(reports)
    if "seeds" in body["arrays"]:
        seeds = body["arrays"]["seeds"]
        seeds["data"] = [str(s) for s in seeds["data"]]
    return body


def _bodies() -> list[dict[str, Any]]:
    rng = np.random.default_rng(11)
    out = []
    for spec, n in (
        (GRR(epsilon=1.0, domain_size=5), 40),
        (GRR(epsilon=0.5, domain_size=300), 40),
        (OUE(epsilon=1.0, domain_size=11), 6),
        (OUE(epsilon=2.0, domain_size=16), 6),
        (OLH(epsilon=1.0, domain_size=10), 40),
        (OLH(epsilon=3.0, domain_size=1000, hash_range=300), 40),
        (HadamardResponse(epsilon=1.0, domain_size=6), 40),
        (HadamardResponse(epsilon=0.7, domain_size=300), 40),
    ):
        d = spec.domain_size
        values = rng.integers(0, d, n)
        uniforms: list[float] = rng.random(n).tolist()
        words = rng.integers(
            0, _U64, n * (d if isinstance(spec, OUE) else 1), dtype=np.uint64, endpoint=True
        )
        if isinstance(spec, GRR):
            y = grr_perturb(values, d, spec.p, _FixedUniforms(uniforms))  # type: ignore[arg-type]
            reports = Reports(spec, values=y.astype(spec.randomize([0], rng=0).values.dtype))
        elif isinstance(spec, OUE):
            big, small = spec._thresholds()
            w = words.reshape(n, d)
            onehot = np.arange(d)[None, :] == values[:, None]
            thresholds = np.where(onehot, np.uint64(big), np.uint64(small))
            reports = Reports(spec, bits=np.packbits(w < thresholds, axis=1))
        elif isinstance(spec, OLH):
            g = spec.range_size
            hashed = local_hash(words, values, g)
            y = grr_perturb(hashed, g, spec.p, _FixedUniforms(uniforms))  # type: ignore[arg-type]
            reports = Reports(
                spec, seeds=words, values=y.astype(np.uint16 if g > 256 else np.uint8)
            )
        else:
            size = spec.hadamard_size
            j = (words & np.uint64(size - 1)).astype(np.int64)
            row = values + 1
            want_inside = np.array(uniforms) < spec.p
            inside = (np.bitwise_count(row & j) & 1) == 0
            y = j ^ np.where(inside != want_inside, row & -row, 0)
            reports = Reports(spec, values=y.astype(spec.randomize([0], rng=0).values.dtype))
        out.append(
            {
                "values": values.tolist(),
                "uniforms": uniforms,
                "words": [str(x) for x in words.tolist()],
                "body": _body(reports),
            }
        )
    return out


def vectors() -> dict[str, Any]:
    """File name -> content of every vector file."""
    return {"hashing.json": _hashing(), "unary.json": _unary(), "bodies.json": _bodies()}


def render(content: Any) -> str:
    return json.dumps(content, indent=1) + "\n"


def main() -> int:
    for name, content in vectors().items():
        (HERE / name).write_text(render(content))
    return 0


if __name__ == "__main__":
    sys.exit(main())
