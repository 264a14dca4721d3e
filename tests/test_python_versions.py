"""The minimum Python of each side, held statically (vermin), whatever interpreter runs the tests.

- the laptop CLI (all of src/rgt): 3.10, pyproject's requires-python (Ubuntu 22.04's Python);
- what goes to a box — the on-box scripts as `script_source` ships them and the `rgt.ckpt`
  package as `rgt run` ships it (rgt.lifecycle.ship): 3.8, the oldest a rented image may have.

vermin does not evaluate annotations (`--no-eval-annotations`): they are postponed, so `X | None`
in one is fine on 3.8 — which holds only while every such module has
`from __future__ import annotations`, checked here too. It also cannot see a runtime union in
`isinstance(x, int | float)` (3.10+), so that is checked from the syntax tree. The real run on
3.8 is tests/onbox/test_onbox_oldest_python.py (may skip: it needs a 3.8 interpreter).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import rgt
from rgt.lifecycle.ship import write_library
from rgt.onbox import SCRIPTS, script_source

SRC = Path(rgt.__file__).parent
FLAGS = ["--no-tips", "--violations", "--no-eval-annotations"]


def vermin(target: str, *paths: Path) -> subprocess.CompletedProcess:
    pytest.importorskip("vermin", reason="vermin is in the test extra: pip install -e '.[test]'")
    return subprocess.run(
        [sys.executable, "-c", "import sys; from vermin import main; sys.exit(main())",
         f"-t={target}-", *FLAGS, *map(str, paths)],
        capture_output=True, text=True, timeout=300,
    )


def shipped_to_a_box(root: Path) -> Path:
    """Exactly what reaches a box: the rgt.ckpt package and each on-box script."""
    write_library(root / "lib")
    (root / "scripts").mkdir()
    for name in SCRIPTS:
        (root / "scripts" / f"{name}.py").write_bytes(script_source(name))
    return root


def runtime_problems(source: str, name: str) -> list[str]:
    """What vermin does not check: annotations evaluated at definition time (no postponing
    import) and `X | Y` as the class argument of isinstance/issubclass."""
    tree = ast.parse(source)
    problems = []
    postponed = any(isinstance(node, ast.ImportFrom) and node.module == "__future__"
                    and any(a.name == "annotations" for a in node.names) for node in tree.body)
    annotated = any(isinstance(node, ast.AnnAssign)
                    or (isinstance(node, ast.arg) and node.annotation is not None)
                    or (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns)
                    for node in ast.walk(tree))
    if annotated and not postponed:
        problems.append(f"{name}: annotations without `from __future__ import annotations`")
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("isinstance", "issubclass") and len(node.args) == 2
                and isinstance(node.args[1], ast.BinOp) and isinstance(node.args[1].op, ast.BitOr)):
            problems.append(f"{name}:{node.lineno}: {node.func.id}(..., X | Y) needs 3.10; "
                            "use a tuple")
    return problems


def test_what_goes_to_a_box_needs_only_python_38(tmp_path):
    root = shipped_to_a_box(tmp_path)
    checked = vermin("3.8", root)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    problems = [p for path in sorted(root.rglob("*.py"))
                for p in runtime_problems(path.read_text(), str(path.relative_to(root)))]
    assert not problems, "\n".join(problems)


def test_the_laptop_side_needs_only_python_310():
    checked = vermin("3.10", SRC)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_checks_catch_what_an_old_python_lacks(tmp_path):
    """The flags above must still see 3.9+ code (a check that passes everything is no check)."""
    newer = tmp_path / "newer.py"
    newer.write_text("import functools\n\n\n@functools.cache\n"
                     "def f():\n    return 'xy'.removeprefix('x')\n")
    checked = vermin("3.8", newer)
    assert checked.returncode != 0
    assert "functools.cache" in checked.stdout and "str.removeprefix" in checked.stdout
    assert runtime_problems("def f(x: int | None):\n    return isinstance(x, int | float)\n",
                            "m.py") == [
        "m.py: annotations without `from __future__ import annotations`",
        "m.py:2: isinstance(..., X | Y) needs 3.10; use a tuple",
    ]
