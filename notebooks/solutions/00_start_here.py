"""Solutions to the exercises of notebook 00. Try each exercise first; open this file when stuck.

Run it in the notebook's folder with `%run solutions/00_start_here.py`: every check says "Correct".
"""

import torch

from course_utils.exercises.start_here import check_accelerator, check_cpu_threads

# 1. PyTorch names the accelerator it finds; with none it answers None.
found = torch.accelerator.current_accelerator(check_available=True)
my_accelerator = found.type if found is not None else None
print(check_accelerator(my_accelerator))

# 2. PyTorch's intra-op thread count: one operation uses this many threads.
my_threads = torch.get_num_threads()
print(check_cpu_threads(my_threads))
