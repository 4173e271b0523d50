"""A device that memoizes its answers: repeated reports of one value leak no more (issue 30).

:class:`Device` holds a secret and answers ``device.report(spec, values)``:

* for a longitudinal spec (:mod:`ldpkit.longitudinal`: a permanent and an instantaneous
  round), the permanent answer of each value is derived deterministically from the secret:
  ``HMAC-SHA256(secret, "ldpkit.device/1" | spec fingerprint | value)`` keys a Philox
  counter-based generator that draws that round only; the answer is memoized per
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
from .spec import Mechanism, Reports

__all__ = ["Device", "default_device_path"]

#: Layout written to and read from the memo file.
DEVICE_FORMAT = "ldpkit.device/1"
_DOMAIN = DEVICE_FORMAT.encode() + b"\x00"


def default_device_path() -> Path:
    """The memo file in the user's data directory (``$XDG_DATA_HOME/ldpkit/device.json``,
    ``~/.local/share`` by default; ``%LOCALAPPDATA%`` on Windows, ``~/Library/Application
    Support`` on macOS)."""
    if os.name == "nt":
        base = Path(os.environ.get("LOCALAPPDATA", Path.home() / "AppData" / "Local"))
    elif os.uname().sysname == "Darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "ldpkit" / "device.json"


def _value_key(value: Any) -> tuple[str, bytes]:
    """A canonical text key (for the file) and byte string (for the HMAC) of one value."""
    if isinstance(value, (np.integer, int)) and not isinstance(value, (bool, np.bool_)):
        return f"i{int(value)}", b"i" + int(value).to_bytes(16, "big", signed=True)
    as_float = float(value)
    return f"f{as_float.hex()}", b"f" + np.float64(as_float).tobytes()


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

    def __init__(self, secret: bytes | None = None, path: str | os.PathLike[str] | None = None):
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
    def _generator(self, spec: Mechanism, key: bytes) -> np.random.Generator:
        """Philox keyed by HMAC-SHA256(secret, domain | fingerprint | value): the permanent
        round's only randomness (a pseudorandom function of the secret)."""
        message = _DOMAIN + spec.fingerprint.encode() + b"\x00" + key
        digest = hmac.new(self._secret, message, hashlib.sha256).digest()
        return np.random.Generator(np.random.Philox(key=int.from_bytes(digest[:16], "big")))

    def _state(self, spec: Any) -> np.ndarray | None:
        """The spec's per-device permanent state (LOLOHA's hash seed), derived once."""
        entry = self._states.get(spec.fingerprint)
        if entry is None:
            state = spec._device_state(self._generator(spec, b"state"))
            if state is None:
                return None
            self._states[spec.fingerprint] = entry = _encode(state)
        return _decode(entry)

    def _memoized(self, spec: Mechanism, value: Any) -> dict[str, Any]:
        if _is_longitudinal(spec):
            # memoized per key: the value, or what its permanent answer depends on (LOLOHA:
            # its hashed value under the device's seed, so values hashing alike share it)
            state = self._state(spec)
            value = spec._memo_keys(np.asarray([value]), state)[0]  # type: ignore[attr-defined]
        text, key = _value_key(value)
        table = self._memo.setdefault(spec.fingerprint, {})
        if text not in table:
            gen = self._generator(spec, key)
            if _is_longitudinal(spec):
                perm = spec._permanent_from_keys(np.asarray([value]), gen, state)  # type: ignore[attr-defined]
                table[text] = {"permanent": _encode(perm[0])}
            else:
                rep = spec.randomize(np.asarray([value]), rng=gen)
                table[text] = {"report": {k: _encode(v[0]) for k, v in rep.arrays.items()}}
        return table[text]

    def permanent(self, spec: Mechanism, value: Any) -> Any:
        """The memoized permanent answer (or whole report) of ``value`` under ``spec``."""
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
        """This device's reports of ``values`` (one report per value, in order).

        Longitudinal specs: the memoized permanent answer of each value, re-randomized
        afresh (``rng``; the secure generator by default). Other specs: the memoized whole
        report (identical every time: a stable identifier, see the module doc). New
        answers are written to the memo file before anything is returned.
        """
        v = self._check_values(spec, values)
        before = len(self._memo.get(spec.fingerprint, {})), len(self._states)
        entries = [self._memoized(spec, x) for x in v.tolist()]  # a device's few values
        if (len(self._memo.get(spec.fingerprint, {})), len(self._states)) != before:
            self._save()
        if _is_longitudinal(spec):
            perm = np.stack([_decode(e["permanent"]) for e in entries]) if entries else None
            if perm is None:
                return spec.randomize(v, rng=rng)
            return spec._instantaneous_round(perm, as_generator(rng))  # type: ignore[attr-defined]
        if not entries:
            return spec.randomize(v, rng=rng)
        fields = entries[0]["report"].keys()
        return Reports(
            spec, **{k: np.stack([_decode(e["report"][k]) for e in entries]) for k in fields}
        )

    def distinct_values(self, spec: Mechanism) -> int:
        """How many different values (memo keys: LOLOHA's hashed values) this device has
        reported under ``spec``."""
        _check_spec(spec)
        return len(self._memo.get(spec.fingerprint, {}))

    def privacy_spent(self, spec: Mechanism) -> float:
        """The loss of all this device's reports under ``spec``, whatever their number:
        ``spec.longitudinal_privacy_loss(distinct values)`` for a longitudinal spec, else
        ``distinct values x privacy_loss()`` (memoized whole reports)."""
        k = self.distinct_values(spec)
        if k == 0:
            return 0.0
        if _is_longitudinal(spec):
            return float(spec.longitudinal_privacy_loss(k))  # type: ignore[attr-defined]
        return k * float(spec.privacy_loss())  # type: ignore[attr-defined]

    def __repr__(self) -> str:
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
