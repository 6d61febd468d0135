"""Re-execute course notebooks top to bottom and write their outputs back.

Usage: python scripts/regenerate.py [NOTEBOOK ...]   (default: every notebook in notebooks/)

Notebooks are run in a kernel of this very Python (the course's virtual environment), with
the working directory set to the notebook's folder, exactly as nbval runs them. Outputs are never
edited by hand: this script is the only way they change.

The Chinese edition (notebooks/zh-CN/) is built from the English notebooks and the translations
first (`scripts/translations.py build`), and an English notebook named here brings its Chinese
twin along, so that one command keeps both editions' outputs current.

A cell excluded from comparison starts with a comment that says why, such as
`# NBVAL_IGNORE_OUTPUT: lists this machine's GPUs`. nbval only honours the bare marker, so this
script also gives such cells nbval's matching metadata tag (`nbval-ignore-output`).

Consecutive stream outputs of one cell are stored merged, so that how the kernel happened to
split a cell's printing into messages never shows in `git diff`; each notebook's line of the
report says whether its file changed.
"""

import sys  # built in: nothing to interrupt; everything else is imported in the `try` below

BEFORE_ANY = "before any notebook ran; nothing was written."
INTERRUPTED_STATUS = 130  # 128 + SIGINT, as a shell shows it
try:  # Ctrl-C during these imports (a second or more): one line, not an import-time traceback
    import asyncio
    import difflib
    import signal
    import time
    import uuid
    from pathlib import Path
    from typing import Any

    import ipykernel.kernelspec
    import nbformat
    from command_help import command_parser
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager, NoSuchKernel
    from kernel_sockets import AsyncSocketKernelManager
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError
    from notebook_args import ROOT, notebooks_from_args

    import translations
except KeyboardInterrupt:
    if __name__ != "__main__":
        raise
    print(f"Interrupted (SIGINT) {BEFORE_ANY}", flush=True)
    sys.exit(INTERRUPTED_STATUS)

KERNEL_NAME = "course-current-env"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
MARKER_TAGS = {"NBVAL_IGNORE_OUTPUT": "nbval-ignore-output", "NBVAL_SKIP": "nbval-skip"}


def marker_tags(source: str) -> set[str]:
    """nbval tags that a cell's leading `# NBVAL_...: reason` comment lines ask for."""
    tags = set()
    for line in source.splitlines():
        if not line.startswith("#"):
            break
        comment = line.lstrip("# ")
        tags |= {tag for marker, tag in MARKER_TAGS.items() if comment.startswith(marker)}
    return tags


def sync_marker_tags(nb: nbformat.NotebookNode) -> None:
    """Give each code cell exactly the nbval tags its marker comments ask for."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        others = [t for t in cell.metadata.get("tags", []) if t not in MARKER_TAGS.values()]
        tags = others + sorted(marker_tags(cell.source))
        if tags:
            cell.metadata["tags"] = tags
        else:
            cell.metadata.pop("tags", None)


def merge_streams(nb: nbformat.NotebookNode) -> None:
    """Join each run of consecutive stream outputs of the same name (stdout, stderr) into one output."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        merged: list[nbformat.NotebookNode] = []
        for output in cell.outputs:
            previous = merged[-1] if merged else None
            if (
                output.output_type == "stream"
                and previous is not None
                and previous.output_type == "stream"
                and previous.name == output.name
            ):
                previous.text += output.text
            else:
                merged.append(output)
        cell.outputs = merged


def number_widget_views(nb: nbformat.NotebookNode, name: str) -> None:
    """Give widget views ids that depend on their place, not on chance: no widget state is stored,
    so an id refers to nothing, and a random one would change the file at every run."""
    views = (
        data
        for cell in nb.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if (data := output.get("data", {}).get(WIDGET_VIEW))
    )
    for number, view in enumerate(views):
        view["model_id"] = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{name}#widget-{number}")).replace("-", "")


def change_summary(before: str, after: str) -> str:
    """`unchanged`, or how many lines of a notebook's file a run added and removed (like git diff --stat)."""
    if before == after:
        return "unchanged"
    added = removed = 0
    for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0):
        if line.startswith(("+++", "---")):
            continue
        added += line.startswith("+")
        removed += line.startswith("-")
    return f"changed: {added} line(s) added, {removed} removed (see git diff)"


class CurrentEnvKernelSpecs(KernelSpecManager):
    """Resolve KERNEL_NAME to an ipykernel running on this interpreter, whatever is installed."""

    def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
        """Return the current-environment spec for KERNEL_NAME, else defer to Jupyter."""
        if kernel_name == KERNEL_NAME:
            return self.kernel_spec_class(
                resource_dir=ipykernel.kernelspec.RESOURCES,
                **ipykernel.kernelspec.get_kernel_dict(),
            )
        raise NoSuchKernel(kernel_name)


class Interrupted(Exception):
    """Ctrl-C (SIGINT) or SIGTERM stopped a notebook's run; its file was not written."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class InterruptibleClient(NotebookClient):
    """A NotebookClient on which Ctrl-C or SIGTERM interrupts the running cell, as Ctrl-C in JupyterLab does.

    nbclient's own handlers shut the kernel down under the running cell (or under the kernel
    still starting: a screen of CancelledError) and then fail on a kernel manager they were
    given. This client's handlers replace them before the kernel starts: a signal during the
    start is remembered and ends the run before the first cell, once the kernel can be shut
    down cleanly; one during a cell interrupts it and ends the run through the usual error path.
    """

    signum: int | None = None
    in_cell = False
    ignoring_sigint = False  # whether this process was started ignoring SIGINT (set before nbclient's)

    async def async_start_new_kernel(self, **kwargs: Any) -> None:
        """nbclient's kernel start, this client's signal handlers put in place of nbclient's first.

        A SIGINT this process was started ignoring (a background job) stays ignored.
        """
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, self._interrupt, signal.SIGTERM)
        if self.ignoring_sigint:
            loop.remove_signal_handler(signal.SIGINT)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        else:
            loop.add_signal_handler(signal.SIGINT, self._interrupt, signal.SIGINT)
        await super().async_start_new_kernel(**kwargs)

    async def async_execute_cell(self, *args: Any, **kwargs: Any) -> Any:
        """Run a cell as nbclient does, unless a signal came: then stop before it."""
        if self.signum is not None:
            raise Interrupted(self.signum)
        self.in_cell = True
        try:
            return await super().async_execute_cell(*args, **kwargs)
        finally:
            self.in_cell = False

    def _interrupt(self, signum: int) -> None:
        """Remember the signal and interrupt the kernel's running cell (a kernel still starting is not)."""
        self.signum = signum
        if self.km is not None and self.in_cell:
            self._interrupting = asyncio.ensure_future(self.km.interrupt_kernel())


def regenerate(path: Path) -> tuple[float, str]:
    """Execute one notebook in place; the seconds it took and what changed in its file (`change_summary`)."""
    before = path.read_text(encoding="utf-8")
    nb = nbformat.reads(before, as_version=4)
    sync_marker_tags(nb)
    ignoring_sigint = signal.getsignal(signal.SIGINT) == signal.SIG_IGN  # before nbclient sets its own
    km = AsyncSocketKernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=CurrentEnvKernelSpecs())
    client = InterruptibleClient(
        nb,
        km=km,
        timeout=300,
        record_timing=False,
        store_widget_state=False,
        resources={"metadata": {"path": str(path.parent)}},  # as nbval: the notebook's own folder
    )
    client.ignoring_sigint = ignoring_sigint
    start = time.perf_counter()
    try:
        client.execute(cleanup_kc=True)  # shut the kernel down: nbclient keeps a km it was given alive
    except Exception:
        if client.signum is not None:  # the error is the one the signal caused (KeyboardInterrupt)
            raise Interrupted(client.signum) from None
        raise
    if client.signum is not None:  # came while the last cell was finishing: do not write a half-run
        raise Interrupted(client.signum)
    elapsed = time.perf_counter() - start
    nb.metadata["kernelspec"] = jupyterlab_kernelspec()
    nb.metadata.pop("widgets", None)
    merge_streams(nb)
    number_widget_views(nb, path.name)
    nbformat.validate(nb)
    nbformat.write(nb, path)
    return elapsed, change_summary(before, path.read_text(encoding="utf-8"))


def jupyterlab_kernelspec() -> dict[str, str]:
    """The kernelspec JupyterLab writes into a notebook it opens with ipykernel's kernel, "Python 3
    (ipykernel)": stored as such, a notebook opens unmodified."""
    import ipykernel.kernelspec

    return {
        "name": "python3",
        "display_name": ipykernel.kernelspec.get_kernel_dict()["display_name"],
        "language": "python",
    }


def main(argv: list[str]) -> int:
    """Regenerate the notebooks named in argv (default: all) and report each one."""
    names = command_parser("regenerate").parse_args(argv)
    paths, missing = notebooks_from_args(names.notebooks)
    if missing:
        print(f"No such notebook: {', '.join(missing)}; name one as notebooks/05_data_parallel.ipynb")
        return 2
    englishes = [english for path in paths if (english := translations.english_of(path)) is not None]
    written, untranslated = translations.build(only=englishes)
    for line in written:
        print(line)
    for line in untranslated:
        print(f"Not built, so not run: {line}")
    twins = [translations.edition_path(english) for english in englishes]
    paths += [twin for twin in twins if twin.is_file() and twin not in paths]
    for path in paths:
        try:
            seconds, change = regenerate(path)
        except CellExecutionError as err:
            print(f"FAILED {path.name}: a cell raised an error; outputs were not written.\n{err}")
            return 1
        except (nbformat.reader.NotJSONError, nbformat.ValidationError, UnicodeDecodeError) as err:
            print(
                f"FAILED {path.name}: not a valid notebook file ({type(err).__name__}); nothing was written."
            )
            return 1
        except Interrupted as stop:
            print(f"Interrupted ({stop}): {path.name} was not written; the notebooks before it were.")
            return 128 + stop.signum
        except KeyboardInterrupt:  # between kernels, where Python's own handler is back
            print(f"Interrupted (SIGINT): {path.name} was not written; the notebooks before it were.")
            return 128 + signal.SIGINT
        name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        print(f"regenerated {name} in {seconds:.1f} s: {change}")
    return 0


def run_main(argv: list[str]) -> int:
    """`main`, with a Ctrl-C that came before the first notebook started said in one line."""
    try:
        return main(argv)
    except KeyboardInterrupt:
        print(f"Interrupted (SIGINT) {BEFORE_ANY}", flush=True)
        return 128 + signal.SIGINT


if __name__ == "__main__":
    sys.exit(run_main(sys.argv[1:]))
