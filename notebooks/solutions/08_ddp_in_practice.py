"""Solutions to the exercises of notebook 08. Try each exercise first; open this file when stuck.

Run it in the notebook's folder with `%run solutions/08_ddp_in_practice.py`: every check says "Correct".
"""

import torch
import torch.nn.functional as F

from course_utils.exercises.ddp_in_practice import (
    check_accumulation_step,
    check_effective_batch,
    check_resume,
    check_scaled_lr,
)

# 1. Every GPU of every machine, each micro-batch of each accumulated step.
machines, gpus_per_machine, per_gpu_batch, micro_batches = 3, 8, 16, 4
my_effective_batch = machines * gpus_per_machine * per_gpu_batch * micro_batches
print(check_effective_batch(my_effective_batch))

# 2. The linear scaling rule: the learning rate grows with the batch.
my_lr = 0.1 * my_effective_batch / 256
print(check_scaled_lr(my_lr))


# 3. no_sync() on every micro-batch but the last: DDP all-reduces once, on the last backward.
#    Each loss is divided by the number of micro-batches, so the sum of gradients is their mean.
def accumulation_step(ddp, micro_batches):
    k = len(micro_batches)
    for i, (x, y) in enumerate(micro_batches):
        if i < k - 1:
            with ddp.no_sync():
                (F.mse_loss(ddp(x), y) / k).backward()
        else:
            (F.mse_loss(ddp(x), y) / k).backward()


print(check_accumulation_step(accumulation_step))


# 4. map_location brings GPU 0's storages to this rank's device; the model is restored into
#    ddp.module (the snapshot's keys have no `module.` prefix), the optimizer and the sampler too.
def resume(ddp, optimizer, sampler, path):
    snapshot = torch.load(path, map_location="cpu", weights_only=True)
    ddp.module.load_state_dict(snapshot["model"])
    optimizer.load_state_dict(snapshot["optimizer"])
    sampler.seed = snapshot["sampler"]["seed"]
    sampler.set_epoch(snapshot["sampler"]["epoch"])
    return snapshot["epoch"]


print(check_resume(resume))
