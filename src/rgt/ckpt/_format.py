"""Serialization: torch.save when torch is in use, a plain pickle otherwise; size estimates.

torch is never imported here: the "torch" format is chosen only when the caller has already
imported torch (a state holding tensors implies that), so `import rgt.ckpt` and checkpointing
plain dicts stay torch-free.
"""

from __future__ import annotations

import contextlib
import io
import pickle
import sys
import threading
from collections.abc import Callable, Iterator
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


@contextlib.contextmanager
def _without_torch_crc32(torch: Any) -> Iterator[None]:
    """Skip torch.save's per-record CRC32 while we write: torch.load never checks it, and our
    own crc32 + sha256 of the whole file (recorded in the sidecar) cover every byte. It is a
    process-wide torch option, so it is flipped under a lock and always restored."""
    ser = torch.serialization
    get = getattr(ser, "get_crc32_options", None)
    set_ = getattr(ser, "set_crc32_options", None)
    if get is None or set_ is None:
        yield
        return
    with _CRC_LOCK:
        before = get()
        set_(False)
        try:
            yield
        finally:
            set_(before)


def prepare(state: Any, fmt: str) -> Prepared:
    fmt = resolve_format(fmt)
    if fmt == "torch":
        import torch

        def write(f: Any) -> None:
            with _without_torch_crc32(torch):
                torch.save(state, f)

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
