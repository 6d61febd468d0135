"""Solutions to the exercises of notebook 06. Try each exercise first; open this file when stuck.

Run it in the notebook's folder with `%run solutions/06_distributed_data_parallel.py`: every check
says "Correct".
"""

import torch.distributed as dist
from torch import nn
from torch.nn.modules.utils import consume_prefix_in_state_dict_if_present

from course_utils.exercises.distributed_data_parallel import (
    check_average_gradients,
    check_sampler_indices,
    check_unprefixed_state_dict,
)


# 1. Sum every gradient over the ranks, then divide by their number: the mean, as DDP computes it.
def average_gradients(model: nn.Module) -> None:
    for p in model.parameters():
        dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
        p.grad /= dist.get_world_size()


print(check_average_gradients(average_gradients))

# 2. 10 indices on 4 replicas: each gets ceil(10 / 4) = 3, so the list is padded to 12 with its start
#    (0, 1), and rank 2 takes every 4th from index 2: 2, 6, 10 -> the padded 10th is index 0.
padded = list(range(10)) + list(range(2))
my_indices = padded[2::4]
print(check_sampler_indices(my_indices))
#    With drop_last=True the tail is dropped instead: 8 indices, 2 per rank.
print(check_sampler_indices(list(range(8))[2::4], drop_last=True))

# 3. Strip the `module.` prefix that DDP added to every key.
wrapped_state = {f"module.{name}": value for name, value in nn.Linear(4, 2).state_dict().items()}
my_state = dict(wrapped_state)
consume_prefix_in_state_dict_if_present(my_state, "module.")
print(check_unprefixed_state_dict(my_state, nn.Linear(4, 2), wrapped_state))
