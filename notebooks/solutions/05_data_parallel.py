"""Solutions to the exercises of notebook 05. Try each exercise first; open this file when stuck.

Run it in the notebook's folder with `%run solutions/05_data_parallel.py`: every check says "Correct".
"""

from torch import nn

from course_utils.exercises.data_parallel import check_batch_dim, check_idle_batches, check_replica_sizes
from course_utils.parallel import replica_sizes, simulated_data_parallel

# 1. torch.chunk gives ceil(10 / 4) = 3 rows to each piece, the rest to the last: 3 + 3 + 3 + 1.
my_sizes = [3, 3, 3, 1]
print(check_replica_sizes(my_sizes, batch_size=10, num_devices=4))

# 2. A GPU idles when the batch is cut into fewer than 8 pieces.
idle_batches = {batch for batch in range(1, 33) if len(replica_sizes(batch, 8)) < 8}
print(check_idle_batches(idle_batches))

# 3. The batch is dimension 1 of (time, batch, features): split there, whole sequences per replica.
input_size = 5
gru = nn.GRU(input_size=input_size, hidden_size=3)
wrapped_gru = simulated_data_parallel(gru, 3, dim=1)
print(check_batch_dim(wrapped_gru))
