"""One FSDP2 training step of notebook 10's MLP, on every GPU (nccl) or on the CPU (gloo).

Notebook 10 runs `fsdp_step` with the course launcher on a machine with two or more GPUs. It
lives in a .py file, not in the notebook, so that the launcher can start it in fresh
interpreters (spawn) when CUDA is already initialised in the kernel, where forking is not
possible; where CUDA was never started, the launcher forks it as usual. Without CUDA the same
function runs on the CPU over gloo, which is how the unit tests run it. Called without the
launcher's variables it says so in one line; a rank waits for the others at most
COURSE_GROUP_TIMEOUT_S seconds (120 by default): course_utils.worker_env.
"""

from __future__ import annotations

import math
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

from course_utils.worker_env import check_torchrun_env, joining


def make_mlp() -> nn.Sequential:
    """Notebook 10's model: the same seeded weights in every process that builds it."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64))


def fsdp_step(x: torch.Tensor, y: torch.Tensor, lr: float = 0.01) -> dict:
    """Shard the MLP with `fully_shard`, train one Adam step on this rank's part of (x, y).

    Returns where rank's shard of the first weight lives, its local and global shapes, and the
    updated full weights (gathered on every rank). The batch must split evenly over the ranks.
    """
    if not isinstance(lr, int | float) or not 0 < lr < math.inf:
        raise ValueError(f"lr must be a positive learning rate, not {lr!r}")
    check_torchrun_env(launch="launch(fsdp_step, 2, args=(x, y))")  # or one clear line
    world = int(os.environ["WORLD_SIZE"])
    if len(x) % world:
        raise ValueError(f"a batch of {len(x)} does not split evenly over {world} ranks")
    with joining() as timeout:  # a rank that never comes: an error after `timeout`, not a hang
        if torch.cuda.is_available():
            local_rank = int(os.environ["LOCAL_RANK"])
            if local_rank >= torch.cuda.device_count():
                gpus = torch.cuda.device_count()
                raise RuntimeError(f"LOCAL_RANK {local_rank}, but this machine has {gpus} GPU(s)")
            torch.cuda.set_device(local_rank)
            device = torch.device("cuda", local_rank)
            dist.init_process_group("nccl", device_id=device, timeout=timeout)
        else:
            device = torch.device("cpu")
            dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    mesh = init_device_mesh(device.type, (world,))
    model = make_mlp().to(device)
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    n = len(x) // world
    mine = x[rank * n : (rank + 1) * n].to(device), y[rank * n : (rank + 1) * n].to(device)
    F.mse_loss(model(mine[0]), mine[1]).backward()
    optimizer.step()
    weight = model[0].weight
    result = {
        "device": str(weight.to_local().device),
        "backend": dist.get_backend(),
        "local": tuple(weight.to_local().shape),
        "global": tuple(weight.shape),
        "weights": {name: p.full_tensor().cpu() for name, p in model.named_parameters()},
    }
    dist.barrier()
    del model, optimizer  # the sharded model goes before the group
    dist.destroy_process_group()
    return result
