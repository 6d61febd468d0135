# 译自 notebooks/solutions/16_plan_a_real_run.py，sha256 前 12 位：7710602a98b9
"""笔记本 16 练习的参考答案。请先自己做每道练习，卡住时再打开本文件。

在笔记本所在的文件夹里用 `%run solutions/16_plan_a_real_run.py` 运行它：
每个检查都会说“正确”。
"""

from course_utils import planner
from course_utils.exercises.plan_a_real_run import check_mesh_fits, check_state_bytes

# 1. 70B 的训练状态是 16 字节 x 706 亿个参数，共 1,129 GB：分到 16 个 GPU 上，每个仍有
#    71 GB，其余各项没有空间了。在节点的 8 个 GPU 内做 TP，既分摊状态，也让激活值的通信走
#    NVLink；再跨 4 个节点做 FSDP，状态再分摊一次：预留之前每个 GPU 40 GB
#    （exercise_plan(mesh).peak_memory）。
mesh = planner.Mesh(dp_shard=4, tp=8)
print(check_mesh_fits(mesh))

# 2. HSDP 只在 dp_shard 的 8 个 GPU 上分片；4 个副本各持一份。在 bf16 策略下，每个参数占
#    16 字节：fp32 参数、fp32 梯度、AdamW 的两个 fp32 矩。
n = planner.LLAMA_3_1_70B.parameter_count()
state_bytes = 16 * n // 8
print(check_state_bytes(state_bytes))
