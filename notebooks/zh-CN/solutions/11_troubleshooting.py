# 译自 notebooks/solutions/11_troubleshooting.py，sha256 前 12 位：2f172f297fdd
"""笔记本 11 练习的参考答案。请先自己做每道练习，卡住时再打开本文件。

在笔记本所在的文件夹里用 `%run solutions/11_troubleshooting.py` 运行它：每个检查都会说“正确”。
"""

from course_utils.exercises.troubleshooting import check_error_fix, check_select_gpus

# 1. 每个错误的修法，与笔记本里错误目录给出的一致。
answers = {1: "C", 2: "D", 3: "A", 4: "B"}
for number, letter in answers.items():
    print(check_error_fix(number, letter))


# 2. 直接赋值：原文代码用的 setdefault 会保留事先已经设好的值。
def select_gpus(environ: dict, value: str) -> None:
    environ["CUDA_VISIBLE_DEVICES"] = value


print(check_select_gpus(select_gpus))
