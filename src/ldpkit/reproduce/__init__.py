"""One command per paper: ``ldpkit reproduce NAME [--quick]``.

Each paper lives in its own module ``ldpkit.reproduce.<name>`` exposing

``QUICK`` and ``FULL`` (its configurations: a reduced grid and the paper's) and
``run(config, *, out: Path, seed: int, jobs: int, console: rich.console.Console) -> Path``,
which runs the configured grids with :mod:`ldpkit.experiments` (progress bar and time
estimate on ``console``; worker processes over grid cells with ``jobs``; the same seed gives
the same records), prints its tables and writes its results into the existing directory
``out`` (Parquet records, Markdown report, figures as PNG and PDF), which it returns.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["PAPERS", "load", "run"]

#: Paper name -> what is reproduced.
PAPERS: dict[str, str] = {
    "fo17": "Wang et al., USENIX Security 2017: frequency oracles (Table 2, MSE vs epsilon)",
    "con20": "Wang et al., NDSS 2020: consistency post-processing",
    "sw20": "Li et al., SIGMOD 2020: numerical distributions (Square Wave + EMS vs competitors)",
    "wav25": "Zhao et al., 2025: Haar-wavelet expansion vs competitors",
    "tops21": "Wang et al., CCS 2021: continuous release of streams (ToPS, ToPL)",
}


def load(name: str) -> ModuleType:
    """Return the module reproducing ``name``; ValueError for unknown names."""
    if name not in PAPERS:
        raise ValueError(f"paper must be one of {sorted(PAPERS)}, got {name!r}")
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name == f"{__name__}.{name}":
            raise NotImplementedError(f"'ldpkit reproduce {name}' is not implemented yet") from exc
        raise


def run(
    name: str,
    *,
    quick: bool = False,
    out: Path | None = None,
    seed: int = 0,
    jobs: int = 1,
    console: Any = None,
) -> Path:
    """Reproduce ``name``; results go to ``out`` (default ``results/<name>[-quick]``)."""
    from rich.console import Console

    module = load(name)
    out = Path(out) if out is not None else Path("results") / (name + ("-quick" if quick else ""))
    out.mkdir(parents=True, exist_ok=True)
    config = module.QUICK if quick else module.FULL
    return module.run(config, out=out, seed=seed, jobs=jobs, console=console or Console())
