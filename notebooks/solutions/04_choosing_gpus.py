"""Solutions to the exercises of notebook 04. Try each exercise first; open this file when stuck.

Run it in the notebook's folder with `%run solutions/04_choosing_gpus.py`: every check says "Correct".
"""

from course_utils.exercises.choosing_gpus import check_cuda_reading, check_freest_value, check_physical_gpu
from course_utils.gpus import demo_inventory

# 1. Logical ids count the list's entries: cuda:0 is GPU 5, cuda:1 is GPU 2.
answer_1 = [5, 2, 7][1]
print(check_physical_gpu(answer_1))

# 2. Sort the demo fleet by free memory, most first (ties: lower index), and keep three.
fleet = demo_inventory()
freest = sorted(fleet.gpus, key=lambda gpu: (-(gpu.memory_total - gpu.memory_used), gpu.index))[:3]
answer_2 = ",".join(str(gpu.index) for gpu in freest)
print(check_freest_value(answer_2))

# 3. CUDA reads the list up to the first invalid entry: -1 ends it, so 0 is never read.
answer_3 = [1, 3]
print(check_cuda_reading(answer_3))
