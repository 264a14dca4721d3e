"""script_source(): what goes to a box is one self-contained, stdlib-only file per script."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from rgt.onbox import SCRIPTS, script_path, script_source


def top_level_names(tree: ast.Module) -> set:
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


COMMON = top_level_names(ast.parse(script_path("runner").with_name("_common.py").read_text()))


@pytest.mark.parametrize("name", SCRIPTS)
def test_shipped_script_is_stdlib_only_and_keeps_the_common_helpers(name):
    source = script_source(name).decode()
    tree = ast.parse(source)
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            assert node.level == 0 and node.module, f"{name}: relative import"
            modules.add(node.module.split(".")[0])
    assert modules <= set(sys.stdlib_module_names), f"{name}: {modules - sys.stdlib_module_names}"
    assert "read_json" in COMMON and top_level_names(tree) >= COMMON
    # a script that defined a name of _common would replace the inlined helper on the box
    assert not top_level_names(ast.parse(script_path(name).read_text())) & COMMON

    # -S: no site-packages, so no rgt; the module body must still load on its own
    loaded = subprocess.run(
        [
            sys.executable,
            "-S",
            "-c",
            "import sys; exec(compile(sys.stdin.read(), 'shipped', 'exec'), {'__name__': 'x'})",
        ],
        input=source,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert loaded.returncode == 0, loaded.stderr


def test_a_script_without_its_common_block_is_refused(tmp_path, monkeypatch):
    import rgt.onbox as onbox

    broken = tmp_path / "runner.py"
    broken.write_text("from __future__ import annotations\n\nprint('no helpers')\n")
    monkeypatch.setattr(onbox, "script_path", lambda name: broken)
    with pytest.raises(RuntimeError, match="exactly one _common import block"):
        onbox.script_source("runner")
