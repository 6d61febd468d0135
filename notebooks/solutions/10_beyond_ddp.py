"""Solutions to the exercises of notebook 10. Try each exercise first; open this file when stuck.

Run it in the notebook's folder with `%run solutions/10_beyond_ddp.py`: every check says "Correct".
"""

from torch import nn
from torch.distributed.tensor import Shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

from course_utils.exercises.beyond_ddp import (
    check_embedding_placements,
    check_local_shape,
    check_rank_bytes,
    check_tensor_parallel,
    exercise_model,
)

# 1. Parameters, gradients, exp_avg and exp_avg_sq: four float32 copies of the model. DDP keeps all
#    four on every rank; FSDP keeps a quarter of each on each of 4 ranks.
parameter_bytes = sum(p.numel() * p.element_size() for p in exercise_model().parameters())
ddp_bytes = 4 * parameter_bytes
fsdp_bytes = ddp_bytes // 4
print(check_rank_bytes(ddp_bytes, fsdp_bytes))

# 2. An embedding's weight is (vocab_size, dim), a Linear's is (out, in). Colwise splits the outputs,
#    which for an embedding are the columns of dim: Shard(1). Rowwise splits the inputs, the rows
#    of the vocabulary: Shard(0).
colwise_weight = Shard(1)
rowwise_weight = Shard(0)
print(check_embedding_placements(colwise_weight, rowwise_weight))

# 3. 10 rows on 4 ranks: ceil(10 / 4) = 3 rows each, ranks 0-2 take 9, rank 3 keeps the last one.
local_shape = (1, 6)
print(check_local_shape(local_shape))


# 4. Colwise on the first Linear, Rowwise on the second: the hidden activations stay sharded
#    between them and one all-reduce at the end makes the output whole on every rank.
def shard_mlp(model: nn.Sequential, mesh) -> None:
    parallelize_module(model, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})


print(check_tensor_parallel(shard_mlp))
