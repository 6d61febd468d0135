"""The Chinese edition prints Chinese: English prose left in the stored outputs of notebooks/zh-CN is counted.

A line counts when it has no Chinese character and at least one English word (letters only, 3 or more,
not an acronym, not a CamelCase name, not a term the glossary keeps in English), or when it has Chinese
and three English words in a row. What is not prose is not looked at: error outputs; the worker scripts
that cells print whole (translated on their own, translations/zh-CN/workers/); what PyTorch, torchrun or
NVML print, quoted from a line that names an error, a warning, an exception, a traceback or a torchrun
log prefix (or a repr of a `torch.x.y` object) to the next blank line; table rows (cells apart by two or
more spaces); lines of Python code; and in a line, code spans, reprs (`<...>`), links, quoted strings
without a space (`'cpu'`, dictionary keys that are names), argument lists with `=` and labels that are
Python expressions (`x.to('cpu') is x: True`). A quoted string with a space in it (`'pid differs'`) is
prose, and is looked at.

At most ten kinds of line may stay, each a message of PyTorch, torchrun or NVML quoted as it is, or a
line of the stored Slurm run as it was recorded, with its reason (ALLOWED). Notebooks whose English
lines wait for another change are marked in PENDING, with what they print: they fail strictly, so
that the mark is removed once they are fixed.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from notebook_hygiene import ROOT

CHINESE = ROOT / "notebooks" / "zh-CN"
MAX_ALLOWED = 10
# Kinds of English line that stay, as regular expressions searched in the line, with why.
ALLOWED = {
    r"input size torch\.Size": "PyTorch's DataParallel tutorial: its Model and loop print `In Model: input "
    "size ...` and `Outside: input size ...`; source article 003 shows these lines and notebook 05 "
    "reproduces them line for line (05)",
    r"NVML Shared Library Not Found": "NVML's message on a machine without NVIDIA's driver (01, 11)",
    r"Detected mismatch between collectives on ranks|Rank \d+ is running collective": "PyTorch's "
    "report of mismatched collectives under TORCH_DISTRIBUTED_DEBUG=DETAIL, per rank (11)",
    r"This flag results in an extra traversal": "DDP's find_unused_parameters warning (08)",
    r"Setting OMP_NUM_THREADS environment variable for each process": "torchrun's notice (07, 08)",
    r"To enable traceback see": "torchrun's failure summary without @record (08)",
    r"job \d+ on node\[1-2\]: ": "the stored Slurm run's `echo` line, recorded as "
    "workers/slurm_torchrun.sbatch and slurm_srun.sbatch printed it; the Chinese copies run "
    "the same code, so they print the same line (07)",
}
# Notebooks whose English lines another change removes, and what it must translate; strict xfail.
PENDING: dict[str, str] = {}

HAN = re.compile("[\u3400-\u9fff\uf900-\ufaff]")
QUOTES_FOREIGN_TEXT = re.compile(
    r"\w*(?:Error|Warning|Exception)\w*\b|Traceback|^\s*File \"|EMMDD|Root Cause|torch\.\w+\.\w+"
    r"|^\[?[IWEF]\d{4} [\d:.]+ |^(?:srun|slurmstepd\S*): "
)
PRINTED_SCRIPT = re.compile(r"workers/\w+\.(?:py|sbatch)\b")  # a cell that prints a worker script whole
TABLE_ROW = re.compile(r"\S {2,}\S.* {2,}\S")
NOT_PROSE = re.compile(
    r"`[^`\n]*`|<[^<>\n]*>|https?://\S+|'[^'\s]*'|\"[^\"\s]*\"|\(\w+\):|\b\w+\([^()\n]*\)|\([^()\n]*=[^()\n]*\)"
)
# A token: a run of Chinese characters or punctuation (never a word), or of anything else but spaces.
TOKENS = re.compile(
    "[\u3000-\u303f\u3400-\u9fff\uf900-\ufaff\uff00-\uffef]+|[^\\s\u3000-\u303f\u3400-\u9fff\uf900-\ufaff\uff00-\uffef]+"
)
WORD = re.compile(r"[A-Za-z][a-z]*(?:-[a-z]+)*")
# Names and terms the Chinese edition writes in English (docs/glossary.md), lower case.
KEPT = {
    "rank", "ranks", "bucket", "buckets", "kernel", "kernels", "all-reduce", "all-gather", "reduce-scatter",
    "all-to-all", "barrier", "hook", "buffer", "gloo", "nccl", "mpi", "cpu", "cuda", "meta",
    "mps", "xpu", "spawn", "fork", "forkserver", "python", "ipywidgets", "torchrun", "numpy", "ndarray",
    "inf", "nan", "true", "false", "none",
}  # fmt: skip


def is_code(line: str) -> bool:
    """Whether `line` is a Python statement (a printed source line), not a value or a sentence."""
    for source in (line.strip(), line.strip() + " pass"):
        try:
            (statement,) = ast.parse(source).body
        except (SyntaxError, ValueError):
            continue
        return not isinstance(statement, ast.Expr) or not isinstance(
            statement.value, ast.Constant | ast.Dict | ast.List | ast.Tuple | ast.Set | ast.Name
        )
    return False


def without_code_label(line: str) -> str:
    """`line` without a leading `expression: ` label that is Python (`x.to('cpu') is x: True`)."""
    label, colon, rest = line.partition(": ")
    if not colon:
        return line
    try:
        tree = ast.parse(label.strip(), mode="eval").body
    except SyntaxError:
        return line
    return line if isinstance(tree, ast.Name | ast.Constant) else rest


def words(line: str) -> list[str | None]:
    """The line's tokens: an English word, or None for code, numbers, names and Chinese."""
    found: list[str | None] = []
    for token in TOKENS.findall(NOT_PROSE.sub("\x00", without_code_label(line))):
        core = token.lstrip("([{'\"").rstrip(")]}'\",:;.!?")
        letters = core.replace("-", "")
        english = WORD.fullmatch(core) and len(letters) >= 3 and core.lower() not in KEPT
        found.append(core if english else None)
    return found


def english_lines(text: str) -> list[str]:
    """The lines of an output text that are English prose, by the rules above."""
    found, quoting = [], False
    for line in text.splitlines():
        quoting = bool(line.strip()) and (quoting or bool(QUOTES_FOREIGN_TEXT.search(line)))
        if quoting or TABLE_ROW.search(line) or is_code(line):
            continue
        tokens = words(line)
        if not HAN.search(line):
            if any(tokens):
                found.append(line.strip())
            continue
        run = 0
        for token in tokens:
            run = run + 1 if token else 0
            if run == 3:
                found.append(line.strip())
                break
    return found


def notebook_english(path: Path) -> list[str]:
    """`cell id: line` for each English line in a stored notebook's outputs."""
    found = []
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] != "code" or (PRINTED_SCRIPT.search(source) and ".read_text()" in source):
            continue
        for output in cell.get("outputs", []):
            if output["output_type"] == "error":
                continue
            text = "".join(output.get("text") or output.get("data", {}).get("text/plain", ""))
            found += [f"{cell.get('id')}: {line}" for line in english_lines(text)]
    return found


def allowed(line: str) -> bool:
    return any(re.search(pattern, line) for pattern in ALLOWED)


def marked(path: Path) -> object:
    """A notebook as a test parameter, strictly expected to fail while its English is PENDING."""
    reason = PENDING.get(path.name)
    return pytest.param(
        path,
        id=path.name,
        marks=[pytest.mark.xfail(strict=True, reason=f"pending another change: {reason}")] if reason else [],
    )


NOTEBOOKS = sorted(CHINESE.glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("path", [marked(path) for path in NOTEBOOKS])
def test_a_chinese_notebook_prints_no_english_but_the_allowed_quotations(path):
    assert [line for line in notebook_english(path) if not allowed(line)] == []


def test_the_allowed_english_is_short_explained_and_used():
    assert len(ALLOWED) <= MAX_ALLOWED, f"at most {MAX_ALLOWED} kinds of English line may stay"
    assert all(len(reason) > 20 for reason in ALLOWED.values()), "each says whose message it is and where"
    seen = [line for path in NOTEBOOKS for line in notebook_english(path)]
    assert [p for p in ALLOWED if not any(re.search(p, line) for line in seen)] == [], (
        "allowed, but not printed"
    )
    assert set(PENDING) <= {path.name for path in NOTEBOOKS}


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("{'RANK': '0', 'MASTER_ADDR': '127.0.0.1', 'pid differs': True}", ["pid", "differs"]),
        ("   backward reaches layer 4", ["backward", "reaches", "layer"]),
        ("1 process, 1 thread：", ["process", "thread"]),
        ("rank 0：{'files': ['model.pt'], 'loaded equals mine': True}", ["loaded", "equals", "mine"]),
        ("持有的字节数 bytes held per rank", ["bytes", "held", "per"]),
        ("rank 0: {'parameters': 316032, 'AdamW state': 632064}", ["state"]),
    ],
)
def test_the_detector_finds_english_prose(text, found):
    assert english_lines(text) == [text.strip()]
    assert [word for word in words(text) if word] == found


@pytest.mark.parametrize(
    "text",
    [
        "{'weight': 'cpu', 'bias': 'cpu'}",  # names, quoted
        "x_cpu.to('cpu', copy=True) is x_cpu: False",  # a Python label
        "net.to('meta') is net: True",
        "(module, device_ids=None, output_device=None, dim=0) -> None",  # a signature
        "  (module): Model(",  # a module's repr
        "<All keys matched successfully>",
        "outputs = self.parallel_apply(replicas, inputs, module_kwargs)",  # printed source
        "for _ in range(50):",
        "GPU  Name                     Bus-Id          Memory-Usage  Util",  # a table
        "RuntimeError: Tensor on device cpu is not on the expected device meta!\nthe next line too",
        "<torch.utils.benchmark.utils.common.Measurement object at 0x7f>\n  2 measurements, 100 runs",
        "NVMLError_LibraryNotFound: NVML Shared Library Not Found",
        "cpu、meta、mps 是否锁页： False False False",
        "参数  132,352 张量 tensor([1., 2.]) 在 rank 0 上",
        "GPipe        rank 0: F0 F1 F2 F3 B0 B1 B2 B3",
    ],
)
def test_the_detector_spares_code_tables_quotations_and_kept_terms(text):
    assert english_lines(text) == []
