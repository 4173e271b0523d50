"""A device that memoizes its answers: repeated reports of one value leak no more.

:class:`Device` holds a secret and answers ``device.report(spec, values)``:

* for a longitudinal spec (:mod:`ldpkit.longitudinal`: a permanent and an instantaneous
  round), the permanent answer of each value is derived deterministically from the secret:
  ``K = HMAC-SHA256(secret, "ldpkit.device/1" | spec fingerprint | value)`` keys the
  permanent round's only randomness. L-GRR and the longitudinal unary encodings consume
  64-bit words ``HMAC-SHA256(K, counter)`` (counter mode, :class:`DerivedWords`) with the
  exact integer samplers (a word below ``floor(2^64 / T) T`` gives ``U = word mod T``; a
  unary bit is ``word < threshold``), which the JS client (``clients/js/src/device.js``)
  computes bit for bit (shared vectors); so does LOLOHA (its hash seed: the first word of
  the key of ``"state"``; its permanent GRR over ``[g]`` keyed by the hashed value), DBitFlipPM
  (its sampled buckets from the ``"state"`` words by Floyd's algorithm, one word per memoized
  bit) and OneBitMean (its alpha: the top 32 bits of the first ``"state"`` word; one U per
  grid point). Other specs key a Philox generator with ``K`` (Python only). The answer is memoized per
  (fingerprint, value), and every report re-randomizes it with fresh randomness (``rng``,
  the secure generator by default), so two days' reports differ: not a stable identifier;
* for any other spec (no two-round form), the whole report is derived and memoized the same
  way. Identical reports across days are then a **stable identifier** of the device (what
  RAPPOR's instantaneous round exists to prevent): prefer a longitudinal spec for repeated
  collection.

A device that loses its memo file re-derives the same answers from the secret instead of
leaking fresh ones. The file (JSON) holds the secret and the memo, in the user's data
directory by default; every write is atomic (temporary file, fsync, ``os.replace``, fsync of
the directory), so a crash or ``kill -9`` leaves the old or the new file, never a torn one.
No generator state is ever sent: a report is what the spec's ``randomize`` would send.

``budget=`` caps each question's loss on this device (:meth:`Device.privacy_spent`): a
report that would need a new permanent answer past it raises
:class:`ldpkit.BudgetExceededError` before anything is derived, stored or returned; values
already memoized are always answered (their reports cost nothing more).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ._rng import RNGLike, as_generator
from ._validation import check_real
from .accountant import BudgetExceededError
from .spec import Mechanism, Reports

__all__ = ["Device", "DerivedWords", "default_device_path"]

#: Layout written to and read from the memo file.
DEVICE_FORMAT = "ldpkit.device/1"
_DOMAIN = DEVICE_FORMAT.encode() + b"\x00"


def default_device_path() -> Path:
    """Return the memo file's path in the user's data directory.

    ``$XDG_DATA_HOME/ldpkit/device.json`` (``~/.local/share`` by default;
    ``%LOCALAPPDATA%`` on Windows, ``~/Library/Application Support`` on macOS).
    """
    if os.name == "nt":
        base = Path(os.environ.get("LOCALAPPDATA", Path.home() / "AppData" / "Local"))
    elif os.uname().sysname == "Darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "ldpkit" / "device.json"


def _value_key(value: Any) -> tuple[str, bytes]:
    """Return a canonical text key (for the file) and byte string (for the HMAC) of one value."""
    if isinstance(value, (np.integer, int)) and not isinstance(value, (bool, np.bool_)):
        return f"i{int(value)}", b"i" + int(value).to_bytes(16, "big", signed=True)
    as_float = float(value)
    return f"f{as_float.hex()}", b"f" + np.float64(as_float).tobytes()


class DerivedWords:
    """Uniform 64-bit words ``HMAC-SHA256(key, counter)`` in counter mode.

    The counter is 8 bytes big-endian from 0; each digest gives four big-endian words, in
    order. This is the permanent round's randomness, computable exactly in any language
    (the JS client's ``derivedWords``).

    Examples
    --------
    >>> words = DerivedWords(bytes(32))
    >>> a, b = words.u64(), words.below(10)
    >>> 0 <= a < 2**64 and 0 <= b < 10
    True
    """

    def __init__(self, key: bytes) -> None:
        self._key = bytes(key)
        self._counter = 0
        self._pending: list[int] = []

    def u64(self) -> int:
        """Return the next word."""
        if not self._pending:
            block = hmac.new(self._key, self._counter.to_bytes(8, "big"), hashlib.sha256)
            digest = block.digest()
            self._counter += 1
            self._pending = [int.from_bytes(digest[i : i + 8], "big") for i in (24, 16, 8, 0)]
        return self._pending.pop()

    def below(self, total: int) -> int:
        """Return a uniform integer in ``[0, total)`` by rejection (the JS ``uniformBelow``)."""
        limit = ((1 << 64) // total) * total
        while True:
            w = self.u64()
            if w < limit:
                return w % total


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".device-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)  # atomic on POSIX and Windows: old file or new file
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if os.name != "nt":  # make the rename itself durable
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


class Device:
    """One user's device: a secret, and a persistent memo of its permanent answers.

    Parameters
    ----------
    secret : bytes, optional
        At least 16 bytes. By default the secret stored in the memo file, or 32 fresh bytes
        from the operating system (:mod:`secrets`) when there is none yet.
    path : str or Path, optional
        The memo file; default :func:`default_device_path`. A secret that differs from the
        file's is refused (the file's answers were derived from its own secret).
    budget : float, optional
        The most each question (spec fingerprint) may cost this device, as
        :meth:`privacy_spent` counts it; ``None`` (default): no cap. A report needing a new
        permanent answer past it raises :class:`ldpkit.BudgetExceededError` (nothing is
        stored or sent); memoized values are answered for free.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from ldpkit.longitudinal import LGRR
    >>> spec = LGRR(epsilon_inf=2.0, epsilon_1=1.0, domain_size=8)
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     device = Device(path=pathlib.Path(tmp) / "device.json")
    ...     day1 = device.report(spec, [3], rng=1)
    ...     day2 = device.report(spec, [3], rng=2)
    ...     again = Device(path=pathlib.Path(tmp) / "device.json")  # a restart
    ...     same = again.permanent(spec, 3) == device.permanent(spec, 3)
    >>> len(day1), bool(same), device.distinct_values(spec)
    (1, True, 1)
    """

    def __init__(
        self,
        secret: bytes | None = None,
        path: str | os.PathLike[str] | None = None,
        *,
        budget: float | None = None,
    ):
        self._budget = None if budget is None else check_real(budget, "budget", low=0.0)
        self._path = Path(default_device_path() if path is None else path)
        stored = self._load()
        if secret is not None:
            if not isinstance(secret, (bytes, bytearray)):
                raise TypeError(f"secret must be bytes (>= 16), got {type(secret).__name__}")
            if len(secret) < 16:
                raise ValueError(f"secret must be bytes (>= 16), got {len(secret)} bytes")
            secret = bytes(secret)
            if stored is not None and bytes.fromhex(stored["secret"]) != secret:
                raise ValueError(
                    f"secret must be the one stored in {self._path} (its memo was derived "
                    "from it), got another"
                )
        self._secret: bytes = (
            secret
            if secret is not None
            else bytes.fromhex(stored["secret"])
            if stored is not None
            else secrets.token_bytes(32)
        )
        self._memo: dict[str, dict[str, Any]] = dict(stored["memo"]) if stored else {}
        self._states: dict[str, Any] = dict(stored.get("states", {})) if stored else {}
        if stored is None:
            self._save()

    # -- persistence --------------------------------------------------------------------------
    @property
    def path(self) -> Path:
        """The memo file."""
        return self._path

    def _load(self) -> dict[str, Any] | None:
        try:
            raw = self._path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise ValueError(
                f"path must be an ldpkit device file, got unreadable {self._path}"
            ) from None
        if (
            not isinstance(data, Mapping)
            or data.get("format") != DEVICE_FORMAT
            or not isinstance(data.get("secret"), str)
            or not isinstance(data.get("memo"), Mapping)
        ):
            raise ValueError(
                f"path must be an ldpkit device file ({DEVICE_FORMAT}), got {self._path}"
            )
        return dict(data)

    def _save(self) -> None:
        data = {
            "format": DEVICE_FORMAT,
            "secret": self._secret.hex(),
            "memo": self._memo,
            "states": self._states,
        }
        _write_atomic(self._path, json.dumps(data, sort_keys=True).encode())

    # -- derivation ----------------------------------------------------------------------------
    def _key(self, spec: Mechanism, key: bytes) -> bytes:
        """Return HMAC-SHA256(secret, domain | fingerprint | 0 | value key).

        The key of the permanent round's randomness (a pseudorandom function of the secret).
        """
        message = _DOMAIN + spec.fingerprint.encode() + b"\x00" + key
        return hmac.new(self._secret, message, hashlib.sha256).digest()

    def _generator(self, spec: Mechanism, key: bytes) -> np.random.Generator:
        """Philox keyed by :meth:`_key` (specs without a word-based permanent round)."""
        digest = self._key(spec, key)
        return np.random.Generator(np.random.Philox(key=int.from_bytes(digest[:16], "big")))

    def _state(self, spec: Any) -> np.ndarray | None:
        """Return the spec's per-device permanent state (LOLOHA's hash seed), derived once."""
        entry = self._states.get(spec.fingerprint)
        if entry is None:
            from_words = getattr(spec, "_device_state_from_words", None)
            if from_words is not None:  # LOLOHA's seed: one word (as the JS client)
                state = from_words(DerivedWords(self._key(spec, b"state")))
            else:
                state = spec._device_state(self._generator(spec, b"state"))
            if state is None:
                return None
            self._states[spec.fingerprint] = entry = _encode(state)
        return _decode(entry)

    def _memoized(self, spec: Mechanism, value: Any) -> dict[str, Any]:
        state = None
        if _is_longitudinal(spec):
            # memoized per key: the value, or what its permanent answer depends on (LOLOHA:
            # its hashed value under the device's seed, so values hashing alike share it)
            state = self._state(spec)
            value = spec._memo_keys(np.asarray([value]), state)[0]  # type: ignore[attr-defined]
        text, key = _value_key(value)
        table = self._memo.setdefault(spec.fingerprint, {})
        if text not in table:
            from_words = getattr(spec, "_permanent_from_words", None)
            if from_words is not None:
                words = DerivedWords(self._key(spec, key))
                perm_row = from_words(int(value), words, *([] if state is None else [state]))
                table[text] = {"permanent": _encode(perm_row)}
                return table[text]
            gen = self._generator(spec, key)
            if _is_longitudinal(spec):
                perm = spec._permanent_from_keys(np.asarray([value]), gen, state)  # type: ignore[attr-defined]
                table[text] = {"permanent": _encode(perm[0])}
            else:
                rep = spec.randomize(np.asarray([value]), rng=gen)
                table[text] = {"report": {k: _encode(v[0]) for k, v in rep.arrays.items()}}
        return table[text]

    def permanent(self, spec: Mechanism, value: Any) -> Any:
        """Return the memoized permanent answer (or whole report) of ``value`` under ``spec``."""
        self._check_values(spec, [value])
        entry = self._memoized(spec, value)
        return entry.get("permanent", entry.get("report"))

    def _check_values(self, spec: Mechanism, values: Any) -> np.ndarray:
        _check_spec(spec)
        check = getattr(spec, "check_values", None)
        if check is not None:
            return np.asarray(check(values))
        # no validator of its own: randomize validates (its bad inputs raise there)
        spec.randomize(values, rng=0)
        arr = np.asarray(values)
        if arr.ndim != 1 or arr.dtype.kind not in "iuf":
            raise TypeError(f"values must be a 1-D array of numbers, got {arr.dtype}")
        return arr

    # -- reporting ----------------------------------------------------------------------------
    def report(self, spec: Mechanism, values: Any, rng: RNGLike = None) -> Reports:
        """Report ``values`` from this device (one report per value, in order).

        Longitudinal specs: the memoized permanent answer of each value, re-randomized
        afresh (``rng``; the secure generator by default). Other specs: the memoized whole
        report (identical every time: a stable identifier, see the module doc). New
        answers are written to the memo file before anything is returned.

        Raises
        ------
        BudgetExceededError
            When the device has a ``budget`` and ``values`` need new permanent answers that
            would take :meth:`privacy_spent` past it (checked before anything is derived or
            stored; the whole batch is refused).
        """
        v = self._check_values(spec, values)
        before = len(self._memo.get(spec.fingerprint, {})), len(self._states)
        if self._budget is not None:
            self._check_budget(spec, v)
        if v.shape[0] == 0:
            return spec.randomize(v, rng=rng)
        # one memo look-up per distinct value (a year of daily reports has a few), then
        # every report gathers its row
        distinct, inverse = np.unique(v, return_inverse=True)
        entries = [self._memoized(spec, x) for x in distinct.tolist()]
        if (len(self._memo.get(spec.fingerprint, {})), len(self._states)) != before:
            self._save()
        inverse = inverse.reshape(-1)
        if _is_longitudinal(spec):
            perm = np.stack([_decode(e["permanent"]) for e in entries])[inverse]
            return spec._instantaneous_round(perm, as_generator(rng))  # type: ignore[attr-defined]
        fields = entries[0]["report"].keys()
        return Reports(
            spec,
            **{k: np.stack([_decode(e["report"][k]) for e in entries])[inverse] for k in fields},
        )

    @property
    def budget(self) -> float | None:
        """The per-question cap on :meth:`privacy_spent` (None: no cap)."""
        return self._budget

    def _keys(self, spec: Mechanism, values: np.ndarray) -> set[str]:
        """Return the memo keys (file text) that ``values`` need."""
        if _is_longitudinal(spec):
            keys = spec._memo_keys(values, self._state(spec))  # type: ignore[attr-defined]
        else:
            keys = values
        return {_value_key(x)[0] for x in np.asarray(keys).tolist()}

    def _check_budget(self, spec: Mechanism, values: np.ndarray) -> None:
        known = set(self._memo.get(spec.fingerprint, {}))
        fresh = self._keys(spec, values) - known
        if not fresh:
            return  # memoized answers only: free
        after = self._spent(spec, len(known) + len(fresh))
        assert self._budget is not None
        if after > self._budget * (1.0 + 1e-12):
            raise BudgetExceededError(
                f"budget must cover this report: {len(fresh)} new value(s) would take "
                f"question {spec.fingerprint} to {after:.6g} > budget = {self._budget:g} "
                f"(spent {self.privacy_spent(spec):.6g}); memoized values stay answerable"
            )

    def _spent(self, spec: Mechanism, k: int) -> float:
        if k == 0:
            return 0.0
        if _is_longitudinal(spec):
            return float(spec.longitudinal_privacy_loss(k))  # type: ignore[attr-defined]
        return k * float(spec.privacy_loss())  # type: ignore[attr-defined]

    def distinct_values(self, spec: Mechanism) -> int:
        """Count the different values this device has reported under ``spec``.

        Values are counted by memo key (LOLOHA: its hashed values).
        """
        _check_spec(spec)
        return len(self._memo.get(spec.fingerprint, {}))

    def privacy_spent(self, spec: Mechanism) -> float:
        """Return the loss of all this device's reports under ``spec``, whatever their number.

        ``spec.longitudinal_privacy_loss(distinct values)`` for a longitudinal spec, else
        ``distinct values x privacy_loss()`` (memoized whole reports).
        """
        return self._spent(spec, self.distinct_values(spec))

    def __repr__(self) -> str:
        """Return a one-line summary."""
        return f"Device(path={str(self._path)!r}, questions={len(self._memo)})"


def _check_spec(spec: Any) -> None:
    if not isinstance(spec, Mechanism):
        raise TypeError(f"spec must be an ldpkit mechanism spec, got {type(spec).__name__}")


def _is_longitudinal(spec: Mechanism) -> bool:
    return hasattr(spec, "_permanent_round") and hasattr(spec, "_instantaneous_round")


def _encode(row: np.ndarray) -> dict[str, Any]:
    arr = np.asarray(row)
    return {"dtype": arr.dtype.str, "shape": list(arr.shape), "data": arr.ravel().tolist()}


def _decode(entry: Mapping[str, Any]) -> np.ndarray:
    return np.asarray(entry["data"], dtype=np.dtype(entry["dtype"])).reshape(entry["shape"])
