"""The three real integer streams shipped inside ldpkit (``datasets/data/streams.npz``)."""

from __future__ import annotations

import importlib.resources

import numpy as np

from ._dataset import Dataset

__all__ = ["STREAMS", "streams", "pos", "retail", "dns_google"]

_CITATION = (
    "T. Wang et al. Continuous Release of Data Streams under both Centralized and Local "
    "Differential Privacy. ACM CCS 2021 (STR21); data from github.com/dp-cont/dp-cont"
)

#: name -> (description, original data licence / provenance, order)
STREAMS: dict[str, tuple[str, str, str]] = {
    "pos": (
        "Items per transaction in the BMS-POS point-of-sale data (KDD Cup 2000); the 'POS' "
        "stream of STR21.",
        "KDD Cup 2000 BMS-POS (public research data)",
        "shuffled",
    ),
    "retail": (
        "Items per basket in the Belgian retail market-basket data (Brijs et al., FIMI).",
        "FIMI repository retail data, T. Brijs et al. (public research data)",
        "shuffled",
    ),
    "dns_google": (
        "DNS queries per second whose second-level domain is google.com, one value per second.",
        "DNS query log published with dp-cont",
        "time order",
    ),
}


def streams(name: str) -> Dataset:
    """Load one of the shipped streams: ``"pos"``, ``"retail"`` or ``"dns_google"``.

    Returns
    -------
    Dataset
        Numerical, ``float64`` integer counts, domain = observed ``(min, max)``:

        ============  =========  ========  ==========
        name          n          range     order
        ============  =========  ========  ==========
        pos           515,597    2..165    shuffled
        retail        88,162     1..76     shuffled
        dns_google    355,872    1..28     time order
        ============  =========  ========  ==========

        The shipped file stores ``uint16`` and is read with ``allow_pickle=False``.

    Examples
    --------
    >>> data = streams("retail")
    >>> data.n, data.domain
    (88162, (1.0, 76.0))
    """
    if name not in STREAMS:
        raise ValueError(f"name must be one of {sorted(STREAMS)}, got {name!r}")
    ref = importlib.resources.files("ldpkit.datasets") / "data" / "streams.npz"
    with importlib.resources.as_file(ref) as path, np.load(path, allow_pickle=False) as archive:
        raw = archive[name]
    values = raw.astype(np.float64)
    description, origin, order = STREAMS[name]
    return Dataset(
        name=name,
        kind="numerical",
        values=values,
        domain=(float(values.min()), float(values.max())),
        licence=f"MIT (dp-cont/dp-cont repository); original data: {origin}",
        source=f"ldpkit/datasets/data/streams.npz, key {name!r} (converted from dp-cont)",
        citation=_CITATION,
        description=f"{description} Order: {order}.",
    )


def pos() -> Dataset:
    """Return the BMS-POS stream (515,597 transactions, items per transaction 2..165)."""
    return streams("pos")


def retail() -> Dataset:
    """Return the FIMI retail stream (88,162 baskets, items per basket 1..76)."""
    return streams("retail")


def dns_google() -> Dataset:
    """Return the google.com DNS stream (355,872 seconds, 1..28 queries per second)."""
    return streams("dns_google")
