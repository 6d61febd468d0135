# 译自 notebooks/solutions/13_fsdp_and_tp_in_practice.py，sha256 前 12 位：3b1ba10d9312
"""笔记本 13 练习的参考答案。请先自己做每道练习，卡住时再打开本文件。

在笔记本所在的文件夹里用 `%run solutions/13_fsdp_and_tp_in_practice.py` 运行它：每个检查都会说“正确”。
"""

from course_utils.exercises.fsdp_and_tp_in_practice import check_accumulation_collectives, check_two_d_bytes

# 1. 2 个 Linear 层在每次前向时各聚集一次，前向后重新切分，所以每次反向时还要再聚集一次：
#    每个微批次 2 x 2 次 all-gather。只有最后一个微批次同步梯度：每层一次 reduce-scatter。
layers, micro_batches = 2, 4
all_gathers = 2 * layers * micro_batches
reduce_scatters = layers
print(check_accumulation_collectives(all_gathers, reduce_scatters))

# 2. Linear(64, 256) -> Linear(256, 64)：TP 把两个权重和第一个偏置切成 4 份
#    （RowwiseParallel 复制第二个偏置），然后 FSDP 沿 dp 再把所有参数切成 2 份。
dp, tp = 2, 4
split_by_tp_and_dp = 256 * 64 + 256 + 64 * 256
split_by_dp_only = 64
rank_bytes = 4 * (split_by_tp_and_dp // (tp * dp) + split_by_dp_only // dp)
print(check_two_d_bytes(rank_bytes))
