# 译自 notebooks/solutions/00_start_here.py，sha256 前 12 位：0451e8595413
"""笔记本 00 练习的参考答案。请先自己做每道练习，卡住时再打开本文件。

在笔记本所在的文件夹里用 `%run solutions/00_start_here.py` 运行它：每个检查都会说“正确”。
"""

import torch

from course_utils.exercises.start_here import check_accelerator, check_cpu_threads

# 1. PyTorch 会报出它找到的加速器类型；一个都没有时答案是 None。
found = torch.accelerator.current_accelerator(check_available=True)
my_accelerator = found.type if found is not None else None
print(check_accelerator(my_accelerator))

# 2. PyTorch 的算子内线程数：一个运算就用这么多线程。
my_threads = torch.get_num_threads()
print(check_cpu_threads(my_threads))
