# 译自 notebooks/solutions/10_beyond_ddp.py，sha256 前 12 位：6f73bb55501f
"""笔记本 10 练习的参考答案。请先自己做每道练习，卡住时再打开本文件。

在笔记本所在的文件夹里用 `%run solutions/10_beyond_ddp.py` 运行它：每个检查都会说“正确”。
"""

from torch import nn
from torch.distributed.tensor import Shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

from course_utils.exercises.beyond_ddp import (
    check_embedding_placements,
    check_local_shape,
    check_rank_bytes,
    check_tensor_parallel,
    exercise_model,
)

# 1. 参数、梯度、exp_avg 和 exp_avg_sq：模型的四份 float32 副本。DDP 在每个 rank 上都存四份全量；
#    FSDP 在 4 个 rank 上各存每份的四分之一。
parameter_bytes = sum(p.numel() * p.element_size() for p in exercise_model().parameters())
ddp_bytes = 4 * parameter_bytes
fsdp_bytes = ddp_bytes // 4
print(check_rank_bytes(ddp_bytes, fsdp_bytes))

# 2. 嵌入层的权重是 (vocab_size, dim)，Linear 的权重是 (out, in)。Colwise 切分输出，
#    对嵌入层来说就是 dim 的各列：Shard(1)。Rowwise 切分输入，也就是词表的各行：Shard(0)。
colwise_weight = Shard(1)
rowwise_weight = Shard(0)
print(check_embedding_placements(colwise_weight, rowwise_weight))

# 3. 10 行分给 4 个 rank：每份 ceil(10 / 4) = 3 行，rank 0-2 拿走 9 行，rank 3 只剩最后一行。
local_shape = (1, 6)
print(check_local_shape(local_shape))


# 4. 第一个 Linear 用 Colwise，第二个用 Rowwise：两者之间的隐藏激活值保持切分，
#    最后一次 all-reduce 让每个 rank 上的输出都是完整的。
def shard_mlp(model: nn.Sequential, mesh) -> None:
    parallelize_module(model, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})


print(check_tensor_parallel(shard_mlp))
