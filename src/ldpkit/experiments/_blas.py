"""Single-threaded BLAS while a reproduction runs its grid."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

__all__ = ["single_threaded_blas"]


@contextlib.contextmanager
def single_threaded_blas() -> Iterator[None]:
    """Limit BLAS to one thread inside the block, when ``threadpoolctl`` is installed.

    The grids' cells do small dense linear algebra (RAPPOR's least squares on d x d
    matrices). Multi-threaded OpenBLAS gains nothing there, and on a busy machine its
    spinning threads slow such calls down twenty-fold or more (measured: 185 ms vs 7 ms
    per RAPPOR estimate at d = 128 on a shared 2-core host). Parallelism comes from the
    grid's worker processes instead (``--jobs``; forked workers inherit the limit).
    Without ``threadpoolctl`` this is a no-op.
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - optional
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield
