"""Solutions to the exercises of notebook 02. Try each exercise first; open this file when stuck.

Run it in the notebook's folder with `%run solutions/02_tensors_on_devices.py`: every check says "Correct".
"""

import numpy as np
import torch

from course_utils.exercises.tensors_on_devices import check_add_on_device_of, check_to_numpy


# 1. detach() leaves autograd, cpu() leaves the device (a no-op on the CPU), numpy() shares the memory.
def to_numpy(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


print(check_to_numpy(to_numpy))


# 2. Move b to a's device first: operands of one operation must be on one device.
def add_on_device_of(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a + b.to(a.device)


print(check_add_on_device_of(add_on_device_of))
