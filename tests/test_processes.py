"""The public face of `course_utils.processes`: what notebooks import, and what the wing depends on."""

from __future__ import annotations

import ast
from pathlib import Path

import course_utils.processes as processes

WING = Path(processes.__file__).parent


def test_every_public_name_is_the_one_its_module_defines():
    for name in processes.__all__:
        obj = getattr(processes, name)
        module = getattr(obj, "__module__", None)
        if module is not None:  # a function or class: defined inside the wing, once
            assert module.startswith("course_utils.processes."), (name, module)
    assert processes.launch.__module__ == "course_utils.processes.launcher"
    assert processes.run_python.__module__ == "course_utils.processes.child_python"
    assert processes.run_torchrun.__module__ == "course_utils.processes.torchrun"
    assert processes.free_port.__module__ == "course_utils.processes.supervision"


def _course_imports(path: Path) -> set[str]:
    """The `course_utils` modules that the file at `path` imports."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("course_utils"):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("course_utils")}
    return found


def test_the_wing_depends_on_no_lesson_module_but_the_driver_check():
    """Starting processes does not depend on choosing GPUs: only `gpus.cuda_driver_started`."""
    outside = set()
    for path in WING.glob("*.py"):
        outside |= {m for m in _course_imports(path) if not m.startswith("course_utils.processes")}
    assert outside == {"course_utils.gpus"}
