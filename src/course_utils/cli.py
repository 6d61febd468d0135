"""`pytorch-on-gpus`: the course on a student's own machine, from nothing but a package index.

    pip install "pytorch-on-gpus-hands-on[lab]"
    pytorch-on-gpus get [FOLDER]        copy the course (both editions) into FOLDER
    pytorch-on-gpus lab [FOLDER]        the same if needed, then JupyterLab at notebook 00

The installed package carries the whole course: both editions' notebooks and solutions
(course_utils/course/) and their worker scripts (course_utils/workers/, workers_zh/). `get` copies
them into a folder of the student's and records each file's hash in a manifest there; a later `get`
(after `pip install -U`) updates only the files the student has not changed since, and says which
it kept. Standard library only and torch is never imported here: `--help` answers at once.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from course_utils import __version__
from course_utils.folders import NotOurFolder, claim

PROGRAM = "pytorch-on-gpus"
DISTRIBUTION = "pytorch-on-gpus-hands-on"
DEFAULT_FOLDER = "pytorch-on-gpus-course"
MANIFEST = ".course-manifest.json"
FIRST_NOTEBOOK = "00_start_here.ipynb"
CHINESE = "zh-CN"
LANGUAGES = ("en", CHINESE)
LANGUAGE_VARIABLE = "COURSE_LANGUAGE"
# What a copy holds, by edition: the notebooks and their solutions, laid out as in the repository.
NOTEBOOK_PATTERNS = ("[0-9][0-9]_*.ipynb", "solutions/*.py")
EDITION_FOLDERS = {"en": "", CHINESE: f"{CHINESE}/"}
PACKAGE = Path(__file__).resolve().parent
ROOT_NOTE = "Running as root: starting JupyterLab with --allow-root."
# The command's messages in Chinese, by their English (templates for str.format). A dict, not the
# course's gettext catalogs: course.py shows ROOT_NOTE before polib is installed.
CHINESE_MESSAGES = {
    "1 file": "1 个文件",
    "{count} files": "{count} 个文件",
    "{manifest} could not be read ({why}): every file that differs from the course's is treated as yours "
    "and kept.": "无法读取 {manifest}（{why}）：凡是与课程的版本不同的文件，都当作你的文件保留。",
    "Copied {files} of the course ({version}) into {folder}.": "已把课程（{version}）的 {files}复制到 "
    "{folder}。",
    "Updated {files} you had not changed to the course's {version}.": "已把你没有改过的 {files}更新为课程的 "
    "{version} 版。",
    "Kept {files} you changed (the course's version was not copied over them; `{program} get NEW_FOLDER` "
    "makes a fresh copy):": "保留了你改过的 {files}（课程的版本没有覆盖它们；`{program} get 新文件夹` "
    "会另做一份全新的副本）：",
    "The course in {folder} is up to date ({version}).": "{folder} 里的课程已是最新的（{version}）。",
    "Open it in JupyterLab: {program} lab {folder}": "在 JupyterLab 里打开它：{program} lab {folder}",
    "this course_utils ({package}) carries no notebooks: install the course again with "
    '`pip install --force-reinstall "{distribution}[lab]"`': "这个 course_utils（{package}）不带笔记本：请用 "
    '`pip install --force-reinstall "{distribution}[lab]"` 重新安装课程',
    "no notebooks in {notebooks}: install {distribution} again": "{notebooks} 里没有笔记本：请重新安装 "
    "{distribution}",
    'JupyterLab is not installed in this Python ({python}): `pip install "{distribution}[lab]"` brings '
    "it": '这个 Python（{python}）没有安装 JupyterLab：`pip install "{distribution}[lab]"` 会装上它',
    ROOT_NOTE: "以 root 身份运行：启动 JupyterLab 时加上 --allow-root。",
    "{program}: error: {error}": "{program}：错误：{error}",
}


def say(message: str, language: str) -> str:
    """`message`, one of the command's own (a key of CHINESE_MESSAGES, or English), in `language`."""
    return CHINESE_MESSAGES.get(message, message) if language == CHINESE else message


class Unavailable(RuntimeError):
    """What a command needs is not installed: the course's files in the package, or JupyterLab."""


def course_locations(package: Path = PACKAGE, language: str = "en") -> tuple[Path, dict[str, Path]]:
    """Where the course's files are: (the notebooks' folder, each edition's workers folder by its place in
    a copy). The installed package has course/, workers/ and workers_zh/; an editable install from a
    clone has none of them, and the clone's notebooks/ holds them."""
    if (package / "course").is_dir():
        return package / "course", {
            "workers": package / "workers",
            f"{CHINESE}/workers": package / "workers_zh",
        }
    clone = package.parent.parent / "notebooks"
    if clone.is_dir():
        return clone, {"workers": clone / "workers", f"{CHINESE}/workers": clone / CHINESE / "workers"}
    raise Unavailable(
        say(
            "this course_utils ({package}) carries no notebooks: install the course again with "
            '`pip install --force-reinstall "{distribution}[lab]"`',
            language,
        ).format(package=package, distribution=DISTRIBUTION)
    )


def course_files(notebooks: Path, workers: Mapping[str, Path], language: str = "en") -> dict[str, Path]:
    """Every file of the course by its place in a copy ("00_start_here.ipynb", "zh-CN/workers/who_am_i.py"),
    each the file it comes from: both editions' notebooks and solutions, and their workers."""
    files = {}
    for prefix in EDITION_FOLDERS.values():
        for pattern in NOTEBOOK_PATTERNS:
            for path in sorted((notebooks / prefix).glob(pattern)):
                files[prefix + path.relative_to(notebooks / prefix).as_posix()] = path
    for place, folder in workers.items():
        for path in sorted(folder.iterdir()) if folder.is_dir() else ():
            if path.is_file() and path.name != "__init__.py":
                files[f"{place}/{path.name}"] = path
    if not any(name.endswith(".ipynb") for name in files):
        raise Unavailable(
            say("no notebooks in {notebooks}: install {distribution} again", language).format(
                notebooks=notebooks, distribution=DISTRIBUTION
            )
        )
    return files


def digest(data: bytes) -> str:
    """The content hash a manifest records for a file."""
    return hashlib.sha256(data).hexdigest()


def _files(places: list[str], language: str) -> str:
    """ "1 file", "2 files", in `language`."""
    return say("1 file" if len(places) == 1 else "{count} files", language).format(count=len(places))


@dataclass
class Copied:
    """What `get` did, file by file (places in the copy)."""

    folder: Path
    copied: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    unreadable_manifest: str | None = None
    language: str = "en"

    def report(self) -> str:
        """What `get` says, in the student's language: what it copied, updated and kept, or that the copy
        was up to date."""
        lang, lines = self.language, []
        values = {"folder": self.folder, "version": __version__, "program": PROGRAM}
        if self.unreadable_manifest:
            lines.append(
                say(
                    "{manifest} could not be read ({why}): every file that differs from the course's is "
                    "treated as yours and kept.",
                    lang,
                ).format(manifest=self.folder / MANIFEST, why=self.unreadable_manifest)
            )
        if self.copied:
            lines.append(
                say("Copied {files} of the course ({version}) into {folder}.", lang).format(
                    files=_files(self.copied, lang), **values
                )
            )
        if self.updated:
            lines.append(
                say("Updated {files} you had not changed to the course's {version}.", lang).format(
                    files=_files(self.updated, lang), **values
                )
            )
        if self.kept:
            lines.append(
                say(
                    "Kept {files} you changed (the course's version was not copied over them; "
                    "`{program} get NEW_FOLDER` makes a fresh copy):",
                    lang,
                ).format(files=_files(self.kept, lang), **values)
            )
            lines += [f"  {name}" for name in self.kept]
        if not (self.copied or self.updated or self.kept):
            lines.append(say("The course in {folder} is up to date ({version}).", lang).format(**values))
        return "\n".join(lines)


def read_manifest(path: Path) -> tuple[dict[str, str], str | None]:
    """The hashes a manifest recorded by place, and why it could not be read (None: it could, or there is
    none yet)."""
    if not path.exists():
        return {}, None
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        return {}, f"{type(err).__name__}: {err}"
    if not isinstance(recorded, dict) or not all(isinstance(v, str) for v in recorded.values()):
        return {}, "its `files` is not a table of hashes"
    return recorded, None


def _writable(folder: Path, place: str) -> bool:
    """Whether the copy's file at `place` can be written without passing through a link (one of the
    student's may lead outside the copy): no link at it or on its way from `folder`, and not a folder."""
    path = Path(place)
    if any((folder / part).is_symlink() for part in (path, *path.parents[:-1])):
        return False
    return not (folder / path).exists() or (folder / path).is_file()


def get(
    folder: Path,
    files: Mapping[str, Path] | None = None,
    command: str = f"{PROGRAM} get",
    language: str = "en",
) -> Copied:
    """Copy the course into `folder`, never over a file the student changed, and record what was copied.

    `folder` must be missing, empty or a copy the course made (course_utils.folders: its marker);
    anything else raises NotOurFolder naming `command`. A file that is missing is copied; one that
    differs from the course's but still has the hash recorded when it was copied is updated; one that
    differs from both is the student's and kept. `files` (place -> source) defaults to the course;
    `language` is the one its report and errors speak.
    """
    if files is None:
        files = course_files(*course_locations(language=language), language=language)
    folder = claim(Path(folder), command)
    manifest = folder / MANIFEST
    recorded, unreadable = read_manifest(manifest)
    done, now = Copied(folder, unreadable_manifest=unreadable, language=language), {}
    for place, source in files.items():
        data = source.read_bytes()
        packaged, target = digest(data), folder / place
        if not _writable(folder, place):
            done.kept.append(place)
            continue
        if target.exists():
            current = digest(target.read_bytes())
            if current == packaged:
                now[place] = packaged
                continue
            if recorded.get(place) != current:  # changed since it was copied, or never copied here
                done.kept.append(place)
                if place in recorded:
                    now[place] = recorded[place]
                continue
            done.updated.append(place)
        else:
            done.copied.append(place)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        now[place] = packaged
    partial = manifest.with_name(MANIFEST + ".partial")
    partial.write_text(
        json.dumps({"course": DISTRIBUTION, "version": __version__, "files": now}, indent=1, sort_keys=True),
        encoding="utf-8",
    )
    partial.replace(manifest)
    return done


def student_language(chosen: str | None, env: Mapping[str, str]) -> str:
    """The edition to open: `chosen` (--language), else COURSE_LANGUAGE, else the locale (LC_ALL,
    LC_MESSAGES, LANG): Chinese for zh*, English otherwise."""
    if chosen:
        return chosen
    names = (LANGUAGE_VARIABLE, "LC_ALL", "LC_MESSAGES", "LANG")
    value = next((env[name].strip() for name in names if env.get(name, "").strip()), "en")
    return CHINESE if value.lower().startswith("zh") else "en"


def jupyterlab_command(
    python: str | os.PathLike[str], jupyter_args: Sequence[str], notebook: str | None, euid: int | None
) -> list[str]:
    """JupyterLab's command line for both routes (`course.py lab` in a clone, `pytorch-on-gpus lab` in a
    copy): `python -m jupyterlab`, the student's options, the notebook to open (None: the ones they
    named), and --allow-root as root (Docker, WSL, cloud shells), which JupyterLab needs there."""
    command = [os.fspath(python), "-m", "jupyterlab", *jupyter_args, *([notebook] if notebook else [])]
    if euid == 0 and "--allow-root" not in jupyter_args:
        command.append("--allow-root")
    return command


def lab_command(language: str, jupyter_args: Sequence[str], euid: int | None) -> list[str]:
    """JupyterLab's command line, run from the copy: the edition's notebook 00."""
    return jupyterlab_command(sys.executable, jupyter_args, EDITION_FOLDERS[language] + FIRST_NOTEBOOK, euid)


def lab(folder: Path, language: str, jupyter_args: Sequence[str]) -> int:
    """Bring the copy in `folder` up to date (`get`), then replace this process by JupyterLab in it."""
    if importlib.util.find_spec("jupyterlab") is None:
        raise Unavailable(
            say(
                'JupyterLab is not installed in this Python ({python}): `pip install "{distribution}[lab]"` '
                "brings it",
                language,
            ).format(python=sys.executable, distribution=DISTRIBUTION)
        )
    done = get(folder, command=f"{PROGRAM} lab", language=language)
    print(done.report(), flush=True)
    euid = os.geteuid() if hasattr(os, "geteuid") else None  # Windows has no user ids
    command = lab_command(language, jupyter_args, euid)
    if command[-1] == "--allow-root":
        print(say(ROOT_NOTE, language), flush=True)
    os.chdir(done.folder)  # JupyterLab serves the folder it starts in
    if os.name == "nt":  # no exec there that keeps the console's Ctrl-C
        return subprocess.call(command)
    os.execv(sys.executable, command)
    return 0  # not reached: exec replaced this process


def parser() -> argparse.ArgumentParser:
    """`pytorch-on-gpus`'s command line: `get` and `lab`."""
    main_parser = argparse.ArgumentParser(
        prog=PROGRAM,
        description="The course 'PyTorch on GPUs, hands-on': copy its notebooks into a folder of yours "
        "and open them in JupyterLab.",
        epilog=f'Install: pip install "{DISTRIBUTION}[lab]". Then: {PROGRAM} lab',
    )
    main_parser.add_argument("--version", action="version", version=f"{DISTRIBUTION} {__version__}")
    commands = main_parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    folder_help = f"the course's folder (default: ./{DEFAULT_FOLDER}); a new or empty one, or an earlier copy"
    get_parser = commands.add_parser(
        "get",
        help="copy the course (both editions' notebooks, workers, solutions) into FOLDER",
        description="Copy the course into FOLDER: the notebooks of both editions (English, and Chinese "
        "in zh-CN/), their worker scripts and solutions. Run it again after `pip install -U "
        f"{DISTRIBUTION}`: files you have not changed are updated, files you changed are kept and named.",
    )
    get_parser.add_argument("folder", nargs="?", default=DEFAULT_FOLDER, metavar="FOLDER", help=folder_help)
    lab_parser = commands.add_parser(
        "lab",
        help="get the course into FOLDER if needed, then open JupyterLab at notebook 00",
        description="Copy the course into FOLDER (or bring an earlier copy up to date, as `get` does), "
        "then open JupyterLab there at notebook 00 of your language. Other options go to JupyterLab, "
        "written --name=value: --no-browser, --port=8899, --ServerApp.ip=127.0.0.1.",
    )
    lab_parser.add_argument("folder", nargs="?", default=DEFAULT_FOLDER, metavar="FOLDER", help=folder_help)
    lab_parser.add_argument(
        "--language",
        choices=LANGUAGES,
        help=f"the edition to open (default: {LANGUAGE_VARIABLE}, else the locale: zh* opens {CHINESE})",
    )
    return main_parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run `pytorch-on-gpus COMMAND`; 1 with one line saying what to do when it cannot."""
    args, rest = parser().parse_known_args(argv)
    if args.command == "get" and rest:
        parser().error(f"unrecognized arguments: {' '.join(rest)}")
    language = student_language(getattr(args, "language", None), os.environ)
    try:
        if args.command == "get":
            done = get(Path(args.folder), language=language)
            print(done.report())
            if done.copied:
                print(
                    say("Open it in JupyterLab: {program} lab {folder}", language).format(
                        program=PROGRAM, folder=args.folder
                    )
                )
            return 0
        return lab(Path(args.folder), language, rest)
    except (NotOurFolder, Unavailable, OSError) as err:
        print(say("{program}: error: {error}", language).format(program=PROGRAM, error=err), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
