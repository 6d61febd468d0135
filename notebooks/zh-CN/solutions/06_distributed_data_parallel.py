# 译自 notebooks/solutions/06_distributed_data_parallel.py，sha256 前 12 位：66853f45cadf
"""笔记本 06 练习的参考答案。请先自己做每道练习，卡住时再打开本文件。

在笔记本所在的文件夹里用 `%run solutions/06_distributed_data_parallel.py` 运行它：每个检查都会说“正确”。
"""

import torch.distributed as dist
from torch import nn
from torch.nn.modules.utils import consume_prefix_in_state_dict_if_present

from course_utils.exercises.distributed_data_parallel import (
    check_average_gradients,
    check_sampler_indices,
    check_unprefixed_state_dict,
)


# 1. 把每个梯度在各个进程间求和，再除以进程数：得到平均值，和 DDP 算的一样。
def average_gradients(model: nn.Module) -> None:
    for p in model.parameters():
        dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
        p.grad /= dist.get_world_size()


print(check_average_gradients(average_gradients))

# 2. 10 个索引分给 4 个副本：每个分到 ceil(10 / 4) = 3 个，所以列表用它的开头（0、1）补齐到 12 个，
#    rank 2 从下标 2 起每隔 4 个取一个：2、6、10，补齐后的第 10 个就是索引 0。
padded = list(range(10)) + list(range(2))
my_indices = padded[2::4]
print(check_sampler_indices(my_indices))
#    drop_last=True 时改为丢掉末尾：共 8 个索引，每个 rank 2 个。
print(check_sampler_indices(list(range(8))[2::4], drop_last=True))

# 3. 去掉 DDP 给每个键加上的 `module.` 前缀。
wrapped_state = {f"module.{name}": value for name, value in nn.Linear(4, 2).state_dict().items()}
my_state = dict(wrapped_state)
consume_prefix_in_state_dict_if_present(my_state, "module.")
print(check_unprefixed_state_dict(my_state, nn.Linear(4, 2), wrapped_state))
