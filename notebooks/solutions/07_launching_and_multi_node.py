"""Solutions to the exercises of notebook 07. Try each exercise first; open this file when stuck.

Run it in the notebook's folder with `%run solutions/07_launching_and_multi_node.py`: every check
says "Correct".
"""

from course_utils.exercises.launching_and_multi_node import check_node1_command, check_rank_and_world_size

# 1. Ranks count node by node: RANK = node_rank * nproc_per_node + LOCAL_RANK; every process counts.
nnodes, nproc_per_node, node_rank, local_rank = 3, 4, 2, 1
my_rank, my_world_size = node_rank * nproc_per_node + local_rank, nnodes * nproc_per_node
print(check_rank_and_world_size(my_rank, my_world_size))

# 2. The same command on both machines except --node-rank; both name node 0's address and port.
my_command = (
    "torchrun --nnodes=2 --node-rank=1 --nproc-per-node=4 --master-addr=10.0.0.1 --master-port=29500 train.py"
)
print(check_node1_command(my_command))
