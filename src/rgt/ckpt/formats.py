"""What a checkpoint is, by format, and what verifying it can honestly prove.

One verification for `rgt pull`, `rgt ckpt verify` and `rgt ckpt ls`. Every `Verdict` says
what was checked — ``hash`` (bytes equal a recorded sha256: rgt.ckpt's sidecar or the box's
pull manifest), ``parse`` (the container is whole: zip directory + complete pickle opcodes,
safetensors header + every tensor's byte range, JSON) and ``load`` (torch.load with
weights_only=True) — and nothing more.

Formats known: rgt.ckpt (``ckpt-N.pt`` + sidecar), torch pickles (``.pt``, ``.pth``, ``.bin``:
HF ``optimizer.pt``/``rng_state.pth``), Lightning ``.ckpt`` (its ``global_step``), safetensors
(header parsed, tensors never loaded, the safetensors package not needed), HF ``checkpoint-N``
directories (``trainer_state.json``'s ``global_step``), accelerate's ``save_state`` directories
(``model.safetensors``, ``optimizer.bin``, ``scheduler.bin``, ``random_states_N.pkl``; the step
from the directory's name) and torch.distributed.checkpoint directories (``.metadata``).
accelerate's ``.pkl`` files are torch.save archives of pickled RNG states: their zip and pickle
opcodes are read, never unpickled. A pickle that weights-only loading refuses is "hash-verified, not
unpickled": reported, never executed. Importable without torch; Python 3.8.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import pickletools
import re
import struct
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHECKS = ("hash", "parse", "load")
DIR_KINDS = ("hf-checkpoint", "dcp", "accelerate")  # directories that are one checkpoint
_SIDE_NAME = re.compile(r"^ckpt-(\d{10,})\.(pt|json)$")
_STEP_IN_NAME = (
    re.compile(r"(?:^|[^a-z])(?:global_)?step[=_-]?(\d+)", re.IGNORECASE),
    re.compile(r"^checkpoint[-_](\d+)$"),  # HF's checkpoint-500, accelerate's checkpoint_3
    re.compile(r"^ckpt-(\d+)\.pt$"),
    re.compile(r"(?:^|[^a-z])iter(?:ation)?[=_-]?(\d+)", re.IGNORECASE),
)
_TORCH_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt")
# accelerate's save_state: the RNG states, written last (its completion marker), and the
# objects registered with register_for_checkpointing; both torch.save archives named .pkl
_ACCELERATE_RNG = re.compile(r"^random_states_\d+\.pkl$")
_ACCELERATE_PICKLE = re.compile(r"^(?:random_states|custom_checkpoint)_\d+\.pkl$")
_ACCELERATE_PARTS = re.compile(r"^(?:optimizer|scheduler|sampler)(?:_\d+)?\.bin$")
_WEIGHTS = re.compile(r"^(model|pytorch_model|adapter_model)(_\d+)?(-\d+-of-\d+)?"
                      r"\.(safetensors|bin)$")
_STEP_KEYS = ("global_step", "step", "iter_num", "iteration")
_MAX_HEADER = 100 * 1024 * 1024  # safetensors refuses larger headers too
_MAX_PICKLE = 256 * 1024 * 1024  # a data.pkl is metadata; more than this is not a checkpoint
# bits per element; F4/F6 pack several elements per byte (safetensors rounds up)
_DTYPE_BITS = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32,
    "I64": 64, "U64": 64, "F64": 64, "C64": 64, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
}
# globals torch's weights-only unpickler accepts on its own (prefixes) or that we allow below
_TORCH_SAFE_PREFIXES = ("torch.", "collections.OrderedDict", "builtins.set",
                        "builtins.frozenset", "builtins.bytearray", "builtins.slice",
                        "builtins.complex", "_codecs.encode")
_NUMPY_ALLOWED = {"numpy.ndarray", "numpy.dtype", "numpy.core.multiarray._reconstruct",
                  "numpy._core.multiarray._reconstruct", "numpy.dtypes.UInt32DType"}
_STRING_OPS = {"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "STRING",
               "BINSTRING", "SHORT_BINSTRING"}
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-_]")


@dataclass
class Verdict:
    """One checkpoint (file or directory): ok or not, what was checked, what it is."""

    path: Path
    kind: str
    ok: bool
    checked: tuple[str, ...]
    note: str  # what was found, or the problem when not ok
    step: int | None = None
    bytes: int | None = None
    metric: float | None = None
    created: float | None = None
    loaded: bool | None = None  # None: not tried (refused, not asked, or nothing to load)
    parts: list[Verdict] = field(default_factory=list)

    @property
    def how(self) -> str:
        return ", ".join(self.checked) or "nothing"

    def line(self) -> str:
        step = "" if self.step is None else f" step {self.step}"
        return f"{self.kind}{step}; checked: {self.how} — {self.note}"


def clean(text: str, limit: int = 160) -> str:
    """Another library's message on one line: no terminal escapes, cut at a word boundary."""
    text = " ".join(_ANSI.sub("", str(text)).split())
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0].rstrip(",;:")
    return (cut or text[:limit]) + " …"


def said_once(items: Iterable[tuple[str, str]], shown: int = 3) -> list[str]:
    """(path, message) pairs → one line per distinct message with its count and a few paths."""
    groups: dict[str, list[str]] = {}
    for path, message in items:
        groups.setdefault(message, []).append(path)
    lines = []
    for message, paths in groups.items():
        if len(paths) == 1:
            lines.append(f"{paths[0]}: {message}")
            continue
        names = ", ".join(paths[:shown]) + (f" and {len(paths) - shown} more"
                                            if len(paths) > shown else "")
        lines.append(f"{len(paths)} files: {message} ({names})")
    return lines


def step_from_name(name: str) -> int | None:
    """The step a checkpoint's name carries (checkpoint-500, epoch=3-step=1000.ckpt, ...)."""
    for pattern in _STEP_IN_NAME:
        found = pattern.search(name)
        if found:
            return int(found.group(1))
    return None


# --------------------------------------------------------------------------- classify


def is_hf_dir(path: Path) -> bool:
    return (path / "trainer_state.json").is_file()


def is_dcp_dir(path: Path) -> bool:
    return (path / ".metadata").is_file()


def is_accelerate_dir(path: Path) -> bool:
    """accelerate's `save_state` output: its RNG states, or (a save cut short before them)
    model weights beside an optimizer's or scheduler's state."""
    try:
        names = [p.name for p in path.iterdir() if p.is_file()]
    except OSError:
        return False
    if any(_ACCELERATE_RNG.match(n) for n in names):
        return True
    return any(_WEIGHTS.match(n) for n in names) and any(_ACCELERATE_PARTS.match(n)
                                                         for n in names)


def kind_of(path: Path) -> str | None:
    """The checkpoint kind of `path`, or None when it is not one rgt knows how to check."""
    if path.is_dir():
        if is_hf_dir(path):
            return "hf-checkpoint"
        if is_dcp_dir(path):
            return "dcp"
        return "accelerate" if is_accelerate_dir(path) else None
    return kind_of_name(path.name)


def kind_of_name(name: str) -> str | None:
    """The kind a file's name alone says (for names listed on a box)."""
    side = _SIDE_NAME.match(name)
    if side:
        return "rgt.ckpt" if side.group(2) == "pt" else "rgt.ckpt-sidecar"
    if name == "training_args.bin":
        return "training-args"
    if _ACCELERATE_PICKLE.match(name):
        return "pickle"
    if name.endswith(".safetensors"):
        return "safetensors"
    if name.endswith(".ckpt"):
        return "lightning"
    if name.endswith(_TORCH_SUFFIXES):
        return "torch"
    if name.endswith(".json"):
        return "json"
    if name.endswith(".distcp") or name == ".metadata":
        return "dcp-part"
    return None


# --------------------------------------------------------------------------- entry points


def check(path: Path, *, hashed: bool = False, load: bool = True, deep: bool = True
          ) -> Verdict:
    """Verify one checkpoint file or directory. `hashed`: its bytes already matched a
    recorded sha256 (pull's manifest), so that check is counted, not repeated. `deep=False`
    (ls --quick) parses only: no sha256 of rgt.ckpt files, no loading."""
    path = Path(path)
    kind = kind_of(path)
    if kind == "rgt.ckpt-sidecar" and not hashed:
        kind = "rgt.ckpt"  # named by a user: the sidecar stands for its checkpoint
    if path.is_dir():
        if kind is None:
            return Verdict(path, "directory", False, (), "not a known checkpoint layout (no "
                           "trainer_state.json, no .metadata, no random_states_N.pkl)")
        return check_dir(path, hashed=hashed, load=load and deep, deep=deep)
    return check_file(path, kind or "other", hashed=hashed, load=load and deep, deep=deep)


def check_file(path: Path, kind: str, *, hashed: bool = False, load: bool = True,
               deep: bool = True) -> Verdict:
    base = ("hash",) if hashed else ()
    try:
        size = path.stat().st_size
    except OSError as err:
        return Verdict(path, kind, False, (), f"cannot read: {clean(err)}")
    if kind == "rgt.ckpt":
        if not path.with_suffix(".json").exists():
            return _check_sidecarless(path, base, load, size, hashed)
        return _check_rgt(path, load) if deep else _check_rgt_size(path, size)
    if kind == "safetensors":
        problem, note = check_safetensors(path)
        return Verdict(path, kind, problem is None, base + ("parse",) if problem is None
                       else base, problem or note, bytes=size)
    if kind == "torch" and _raw_bin(path, size):
        return Verdict(path, "other", True, base, "raw .bin data, not a torch file "
                       + ("(hash-verified)" if hashed else "(not checked)"), bytes=size)
    if kind in ("torch", "lightning", "training-args", "pickle"):
        return _check_torch(path, kind, base, load and kind in ("torch", "lightning"), size)
    if kind in ("json", "rgt.ckpt-sidecar"):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError, OSError) as err:
            return Verdict(path, kind, False, base, f"not valid JSON: {clean(err)}", bytes=size)
        step = data.get("global_step") if isinstance(data, dict) else None
        return Verdict(path, kind, True, base + ("parse",), "JSON parses",
                       step=step if isinstance(step, int) else None, bytes=size)
    if kind == "dcp-part":
        return Verdict(path, kind, True, base, "part of a torch.distributed.checkpoint "
                       "directory (checked with it)", bytes=size)
    return Verdict(path, kind, True, base, "hash-verified" if hashed else "not checked",
                   bytes=size)


# A model's own .bin (HF weights, adapters) must be a torch file; any other .bin may be raw data
# (nanoGPT's train.bin token memmaps, fairseq shards, ggml weights).
_MODEL_BIN_PREFIXES = ("pytorch_model", "adapter_model", "model", "optimizer", "scheduler",
                       "rng_state", "scaler")


def _raw_bin(path: Path, size: int) -> bool:
    """A non-empty .bin that begins as neither a zip (torch.save) nor a pickle (legacy torch):
    data, not a checkpoint. An empty or model-named one stays a torch file, checked as one."""
    if path.suffix != ".bin" or size == 0 or path.name.startswith(_MODEL_BIN_PREFIXES):
        return False
    try:
        with path.open("rb") as f:
            head = f.read(2)
    except OSError:
        return False
    return not (head == b"PK" or head[:1] == b"\x80")


# --------------------------------------------------------------------------- rgt.ckpt


def _check_sidecarless(path: Path, base: tuple[str, ...], load: bool, size: int,
                       hashed: bool) -> Verdict:
    """A `ckpt-N.pt` with no sidecar: another writer chose rgt's name, or an rgt save stopped
    between its data file and its sidecar. Either way the bytes are whatever torch file they
    are, and are checked as one; the verdict says there was no sidecar instead of calling a
    file rgt never wrote damaged for lacking it. (pull: the manifest vouches for the bytes.)"""
    verdict = _check_torch(path, "torch", base, load, size)
    if hashed:
        return verdict
    step = verdict.step
    if step is None and (named := _SIDE_NAME.match(path.name)):
        step = int(named.group(1))
    return Verdict(path, "torch", verdict.ok, verdict.checked,
                   f"no sidecar {path.with_suffix('.json').name}, so not an rgt.ckpt save; "
                   f"as a torch file: {verdict.note}", step=step, bytes=verdict.bytes,
                   loaded=verdict.loaded)


def _check_rgt(path: Path, load: bool) -> Verdict:
    from rgt.ckpt.checkpointer import verify_file  # the sidecar's own rules live there

    r = verify_file(path, load=load)
    checked = (("hash",) if r.sha256 is not None else ()) + (("load",) if r.loads else ())
    note = "sidecar size + sha256 match" + ("; loads" if r.loads else "") if r.ok else r.reason
    return Verdict(r.path, "rgt.ckpt", r.ok, checked, note, step=r.step, bytes=r.bytes,
                   metric=r.metric, created=r.created, loaded=r.loads)


def _check_rgt_size(path: Path, size: int) -> Verdict:
    """The quick check `rgt ckpt ls --quick` makes: the sidecar parses and the size matches."""
    from rgt.ckpt.checkpointer import _metric_of, _read_sidecar

    side = path.with_suffix(".json")
    if not side.exists():
        return Verdict(path, "rgt.ckpt", False, (), "no sidecar (the save did not complete)",
                       step=step_from_name(path.name), bytes=size)
    try:
        meta = _read_sidecar(side)
    except ValueError as err:
        return Verdict(path, "rgt.ckpt", False, (), str(err), bytes=size)
    ok = meta["bytes"] == size
    return Verdict(path, "rgt.ckpt", ok, ("parse",) if ok else (),
                   "size ok" if ok else f"size {size} != recorded {meta['bytes']} (truncated?)",
                   step=meta["step"], bytes=size, metric=_metric_of(meta),
                   created=meta.get("created"))


# --------------------------------------------------------------------------- safetensors


def check_safetensors(path: Path) -> tuple[str | None, str]:
    """(problem, note): the 8-byte little-endian header length, the JSON header, and every
    tensor's dtype × shape against its byte range; ranges must tile the data exactly (what
    safetensors itself demands). No tensor is read."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            return f"{size} bytes: shorter than the 8-byte header length", ""
        (length,) = struct.unpack("<Q", head)
        if length > min(size - 8, _MAX_HEADER):
            return (f"header length field says {length:,} bytes but the file has "
                    f"{size - 8:,} after it (overwritten or truncated)"), ""
        raw = f.read(length)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        return f"header is not JSON: {clean(err, 80)}", ""
    if not isinstance(header, dict):
        return "header is not a JSON object", ""
    data_len = size - 8 - length
    ranges = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        problem = _tensor_problem(info, data_len)
        if problem:
            return f"tensor {clean(name, 60)}: {problem}", ""
        ranges.append(tuple(info["data_offsets"]))
    ranges.sort()
    end = 0
    for begin, stop in ranges:
        if begin != end:
            return (f"tensor byte ranges {'overlap' if begin < end else 'leave a gap'} at "
                    f"offset {min(begin, end)}"), ""
        end = stop
    if end != data_len:
        return f"tensors cover {end:,} bytes, the file holds {data_len:,} after the header", ""
    return None, f"header and {len(ranges)} tensor byte ranges consistent; tensors not loaded"


def _tensor_problem(info: Any, data_len: int) -> str | None:
    if not isinstance(info, dict):
        return "entry is not an object"
    dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if not (isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)):
        return f"bad shape {clean(shape, 40)}"
    if not (isinstance(offsets, list) and len(offsets) == 2
            and all(isinstance(o, int) for o in offsets) and 0 <= offsets[0] <= offsets[1]):
        return f"bad data_offsets {clean(offsets, 40)}"
    if offsets[1] > data_len:
        return f"ends at byte {offsets[1]:,} of {data_len:,} (truncated?)"
    bits = _DTYPE_BITS.get(dtype) if isinstance(dtype, str) else None
    if bits is None:
        return f"unknown dtype {clean(dtype, 20)}"
    numel = 1
    for d in shape:
        numel *= d
    if offsets[1] - offsets[0] != (numel * bits + 7) // 8:
        return (f"{dtype}{shape} needs {(numel * bits + 7) // 8:,} bytes, its range has "
                f"{offsets[1] - offsets[0]:,}")
    return None


# --------------------------------------------------------------------------- torch pickles


@dataclass
class _Parsed:
    globals: list[str]
    ints: dict[str, int]  # string key → the int that follows it (global_step, epoch, ...)
    problem: str | None = None
    zipped: bool = True


def parse_pickle(data: bytes) -> _Parsed:
    """Walk the pickle's opcodes without executing any: the globals it would import, the
    ints stored under well-known keys, and whether it ends (a cut pickle has no STOP)."""
    names: list[str] = []
    ints: dict[str, int] = {}
    strings: list[str] = []
    last_key = None
    stopped = False
    try:
        for op, arg, _pos in pickletools.genops(data):
            if op.name == "GLOBAL":
                names.append(str(arg).replace(" ", "."))
            elif op.name == "STACK_GLOBAL" and len(strings) >= 2:
                names.append(f"{strings[-2]}.{strings[-1]}")
            elif op.name == "STOP":
                stopped = True
                break
            if op.name in _STRING_OPS:
                strings.append(str(arg))
                last_key = str(arg)
                continue
            if op.name in ("BININT", "BININT1", "BININT2", "LONG1", "INT") and last_key and \
                    last_key in _STEP_KEYS + ("epoch",) and last_key not in ints:
                ints[last_key] = int(arg)
            if op.name not in ("BINPUT", "LONG_BINPUT", "MEMOIZE"):
                last_key = None
    except (ValueError, EOFError, struct.error, pickle.UnpicklingError) as err:
        return _Parsed(names, ints, f"pickle does not parse: {clean(err, 80)}")
    if not stopped:
        return _Parsed(names, ints, "pickle ends before its STOP opcode (truncated)")
    return _Parsed(sorted(set(names)), ints)


def parse_torch_file(path: Path) -> _Parsed:
    """A torch.save file's container: the zip directory and its data.pkl, or a legacy pickle."""
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic == b"PK\x03\x04":
        try:
            with zipfile.ZipFile(path) as archive:
                pkls = [n for n in archive.namelist() if n.endswith("data.pkl")]
                if not pkls:
                    return _Parsed([], {}, "zip archive without a data.pkl: not torch.save's")
                info = archive.getinfo(pkls[0])
                if info.file_size > _MAX_PICKLE:
                    return _Parsed([], {}, f"data.pkl is {info.file_size:,} bytes: not a "
                                   "checkpoint's metadata")
                data = archive.read(pkls[0])
        except (zipfile.BadZipFile, OSError, EOFError) as err:
            return _Parsed([], {}, f"not a complete zip archive (truncated?): {clean(err, 80)}")
        return parse_pickle(data)
    if magic[:1] == b"\x80":  # torch's legacy format: a magic-number pickle first
        with open(path, "rb") as f:  # its first pickle (the magic number) is a few bytes
            parsed = parse_pickle(f.read(1 << 20))
        parsed.zipped = False
        if parsed.problem and "STOP" not in parsed.problem:
            return parsed
        return _Parsed(parsed.globals, parsed.ints, None, zipped=False)
    return _Parsed([], {}, "neither a torch zip archive nor a pickle")


def unsafe_globals(names: Iterable[str]) -> list[str]:
    """Globals weights-only loading refuses even with rgt's numpy allowance."""
    return [n for n in names if not n.startswith(_TORCH_SAFE_PREFIXES)
            and n not in _NUMPY_ALLOWED]


def _numpy_allowlist() -> list:
    """Exactly the numpy globals a pickled numpy RNG state needs (HF's rng_state.pth:
    np.random.get_state()), under both the numpy 1.x and 2.x module names."""
    try:
        import numpy as np
    except ImportError:
        return []
    core = getattr(np, "_core", None) or np.core
    reconstruct = core.multiarray._reconstruct
    uint32 = type(np.dtype(np.uint32))
    return [np.ndarray, np.dtype, uint32,
            (reconstruct, "numpy.core.multiarray._reconstruct"),
            (reconstruct, "numpy._core.multiarray._reconstruct"),
            (uint32, "numpy.dtypes.UInt32DType")]


def torch_load(path: Path, mmap: bool = True) -> Any:
    """torch.load weights-only on the CPU, memory-mapped (tensor bytes are not read)."""
    import torch

    allow = _numpy_allowlist()
    scope = (torch.serialization.safe_globals(allow)
             if allow and hasattr(torch.serialization, "safe_globals")
             else contextlib.nullcontext())
    with scope:
        return torch.load(str(path), map_location="cpu", weights_only=True, mmap=mmap)


def _check_torch(path: Path, kind: str, base: tuple[str, ...], load: bool,
                 size: int) -> Verdict:
    parsed = parse_torch_file(path)
    if parsed.problem:
        return Verdict(path, kind, False, base, parsed.problem, bytes=size,
                       step=step_from_name(path.name))
    checked = base + ("parse",)
    step = next((parsed.ints[k] for k in _STEP_KEYS if k in parsed.ints), None)
    if step is None:
        step = step_from_name(path.name)
    refused = unsafe_globals(parsed.globals)
    proven = "hash-verified" if base else "parsed"
    if kind == "training-args":
        return Verdict(path, kind, True, checked, f"{proven}, not unpickled: a pickled "
                       "TrainingArguments object (loading it runs transformers code; rgt "
                       "never does)", bytes=size)
    if kind == "pickle":  # accelerate's RNG states: whole is all a resume needs to know
        return Verdict(path, kind, True, checked, "zip + pickle opcodes complete (an RNG "
                       "state: parsed, never unpickled)", bytes=size)
    if refused:
        shown = ", ".join(refused[:2]) + (f" and {len(refused) - 2} more" if len(refused) > 2
                                          else "")
        return Verdict(path, kind, True, checked, f"{proven}, not unpickled: needs {shown} "
                       "(weights-only loading refuses code; rgt never runs it)", step=step,
                       bytes=size)
    if not load:
        return Verdict(path, kind, True, checked, "zip + pickle opcodes complete; not loaded",
                       step=step, bytes=size)
    try:
        state = torch_load(path, mmap=parsed.zipped)
    except ImportError:
        return Verdict(path, kind, True, checked, f"{proven}; not loaded (torch is not "
                       "installed here)", step=step, bytes=size)
    except Exception as err:  # noqa: BLE001 - any failure to load is the answer
        return Verdict(path, kind, False, checked, f"does not load: {type(err).__name__}: "
                       f"{clean(err, 120)}", step=step, bytes=size, loaded=False)
    if isinstance(state, dict):
        found = next((state[k] for k in _STEP_KEYS if isinstance(state.get(k), int)), None)
        step = found if found is not None else step
    return Verdict(path, kind, True, checked + ("load",), "loads (weights-only)", step=step,
                   bytes=size, loaded=True)


# --------------------------------------------------------------------------- directories


def check_dir(path: Path, *, hashed: bool = False, load: bool = True, deep: bool = True,
              parts: dict[str, Verdict] | None = None) -> Verdict:
    """An HF `checkpoint-N`, accelerate or torch.distributed.checkpoint directory as one
    checkpoint; damaged when any of its files is.
    `parts` (file name → verdict) reuses checks already made on the files (pull)."""
    parts = dict(parts or {})
    for child in sorted(path.iterdir()):
        kind = kind_of(child)
        if child.is_file() and child.name not in parts:
            parts[child.name] = check_file(child, kind or "other", hashed=hashed, load=load,
                                           deep=deep)
    if is_hf_dir(path):
        kind, step, problems = "hf-checkpoint", *_hf_layout(path)
    elif is_dcp_dir(path):
        kind, step, problems = "dcp", step_from_name(path.name), _dcp_layout(path)
    elif is_accelerate_dir(path):
        kind, step, problems = "accelerate", *_accelerate_layout(path, parts)
    else:
        kind, step, problems = "directory", None, ["not a known checkpoint layout"]
    bad = [v for v in parts.values() if not v.ok]
    problems += said_once((v.path.name, v.note) for v in bad)
    checked: tuple[str, ...] = tuple(c for c in CHECKS if any(c in v.checked
                                                               for v in parts.values()))
    size = sum(v.bytes or 0 for v in parts.values())
    unpickled = sorted(v.path.name for v in parts.values() if "not unpickled" in v.note)
    note = "; ".join(problems) if problems else (
        f"{len(parts)} files verified" + (f"; not unpickled: {', '.join(unpickled)}"
                                          if unpickled else ""))
    return Verdict(path, kind, not problems, checked, note, step=step, bytes=size,
                   parts=sorted(parts.values(), key=lambda v: v.path.name))


def _hf_layout(path: Path) -> tuple[int | None, list[str]]:
    problems: list[str] = []
    step = None
    try:
        state = json.loads((path / "trainer_state.json").read_text(encoding="utf-8"))
        step = state.get("global_step") if isinstance(state, dict) else None
        if not isinstance(step, int):
            problems.append("trainer_state.json has no integer global_step")
            step = None
    except (ValueError, UnicodeDecodeError, OSError) as err:
        problems.append(f"trainer_state.json: {clean(err, 80)}")
    named = step_from_name(path.name) if path.name.startswith("checkpoint-") else None
    if step is not None and named is not None and named != step:
        problems.append(f"trainer_state.json says step {step}, the directory name {named}")
    names = {p.name for p in path.iterdir()}
    weights = [n for n in names if _WEIGHTS.match(n)]
    if not weights:
        problems.append("no model weights (model*.safetensors, pytorch_model*.bin, "
                        "adapter_model.*)")
    for index in sorted(n for n in names if n.endswith(".index.json")):
        try:
            shards = set(json.loads((path / index).read_text(encoding="utf-8"))
                         ["weight_map"].values())
        except (ValueError, KeyError, TypeError, AttributeError, OSError) as err:
            problems.append(f"{index}: {clean(err, 80)}")
            continue
        missing = sorted(s for s in shards if s not in names)
        if missing:
            problems.append(f"{index} names shards that are absent: {', '.join(missing[:3])}")
    return step if step is not None else named, problems


def _accelerate_layout(path: Path, parts: dict[str, Verdict]) -> tuple[int | None,
                                                                        list[str]]:
    """accelerate's `save_state` directory: model weights and its RNG states (written last:
    without them the save did not complete). The step is the directory's name (step_620,
    checkpoint_3), else the one accelerate pickles with its RNG states."""
    names = {p.name for p in path.iterdir() if p.is_file()}
    problems = []
    if not any(_WEIGHTS.match(n) for n in names):
        problems.append("no model weights (model*.safetensors, pytorch_model*.bin)")
    if not any(_ACCELERATE_RNG.match(n) for n in names):
        problems.append("no random_states_N.pkl, which accelerate writes last: the save did "
                        "not complete")
    step = step_from_name(path.name)
    if step is None:
        step = next((v.step for n, v in sorted(parts.items())
                     if _ACCELERATE_RNG.match(n) and v.step is not None), None)
    return step, problems


def _dcp_layout(path: Path) -> list[str]:
    """`.metadata` is a pickle torch.distributed.checkpoint loads unrestricted: parse its
    opcodes (never execute them) for the .distcp files it names, and check they are here."""
    try:
        data = (path / ".metadata").read_bytes()
    except OSError as err:
        return [f".metadata: {clean(err, 80)}"]
    parsed = parse_pickle(data)
    if parsed.problem:
        return [f".metadata: {parsed.problem}"]
    named = set(re.findall(rb"([\w.-]+\.distcp)", data))
    problems = []
    for name in sorted(n.decode() for n in named):
        file = path / name
        if not file.is_file() or file.stat().st_size == 0:
            problems.append(f"{name} named by .metadata is missing or empty")
    if not named and not any(path.glob("*.distcp")):
        problems.append("no .distcp data files")
    return problems


# --------------------------------------------------------------------------- discovery


def find(root: Path, max_depth: int = 4) -> list[Path]:
    """Checkpoints under `root` (files and known-layout directories), never descending into
    one; hidden and temporary entries skipped. `root` itself may be one."""
    root = Path(root)
    if root.is_file() or (root.is_dir() and kind_of(root) in DIR_KINDS):
        return [root]
    found: list[Path] = []
    base_depth = len(root.parts)
    for current, dirs, files in os.walk(root):
        here = Path(current)
        keep = []
        for d in sorted(dirs):
            sub = here / d
            if d.startswith("."):
                continue
            if kind_of(sub) in DIR_KINDS:
                found.append(sub)
            elif len(sub.parts) - base_depth < max_depth:
                keep.append(d)
        dirs[:] = keep
        for name in sorted(files):
            if name.startswith("."):
                continue
            kind = kind_of(here / name)
            if kind in ("rgt.ckpt", "lightning", "safetensors", "torch", "training-args") or (
                    kind == "rgt.ckpt-sidecar" and name[:-5] + ".pt" not in files):
                found.append(here / name)  # a sidecar alone stands for its missing data file
    return sorted(found, key=_order)


def _order(path: Path) -> tuple[int, str]:
    step = step_from_name(path.name)
    return (-1 if step is None else step, str(path))
