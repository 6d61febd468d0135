"""Exercise 4 of notebook 10: the tensor-parallel check runs the reader's function in real ranks.

Right answers in several spellings pass; wrong ones that print plausible results (plain DDP,
one layer sharded, FSDP's gathered weights, gathered activations, a DTensor output) get a hint.
"""

from __future__ import annotations

from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from torch.nn.parallel import DistributedDataParallel as DDP

from course_utils.exercises.beyond_ddp import check_tensor_parallel


def plan(model, mesh):
    parallelize_module(model, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})


def layer_by_layer(model, mesh):
    parallelize_module(model[0], mesh, ColwiseParallel(output_layouts=Shard(-1)))
    return parallelize_module(model[2], mesh, RowwiseParallel(input_layouts=Shard(1)))  # returns a Linear


def negative_dims(model, mesh):
    styles = {"0": ColwiseParallel(output_layouts=Shard(-1)), "2": RowwiseParallel(input_layouts=Shard(-1))}
    return parallelize_module(model, mesh, styles)


def test_right_answers_pass():
    for answer in (plan, layer_by_layer, negative_dims):
        result = check_tensor_parallel(answer)
        assert result.ok, (answer.__name__, result)
        assert "(16, 16) of 0.weight and (16, 16) of 2.weight" in str(result)


def train_mode_only(model, mesh):
    model.train()


def plain_ddp(model, mesh):
    return DDP(model)


def first_layer_only(model, mesh):
    parallelize_module(model, mesh, {"0": ColwiseParallel(output_layouts=Replicate())})


def fsdp_instead(model, mesh):
    for layer in (model[0], model[2]):
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)


def colwise_twice(model, mesh):
    gathered = ColwiseParallel(output_layouts=Replicate())
    styles = {"0": gathered, "2": ColwiseParallel(output_layouts=Replicate())}
    parallelize_module(model, mesh, styles)


def dtensor_out(model, mesh):
    parallelize_module(model, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel(use_local_output=False)})


def rowwise_first(model, mesh):
    parallelize_module(model, mesh, {"0": RowwiseParallel(), "2": ColwiseParallel()})


def test_wrong_answers_get_a_hint():
    cases = {
        train_mode_only: "both weights are still whole",
        plain_ddp: "do not wrap it",
        first_layer_only: "2.weight is still whole",
        fsdp_instead: "FSDP's way",
        colwise_twice: "the output is right, but the forward ran",
        dtensor_out: "the output is a DTensor",
        rowwise_first: "rank ",
    }
    for answer, hint in cases.items():
        result = check_tensor_parallel(answer)
        assert not result.ok and hint in str(result), (answer.__name__, result)


def unanswered(model, mesh) -> None:
    """As the notebook gives it."""
    ...  # your code here


def test_not_a_function_and_the_unanswered_stub():
    for stub in (unanswered, lambda model, mesh: None):
        hint = str(check_tensor_parallel(stub))
        assert "`shard_mlp(model, mesh)` is not answered yet" in hint and "parallelize_module" in hint
    assert "write `shard_mlp(model, mesh)`" in str(check_tensor_parallel(...))
    assert "not a dict" in str(check_tensor_parallel({"0": ColwiseParallel()}))
