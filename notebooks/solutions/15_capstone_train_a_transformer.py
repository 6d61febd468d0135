"""Solutions to the exercises of notebook 15. Try each exercise first; open this file when stuck.

Run it in the notebook's folder with `%run solutions/15_capstone_train_a_transformer.py`: every
check says "Correct".
"""

from course_utils.exercises.capstone_train_a_transformer import (
    check_flops_per_token,
    check_heads_per_rank,
    check_mfu,
)

# 1. 6 FLOPs per weight of a matrix (2 forward, 4 backward), plus attention's two products
#    (scores and weighted values: 2 x 2 x d x T forward, times 3 with the backward) in every layer.
vocab, d, hidden, layers, heads, kv_heads, seq = 512, 128, 352, 4, 8, 4, 256
kv_width = d // heads * kv_heads
block = 2 * d * d + 2 * d * kv_width + 3 * d * hidden  # q and o; k and v; gate, up and down
n = layers * block + d * vocab  # the blocks' matrices and the output head (the embedding is a lookup)
flops = 6 * n + 12 * layers * d * seq
print(check_flops_per_token(flops))

# 2. The FLOPs the model did per second on one rank, over what that rank can do at its peak.
utilisation = 1500 * flops / 20e9
print(check_mfu(utilisation))


# 3. Every rank computes the same number of query heads and of key/value heads: both must divide.
def heads_per_rank(num_heads: int, num_kv_heads: int, tp: int) -> tuple[int, int]:
    if num_heads % tp or num_kv_heads % tp:
        raise ValueError(f"{num_heads} query and {num_kv_heads} key/value heads do not split over {tp} ranks")
    return num_heads // tp, num_kv_heads // tp


print(check_heads_per_rank(heads_per_rank))
