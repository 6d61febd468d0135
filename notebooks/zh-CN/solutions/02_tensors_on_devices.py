# 译自 notebooks/solutions/02_tensors_on_devices.py，sha256 前 12 位：1580bdf4bd26
"""笔记本 02 练习的参考答案。请先自己做每道练习，卡住时再打开本文件。

在笔记本所在的文件夹里用 `%run solutions/02_tensors_on_devices.py` 运行它：每个检查都会说“正确”。
"""

import numpy as np
import torch

from course_utils.exercises.tensors_on_devices import check_add_on_device_of, check_to_numpy


# 1. detach() 脱离自动求导，cpu() 离开设备（在 CPU 上什么也不做），numpy() 与张量共享内存。
def to_numpy(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


print(check_to_numpy(to_numpy))


# 2. 先把 b 移到 a 所在的设备：同一个运算的操作数必须在同一设备上。
def add_on_device_of(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a + b.to(a.device)


print(check_add_on_device_of(add_on_device_of))
