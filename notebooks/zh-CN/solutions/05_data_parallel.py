# 译自 notebooks/solutions/05_data_parallel.py，sha256 前 12 位：4096a8b95af0
"""笔记本 05 练习的参考答案。请先自己做每道练习，卡住时再打开本文件。

在笔记本所在的文件夹里用 `%run solutions/05_data_parallel.py` 运行它：每个检查都会说“正确”。
"""

from torch import nn

from course_utils.exercises.data_parallel import check_batch_dim, check_idle_batches, check_replica_sizes
from course_utils.parallel import replica_sizes, simulated_data_parallel

# 1. torch.chunk 给每份 ceil(10 / 4) = 3 行，余下的归最后一份：3 + 3 + 3 + 1。
my_sizes = [3, 3, 3, 1]
print(check_replica_sizes(my_sizes, batch_size=10, num_devices=4))

# 2. 批量被切成不足 8 份时，就有 GPU 闲着。
idle_batches = {batch for batch in range(1, 33) if len(replica_sizes(batch, 8)) < 8}
print(check_idle_batches(idle_batches))

# 3. 批量是 (time, batch, features) 的第 1 维：在这一维上切分，每个副本拿到完整的序列。
input_size = 5
gru = nn.GRU(input_size=input_size, hidden_size=3)
wrapped_gru = simulated_data_parallel(gru, 3, dim=1)
print(check_batch_dim(wrapped_gru))
