# 译自 notebooks/solutions/01_device_queries.py，sha256 前 12 位：bd320eafcc88
"""笔记本 01 练习的参考答案。请先自己做每道练习，卡住时再打开本文件。

在笔记本所在的文件夹里用 `%run solutions/01_device_queries.py` 运行它：每个检查都会说“正确”。
"""

import torch

from course_utils.exercises.device_queries import check_device_choice, check_hidden_gpu_count


# 1. torch.accelerator 同样覆盖 CUDA、MPS 和 XPU；找不到加速器时，`or` 退回到 CPU。
def pick_device() -> torch.device:
    return torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")


print(check_device_choice(pick_device))

# 2. 空的 CUDA_VISIBLE_DEVICES 隐藏所有 GPU：CUDA 一块也不编号。
my_count = 0
print(check_hidden_gpu_count(my_count))
