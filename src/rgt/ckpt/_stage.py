"""Snapshot a state to host memory for an async save.

Tensors are copied into host buffers that are kept and reused from one save to the next
(keyed by their position in the state), so after the first save a snapshot is a plain memcpy
(CUDA: a pinned-memory device-to-host copy) with no allocation or page faults. That is safe
because the Checkpointer never stages while a write is still in flight. Containers are rebuilt,
other leaves deep-copied, so the training loop can mutate its state as soon as `save_async`
returns.
"""

from __future__ import annotations

import copy
import sys
from collections import OrderedDict
from typing import Any

_IMMUTABLE = (int, float, complex, str, bytes, bool, type(None), range, frozenset)


def holds_cuda(state: Any) -> bool:
    """True when STATE (dicts, lists and tuples of it) holds a tensor in GPU memory."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    seen: set[int] = set()
    todo = [state]
    while todo:
        obj = todo.pop()
        if isinstance(obj, torch.Tensor):
            if obj.device.type == "cuda":
                return True
        elif isinstance(obj, (dict, list, tuple)) and id(obj) not in seen:
            seen.add(id(obj))
            todo.extend(obj.values() if isinstance(obj, dict) else obj)
    return False


class Stager:
    def __init__(self, cache: bool = True) -> None:
        self.cache = cache
        self._buffers: dict[tuple, Any] = {}
        self._memo: dict[int, Any] = {}
        self._cuda = False

    def release(self) -> None:
        self._buffers.clear()

    def stage(self, state: Any) -> Any:
        torch = sys.modules.get("torch")
        self._memo = {}
        self._cuda = False
        try:
            out = self._copy(state, (), torch)
            if self._cuda:
                torch.cuda.synchronize()
            return out
        finally:
            self._memo = {}

    def _copy(self, obj: Any, path: tuple, torch: Any) -> Any:
        if isinstance(obj, _IMMUTABLE):
            return obj
        if torch is not None and isinstance(obj, torch.Tensor):
            return self._tensor(obj, path, torch)
        if type(obj) is dict or type(obj) is OrderedDict:
            return type(obj)((k, self._copy(v, (*path, k), torch)) for k, v in obj.items())
        if type(obj) is list:
            return [self._copy(v, (*path, i), torch) for i, v in enumerate(obj)]
        if type(obj) is tuple:
            return tuple(self._copy(v, (*path, i), torch) for i, v in enumerate(obj))
        if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # namedtuple
            return type(obj)(*(self._copy(v, (*path, i), torch) for i, v in enumerate(obj)))
        return copy.deepcopy(obj)

    def _tensor(self, t: Any, path: tuple, torch: Any) -> Any:
        key = id(t)
        memo = self._memo.get(key)
        if memo is not None:
            return memo
        t = t.detach()
        if t.layout != torch.strided or t.is_quantized or t.device.type == "meta":
            out = t.to("cpu", copy=True)
        else:
            buf = self._buffers.get(path) if self.cache else None
            if buf is None or buf.shape != t.shape or buf.dtype != t.dtype:
                pin = t.device.type == "cuda"
                buf = torch.empty(t.shape, dtype=t.dtype, device="cpu", pin_memory=pin)
                if self.cache:
                    self._buffers[path] = buf
            if t.device.type == "cuda":
                buf.copy_(t, non_blocking=True)
                self._cuda = True
            else:
                buf.copy_(t)
            out = buf
        self._memo[key] = out
        return out
