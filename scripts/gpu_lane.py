"""The GPU lane: run the course on a GPU machine that has no package index, in one call, and record it.

    python scripts/gpu_lane.py prepare [--wheels DIR]       here, with pip: the wheels the GPU machine lacks
    python scripts/gpu_lane.py run --out DIR [--wheels DIR] [--notebooks NB ...] [--tests FILE ...]
                                   [--timeout S]           there: every English notebook under nbval and
                                                             the unit tests that take a GPU path
    python scripts/gpu_lane.py report DIR [--docs DIR]      here: the run as a page of the website

`prepare` resolves, for the GPU machine's Python and platform, what the notebooks and tests need
besides what that machine already has (scripts/gpu_lane_target.txt) and downloads those wheels into
build/gpu-wheels/ with a manifest (lane.json). `run` unpacks them into a temporary folder, puts it,
src/ and scripts/ on PYTHONPATH (the notebooks' kernels inherit it), prints the GPU inventory, runs
pytest in parallel and writes report.json, notebooks.zip (the executed notebooks) and
pytest-output.txt into DIR, also when its timeout stops pytest. It never installs torch: the
machine's own CUDA build is what the run tests. Called through `python3 course.py gpu`.

What comes from elsewhere (lane.json and the wheels there, report.json and notebooks.zip here) is
checked before use (gpu_lane_inputs), and every text of a run reaches its page escaped: a bad file,
or a folder that cannot be written, ends in one line that names it and the field, status 2.
"""

from __future__ import annotations

import argparse
import datetime
import html
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import owned_folders
from course_shell import pytest_command, requirement_name, requirements_for_tests, worker_count
from gpu_lane_inputs import RAN_KEY, REPORT_HINT, BadInput, inside, load_manifest, load_report, read_notebooks

ROOT = Path(__file__).resolve().parent.parent
WHEELS = ROOT / "build" / "gpu-wheels"
TARGET_LIST = ROOT / "scripts" / "gpu_lane_target.txt"
MANIFEST = "lane.json"
DOCS = ROOT / "docs"
RUNS = Path("gpu-runs")
CONTRIBUTING = ROOT / "CONTRIBUTING.md"
MIB = 1024 * 1024
SIZE_AIM = 40 * MIB  # what travels to the GPU machine with the working tree is at most 64 MiB
TRANSFER_LIMIT = 64 * MIB
TARGET_PYTHON = "3.12"
# torch's CUDA wheels (and so the GPU machine) need glibc 2.28 or newer; pip 23 does not widen a
# manylinux tag to the older ones by itself, so each is named.
PLATFORMS = [f"manylinux_2_{minor}_x86_64" for minor in range(28, 16, -1)] + ["manylinux2014_x86_64"]
# The environment markers of the GPU machine, for the dependencies that `prepare` resolves.
TARGET_MARKERS = {
    "python_version": TARGET_PYTHON,
    "python_full_version": f"{TARGET_PYTHON}.0",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "os_name": "posix",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
}
# The course's requirements that the lane does not take to the GPU machine, and why.
LEFT_OUT = {
    "torch": "the machine's own CUDA build is what the run tests",
    "ruff": "the code's style does not depend on the machine",
    "playwright": "the browser tests need a browser build, not a GPU",
    "jupyterlab": "nbval starts kernels without JupyterLab",
}
# Never downloaded: torch and the CUDA libraries come with the machine (and are gigabytes).
NEVER = re.compile(r"^(torch|triton|nvidia-.*|cuda-.*)$")
# A unit test takes a GPU path where its file asks torch about CUDA or the accelerator.
GPU_TEST_MARK = re.compile(r"torch\.(cuda|accelerator)\.")
DEFAULT_TIMEOUT_S = 420  # well inside the 8 minutes that one call on a GPU machine may take
REPORT_MARGIN_S = 20  # what writing the report takes after pytest is stopped
RUN_FILES = ("report.json", "notebooks.zip", "pytest-output.txt")  # what `run` writes into --out


def normalize(name: str) -> str:
    """A distribution's name as package indexes compare it: `Jupyter_Client` -> `jupyter-client`."""
    return re.sub(r"[-_.]+", "-", name).lower()


# --- prepare -------------------------------------------------------------------------------------


def target_requirements(path: Path = TARGET_LIST) -> list[str]:
    """The distributions the GPU machine already has, as requirements (comments and blanks dropped)."""
    lines = [line.split("#", 1)[0].strip() for line in path.read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if line]


def needed_requirements(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    """What the notebooks and the tests need there: the course's requirements and its test extra,
    less the website's (`site`) and LEFT_OUT."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    site = {requirement_name(r) for r in project["optional-dependencies"].get("site", [])}
    wanted = [*project["dependencies"], *requirements_for_tests(project)]
    return [r for r in wanted if requirement_name(r) not in LEFT_OUT and requirement_name(r) not in site]


def pip_target_options() -> list[str]:
    """pip's options that choose wheels for the GPU machine's Python and platform, wheels only."""
    options = ["--only-binary=:all:", "--python-version", TARGET_PYTHON, "--implementation", "cp"]
    for tag in PLATFORMS:
        options += ["--platform", tag]
    return options


def requires(metadata: dict[str, Any], extras: Iterable[str] = ()) -> list[str]:
    """The names a distribution (its metadata in pip's install report) needs on the GPU machine."""
    from packaging.requirements import Requirement  # prepare runs in the course's .venv, which has it

    names = []
    for line in metadata.get("requires_dist", []):
        requirement = Requirement(line)
        marker = requirement.marker
        if marker is None or any(marker.evaluate({**TARGET_MARKERS, "extra": e}) for e in ("", *extras)):
            names.append(normalize(requirement.name))
    return names


def plan(report: dict[str, Any], target: list[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """From pip's install report: the (name, version) pairs to download and the names the machine has.

    The machine has each distribution of `target` and, transitively, what those need; the rest of
    the report is what the lane brings. torch and the CUDA libraries are never brought.
    """
    items = {normalize(i["metadata"]["name"]): i for i in report["install"]}
    have: set[str] = set()
    todo = [normalize(requirement_name(r)) for r in target]
    while todo:
        name = todo.pop()
        if name in have:
            continue
        have.add(name)
        if name in items:
            todo += requires(items[name]["metadata"], items[name].get("requested_extras") or ())
    bring = sorted(
        (items[n]["metadata"]["name"], items[n]["metadata"]["version"])
        for n in items
        if n not in have and not NEVER.match(n)
    )
    return bring, sorted(have)


def folder_size(folder: Path) -> int:
    """The bytes of the files directly in `folder`."""
    return sum(p.stat().st_size for p in folder.iterdir() if p.is_file())


def tree_size() -> int:
    """The bytes of the files git tracks here: the working tree that travels with the wheels."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return sum(
        (ROOT / name).stat().st_size for name in listed.decode().split("\0") if (ROOT / name).is_file()
    )


def prepare(wheels: Path) -> int:
    """Download into `wheels` what the GPU machine lacks, write the manifest, check the size.

    `wheels` must be missing, empty or a folder an earlier `prepare` made (owned_folders): the
    wheels and manifest there are replaced, nothing else; a folder of the user's is refused
    before anything is downloaded.
    """
    try:
        wheels = owned_folders.claim(wheels, "--wheels")
    except owned_folders.NotOurFolder as err:
        print(err, file=sys.stderr)
        return 2
    target = target_requirements()
    needed = needed_requirements()
    # torch is left out of the resolution: pip would fetch its gigabytes of CUDA wheels only to read
    # their metadata, and nothing the lane brings depends on it.
    resolved_target = [r for r in target if not NEVER.match(normalize(requirement_name(r)))]
    print(f"The GPU machine has (from {TARGET_LIST.relative_to(ROOT)}): {', '.join(target)}", flush=True)
    print(f"The notebooks and tests need: {', '.join(needed)}", flush=True)
    print(f"Resolving for Python {TARGET_PYTHON} on {PLATFORMS[0]} (takes a few minutes) ...", flush=True)
    with tempfile.TemporaryDirectory(prefix="course-gpu-prepare-") as scratch:
        report_path = Path(scratch) / "report.json"
        pip = [sys.executable, "-m", "pip"]
        resolve = [
            *pip,
            "install",
            "--dry-run",
            "--quiet",
            "--ignore-installed",
            "--report",
            str(report_path),
        ]
        resolve += [
            *pip_target_options(),
            "--target",
            str(Path(scratch) / "target"),
            *resolved_target,
            *needed,
        ]
        if subprocess.call(resolve) != 0:
            print("pip could not resolve the requirements above (see its message).", file=sys.stderr)
            return 1
        bring, have = plan(json.loads(report_path.read_text(encoding="utf-8")), target)
    owned_folders.remove(wheels, MANIFEST, *(p.name for p in wheels.glob("*.whl")))
    download = [*pip, "download", "--quiet", "--no-deps", *pip_target_options(), "--dest", str(wheels)]
    if subprocess.call([*download, *(f"{name}=={version}" for name, version in bring)]) != 0:
        print("pip could not download the wheels above (see its message).", file=sys.stderr)
        return 1
    files = sorted(p.name for p in wheels.glob("*.whl"))
    manifest = {
        "prepared": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "python": TARGET_PYTHON,
        "platforms": PLATFORMS,
        "target": target,
        "needed": needed,
        "machine_has": have,
        "brings": [f"{name}=={version}" for name, version in bring],
        "wheels": files,
    }
    (wheels / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    size, tree = folder_size(wheels), tree_size()
    for name in files:
        print(f"  {(wheels / name).stat().st_size / MIB:6.2f} MiB  {name}")
    where = wheels.relative_to(ROOT) if wheels.is_relative_to(ROOT) else wheels
    print(
        f"{where}/: {len(files)} wheels, {size / MIB:.1f} MiB (aim: under {SIZE_AIM // MIB} MiB); with the "
        f"working tree ({tree / MIB:.1f} MiB) {(size + tree) / MIB:.1f} MiB of the "
        f"{TRANSFER_LIMIT // MIB} MiB that travel to a GPU machine."
    )
    if size > SIZE_AIM:
        print(f"The wheels take more than {SIZE_AIM // MIB} MiB: leave out what the run does not need.")
        return 1
    print(f"Next, on the GPU machine, carrying {where}: python3 course.py gpu run --out DIR")
    return 0


# --- run -----------------------------------------------------------------------------------------


def unpack_wheels(wheels: Path, names: list[str], site: Path) -> None:
    """Install wheels by unpacking them into `site` (a folder for PYTHONPATH): no pip, no network.

    A wheel is a zip of what goes into site-packages; its `NAME.data/purelib` and `platlib` go
    there too (its scripts and data files are not needed to import it). A file that is no zip
    raises BadInput; zipfile keeps every entry inside `site`.
    """
    site.mkdir(parents=True, exist_ok=True)
    for name in names:
        try:
            with zipfile.ZipFile(wheels / name) as wheel:
                wheel.extractall(site)
        except zipfile.BadZipFile as err:
            raise BadInput(
                f"{wheels / name}: not a wheel ({err}): run `python3 course.py gpu prepare` again"
            ) from None
        for data in site.glob("*.data"):
            for kind in ("purelib", "platlib"):
                if (data / kind).is_dir():
                    shutil.copytree(data / kind, site, dirs_exist_ok=True)
            shutil.rmtree(data)


def lane_environment(site: Path, results: Path) -> dict[str, str]:
    """The environment of pytest, its workers and the notebooks' kernels: the wheels, src/ and scripts/.

    pytest-benchmark, which a GPU machine may have, is kept out of every pytest started there: it
    warns under xdist, and the course's settings make a warning an error. Each kernel is a fresh
    process there (COURSE_FORKED_KERNELS=0, tests/forked_kernels.py): the lane checks the path a
    student's GPU machine takes, CUDA initialised in a kernel that imported torch itself.
    """
    paths = [str(site), str(ROOT / "src"), str(ROOT / "scripts")]
    if os.environ.get("PYTHONPATH"):
        paths.append(os.environ["PYTHONPATH"])
    options = " ".join(filter(None, ["-p no:benchmark", os.environ.get("PYTEST_ADDOPTS", "")]))
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(paths),
        "PYTEST_ADDOPTS": options,
        "COURSE_GPU_LANE_RESULTS": str(results),
        "COURSE_FORKED_KERNELS": "0",
    }


# Run in the lane's environment: the machine, torch's build, the GPUs and where each package comes from.
INVENTORY = r"""
import importlib.metadata, importlib.util, json, os, platform, sys
from packaging.specifiers import SpecifierSet
site, names, ranges = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
found = {"python": sys.version.split()[0], "platform": platform.platform(),
         "cpus": len(os.sched_getaffinity(0)),
         "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)}
packages, missing, outside = {}, [], []
for name in names:
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        missing.append(name)
        continue
    where = os.path.realpath(str(dist.locate_file("")))
    origin = "lane" if where == os.path.realpath(site) else "machine"
    packages[name] = {"version": dist.version, "from": origin}
    if ranges.get(name) and not SpecifierSet(ranges[name]).contains(dist.version, prereleases=True):
        outside.append(f"{name} {dist.version} (the course needs {ranges[name]})")
spec = importlib.util.find_spec("course_utils")
found.update(packages=packages, missing=missing, outside=outside, course_utils=spec.origin if spec else None)
import torch
found["torch"] = {"version": torch.__version__, "cuda": torch.version.cuda,
                  "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
                  "build": f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU-only"}
gpus = []
for i in range(torch.cuda.device_count()):
    p = torch.cuda.get_device_properties(i)
    gpus.append({"index": i, "name": p.name, "memory_gib": round(p.total_memory / 2**30, 1),
                 "capability": f"{p.major}.{p.minor}"})
found["gpus"], found["driver"] = gpus, None
if gpus:
    try:
        import pynvml
        pynvml.nvmlInit()
        found["driver"] = pynvml.nvmlSystemGetDriverVersion()
    except Exception as err:
        found["driver"] = f"unknown ({type(err).__name__})"
print(json.dumps(found))
"""


def course_ranges(pyproject: Path = ROOT / "pyproject.toml") -> dict[str, str]:
    """The versions the course accepts, by distribution: its requirements and its test extra's, and
    for torch the supported range (`[tool.course] supported-torch`), not the pin of the stored outputs."""
    from packaging.requirements import Requirement  # pytest needs packaging: every machine here has it

    config = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    project = config["project"]
    requirements = [Requirement(r) for r in [*project["dependencies"], *requirements_for_tests(project)]]
    ranges = {normalize(r.name): str(r.specifier) for r in requirements if r.specifier}
    return ranges | {"torch": config["tool"]["course"]["supported-torch"]}


def inventory(
    env: dict[str, str], site: Path, names: list[str], ranges: dict[str, str] | None = None
) -> dict[str, Any]:
    """What INVENTORY finds in the lane's environment (a child process: CUDA starts there, not here),
    with each package whose version lies outside `ranges` (None: the course's)."""
    ranges = course_ranges() if ranges is None else ranges
    probe = subprocess.run(
        [sys.executable, "-c", INVENTORY, str(site), json.dumps(names), json.dumps(ranges)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    if probe.returncode != 0:
        return {"error": (probe.stderr.strip().splitlines() or ["(no message)"])[-1]}
    return json.loads(probe.stdout.splitlines()[-1])


def describe_machine(found: dict[str, Any]) -> list[str]:
    """The inventory in a few lines: the GPUs (name, memory), driver, CUDA, torch, the machine."""
    if "error" in found:
        return [f"The inventory failed: {found['error']}"]
    torch_ = found["torch"]
    lines = [f"torch {torch_['version']}, {torch_['build']} build, cuDNN {torch_['cudnn']}"]
    gpus = found["gpus"]
    lines.append(f"GPUs: {len(gpus)}, driver {found['driver']}" if gpus else "GPUs: none (a CPU rehearsal)")
    lines += [
        f"  {g['index']}: {g['name']}, {g['memory_gib']} GiB, compute capability {g['capability']}"
        for g in gpus
    ]
    lines.append(
        f"Python {found['python']}, {found['cpus']} CPUs, {found['memory_gib']} GiB, {found['platform']}"
    )
    if found["missing"]:
        lines.append(f"MISSING (neither brought nor on the machine): {', '.join(found['missing'])}")
    if found["outside"]:
        lines.append(
            f"OUTSIDE THE COURSE'S RANGE: {', '.join(found['outside'])}. A student would not run this: "
            f"take it out of {TARGET_LIST.relative_to(ROOT)} so that `prepare` brings it "
            "(torch: use a supported build)."
        )
    return lines


def gpu_test_files() -> list[str]:
    """The unit test files that take a GPU path: those that ask torch about CUDA or the accelerator."""
    files = sorted((ROOT / "tests").glob("test_*.py"))
    return [
        p.relative_to(ROOT).as_posix() for p in files if GPU_TEST_MARK.search(p.read_text(encoding="utf-8"))
    ]


def course_path(path: str) -> str:
    """A path under the course root as the report writes it: relative, with slashes."""
    return (ROOT / path).resolve().relative_to(ROOT).as_posix()


def shown_path(path: str | None) -> str | None:
    """A path as the report shows it: relative where it lies under the course root."""
    if path is None or not Path(path).resolve().is_relative_to(ROOT):
        return path
    return course_path(path)


def english_notebooks() -> list[str]:
    """Every notebook of the English edition, in course order."""
    return [p.relative_to(ROOT).as_posix() for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))]


def run_pytest(command: list[str], env: dict[str, str], log: Path, seconds: float) -> tuple[int | None, bool]:
    """Run pytest, its output echoed and kept in `log`; stop it (and everything it started) after `seconds`.

    Return its exit status (None when stopped) and whether it was stopped.
    """
    print("+", " ".join(command), flush=True)
    with open(log, "w", encoding="utf-8") as stream:
        child = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )

        def echo() -> None:
            assert child.stdout is not None
            for line in child.stdout:
                print(line, end="", flush=True)
                stream.write(line)

        reader = threading.Thread(target=echo, daemon=True)
        reader.start()
        try:
            child.wait(timeout=max(seconds, 1))
        except subprocess.TimeoutExpired:
            stop_tree(child.pid)
            child.wait()
            reader.join(timeout=10)
            stream.write(f"\n[the lane stopped pytest after {seconds:.0f} s]\n")
            return None, True
        reader.join(timeout=10)
    return child.returncode, False


def stop_tree(pid: int) -> None:
    """Kill a process and every descendant (the notebooks' kernels run in sessions of their own)."""
    import psutil  # the GPU machine and the course's .venv both have it

    try:
        parent = psutil.Process(pid)
        family = [parent, *parent.children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    for process in family:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(family, timeout=10)


def read_results(results: Path) -> list[dict[str, Any]]:
    """The records the plugin wrote, from every worker."""
    records = []
    for path in sorted(results.glob("*.jsonl")):
        records += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return records


def summarize(records: list[dict[str, Any]], notebooks: list[str], tests: list[str]) -> dict[str, Any]:
    """Per notebook and per test file: passed, failed and skipped, each failure with its first error line."""
    worst: dict[str, dict[str, Any]] = {}
    rank = {"passed": 0, "skipped": 1, "failed": 2}
    for record in records:
        seen = worst.get(record["nodeid"])
        if seen is None or rank[record["outcome"]] > rank[seen["outcome"]]:
            worst[record["nodeid"]] = record
    groups: dict[str, dict[str, Any]] = {}
    for name in [Path(n).name for n in notebooks] + tests:
        groups[name] = {"passed": 0, "failed": 0, "skipped": 0, "failures": []}
    for record in sorted(worst.values(), key=lambda r: (r["file"], r["cell"] or 0, r["nodeid"])):
        group = groups.setdefault(record["file"], {"passed": 0, "failed": 0, "skipped": 0, "failures": []})
        group[record["outcome"]] += 1
        if record["outcome"] == "failed":
            where = {"cell": record["cell"]} if record["cell"] is not None else {"test": record["test"]}
            group["failures"].append({**where, "error": record["error"]})
    notebook_names = {Path(n).name for n in notebooks}
    return {
        "notebooks": {k: v for k, v in groups.items() if k in notebook_names},
        "tests": {k: v for k, v in groups.items() if k not in notebook_names},
    }


def archive(executed: Path, target: Path) -> list[str]:
    """Zip the executed notebooks into `target`; return their names."""
    names = sorted(p.name for p in executed.glob("*.ipynb")) if executed.is_dir() else []
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as bundle:
        for name in names:
            bundle.write(executed / name, name)
    return names


def gpu_run(
    out: Path, wheels: Path, notebooks: list[str], tests: list[str], timeout: float, workers: int
) -> int:
    """Run the notebooks and tests in the lane's environment and write `out`'s report; 0 when all passed.

    The manifest is checked first (BadInput); `out` must be missing, empty or a folder an earlier
    run made (owned_folders), where only RUN_FILES are replaced.
    """
    started, clock = datetime.datetime.now(datetime.UTC), time.monotonic()
    manifest = load_manifest(wheels, MANIFEST)
    try:
        out = owned_folders.claim(out, "--out")
    except OSError as err:
        raise BadInput(
            f"--out {out}: cannot write there ({err.strerror}): name a folder you may write to"
        ) from None
    owned_folders.remove(out, *RUN_FILES)
    with tempfile.TemporaryDirectory(prefix="course-gpu-lane-") as scratch:
        site, results = Path(scratch) / "site", Path(scratch) / "results"
        unpack_wheels(wheels, manifest["wheels"], site)
        env = lane_environment(site, results)
        names = sorted(
            {"torch"}
            | {normalize(requirement_name(r)) for r in manifest["needed"]}
            | {normalize(Path(w).name.split("-")[0]) for w in manifest["wheels"]}
        )
        found = inventory(env, site, names)
        print("\n".join(describe_machine(found)), flush=True)
        if sys.version.split()[0].rsplit(".", 1)[0] != manifest["python"]:
            print(
                f"This is Python {sys.version.split()[0]}; the wheels are for {manifest['python']}.",
                flush=True,
            )
        arguments = ["-n", str(workers), "-p", "gpu_lane_plugin", *notebooks, *tests]
        command = [str(c) for c in pytest_command(sys.executable, arguments)]
        budget = timeout - (time.monotonic() - clock) - REPORT_MARGIN_S
        status, timed_out = run_pytest(command, env, out / "pytest-output.txt", budget)
        summary = summarize(read_results(results), notebooks, tests)
        executed = archive(results / "executed", out / "notebooks.zip")
    gpus = found.get("gpus", [])
    report = {
        "format": 1,
        "rehearsal": not gpus,
        "started": started.isoformat(timespec="seconds"),
        "seconds": round(time.monotonic() - clock, 1),
        "timeout_s": timeout,
        "timed_out": timed_out,
        "pytest": {"exit_status": status, "workers": workers, "arguments": command[3:]},
        "machine": {k: found.get(k) for k in ("python", "platform", "cpus", "memory_gib")},
        "torch": found.get("torch"),
        "gpus": gpus,
        "driver": found.get("driver"),
        "inventory_error": found.get("error"),
        "packages": found.get("packages"),
        "missing": found.get("missing"),
        "outside": found.get("outside"),
        "course_utils": shown_path(found.get("course_utils")),
        "wheels": manifest["wheels"],
        "executed": executed,
        **summary,
    }
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    failed = sum(g["failed"] for part in ("notebooks", "tests") for g in summary[part].values())
    passed = sum(g["passed"] for part in ("notebooks", "tests") for g in summary[part].values())
    stopped = f"; stopped after {timeout:.0f} s" if timed_out else ""
    print(f"GPU lane: {passed} passed, {failed} failed{stopped}. Report: {out / 'report.json'}")
    return 0 if status == 0 and not failed and not timed_out else 1


# --- report --------------------------------------------------------------------------------------


def gpu_table(contributing: Path = CONTRIBUTING) -> dict[str, dict[str, str]]:
    """CONTRIBUTING's "What a GPU run prints differently": per notebook number, each column's text."""
    text = contributing.read_text(encoding="utf-8")
    section = text.split("## What a GPU run prints differently", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    table = {}
    for line in rows[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        table[cells[0]] = dict(zip(header[1:], cells[1:], strict=True))
    return table


def table_column(gpu_count: int) -> str | None:
    """The table's column for a machine with `gpu_count` GPUs (None: no GPU, the table does not apply)."""
    if gpu_count == 0:
        return None
    return "1 GPU" if gpu_count == 1 else "8 GPUs" if gpu_count >= 8 else "2 GPUs (Kaggle's T4 x2)"


def hardware_dependent(cell: dict[str, Any]) -> bool:
    """Whether a code cell's output may differ with the machine: it starts with `# NBVAL_IGNORE_OUTPUT`."""
    tags = cell.get("metadata", {}).get("tags", [])
    return "".join(cell["source"]).startswith("# NBVAL_IGNORE_OUTPUT") or "nbval-ignore-output" in tags


def output_text(outputs: list[dict[str, Any]], limit: int = 30) -> str:
    """A cell's outputs as text: streams, plain-text results, errors; a picture as `[image]`.
    A field that an executed notebook lacks counts as empty (gpu_lane_inputs.NOTEBOOK checks the rest)."""
    parts = []
    for output in outputs:
        kind = output["output_type"]
        if kind == "stream":
            parts.append("".join(output.get("text", "")))
        elif kind == "error":
            parts.append(f"{output.get('ename', '')}: {output.get('evalue', '')}\n")
        else:
            data = output.get("data", {})
            if any(key.startswith("image/") for key in data):
                parts.append("[image]\n")
            elif "text/plain" in data:
                parts.append("".join(data["text/plain"]) + "\n")
    lines = "".join(parts).splitlines()
    return "\n".join(
        lines[:limit] + ([f"... ({len(lines) - limit} more lines)"] if len(lines) > limit else [])
    )


def code_cells(notebook: dict[str, Any]) -> list[dict[str, Any]]:
    """A notebook's code cells, numbered as nbval numbers them."""
    return [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]


# The page's words in each edition of the website.
WORDS = {
    "en": {
        "title": "Verified on {gpu} · torch {torch} · {date}",
        "rehearsal": "CPU rehearsal (no GPU) · torch {torch} · {date}",
        "rehearsal_note": "This run had no GPU: it rehearses the lane and verifies nothing about GPUs.",
        "what_ran": "What ran",
        "machine": "Machine",
        "results": "What passed",
        "differs": "Outputs that differ from the CPU's",
        "failures": "failed",
        "notebook": "notebook",
        "cells": "cells passed / failed / skipped",
        "first_error": "first error",
        "tests": "unit tests passed / failed / skipped",
        "predicted": "The table in CONTRIBUTING ({column}) says:",
        "same": "{count} hardware-dependent cells printed what the CPU printed.",
        "cell": "Cell {cell}",
        "cpu": "CPU (stored)",
        "gpu": "this run",
        "none": "none",
        "not_run": "not run",
        "timed_out": "The lane's timeout ({timeout:.0f} s) stopped the run: below is what ran before.",
        "command": "Run with `python3 course.py gpu run` in {seconds:.0f} s, pytest over {workers} workers.",
        "outside": "Outside the course's supported versions: {packages}.",
        "load": "The notebooks ran side by side on the same cores and GPU: a timing on this page shows "
        "that the cell runs, not how fast this machine is.",
    },
    "zh-CN": {
        "title": "在 {gpu} 上验证 · torch {torch} · {date}",
        "rehearsal": "CPU 预演（没有 GPU）· torch {torch} · {date}",
        "rehearsal_note": "这次运行没有 GPU：它只演练这条流程，不验证任何与 GPU 有关的内容。",
        "what_ran": "运行了什么",
        "machine": "机器",
        "results": "通过了什么",
        "differs": "与 CPU 输出不同的地方",
        "failures": "失败",
        "notebook": "笔记本",
        "cells": "单元格 通过 / 失败 / 跳过",
        "first_error": "第一条错误",
        "tests": "单元测试 通过 / 失败 / 跳过",
        "predicted": "CONTRIBUTING 中的表格（{column}）写道：",
        "same": "{count} 个与硬件有关的单元格输出与 CPU 相同。",
        "cell": "单元格 {cell}",
        "cpu": "CPU（已存储）",
        "gpu": "这次运行",
        "none": "无",
        "not_run": "未运行",
        "timed_out": "流程的超时（{timeout:.0f} 秒）中止了运行：以下是中止前运行的部分。",
        "command": "用 `python3 course.py gpu run` 运行，耗时 {seconds:.0f} 秒，pytest 用 {workers} 个进程。",
        "outside": "超出本课程支持的版本：{packages}。",
        "load": "各笔记本在同一组 CPU 核心和同一块 GPU 上并行运行："
        "本页上的计时只说明单元格能运行，不代表这台机器有多快。",
    },
}


def run_date(report: dict[str, Any]) -> str:
    """The day a checked report's run started, from its parsed `started` (never the raw text)."""
    return datetime.datetime.fromisoformat(report["started"]).date().isoformat()


def page_name(report: dict[str, Any]) -> str:
    """`<date>-<gpu>-torch<version>`, e.g. `2026-11-26-nvidia-h100-80gb-hbm3-torch2.11.0`, of a report
    that load_report checked: letters, digits, `-` and `.` only, so it names a file in one folder."""
    gpu = report["gpus"][0]["name"] if report["gpus"] else "cpu-rehearsal"
    slug = re.sub(r"[^a-z0-9]+", "-", gpu.lower()).strip("-") or "gpu"
    torch_version = report["torch"]["version"].split("+")[0]  # digits, letters and dots (VERSION)
    return f"{run_date(report)}-{slug}-torch{torch_version}"


def side_by_side(cpu: str, gpu: str, words: dict[str, str]) -> str:
    """Two outputs as a two-column HTML table on one line (MyST passes HTML through; a blank line
    would end the HTML block, so each line break inside is `&#10;`)."""

    def shown(text: str) -> str:
        return "&#10;".join(html.escape(scrub(text)).splitlines())

    return (
        f"<table><tr><th>{words['cpu']}</th><th>{words['gpu']}</th></tr>"
        f"<tr><td><pre>{shown(cpu)}</pre></td><td><pre>{shown(gpu)}</pre></td></tr></table>"
    )


TEMP_PATH = re.compile(r"(?<![\w.])/tmp/")
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # as in gpu_lane_plugin, which imports pytest
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# What Markdown (MyST: CommonMark, tables, roles) would read as markup inside a line.
MARKDOWN_MARKUP = re.compile(r"[\\`*_{}\[\]|~#]")


def scrub(text: str) -> str:
    """Text without the GPU machine's own paths: its temporary folders as `$TMPDIR/`, the
    course's files relative to its root (the website must not show where a machine kept things),
    and without a terminal's colour codes (a report's error lines may carry nbval's)."""
    return ANSI_ESCAPE.sub("", TEMP_PATH.sub("$TMPDIR/", text.replace(f"{ROOT}/", "")))


def one_line(value: object) -> str:
    """A value from a run folder as scrubbed text on one line, without control characters."""
    return CONTROL.sub("", " ".join(scrub(str(value)).splitlines()))


def markdown_text(value: object) -> str:
    """A value from a run folder as Markdown that shows it as text and does nothing else: HTML's
    `<`, `>` and `&` as entities, Markdown's markup (emphasis, links, code, roles, a table's `|`)
    behind a backslash."""
    return MARKDOWN_MARKUP.sub(r"\\\g<0>", html.escape(one_line(value), quote=False))


def code_span(value: object, in_table: bool = False) -> str:
    """A value from a run folder as a Markdown code span (whose text Markdown shows as it is): its
    fence longer than any run of backticks in it; in a table a `|` is escaped, as GFM asks there."""
    text = one_line(value).replace("|", "\\|") if in_table else one_line(value)
    fence = "`" * (max(map(len, re.findall("`+", text)), default=0) + 1)
    pad = " " if "`" in text else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def page(report: dict[str, Any], executed: dict[str, dict[str, Any]], language: str) -> str:
    """The run's page: the machine, what ran and passed, and each hardware-dependent output that
    differs from the stored CPU output, beside it and the table's prediction. `report` and
    `executed` come from a run folder, checked (load_report, read_notebooks): each text of theirs
    reaches the page escaped (markdown_text, code_span, side_by_side), numbers as numbers."""
    words, torch_ = WORDS[language], report["torch"]
    date, version = run_date(report), markdown_text(torch_["version"])
    gpus = report["gpus"]
    title = (
        words["title"].format(gpu=markdown_text(gpus[0]["name"]), torch=version, date=date)
        if gpus
        else (words["rehearsal"].format(torch=version, date=date))
    )
    lines = [f"# {title}", ""]
    if not gpus:
        lines += [f"**{words['rehearsal_note']}**", ""]
    if report["timed_out"]:
        lines += [f"**{words['timed_out'].format(timeout=report['timeout_s'])}**", ""]
    machine = report["machine"]
    lines += [f"## {words['machine']}", ""]
    lines += [
        f"- {g['index']}: {markdown_text(g['name'])}, {g['memory_gib']} GiB, "
        f"compute capability {g['capability']}"
        for g in gpus
    ]
    build, driver = markdown_text(torch_["build"]), markdown_text(report["driver"])
    lines += [
        f"- driver {driver}, torch {version} ({build}, cuDNN {torch_['cudnn']})",
        f"- Python {markdown_text(machine['python'])}, {machine['cpus']} CPUs, {machine['memory_gib']} GiB",
        f"- {words['command'].format(seconds=report['seconds'], workers=report['pytest']['workers'] or 1)}",
        *(
            [f"- **{words['outside'].format(packages=', '.join(map(markdown_text, report['outside'])))}**"]
            if report.get("outside")
            else []
        ),
        *([f"- {words['load']}"] if report["pytest"]["workers"] > 1 else []),
        "",
        f"## {words['results']}",
        "",
        f"| {words['notebook']} | {words['cells']} | {words['first_error']} |",
        "|---|---|---|",
    ]
    for name, group in report["notebooks"].items():
        counts = f"{group['passed']} / {group['failed']} / {group['skipped']}"
        if not (group["passed"] or group["failed"] or group["skipped"]):
            counts = words["not_run"]
        first = group["failures"][0] if group["failures"] else None
        error = (
            f"{words['cell'].format(cell=first['cell'])}: {code_span(first['error'], True)}" if first else ""
        )
        lines.append(f"| {markdown_text(name)} | {counts} | {error} |")
    if report["tests"]:
        lines += ["", f"| test | {words['tests']} | {words['first_error']} |", "|---|---|---|"]
        for name, group in report["tests"].items():
            first = group["failures"][0] if group["failures"] else None
            error = f"{markdown_text(first['test'])}: {code_span(first['error'], True)}" if first else ""
            counts = f"{group['passed']} / {group['failed']} / {group['skipped']}"
            lines.append(f"| {markdown_text(name)} | {counts} | {error} |")
    column = table_column(len(gpus))
    table = gpu_table()
    lines += ["", f"## {words['differs']}", ""]
    for name, group in report["notebooks"].items():
        if name not in executed:
            continue
        stored_path = ROOT / "notebooks" / name  # a plain NN_name.ipynb (NOTEBOOK_NAME): in notebooks/
        stored = (
            json.loads(stored_path.read_text(encoding="utf-8")) if stored_path.is_file() else {"cells": []}
        )
        cpu_cells = {cell.get("id"): cell for cell in code_cells(stored)}  # by id: cells may have moved since
        failed = {f["cell"]: f["error"] for f in group["failures"]}
        differing, same = [], 0
        for number, gpu in enumerate(code_cells(executed[name])):
            ran = gpu.get("metadata", {}).get(RAN_KEY, False)
            if not (number in failed or (ran and hardware_dependent(gpu))):
                continue
            cpu = cpu_cells.get(gpu.get("id"), {"outputs": [], "source": gpu["source"]})
            cpu_text, gpu_text = output_text(cpu["outputs"]), output_text(gpu.get("outputs", []))
            if cpu_text == gpu_text and number not in failed:
                same += 1
                continue
            why = ("".join(cpu["source"]).splitlines() or [""])[0]
            error = f" — {words['failures']}: {code_span(failed[number])}" if number in failed else ""
            heading = f"### {markdown_text(name)}, {words['cell'].format(cell=number)}{error}"
            differing += [heading, "", code_span(why), "", side_by_side(cpu_text, gpu_text, words), ""]
        lines += [f"**{markdown_text(name)}** — {words['same'].format(count=same)}", ""]
        row = table.get(name[:2])
        if column is not None and row is not None:
            lines += [words["predicted"].format(column=column), "", f"> {row[column]}", ""]
        lines += differing
    return "\n".join(lines).rstrip() + "\n"


INDEX_WORDS = {
    "en": (
        "Verified on GPUs",
        "The course is written and its outputs stored on CPU-only machines. Each page below is one run "
        "of every notebook and of the unit tests that take a GPU path on a real GPU machine "
        "(`python3 course.py gpu run`, see CONTRIBUTING): what ran, what passed, and each output that "
        "differs from the CPU's, beside what CONTRIBUTING's table predicts.",
        "No GPU run is recorded yet.",
        "The runs",
    ),
    "zh-CN": (
        "在 GPU 上验证",
        "本课程在只有 CPU 的机器上编写，存储的输出也来自那里。下面每一页是一次在真实 GPU 机器上的运行"
        "（`python3 course.py gpu run`，见 CONTRIBUTING）：所有笔记本和走 GPU 路径的单元测试运行了什么、"
        "通过了什么，以及每个与 CPU 输出不同的地方，旁边是 CONTRIBUTING 表格的预期。",
        "还没有记录任何 GPU 运行。",
        "运行记录",
    ),
}


def index_page(pages: list[str], language: str) -> str:
    """docs/gpu-runs/index.md of an edition: what the pages are and a toctree of them, newest first."""
    title, intro, empty, caption = INDEX_WORDS[language]
    lines = [f"# {title}", "", intro, ""]
    if not pages:
        return "\n".join([*lines, empty, ""])
    lines += [
        "```{toctree}",
        f":caption: {caption}",
        ":maxdepth: 1",
        "",
        *sorted(pages, reverse=True),
        "```",
        "",
    ]
    return "\n".join(lines)


def edition_folder(docs: Path, language: str) -> Path:
    """Where an edition's run pages go under `docs`."""
    return docs / RUNS if language == "en" else docs / language / RUNS


def docs_file(docs: Path, language: str, name: str) -> Path:
    """The file `name` in an edition's folder of run pages under `docs`, that folder made; BadInput
    where the folder or the file would lead out of `docs` (through a link)."""
    folder = edition_folder(docs, language)
    if not folder.resolve().is_relative_to(docs.resolve()):  # checked before mkdir makes anything
        raise BadInput(f"--docs {docs}: {folder} leads out of it (a link): name a folder without such links")
    folder.mkdir(parents=True, exist_ok=True)
    return inside(folder, name)


def write_index(docs: Path) -> None:
    """Rewrite each edition's index of the run pages from the pages that are there."""
    for language in WORDS:
        index = docs_file(docs, language, "index.md")
        pages = [p.stem for p in index.parent.glob("*.md") if p.name != "index.md"]
        index.write_text(index_page(pages, language), encoding="utf-8")


def gpu_report(run_dir: Path, docs: Path) -> int:
    """Turn a run's report.json and notebooks.zip into a page in each edition under `docs`.

    Both files are checked before anything is written (load_report, read_notebooks: BadInput);
    the page's name comes from the checked values, and every file written lies inside `docs`.
    """
    report = load_report(run_dir)
    if report["rehearsal"] and docs.resolve() == DOCS.resolve():
        print(
            f"{run_dir} holds a CPU rehearsal (no GPU): its page would stand among the GPU runs. "
            "Give --docs DIR to write it elsewhere.",
            file=sys.stderr,
        )
        return 2
    executed = read_notebooks(inside(run_dir, "notebooks.zip"), REPORT_HINT)
    name = page_name(report)
    pages = {language: page(report, executed, language) for language in WORDS}
    try:
        for language, text in pages.items():
            target = docs_file(docs, language, f"{name}.md")
            target.write_text(text, encoding="utf-8")
            print(f"Wrote {target}")
        write_index(docs)
    except OSError as err:
        raise BadInput(
            f"--docs {docs}: cannot write {err.filename} ({err.strerror}): name a folder you may write to"
        ) from None
    return 0


def run_seconds(text: str) -> float:
    """`--timeout`: a finite number of seconds, more than the report takes after pytest stops."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > REPORT_MARGIN_S):
        raise argparse.ArgumentTypeError(
            f"must be more than {REPORT_MARGIN_S} s (the time the report takes), a finite number: {text!r}"
        )
    return seconds


def worker_option(text: str) -> int:
    """`--workers`: how many pytest workers, a whole number, 0 for one process."""
    if not text.strip().isdecimal():
        raise argparse.ArgumentTypeError(f"must be a whole number of workers, 0 or more, not {text!r}")
    return int(text)


def main(argv: list[str]) -> int:
    """Parse the command line and run `prepare`, `run` or `report`; a bad input (a file from
    elsewhere, a folder that cannot be written) ends in one line on stderr and status 2."""
    parser = argparse.ArgumentParser(prog="python3 course.py gpu", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    prepare_ = commands.add_parser("prepare", help="download the wheels the GPU machine lacks")
    prepare_.add_argument("--wheels", type=Path, default=WHEELS, help="where (default: build/gpu-wheels)")
    run_ = commands.add_parser("run", help="on the GPU machine: run the notebooks and tests, write a report")
    run_.add_argument("--out", type=Path, required=True, help="the folder for report.json and notebooks.zip")
    run_.add_argument(
        "--wheels", type=Path, default=WHEELS, help="what `prepare` made (default: build/gpu-wheels)"
    )
    run_.add_argument("--notebooks", nargs="*", help="these notebooks only (default: every English one)")
    run_.add_argument(
        "--tests", nargs="*", help="these test files only (default: those that take a GPU path)"
    )
    run_.add_argument(
        "--timeout", type=run_seconds, default=DEFAULT_TIMEOUT_S, help="seconds for the whole run"
    )
    run_.add_argument(
        "--workers", type=worker_option, default=worker_count(), help="pytest's workers (0: serially)"
    )
    report_ = commands.add_parser("report", help="turn a run's folder into a page of the website")
    report_.add_argument("run_dir", type=Path, help="the folder that `gpu run --out` wrote")
    report_.add_argument("--docs", type=Path, default=DOCS, help="the website's pages (default: docs/)")
    options = parser.parse_args(argv)
    try:
        return command(parser, options)
    except (BadInput, owned_folders.NotOurFolder) as err:
        print(err, file=sys.stderr)
    except OSError as err:
        print(f"{err.filename or 'the GPU lane'}: {err.strerror or err}", file=sys.stderr)
    return 2


def command(parser: argparse.ArgumentParser, options: argparse.Namespace) -> int:
    """Run the command that `options` names (`parser` reports a bad argument)."""
    if options.command == "prepare":
        if options.wheels == WHEELS:  # the course's own folder under build/, also from before markers
            owned_folders.adopt(WHEELS)
        return prepare(options.wheels)
    if options.command == "run":
        notebooks = english_notebooks() if options.notebooks is None else options.notebooks
        tests = gpu_test_files() if options.tests is None else options.tests
        for path in [*notebooks, *tests]:
            if not (ROOT / path).resolve().is_relative_to(ROOT) or not (ROOT / path).is_file():
                parser.error(f"{path} is not a file under {ROOT}: give a notebook or test file of the course")
        notebooks, tests = [course_path(p) for p in notebooks], [course_path(p) for p in tests]
        return gpu_run(
            options.out.resolve(),
            options.wheels.resolve(),
            notebooks,
            tests,
            options.timeout,
            options.workers,
        )
    return gpu_report(options.run_dir.resolve(), options.docs)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
