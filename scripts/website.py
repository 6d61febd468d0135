"""Build the course's website from the committed, executed notebooks (never re-executed), or serve it.

    python scripts/website.py [--out DIR]                  build into DIR/html (default build/site)
    python scripts/website.py [--out DIR] --serve [--port N]
                                                        build, then serve on http://127.0.0.1:N/

The pages of docs/, README.md (the home page includes it) and every notebooks/NN_*.ipynb are
staged into DIR/src, laid out as in the repository, and built by Sphinx with docs/conf.py.
Every warning is an error. Called through `python3 course.py site`.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
DEFAULT_OUT = ROOT / "build" / "site"


def course_notebooks() -> list[Path]:
    """The course's notebooks in course order: notebooks/NN_*.ipynb sorted by name."""
    notebooks = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    if not notebooks:
        raise FileNotFoundError(f"no notebooks/NN_*.ipynb under {ROOT}: run this from a clone of the course")
    return notebooks


def stage_sources(stage: Path) -> list[Path]:
    """Copy docs/ (but its conf.py), README.md and the notebooks into `stage`; return the notebooks."""
    if stage.exists():
        shutil.rmtree(stage)
    shutil.copytree(DOCS, stage, ignore=shutil.ignore_patterns("conf.py", "__pycache__"))
    shutil.copy2(ROOT / "README.md", stage / "README.md")
    (stage / "notebooks").mkdir()
    notebooks = course_notebooks()
    for notebook in notebooks:
        shutil.copy2(notebook, stage / "notebooks" / notebook.name)
    return notebooks


def build(out: Path) -> Path:
    """Build the site into `out`/html from scratch and return that folder; raise if Sphinx warns or fails."""
    out = out.resolve()
    stage, html, doctrees = out / "src", out / "html", out / "doctrees"
    notebooks = stage_sources(stage)
    shutil.rmtree(html, ignore_errors=True)
    shutil.rmtree(doctrees, ignore_errors=True)
    command = [
        sys.executable,
        "-m",
        "sphinx",
        "--builder=html",
        "--fail-on-warning",
        "--keep-going",
        "--nitpicky",
        "--quiet",
        f"--conf-dir={DOCS}",
        f"--doctree-dir={doctrees}",
        str(stage),
        str(html),
    ]
    started = time.monotonic()
    status = subprocess.call(command, cwd=ROOT)
    if status != 0:
        raise RuntimeError(
            f"Sphinx failed (exit status {status}): fix the warnings above and build again "
            f"(files under {stage} are copies of docs/, README.md and notebooks/)"
        )
    print(
        f"Built {len(notebooks)} notebook pages in {time.monotonic() - started:.1f} s: {html / 'index.html'}"
    )
    return html


def make_server(html: Path, port: int) -> http.server.ThreadingHTTPServer:
    """An HTTP server for the built site in `html`, bound to 127.0.0.1 only (port 0: any free one)."""
    if not (html / "index.html").is_file():
        raise FileNotFoundError(f"no site in {html}: build it first with `python3 course.py site`")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(html))
    return http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)


def serve(html: Path, port: int) -> None:
    """Serve `html` on 127.0.0.1 until Ctrl+C."""
    with make_server(html, port) as server:
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        print(f"Serving the course at {url} (Ctrl+C stops)", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            print("Stopped.")


def main(argv: list[str]) -> int:
    """Parse the command line, build, and serve when asked."""
    parser = argparse.ArgumentParser(description="Build (and serve) the course's website.")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="build folder (default build/site)")
    parser.add_argument("--serve", action="store_true", help="serve the site on 127.0.0.1 after building")
    parser.add_argument("--port", type=int, default=8000, help="port for --serve (default 8000; 0: any free)")
    args = parser.parse_args(argv)
    if not 0 <= args.port <= 65535:
        parser.error(f"--port must be between 0 and 65535, not {args.port}")
    try:
        html = build(args.out)
    except (RuntimeError, FileNotFoundError) as err:
        print(err, file=sys.stderr)
        return 1
    if args.serve:
        try:
            serve(html, args.port)
        except OSError as err:
            print(f"Cannot serve on 127.0.0.1:{args.port} ({err}): pick another with --port", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
