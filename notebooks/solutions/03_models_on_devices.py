"""Solutions to the exercises of notebook 03. Try each exercise first; open this file when stuck.

Run it in the notebook's folder with `%run solutions/03_models_on_devices.py`: every check says "Correct".
"""

from pathlib import Path

import torch
from torch import nn
from torch.nn.modules.utils import consume_prefix_in_state_dict_if_present

from course_utils.exercises.models_on_devices import (
    check_load_gpu_checkpoint,
    check_model_and_optimizer,
    check_prepare_batch,
)


# 1. One .to() sets device and dtype; view(-1) replaces the old `label.resize_(N)`.
def prepare_batch(images: torch.Tensor, labels: torch.Tensor, device: torch.device):
    return images.to(device, torch.float32), labels.to(device, torch.long).view(-1)


print(check_prepare_batch(prepare_batch))


# 2. Move the model first, then build the optimizer from its parameters.
def make_model_and_optimizer(device: torch.device):
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    return model, optimizer


print(check_model_and_optimizer(make_model_and_optimizer))


# 3. map_location puts the GPU-tagged storages on this machine's device; the `module.` prefix of
#    DataParallel's state_dict goes before load_state_dict.
def load_weights(model: nn.Module, path: Path) -> None:
    device = next(model.parameters()).device
    state = torch.load(path, map_location=device, weights_only=True)
    consume_prefix_in_state_dict_if_present(state, "module.")
    model.load_state_dict(state)


print(check_load_gpu_checkpoint(load_weights))
