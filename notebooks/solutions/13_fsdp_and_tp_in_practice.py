"""Solutions to the exercises of notebook 13. Try each exercise first; open this file when stuck.

Run it in the notebook's folder with `%run solutions/13_fsdp_and_tp_in_practice.py`: every check
says "Correct".
"""

from course_utils.exercises.fsdp_and_tp_in_practice import check_accumulation_collectives, check_two_d_bytes

# 1. Each of the 2 Linear layers is gathered in every forward and, resharded after it, again in
#    every backward: 2 x 2 all-gathers per micro-batch. Only the last micro-batch syncs gradients:
#    one reduce-scatter per layer.
layers, micro_batches = 2, 4
all_gathers = 2 * layers * micro_batches
reduce_scatters = layers
print(check_accumulation_collectives(all_gathers, reduce_scatters))

# 2. Linear(64, 256) -> Linear(256, 64): TP splits both weights and the first bias 4 ways
#    (RowwiseParallel replicates the second bias), then FSDP splits everything 2 ways over dp.
dp, tp = 2, 4
split_by_tp_and_dp = 256 * 64 + 256 + 64 * 256
split_by_dp_only = 64
rank_bytes = 4 * (split_by_tp_and_dp // (tp * dp) + split_by_dp_only // dp)
print(check_two_d_bytes(rank_bytes))
