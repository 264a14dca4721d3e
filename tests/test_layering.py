"""Folder dependencies go one way: cli → agent (the MCP server, which the CLI starts) →
lifecycle → platforms → (remote, transport, onbox, store, profiles, spec, ckpt). Read from the
source with `ast`, lazy imports inside functions included: a lazy import against the direction
is still a cycle, only a hidden one."""

from __future__ import annotations

import ast
from pathlib import Path

import rgt

SRC = Path(rgt.__file__).parent

# Each unit, and the units it may never import. Units not listed (errors, hostos, examples,
# __main__, __init__) sit outside the chain.
LAYERS = ["cli", "agent", "lifecycle", "platforms", "remote"]
BELOW = {"transport", "onbox", "store", "profiles", "spec", "spec_sections", "boxfacts",
         "ckpt"}


def forbidden(unit: str) -> set[str]:
    """What `unit` must not import: every layer above it (and, for the units below, all of
    them)."""
    if unit in LAYERS:
        return set(LAYERS[: LAYERS.index(unit)])
    if unit in BELOW:
        return set(LAYERS)
    return set()


def unit_of(path: Path, root: Path) -> str:
    parts = path.relative_to(root).parts
    return parts[0] if len(parts) > 1 else parts[0].removesuffix(".py")


def imported_units(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, unit) for every `rgt.<unit>` the module imports, at any depth."""
    package = ["rgt", *path.relative_to(root).parts[:-1]]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = package[: len(package) - (node.level - 1)]
                names = [".".join(base + ([node.module] if node.module else []))]
            else:
                names = [node.module or ""]
            if names == ["rgt"]:  # `from rgt import lifecycle`
                names = [f"rgt.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "rgt" and len(parts) > 1:
                found.append((node.lineno, parts[1]))
    return found


def violations(root: Path = SRC) -> list[str]:
    bad = []
    for path in sorted(root.rglob("*.py")):
        unit = unit_of(path, root)
        for line, target in imported_units(path, root):
            if target in forbidden(unit):
                bad.append(f"{path.relative_to(root)}:{line}: {unit} imports {target}")
    return bad


def test_imports_go_one_way():
    assert violations() == []


def test_the_check_catches_an_import_against_the_direction(tmp_path):
    """The rule is not vacuous: a platform that reaches up into the lifecycle (even lazily,
    inside a function) and a remote module that imports a platform are both named."""
    (tmp_path / "platforms").mkdir()
    (tmp_path / "remote").mkdir()
    (tmp_path / "platforms" / "bad.py").write_text(
        "def up():\n    from rgt.lifecycle import boxes\n    return boxes\n")
    (tmp_path / "remote" / "worse.py").write_text("from ..platforms import ssh\n")
    (tmp_path / "store.py").write_text("from rgt import cli\n")
    (tmp_path / "spec.py").write_text("import rgt.errors\nfrom rgt.store import Box\n")
    assert [v.split(": ", 1)[1] for v in violations(tmp_path)] == [
        "platforms imports lifecycle", "remote imports platforms", "store imports cli"]
