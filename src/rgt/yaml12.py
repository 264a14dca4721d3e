"""YAML as its 1.2 core schema reads it, for the files users write (job specs, task files).

PyYAML implements YAML 1.1, whose implicit types are traps in a job spec: `on`, `off`, `yes`,
`no`, `y` and `n` are booleans (so `recover: {on: [crashed]}` has the key True, and
`env: {FLAG: yes}` exports "True"), `1:30` is the sexagesimal integer 90, and `0777` is octal.
YAML 1.2's core schema, which SkyPilot's and dstack's users and every other current parser
read, has none of that: only true/false are booleans, integers are decimal, 0o-octal or
0x-hex, and anything else is the string it looks like.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

_BOOL = "tag:yaml.org,2002:bool"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"


class Yaml12Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 core-schema booleans, integers and floats."""


Yaml12Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in (_BOOL, _INT, _FLOAT)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
Yaml12Loader.add_implicit_resolver(
    _BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
Yaml12Loader.add_implicit_resolver(
    _INT, re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"), list("-+0123456789"))
Yaml12Loader.add_implicit_resolver(
    _FLOAT, re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                       r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"), list("-+.0123456789"))


def _construct_int(loader: yaml.SafeLoader, node: yaml.Node) -> int:
    text = str(loader.construct_scalar(node))  # type: ignore[arg-type]
    if text.startswith("0o"):
        return int(text[2:], 8)
    if text.startswith("0x"):
        return int(text[2:], 16)
    return int(text, 10)  # a leading zero is decimal in 1.2, not octal


Yaml12Loader.add_constructor(_INT, _construct_int)


def load(text: str) -> Any:
    """Parse one YAML document the 1.2 way."""
    return yaml.load(text, Loader=Yaml12Loader)  # noqa: S506  (a SafeLoader subclass)


def load_all(text: str) -> list[Any]:
    """Parse every document of a multi-document file (a SkyPilot pipeline) the 1.2 way."""
    return list(yaml.load_all(text, Loader=Yaml12Loader))  # noqa: S506  (a SafeLoader subclass)
