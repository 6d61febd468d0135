# 译自 notebooks/solutions/04_choosing_gpus.py，sha256 前 12 位：b00cf04041a1
"""笔记本 04 练习的参考答案。请先自己做每道练习，卡住时再打开本文件。

在笔记本所在的文件夹里用 `%run solutions/04_choosing_gpus.py` 运行它：每个检查都会说“正确”。
"""

from course_utils.exercises.choosing_gpus import check_cuda_reading, check_freest_value, check_physical_gpu
from course_utils.gpus import demo_inventory

# 1. 逻辑编号按列表的条目计数：cuda:0 是 5 号 GPU，cuda:1 是 2 号。
answer_1 = [5, 2, 7][1]
print(check_physical_gpu(answer_1))

# 2. 把演示机群按空闲显存从多到少排序（相同时编号小的在前），取前三块。
fleet = demo_inventory()
freest = sorted(fleet.gpus, key=lambda gpu: (-(gpu.memory_total - gpu.memory_used), gpu.index))[:3]
answer_2 = ",".join(str(gpu.index) for gpu in freest)
print(check_freest_value(answer_2))

# 3. CUDA 读列表读到第一个无效条目为止：-1 结束了列表，所以 0 根本没被读到。
answer_3 = [1, 3]
print(check_cuda_reading(answer_3))
