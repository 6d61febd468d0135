"""Solutions to the exercises of notebook 16. Try each exercise first; open this file when stuck.

Run it in the notebook's folder with `%run solutions/16_plan_a_real_run.py`: every check says
"Correct".
"""

from course_utils import planner
from course_utils.exercises.plan_a_real_run import check_mesh_fits, check_state_bytes

# 1. The state of 70B is 16 bytes x 70.6 billion parameters, 1,129 GB: divided by 16 GPUs it is
#    still 71 GB, no room left for the rest. TP over the 8 GPUs of a node divides it and the
#    activations over NVLink, FSDP over the 4 nodes divides it again: 40 GB per GPU before the
#    reserve (exercise_plan(mesh).peak_memory).
mesh = planner.Mesh(dp_shard=4, tp=8)
print(check_mesh_fits(mesh))

# 2. HSDP shards over dp_shard's 8 GPUs only; the 4 replicas each hold a copy. Under the bf16 policy
#    each parameter keeps 16 bytes: fp32 parameter, fp32 gradient, AdamW's two fp32 moments.
n = planner.LLAMA_3_1_70B.parameter_count()
state_bytes = 16 * n // 8
print(check_state_bytes(state_bytes))
