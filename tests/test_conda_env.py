"""environment.yml installs everything the course imports: a dry parse, no conda needed."""

from __future__ import annotations

import re
import tomllib

from notebook_hygiene import ROOT
from torch_matrix import requirements_for_tests

# PyPI name -> conda-forge name where they differ.
CONDA_NAMES = {"torch": "pytorch"}
# On conda-forge under the PyPI name but another program: these come from PyPI, in the pip section.
PIP_ONLY = {"playwright"}  # conda-forge's playwright is the Node.js tool, not the Python module


def name_of(requirement: str) -> str:
    """The bare, normalised package name of a requirement line ("torch==2.13.*" -> "torch")."""
    return re.split(r"[\s=<>!~;\[]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def environment_packages(text: str) -> tuple[set[str], set[str]]:
    """(conda packages, pip packages) listed in environment.yml, read line by line."""
    conda, pip, section = set(), set(), None
    for line in text.splitlines():
        if re.match(r"^\S", line):
            section = line.split(":")[0]
            continue
        item = re.match(r"^(?P<indent>\s*)- (?P<spec>[^#]+?)\s*(?:#.*)?$", line)
        if section != "dependencies" or item is None:
            continue
        spec = item["spec"]
        if spec == "pip:" or spec.startswith("-e "):
            continue
        (pip if len(item["indent"]) > 2 else conda).add(name_of(spec))
    return conda, pip


def course_requirements() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return {name_of(requirement) for requirement in project["dependencies"] + requirements_for_tests(project)}


ENVIRONMENT = (ROOT / "environment.yml").read_text(encoding="utf-8")


def test_every_requirement_of_the_course_and_its_tests_is_in_environment_yml():
    conda, pip = environment_packages(ENVIRONMENT)
    missing = []
    for name in sorted(course_requirements()):
        if name in PIP_ONLY:
            if name not in pip or name in conda:
                missing.append(f"{name} (in the pip section)")
        elif CONDA_NAMES.get(name, name) not in conda:
            missing.append(CONDA_NAMES.get(name, name))
    assert missing == []


def test_the_parser_reads_both_sections_and_would_notice_a_gap():
    conda, pip = environment_packages(ENVIRONMENT)
    assert {"pytorch", "python", "nvidia-ml-py", "pip"} <= conda
    assert pip == {"playwright"}
    assert "torch" not in conda
    text = ENVIRONMENT.replace("  - nbformat\n", "")
    assert "nbformat" not in environment_packages(text)[0]


def test_environment_yml_installs_the_course_itself():
    assert re.search(r"^      - -e \.$", ENVIRONMENT, re.MULTILINE)
    assert re.search(r"^  - nodefaults$", ENVIRONMENT, re.MULTILINE)
