"""Solutions to the exercises of notebook 11. Try each exercise first; open this file when stuck.

Run it in the notebook's folder with `%run solutions/11_troubleshooting.py`: every check says "Correct".
"""

from course_utils.exercises.troubleshooting import check_error_fix, check_select_gpus

# 1. The fix for each error, as the notebook's catalogue gives it.
answers = {1: "C", 2: "D", 3: "A", 4: "B"}
for number, letter in answers.items():
    print(check_error_fix(number, letter))


# 2. Assign the value: setdefault (the source article's code) keeps a value that was set before.
def select_gpus(environ: dict, value: str) -> None:
    environ["CUDA_VISIBLE_DEVICES"] = value


print(check_select_gpus(select_gpus))
