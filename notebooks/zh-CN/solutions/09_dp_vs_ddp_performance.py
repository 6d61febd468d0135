# 译自 notebooks/solutions/09_dp_vs_ddp_performance.py，sha256 前 12 位：a45b81e4d5aa
"""笔记本 09 练习的参考答案。请先自己做每道练习，卡住时再打开本文件。

在笔记本所在的文件夹里用 `%run solutions/09_dp_vs_ddp_performance.py` 运行它：每个检查都会说“正确”。
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

# 1. 每次 all-reduce 时各个 rank 互相等待：整个作业按最慢的 rank 的节奏前进，
#    用去掉预热后的步时中位数来衡量。每个 rank 都贡献自己的批量。
slowest = max(statistics.median(times[WARMUP_STEPS:]) for times in EXAMPLE_STEP_TIMES.values())
my_samples_per_second = len(EXAMPLE_STEP_TIMES) * PER_RANK_BATCH / slowest
print(check_samples_per_second(my_samples_per_second))

# 2. 读时钟之前先等 GPU 算完（synchronize，或 torch.utils.benchmark），并且先预热的那两段代码。
my_letters = {"C", "D"}
print(check_correct_snippets(my_letters))


# 3. torch.utils.benchmark 的中位数和四分位距，就是保留下来的时间的闭区间（inclusive）四分位数。
def summarize(times: list[float], warmup: int) -> tuple[float, float]:
    q1, median, q3 = statistics.quantiles(times[warmup:], n=4, method="inclusive")
    return median, q3 - q1


print(check_median_and_iqr(summarize))
