"""Checks for the exercises of notebook 11 (troubleshooting).

Exercise 1 gives real error messages (the ones notebook 11 reproduces) and asks for the fix,
as a letter; a wrong letter gets a hint on why that fix does not address the cause. Exercise 2
asks for a corrected version of source article 002's GPU selection, which used `os.environ.setdefault`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from course_utils._checks import shown
from course_utils.exercises import (
    CheckResult,
    call_reader,
    failed,
    integral_value,
    not_a_function,
    passed,
    unanswered,
)
from course_utils.i18n import N_, _, translated

__all__ = ["QUESTIONS", "check_error_fix", "check_select_gpus", "question"]


@dataclass(frozen=True)
class Question:
    """One error message, four fixes labelled A-D, the right letter, and a hint per wrong letter.

    Texts are kept in English (marked with `N_()`) and shown in the notebook's language.
    """

    message: str
    options: dict[str, str]
    answer: str
    why: str  # said when the answer is right
    hints: dict[str, str]  # said for each wrong letter: why that fix misses the cause


QUESTIONS: dict[int, Question] = {
    1: Question(
        message=(
            "RuntimeError: Attempting to deserialize object on a CUDA device but "
            "torch.cuda.is_available() is False. ..."
        ),
        options={
            "A": N_('os.environ["CUDA_VISIBLE_DEVICES"] = "0" before loading'),
            "B": "torch.load(path, weights_only=False)",
            "C": 'torch.load(path, map_location="cpu")',
            "D": N_("model.cuda() before model.load_state_dict(...)"),
        },
        answer="C",
        why=N_("the file's storages are tagged cuda:0 and map_location says where to put them instead."),
        hints={
            "A": N_(
                "the machine has no CUDA device to make visible; the file's location tags are the problem."
            ),
            "B": N_("weights_only decides which objects may be unpickled, not which device storages go to."),
            "D": N_("the error is raised by torch.load, before load_state_dict runs, and there is no GPU."),
        },
    ),
    2: Question(
        message=(
            "RuntimeError: Error(s) in loading state_dict for FooNet: Missing key(s) in state_dict: "
            '"linears.0.weight", ... Unexpected key(s) in state_dict: "module.linears.0.weight", ...'
        ),
        options={
            "A": "model.load_state_dict(state, strict=False)",
            "B": 'torch.load(path, map_location="cpu")',
            "C": "torch.load(path, weights_only=False)",
            "D": N_('consume_prefix_in_state_dict_if_present(state, "module.") before loading'),
        },
        answer="D",
        why=N_("the keys were saved from a DataParallel/DDP wrapper; stripping `module.` makes them match."),
        hints={
            "A": N_(
                "strict=False silences the error and loads nothing: no key matches, weights stay random."
            ),
            "B": N_("the keys are wrong, not the devices; map_location does not rename anything."),
            "C": N_("the file unpickled fine; its key names do not match the model's."),
        },
    ),
    3: Question(
        message=N_(
            "ValueError: Expected more than 1 value per channel when training, got input size "
            "torch.Size([1, 4])   (last batch of the epoch, nn.DataParallel on 8 GPUs, BatchNorm1d)"
        ),
        options={
            "A": N_("DataLoader(..., drop_last=True), so that every batch is full"),
            "B": N_("model.eval() for the whole training run"),
            "C": N_("torch.cuda.empty_cache() before the last batch"),
            "D": N_('CUDA_VISIBLE_DEVICES="0,1,2,3,4,5,6,7" set again'),
        },
        answer="A",
        why=N_(
            "the short last batch is cut into pieces of one row; full batches give every GPU several rows."
        ),
        hints={
            "B": N_("eval mode stops BatchNorm from using batch statistics: the model trains differently."),
            "C": N_("this is not a memory problem: a replica got a single row, and BatchNorm needs two."),
            "D": N_("the GPUs are all there already; the batch is what is too small to split."),
        },
    ),
    4: Question(
        message=N_(
            "torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with exit code 1 "
            "(and in the log: AttributeError: Can't get attribute 'train' on <module '__main__'>)"
        ),
        options={
            "A": N_("raise the process group's timeout"),
            "B": N_("move `train` into a .py file and import it from there"),
            "C": N_("pass a different MASTER_PORT"),
            "D": N_("call torch.cuda.init() before mp.spawn"),
        },
        answer="B",
        why=N_("a spawned interpreter imports the worker by name, which works for a function in a module."),
        hints={
            "A": N_("the worker never started: it could not even be unpickled, so nothing waited."),
            "C": N_("no process group was created yet; the worker could not be found by name."),
            "D": N_(
                "CUDA has nothing to do with finding the function; the fresh interpreter cannot import it."
            ),
        },
    ),
}


def question(number: int) -> str:
    """The text of question `number` of exercise 1: the error message and the options A-D."""
    key = integral_value(number)
    if key not in QUESTIONS:
        raise (TypeError if key is None else ValueError)(
            _("number must be one of the questions {questions}, not {number}").format(
                questions=sorted(QUESTIONS), number=shown(number)
            )
        )
    number, q = key, QUESTIONS[key]
    lines = [
        _("Question {number}. The error:").format(number=number),
        f"  {translated(q.message)}",
        _("Which fix?"),
    ]
    lines += [f"  {letter}) {translated(text)}" for letter, text in q.options.items()]
    return "\n".join(lines)


def check_error_fix(number: int, answer: object) -> CheckResult:
    """Check the letter chosen for question `number`; a wrong letter gets a hint, not the answer."""
    key = integral_value(number)
    if key is None or key not in QUESTIONS:
        return failed(
            _("there is no question {number!r:.40}; the questions are {questions}.").format(
                number=number, questions=sorted(QUESTIONS)
            )
        )
    number, q = key, QUESTIONS[key]
    if answer is None or answer is Ellipsis:
        return failed(
            _('question {number}: write one letter, A to D, as a string, e.g. "A".').format(number=number)
        )
    if not isinstance(answer, str) or answer.strip().upper() not in q.options:
        return failed(
            _("question {number}: answer with one of the letters A, B, C, D, not {answer!r}.").format(
                number=number, answer=answer
            )
        )
    letter = answer.strip().upper()
    if letter == q.answer:
        return passed(
            _("question {number}: {letter}: {why}").format(
                number=number, letter=letter, why=translated(q.why)
            )
        )
    return failed(
        _("question {number}: {letter} does not fix it: {hint}").format(
            number=number, letter=letter, hint=translated(q.hints[letter])
        )
    )


def _restore_environ(saved: dict[str, str]) -> list[str]:
    """Put os.environ back as `saved` holds it; the names that had changed, sorted."""
    changed = sorted(k for k in set(saved) | set(os.environ) if saved.get(k) != os.environ.get(k))
    for name in changed:
        if name in saved:
            os.environ[name] = saved[name]
        else:
            del os.environ[name]
    return changed


def check_select_gpus(select_gpus: Callable[[dict[str, str], str], object] | None) -> CheckResult:
    """Check `select_gpus(environ, value)`: after the call environ["CUDA_VISIBLE_DEVICES"] == value.

    It is called on plain dicts standing for the environment: one where the variable is unset
    and one where the shell already set it (source article 002's `setdefault` keeps the old value
    there). A function that also writes this process's `os.environ` is told so, and the change undone.
    """
    if (verdict := not_a_function(select_gpus, "select_gpus(environ, value)")) is not None:
        return verdict
    goal = _("set environ['CUDA_VISIBLE_DEVICES'] to value, whether or not it was set before")
    if (verdict := unanswered(select_gpus, "select_gpus(environ, value)", goal)) is not None:
        return verdict
    cases = [
        ({"HOME": "/home/student"}, "3,6", N_("the variable unset")),
        ({"CUDA_VISIBLE_DEVICES": "7", "HOME": "/home/student"}, "3,6", N_("the variable set to '7'")),
        ({"CUDA_VISIBLE_DEVICES": "0,1"}, "2", N_("the variable set to '0,1'")),
        ({}, "1,0", N_("an empty environment")),
    ]
    for environ, value, case in cases:
        where = translated(case)
        before = dict(environ)
        process_environ = dict(os.environ)
        outcome = call_reader(select_gpus, environ, value)
        touched = _restore_environ(process_environ)
        if outcome.problem is not None:
            return failed(
                _("with {where} your function {problem}").format(where=where, problem=outcome.problem)
            )
        got = environ.get("CUDA_VISIBLE_DEVICES")
        if got == before.get("CUDA_VISIBLE_DEVICES") and got is not None and got != value:
            return failed(
                _(
                    "with {where} it is still {got!r}: the old value was kept. Which call writes only "
                    "when a key is missing?"
                ).format(where=where, got=got)
            )
        if got != value:
            return failed(
                _(
                    "with {where}, environ['CUDA_VISIBLE_DEVICES'] is {got!r}, not {value!r}: change the "
                    "environ passed in (not os.environ), under that exact name."
                ).format(where=where, got=got, value=value)
            )
        others = {k: v for k, v in before.items() if k != "CUDA_VISIBLE_DEVICES"}
        if {k: v for k, v in environ.items() if k != "CUDA_VISIBLE_DEVICES"} != others:
            return failed(
                _("with {where} the other variables changed: set this one variable, leave the rest.").format(
                    where=where
                )
            )
        if touched:
            return failed(
                _(
                    "the environ passed in is right, but your function also changed this process's "
                    "os.environ ({names}; the check undid it): write only to the environ passed in."
                ).format(names=", ".join(touched))
            )
    return passed(
        _(
            "the value is written whether or not the variable was set before. Do it before anything "
            "touches CUDA: CUDA reads the variable once."
        )
    )
