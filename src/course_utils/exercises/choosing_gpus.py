"""Self-checks for notebook 04, choosing GPUs: logical vs physical ids and choosing by free memory.

Each check answers "Correct" or "Not yet" with a hint; none prints the solution.
"""

from __future__ import annotations

from course_utils.exercises import (
    CheckResult,
    failed,
    integral_list,
    integral_value,
    passed,
    whole_number_hint,
)
from course_utils.gpus import demo_inventory
from course_utils.i18n import _
from course_utils.visible_devices import (
    choose_by_free_memory,
    cuda_semantics,
    parse_visible_devices,
    physical_of,
)

EXERCISE_1_VALUE = "5,2,7"
EXERCISE_1_LOGICAL = 1
EXERCISE_3_VALUE = "1,3,-1,0"


def check_physical_gpu(answer: object) -> CheckResult:
    """Exercise 1: with CUDA_VISIBLE_DEVICES="5,2,7", which physical GPU is `cuda:1`? (an int)."""
    if answer is None or answer is ...:
        return failed(_("no answer yet: replace the `...` with the physical GPU number (an int)."))
    given = integral_value(answer)
    if given is None:
        return failed(whole_number_hint(answer, _("a GPU's number")))
    answer = given
    right = physical_of(EXERCISE_1_LOGICAL, EXERCISE_1_VALUE, demo_inventory())
    if answer == right:
        return passed(
            _("cuda:1 is the second entry of {value!r}: logical ids count the list.").format(
                value=EXERCISE_1_VALUE
            )
        )
    if answer == EXERCISE_1_LOGICAL:
        return failed(_("that is the logical id itself; logical ids index into the list, count along it."))
    if answer in (5, 7):
        return failed(_("that GPU is visible, but not as cuda:1; remember that logical ids start at 0."))
    return failed(
        _("GPU {answer} is not even visible with {value!r}; read the list in order.").format(
            answer=answer, value=EXERCISE_1_VALUE
        )
    )


def check_freest_value(answer: object) -> CheckResult:
    """Exercise 2: the CUDA_VISIBLE_DEVICES value for the demo fleet's 3 freest GPUs, freest first (a str).

    The answer is read by the course's strict parser, so a value CUDA would read differently
    from what it says ("3, 6, 1", "+3,6,1") is not yet right, with the parser's reason.
    """
    if answer is None or answer is ...:
        return failed(_("no answer yet: replace the `...` with a string such as '0,1,2'."))
    if not isinstance(answer, str):
        return failed(
            _("the variable's value is a string, not {type}; write it in quotes.").format(
                type=type(answer).__name__
            )
        )
    fleet = demo_inventory()
    right = choose_by_free_memory(fleet, 3)
    try:
        given = parse_visible_devices(answer, fleet)
    except ValueError as err:
        reason = str(err).removeprefix(f"CUDA_VISIBLE_DEVICES={answer!r}: ")
        return failed(
            _(
                "the course's strict parser refuses that value: {reason} Write comma-separated GPU "
                "numbers, no spaces or signs, e.g. '0,1,2'."
            ).format(reason=reason)
        )
    if given == right:
        return passed(_("those are the three GPUs with most free memory, the freest as cuda:0."))
    if sorted(given) == sorted(right):
        return failed(_("the right GPUs in another order: the freest should be cuda:0 (ties: lower index)."))
    if len(given) != 3:
        return failed(_("you named {count} GPU(s); the exercise asks for 3.").format(count=len(given)))
    return failed(
        _("compare memory_free of each GPU in demo_inventory() (or smi_table) and take the largest.")
    )


def check_cuda_reading(answer: object) -> CheckResult:
    """Exercise 3: which physical GPUs does CUDA make visible for "1,3,-1,0"? (a list in logical order)."""
    if answer is None or answer is ...:
        return failed(_("no answer yet: replace the `...` with a list of physical GPU numbers, e.g. [0, 1]."))
    given = integral_list(answer)
    if given is None:
        return failed(
            _("give a list of ints (GPU numbers) in logical order, not {answer!r:.60}.").format(answer=answer)
        )
    answer = given
    right = cuda_semantics(EXERCISE_3_VALUE, demo_inventory())
    if answer == right:
        return passed(_("CUDA stops at the first invalid entry (-1) and ignores everything after it."))
    if sorted(answer) == sorted(right):
        return failed(_("the right GPUs but not in the order CUDA numbers them: the order of the list."))
    if 0 in answer:
        return failed(_("look at what CUDA does at the first entry it cannot use: does it read on?"))
    return failed(_("walk the list entry by entry as CUDA does; what happens at '-1'?"))
