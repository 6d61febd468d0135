# 译自 notebooks/solutions/15_capstone_train_a_transformer.py，sha256 前 12 位：fc2eaf21dd88
"""笔记本 15 练习的参考答案。请先自己做每道练习，卡住时再打开本文件。

在笔记本所在的文件夹里用 `%run solutions/15_capstone_train_a_transformer.py` 运行它：
每个检查都会说“正确”。
"""

from course_utils.exercises.capstone_train_a_transformer import (
    check_flops_per_token,
    check_heads_per_rank,
    check_mfu,
)

# 1. 矩阵里的每个权重 6 次浮点运算（前向 2 次，反向 4 次），再加上每一层注意力的两次乘积
#    （打分和加权求值：前向 2 x 2 x d x T，连同反向共 3 倍）。
vocab, d, hidden, layers, heads, kv_heads, seq = 512, 128, 352, 4, 8, 4, 256
kv_width = d // heads * kv_heads
block = 2 * d * d + 2 * d * kv_width + 3 * d * hidden  # q 和 o；k 和 v；gate、up 和 down
n = layers * block + d * vocab  # 各块的矩阵和输出头（嵌入层只是查表）
flops = 6 * n + 12 * layers * d * seq
print(check_flops_per_token(flops))

# 2. 一个 rank 上模型每秒完成的浮点运算次数，除以这个 rank 的峰值算力。
utilisation = 1500 * flops / 20e9
print(check_mfu(utilisation))


# 3. 每个 rank 算同样多的查询头和同样多的键/值头：两者都必须能整除。
def heads_per_rank(num_heads: int, num_kv_heads: int, tp: int) -> tuple[int, int]:
    if num_heads % tp or num_kv_heads % tp:
        raise ValueError(f"{num_heads} 个查询头和 {num_kv_heads} 个键/值头无法平均分给 {tp} 个 rank")
    return num_heads // tp, num_kv_heads // tp


print(check_heads_per_rank(heads_per_rank))
