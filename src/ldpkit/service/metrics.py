"""Process-local counters for ``GET /metrics`` (Prometheus text exposition format 0.0.4).

Stored totals (batches, reports per collection) come from the database, so every worker
process reports the same numbers; request counters, rejects and commit latency are per
process and carry a ``pid`` label (sum them over processes in queries).
"""

from __future__ import annotations

import os
import threading
from collections import defaultdict

__all__ = ["Metrics"]

# Upper bounds of the commit latency histogram, in seconds.
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class Metrics:
    """Counters and one histogram; every method is thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.accepted: dict[str, int] = defaultdict(int)  # collection -> batches
        self.accepted_reports: dict[str, int] = defaultdict(int)
        self.duplicates: dict[str, int] = defaultdict(int)
        self.rejects: dict[tuple[str, int], int] = defaultdict(int)  # (reason, status)
        self.commit_counts = [0] * (len(_BUCKETS) + 1)
        self.commit_sum = 0.0
        self.commit_batches = 0

    def accept(self, collection: str, n: int, duplicate: bool) -> None:
        with self._lock:
            if duplicate:
                self.duplicates[collection] += 1
            else:
                self.accepted[collection] += 1
                self.accepted_reports[collection] += n

    def reject(self, reason: str, status: int) -> None:
        with self._lock:
            self.rejects[(reason, status)] += 1

    def commit(self, seconds: float, batches: int) -> None:
        with self._lock:
            i = next((k for k, b in enumerate(_BUCKETS) if seconds <= b), len(_BUCKETS))
            self.commit_counts[i] += 1
            self.commit_sum += seconds
            self.commit_batches += batches

    def render(self, stored: dict[str, tuple[int, int]]) -> str:
        """The exposition text; ``stored`` maps collection -> (reports, batches) in the DB."""
        pid = f'pid="{os.getpid()}"'
        lines = [
            "# HELP ldpkit_stored_batches Batches stored per collection (database total).",
            "# TYPE ldpkit_stored_batches gauge",
        ]
        lines += [
            f'ldpkit_stored_batches{{collection="{_escape(c)}"}} {b}'
            for c, (_, b) in sorted(stored.items())
        ]
        lines += [
            "# HELP ldpkit_stored_reports Reports stored per collection (database total).",
            "# TYPE ldpkit_stored_reports gauge",
        ]
        lines += [
            f'ldpkit_stored_reports{{collection="{_escape(c)}"}} {n}'
            for c, (n, _) in sorted(stored.items())
        ]
        with self._lock:
            lines += [
                "# HELP ldpkit_batches_total Batches accepted by this process.",
                "# TYPE ldpkit_batches_total counter",
            ]
            lines += [
                f'ldpkit_batches_total{{collection="{_escape(c)}",{pid}}} {v}'
                for c, v in sorted(self.accepted.items())
            ]
            lines += [
                "# HELP ldpkit_reports_total Reports accepted by this process.",
                "# TYPE ldpkit_reports_total counter",
            ]
            lines += [
                f'ldpkit_reports_total{{collection="{_escape(c)}",{pid}}} {v}'
                for c, v in sorted(self.accepted_reports.items())
            ]
            lines += [
                "# HELP ldpkit_duplicate_batches_total Retried batches answered from the store.",
                "# TYPE ldpkit_duplicate_batches_total counter",
            ]
            lines += [
                f'ldpkit_duplicate_batches_total{{collection="{_escape(c)}",{pid}}} {v}'
                for c, v in sorted(self.duplicates.items())
            ]
            lines += [
                "# HELP ldpkit_rejects_total Requests refused, by reason and HTTP status.",
                "# TYPE ldpkit_rejects_total counter",
            ]
            lines += [
                f'ldpkit_rejects_total{{reason="{_escape(r)}",status="{s}",{pid}}} {v}'
                for (r, s), v in sorted(self.rejects.items())
            ]
            lines += [
                "# HELP ldpkit_commit_seconds Duration of one group commit (one transaction).",
                "# TYPE ldpkit_commit_seconds histogram",
            ]
            total = 0
            for bound, count in zip(_BUCKETS, self.commit_counts):
                total += count
                lines.append(f'ldpkit_commit_seconds_bucket{{le="{bound}",{pid}}} {total}')
            total += self.commit_counts[-1]
            lines.append(f'ldpkit_commit_seconds_bucket{{le="+Inf",{pid}}} {total}')
            lines.append(f"ldpkit_commit_seconds_sum{{{pid}}} {self.commit_sum:.6f}")
            lines.append(f"ldpkit_commit_seconds_count{{{pid}}} {total}")
            lines += [
                "# HELP ldpkit_committed_batches_total Batches written by group commits.",
                "# TYPE ldpkit_committed_batches_total counter",
                f"ldpkit_committed_batches_total{{{pid}}} {self.commit_batches}",
            ]
        return "\n".join(lines) + "\n"
