# 译自 notebooks/solutions/03_models_on_devices.py，sha256 前 12 位：ee78432a4078
"""笔记本 03 练习的参考答案。请先自己做每道练习，卡住时再打开本文件。

在笔记本所在的文件夹里用 `%run solutions/03_models_on_devices.py` 运行它：每个检查都会说“正确”。
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


# 1. 一次 .to() 同时设定设备和 dtype；view(-1) 取代旧代码里的 `label.resize_(N)`。
def prepare_batch(images: torch.Tensor, labels: torch.Tensor, device: torch.device):
    return images.to(device, torch.float32), labels.to(device, torch.long).view(-1)


print(check_prepare_batch(prepare_batch))


# 2. 先移动模型，再用它的参数创建优化器。
def make_model_and_optimizer(device: torch.device):
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    return model, optimizer


print(check_model_and_optimizer(make_model_and_optimizer))


# 3. map_location 把标记为 GPU 的存储放到本机的设备上；在 load_state_dict 之前，
#    去掉 DataParallel 的 state_dict 带来的 `module.` 前缀。
def load_weights(model: nn.Module, path: Path) -> None:
    device = next(model.parameters()).device
    state = torch.load(path, map_location=device, weights_only=True)
    consume_prefix_in_state_dict_if_present(state, "module.")
    model.load_state_dict(state)


print(check_load_gpu_checkpoint(load_weights))
