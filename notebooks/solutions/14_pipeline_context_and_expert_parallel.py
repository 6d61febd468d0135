"""Solutions to the exercises of notebook 14. Try each exercise first; open this file when stuck.

Run it in the notebook's folder with `%run solutions/14_pipeline_context_and_expert_parallel.py`:
every check says "Correct".
"""

import torch

from course_utils.exercises.pipeline_context_and_expert_parallel import (
    check_bubble,
    check_online_softmax,
    check_split_sizes,
)


# 1. Each stage idles for stages - 1 slots of the stages + micro_batches - 1 slots of a schedule.
def bubble(stages, micro_batches):
    return (stages - 1) / (micro_batches + stages - 1)


print(check_bubble(bubble))


# 2. A new maximum rescales what was summed so far by exp(old max - new max); the new block's
#    weights are taken against the new maximum, so no exponential overflows.
def update(running_max, running_sum, out, scores, values):
    new_max = torch.maximum(running_max, scores.amax(dim=-1))
    correction = torch.exp(running_max - new_max)
    weights = torch.exp(scores - new_max.unsqueeze(-1))
    return (
        new_max,
        running_sum * correction + weights.sum(dim=-1),
        out * correction.unsqueeze(-1) + weights @ values,
    )


print(check_online_softmax(update))


# 3. Expert e lives on rank e // experts_per_rank; count the tokens per rank, zeros included.
def split_sizes(expert, experts_per_rank, world):
    return torch.bincount(expert // experts_per_rank, minlength=world).tolist()


print(check_split_sizes(split_sizes))
