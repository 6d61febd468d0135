# 译自 notebooks/solutions/07_launching_and_multi_node.py，sha256 前 12 位：5ef51d542b62
"""笔记本 07 练习的参考答案。请先自己做每道练习，卡住时再打开本文件。

在笔记本所在的文件夹里用 `%run solutions/07_launching_and_multi_node.py` 运行它：每个检查都会说“正确”。
"""

from course_utils.exercises.launching_and_multi_node import check_node1_command, check_rank_and_world_size

# 1. rank 按节点依次编号：RANK = node_rank * nproc_per_node + LOCAL_RANK；所有进程都算在 WORLD_SIZE 里。
nnodes, nproc_per_node, node_rank, local_rank = 3, 4, 2, 1
my_rank, my_world_size = node_rank * nproc_per_node + local_rank, nnodes * nproc_per_node
print(check_rank_and_world_size(my_rank, my_world_size))

# 2. 两台机器上的命令只有 --node-rank 不同；两边都写 0 号节点的地址和端口。
my_command = (
    "torchrun --nnodes=2 --node-rank=1 --nproc-per-node=4 --master-addr=10.0.0.1 --master-port=29500 train.py"
)
print(check_node1_command(my_command))
