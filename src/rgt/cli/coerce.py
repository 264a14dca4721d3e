"""Command-line values turned into Python values without importing pydantic first.

Typer (0.2x) coerces every parameter value through a pydantic TypeAdapter it builds on first
use: importing pydantic and building the adapters costs ~0.13 s, more than the rest of
`rgt ls` together, only to turn "60" into 60. rgt's parameters are plain (str, int, float,
Path, list[str], bool flags), so for a value whose Python form is certain (a str for a str, a
decimal integer for an int, a number in range) this gives it at once; anything else — a range
not met, "abc" for an int, an annotation not listed here — goes to Typer's own adapter, so its
verdicts and error messages stay Typer's, word for word. tests/test_cli_startup.py checks both
paths against Typer's. With a Typer that coerces some other way (no `typer._coercion`), this
does nothing.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

try:
    from typer._coercion import RuntimeParam, build_runtime_param
    from typer._param_types import coerce_cli_path
except ImportError:  # another Typer: its own coercion stays
    RuntimeParam = None  # type: ignore[assignment,misc]

_INT = re.compile(r"-?(0|[1-9][0-9]*)")
_DECIMAL = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?")
_UNSURE = object()  # the fast path cannot say: Typer's adapter decides


def use_fast_coercion(command: Any) -> None:
    """Give each parameter of COMMAND (and of its subcommands) the fast coercion."""
    if RuntimeParam is None:
        return
    for param in getattr(command, "params", ()):  # (again: Typer may have added some since)
        _give_fast(param)
    if getattr(command, "_rgt_fast", False):
        return
    command._rgt_fast = True
    made_help_option = command.get_help_option  # made on first use, as a parameter too

    def get_help_option(ctx: Any) -> Any:
        option = made_help_option(ctx)
        if option is not None:
            _give_fast(option)
        return option

    command.get_help_option = get_help_option
    for sub in (getattr(command, "commands", None) or {}).values():
        use_fast_coercion(sub)


def _give_fast(param: Any) -> None:
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is not None and getattr(param, "_runtime_param", 0) is None:
        param._runtime_param = _Fast(parameter_info=descriptor.parameter_info,
                                     annotation=descriptor.annotation, descriptor=descriptor)


def _fast_value(annotation: Any, info: Any, value: Any) -> Any:
    """VALUE as ANNOTATION where that is certain, else _UNSURE."""
    if info.parser is not None or getattr(info, "clamp", False):
        return _UNSURE
    if annotation is bool:  # a flag's own value; "yes", "1" and the like: Typer's
        return value if isinstance(value, bool) else _UNSURE
    if annotation is str:
        return value if isinstance(value, str) else _UNSURE
    if annotation is int or annotation is float:
        if isinstance(value, str):
            if not (_INT if annotation is int else _DECIMAL).fullmatch(value):
                return _UNSURE
            number = annotation(value)
        elif type(value) is int or (annotation is float and type(value) is float):
            number = annotation(value)
        else:
            return _UNSURE
        low, high = info.min, info.max
        if (low is not None and number < low) or (high is not None and number > high):
            return _UNSURE  # Typer's adapter words the refusal
        return number
    if annotation == list[str] and isinstance(value, (list, tuple)) \
            and all(isinstance(v, str) for v in value):
        return list(value)
    return _UNSURE


if RuntimeParam is not None:
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class _Fast(RuntimeParam):
        descriptor: Any

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            annotation, info = self.annotation, self.parameter_info
            if isinstance(annotation, type) and issubclass(annotation, Path) \
                    and info.parser is None and info.path_type is None:
                return coerce_cli_path(value, info, path_type=annotation, param=param, ctx=ctx)
            fast = _fast_value(annotation, info, value)
            if fast is not _UNSURE:
                return fast
            return build_runtime_param(self.descriptor)._coerce_value(value, param, ctx)
