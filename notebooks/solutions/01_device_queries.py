"""Solutions to the exercises of notebook 01. Try each exercise first; open this file when stuck.

Run it in the notebook's folder with `%run solutions/01_device_queries.py`: every check says "Correct".
"""

import torch

from course_utils.exercises.device_queries import check_device_choice, check_hidden_gpu_count


# 1. torch.accelerator covers CUDA, MPS and XPU alike; `or` falls back to the CPU when it finds none.
def pick_device() -> torch.device:
    return torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")


print(check_device_choice(pick_device))

# 2. An empty CUDA_VISIBLE_DEVICES hides every GPU: CUDA numbers none of them.
my_count = 0
print(check_hidden_gpu_count(my_count))
