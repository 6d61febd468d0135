"""Solutions to the exercises of notebook 09. Try each exercise first; open this file when stuck.

Run it in the notebook's folder with `%run solutions/09_dp_vs_ddp_performance.py`: every check
says "Correct".
"""

import statistics

from course_utils.exercises.dp_vs_ddp_performance import (
    EXAMPLE_STEP_TIMES,
    PER_RANK_BATCH,
    WARMUP_STEPS,
    check_correct_snippets,
    check_median_and_iqr,
    check_samples_per_second,
)

# 1. The ranks wait for each other at every all-reduce: the job steps at the pace of its slowest
#    rank, measured by the median step time after warm-up. Every rank contributes its batch.
slowest = max(statistics.median(times[WARMUP_STEPS:]) for times in EXAMPLE_STEP_TIMES.values())
my_samples_per_second = len(EXAMPLE_STEP_TIMES) * PER_RANK_BATCH / slowest
print(check_samples_per_second(my_samples_per_second))

# 2. The two snippets that wait for the GPU (synchronize, or torch.utils.benchmark) before reading
#    the clock, after a warm-up.
my_letters = {"C", "D"}
print(check_correct_snippets(my_letters))


# 3. torch.utils.benchmark's median and IQR are the inclusive quartiles of the kept times.
def summarize(times: list[float], warmup: int) -> tuple[float, float]:
    q1, median, q3 = statistics.quantiles(times[warmup:], n=4, method="inclusive")
    return median, q3 - q1


print(check_median_and_iqr(summarize))
