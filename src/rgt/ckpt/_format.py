"""Serialization: torch.save when torch is in use, a plain pickle otherwise; size estimates.

torch is never imported here: the "torch" format is chosen only when the caller has already
imported torch (a state holding tensors implies that), so `import rgt.ckpt` and checkpointing
plain dicts stay torch-free.
"""

from __future__ import annotations

import io
import pickle
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

FORMATS = ("auto", "torch", "pickle")
_ZIP_MAGIC = b"PK\x03\x04"

# Per-storage zip overhead (local header + 64-byte alignment padding + central directory
# entry) is ~250 bytes; fixed records (data.pkl header, version, byteorder, serialization id,
# end of central directory) a few KiB. Both rounded up generously.
_PER_STORAGE = 512
_FIXED = 8192


def resolve_format(fmt: str) -> str:
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, not {fmt!r}")
    if fmt == "auto":
        return "torch" if "torch" in sys.modules else "pickle"
    return fmt


@dataclass
class Prepared:
    """A state ready to write: its format, an honest size estimate, and the writer."""

    fmt: str
    estimate: int
    write: Callable[[Any], None]


class _Counter:
    def __init__(self) -> None:
        self.n = 0

    def write(self, b) -> int:  # noqa: ANN001
        n = len(memoryview(b).cast("B")) if not isinstance(b, bytes) else len(b)
        self.n += n
        return n


def _torch_estimate(state: Any) -> int:
    """Bytes torch.save will write: unique storage bytes + metadata pickle + zip overhead."""
    import torch

    storages: dict[tuple, int] = {}

    class Sizer(pickle.Pickler):
        def persistent_id(self, obj: Any):  # noqa: ANN201
            if isinstance(obj, torch.storage.TypedStorage):
                obj = obj._untyped_storage
            if isinstance(obj, torch.UntypedStorage):
                key = (obj.device.type, obj.device.index, obj.data_ptr(), obj.nbytes())
                storages.setdefault(key, obj.nbytes())
                return ("s", str(len(storages)), "cpu", 0)
            return None

    counter = _Counter()
    Sizer(counter, protocol=2).dump(state)
    return sum(storages.values()) + counter.n + _PER_STORAGE * len(storages) + _FIXED


_CRC_LOCK = threading.Lock()


class _CrcOffUntilFirstWrite:
    """The file object torch.save writes to, with its per-record CRC32 switched off.

    torch.load never checks that CRC, and our own crc32 + sha256 of the whole file (in the
    sidecar) cover every byte; computing it costs torch.save ~0.5 s/GB. The switch is a
    process-wide torch option, but torch reads it once, when torch.save creates its zip writer
    — before the first byte is written. So it is turned off under a lock (only one rgt save
    flips it at a time, and each restores what it found) and back on at our first write: a
    torch.save in another thread is affected only if it starts in that short window (while
    the state's metadata is pickled), not for the whole write. Use it as a context manager.
    """

    def __init__(self, f: Any, torch: Any) -> None:
        self._f = f
        ser = torch.serialization
        self._get = getattr(ser, "get_crc32_options", None)
        self._set = getattr(ser, "set_crc32_options", None)
        self._before: bool | None = None

    def __enter__(self) -> _CrcOffUntilFirstWrite:
        if self._get is not None and self._set is not None:
            _CRC_LOCK.acquire()
            try:
                self._before = self._get()
                self._set(False)
            except BaseException:
                _CRC_LOCK.release()
                raise
        return self

    def _restore(self) -> None:
        if self._before is not None:
            before, self._before = self._before, None
            try:
                self._set(before)
            finally:
                _CRC_LOCK.release()

    def __exit__(self, *exc: object) -> None:
        self._restore()

    def write(self, b: Any) -> int:
        self._restore()
        return self._f.write(b)

    def flush(self) -> None:
        self._f.flush()


def prepare(state: Any, fmt: str) -> Prepared:
    fmt = resolve_format(fmt)
    if fmt == "torch":
        import torch

        def write(f: Any) -> None:
            with _CrcOffUntilFirstWrite(f, torch) as out:
                torch.save(state, out)

        return Prepared(fmt, _torch_estimate(state), write)
    data = pickle.dumps(state, protocol=5)
    return Prepared(fmt, len(data), lambda f: f.write(data))


class _SafeUnpickler(pickle.Unpickler):
    """weights_only-style loading for the pickle format: plain containers and scalars only."""

    _ALLOWED = {
        ("builtins", "set"),
        ("builtins", "frozenset"),
        ("builtins", "complex"),
        ("builtins", "slice"),
        ("builtins", "range"),
        ("collections", "OrderedDict"),
        ("collections", "defaultdict"),
        ("datetime", "datetime"),
        ("datetime", "timedelta"),
        ("datetime", "date"),
    }

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self._ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(
            f"refusing to load {module}.{name} with weights_only=True "
            "(pass weights_only=False if you trust this checkpoint)"
        )


def sniff(path: str) -> str:
    with open(path, "rb") as f:
        return "torch" if f.read(4) == _ZIP_MAGIC else "pickle"


def load(
    path: str,
    *,
    fmt: str | None = None,
    weights_only: bool = True,
    map_location: Any = None,
    mmap: bool = False,
) -> Any:
    fmt = fmt or sniff(path)
    if fmt == "torch":
        try:
            import torch
        except ImportError as err:  # pragma: no cover - torch-less environments
            raise RuntimeError(f"{path} is a torch checkpoint; install rgt[torch]") from err
        return torch.load(path, map_location=map_location, weights_only=weights_only, mmap=mmap)
    with open(path, "rb") as f:
        data = f.read()
    if weights_only:
        return _SafeUnpickler(io.BytesIO(data)).load()
    return pickle.loads(data)
