"""The DataParallel simulation against DataParallel's rule, torch's own scatter/gather code and seed 003."""

from __future__ import annotations

import contextlib
import copy
import io
import math
import sys
import warnings
from collections import namedtuple

import pytest
import torch
from torch import nn
from torch.nn.parallel import scatter_gather
from torch.utils.data import DataLoader, Dataset

from course_utils.parallel import (
    SimulatedDataParallel,
    replica_sizes,
    simulated_data_parallel,
    simulated_gather,
    simulated_parallel_apply,
    simulated_replicate,
    simulated_scatter,
    simulated_scatter_kwargs,
)

# --------------------------------------------------------------------------- the split rule


def closed_form(batch: int, devices: int) -> list[int]:
    """torch.chunk written out: pieces of ceil(B/N) rows, the remainder last."""
    size = math.ceil(batch / devices)
    return [size] * (batch // size) + ([batch % size] if batch % size else [])


@pytest.mark.parametrize("devices", range(1, 10))
def test_replica_sizes_is_torch_chunk(devices):
    for batch in range(1, 41):
        expected = [len(piece) for piece in torch.arange(batch).chunk(devices)]
        assert replica_sizes(batch, devices) == expected == closed_form(batch, devices)


@pytest.mark.parametrize(
    ("batch", "devices", "sizes"),
    [
        (30, 2, [15, 15]),
        (10, 2, [5, 5]),
        (30, 3, [10, 10, 10]),
        (10, 3, [4, 4, 2]),
        (30, 8, [4, 4, 4, 4, 4, 4, 4, 2]),
        (10, 8, [2, 2, 2, 2, 2]),  # fewer replicas than GPUs
        (16, 2, [8, 8]),  # seed 002's FooNet
        (10, 4, [3, 3, 3, 1]),  # not the "even" split [3, 3, 2, 2]
        (3, 8, [1, 1, 1]),
    ],
)
def test_replica_sizes_examples(batch, devices, sizes):
    assert replica_sizes(batch, devices) == sizes


@pytest.mark.parametrize("bad", [0, -1, 2.0, True, "2", None])
def test_replica_sizes_rejects_bad_device_counts(bad):
    with pytest.raises((ValueError, TypeError), match="num_devices"):
        replica_sizes(10, bad)


@pytest.mark.parametrize("bad", [0, -3, 1.5])
def test_replica_sizes_rejects_bad_batches(bad):
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        replica_sizes(bad, 2)


# --------------------------------------------------------------------------- seed 003, exactly

SEED_003_2_GPUS = """\
In Model: input size torch.Size([15, 5]) output size torch.Size([15, 2])
In Model: input size torch.Size([15, 5]) output size torch.Size([15, 2])
Outside: input size torch.Size([30, 5]) output_size torch.Size([30, 2])
In Model: input size torch.Size([15, 5]) output size torch.Size([15, 2])
In Model: input size torch.Size([15, 5]) output size torch.Size([15, 2])
Outside: input size torch.Size([30, 5]) output_size torch.Size([30, 2])
In Model: input size torch.Size([15, 5]) output size torch.Size([15, 2])
In Model: input size torch.Size([15, 5]) output size torch.Size([15, 2])
Outside: input size torch.Size([30, 5]) output_size torch.Size([30, 2])
In Model: input size torch.Size([5, 5]) output size torch.Size([5, 2])
In Model: input size torch.Size([5, 5]) output size torch.Size([5, 2])
Outside: input size torch.Size([10, 5]) output_size torch.Size([10, 2])
"""

SEED_003_3_GPUS = """\
In Model: input size torch.Size([10, 5]) output size torch.Size([10, 2])
In Model: input size torch.Size([10, 5]) output size torch.Size([10, 2])
In Model: input size torch.Size([10, 5]) output size torch.Size([10, 2])
Outside: input size torch.Size([30, 5]) output_size torch.Size([30, 2])
In Model: input size torch.Size([10, 5]) output size torch.Size([10, 2])
In Model: input size torch.Size([10, 5]) output size torch.Size([10, 2])
In Model: input size torch.Size([10, 5]) output size torch.Size([10, 2])
Outside: input size torch.Size([30, 5]) output_size torch.Size([30, 2])
In Model: input size torch.Size([10, 5]) output size torch.Size([10, 2])
In Model: input size torch.Size([10, 5]) output size torch.Size([10, 2])
In Model: input size torch.Size([10, 5]) output size torch.Size([10, 2])
Outside: input size torch.Size([30, 5]) output_size torch.Size([30, 2])
In Model: input size torch.Size([4, 5]) output size torch.Size([4, 2])
In Model: input size torch.Size([4, 5]) output size torch.Size([4, 2])
In Model: input size torch.Size([2, 5]) output size torch.Size([2, 2])
Outside: input size torch.Size([10, 5]) output_size torch.Size([10, 2])
"""

# As the seed prints it: real GPUs run replicas in threads, so the order within a batch varies.
SEED_003_8_GPUS_THREAD_ORDER = """\
In Model: input size torch.Size([4, 5]) output size torch.Size([4, 2])
In Model: input size torch.Size([4, 5]) output size torch.Size([4, 2])
In Model: input size torch.Size([2, 5]) output size torch.Size([2, 2])
In Model: input size torch.Size([4, 5]) output size torch.Size([4, 2])
In Model: input size torch.Size([4, 5]) output size torch.Size([4, 2])
In Model: input size torch.Size([4, 5]) output size torch.Size([4, 2])
In Model: input size torch.Size([4, 5]) output size torch.Size([4, 2])
In Model: input size torch.Size([4, 5]) output size torch.Size([4, 2])
Outside: input size torch.Size([30, 5]) output_size torch.Size([30, 2])
In Model: input size torch.Size([4, 5]) output size torch.Size([4, 2])
In Model: input size torch.Size([4, 5]) output size torch.Size([4, 2])
In Model: input size torch.Size([4, 5]) output size torch.Size([4, 2])
In Model: input size torch.Size([4, 5]) output size torch.Size([4, 2])
In Model: input size torch.Size([4, 5]) output size torch.Size([4, 2])
In Model: input size torch.Size([4, 5]) output size torch.Size([4, 2])
In Model: input size torch.Size([2, 5]) output size torch.Size([2, 2])
In Model: input size torch.Size([4, 5]) output size torch.Size([4, 2])
Outside: input size torch.Size([30, 5]) output_size torch.Size([30, 2])
In Model: input size torch.Size([4, 5]) output size torch.Size([4, 2])
In Model: input size torch.Size([4, 5]) output size torch.Size([4, 2])
In Model: input size torch.Size([4, 5]) output size torch.Size([4, 2])
In Model: input size torch.Size([4, 5]) output size torch.Size([4, 2])
In Model: input size torch.Size([4, 5]) output size torch.Size([4, 2])
In Model: input size torch.Size([4, 5]) output size torch.Size([4, 2])
In Model: input size torch.Size([4, 5]) output size torch.Size([4, 2])
In Model: input size torch.Size([2, 5]) output size torch.Size([2, 2])
Outside: input size torch.Size([30, 5]) output_size torch.Size([30, 2])
In Model: input size torch.Size([2, 5]) output size torch.Size([2, 2])
In Model: input size torch.Size([2, 5]) output size torch.Size([2, 2])
In Model: input size torch.Size([2, 5]) output size torch.Size([2, 2])
In Model: input size torch.Size([2, 5]) output size torch.Size([2, 2])
In Model: input size torch.Size([2, 5]) output size torch.Size([2, 2])
Outside: input size torch.Size([10, 5]) output_size torch.Size([10, 2])
"""


class RandomDataset(Dataset):
    """Seed 003's dataset, as written there."""

    def __init__(self, size, length):
        self.len = length
        self.data = torch.randn(length, size)

    def __getitem__(self, index):
        return self.data[index]

    def __len__(self):
        return self.len


class SeedModel(nn.Module):
    """Seed 003's model, as written there."""

    def __init__(self, input_size, output_size):
        super().__init__()
        self.fc = nn.Linear(input_size, output_size)

    def forward(self, input):
        output = self.fc(input)
        print("\tIn Model: input size", input.size(), "output size", output.size())
        return output


def run_seed_003(num_devices: int) -> str:
    """Seed 003's program with `nn.DataParallel(model)` replaced by the simulation; its stdout."""
    torch.manual_seed(0)
    input_size, output_size, batch_size, data_size = 5, 2, 30, 100
    device = torch.device("cpu")
    rand_loader = DataLoader(
        dataset=RandomDataset(input_size, data_size), batch_size=batch_size, shuffle=True
    )
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        model = SeedModel(input_size, output_size)
        model = simulated_data_parallel(model, num_devices)
        model.to(device)
        for data in rand_loader:
            input = data.to(device)
            output = model(input)
            print("Outside: input size", input.size(), "output_size", output.size())
    return out.getvalue()


def batches(transcript: str) -> list[list[str]]:
    """Split a transcript into batches (the lines up to each 'Outside'), tabs stripped."""
    result, current = [], []
    for line in transcript.strip().splitlines():
        current.append(line.strip())
        if line.startswith("Outside"):
            result.append(current)
            current = []
    assert not current
    return result


@pytest.mark.parametrize(("devices", "seed"), [(2, SEED_003_2_GPUS), (3, SEED_003_3_GPUS)])
def test_seed_003_transcript_is_reproduced_exactly(devices, seed):
    printed = run_seed_003(devices)
    assert "\tIn Model" in printed  # the seed's tab is kept
    assert [line.strip() for line in printed.splitlines()] == seed.splitlines()


def test_seed_003_eight_gpus_same_replicas_in_device_order():
    printed, seed = batches(run_seed_003(8)), batches(SEED_003_8_GPUS_THREAD_ORDER)
    assert len(printed) == len(seed) == 4
    for mine, theirs in zip(printed, seed, strict=True):
        assert sorted(mine) == sorted(theirs)  # the same replicas, each batch
    four = "In Model: input size torch.Size([4, 5]) output size torch.Size([4, 2])"
    two = "In Model: input size torch.Size([2, 5]) output size torch.Size([2, 2])"
    for batch in printed[:3]:
        assert batch[:8] == [four] * 7 + [two]  # device order: the short piece is the last
    assert printed[3][:5] == [two] * 5  # batch 10: only five replicas
    assert printed[3][5].startswith("Outside: input size torch.Size([10, 5])")


# --------------------------------------------------------------------------- against torch's own code


class ChunkScatter:
    """Stand-in for torch's `Scatter` autograd function with the rule of `torch::cuda::scatter`.

    comm.cpp: `chunks = tensor.chunk(devices.size(), dim)`; a piece meant for another GPU is
    copied there, one for the input's own GPU stays a view. Here every piece stays a view on
    the CPU, which has the same values. Patched into `scatter_gather`, it lets torch's own
    `scatter_kwargs` run on a CPU.
    """

    @staticmethod
    def apply(target_gpus, chunk_sizes, dim, tensor):
        assert chunk_sizes is None
        return tensor.chunk(len(target_gpus), dim)


class CatGather:
    """Stand-in for torch's `Gather` autograd function: `comm.gather` concatenates along dim."""

    @staticmethod
    def apply(target_device, dim, *tensors):
        return torch.cat(tensors, dim)


@pytest.fixture
def torch_reference(monkeypatch):
    monkeypatch.setattr(scatter_gather, "Scatter", ChunkScatter)
    monkeypatch.setattr(scatter_gather, "Gather", CatGather)
    return scatter_gather


def assert_same(a, b):
    """Same structure, same types, equal tensors of equal shapes."""
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, torch.Tensor):
        assert a.shape == b.shape and torch.equal(a, b)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for key in a:
            assert_same(a[key], b[key])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            assert_same(x, y)
    else:
        assert a == b


Pair = namedtuple("Pair", "left right")


def x(n, width=3):
    return torch.arange(n * width, dtype=torch.float32).reshape(n, width)


CASES = {
    "one tensor": ((x(30),), None),
    "small batch": ((x(10),), None),
    "two tensors": ((x(30), x(30, 2)), None),
    "tensors of different batch": ((x(30), x(10)), None),
    "non-tensors are copied": ((x(12), 2.5, "mean", None), None),
    "list": (([x(9), x(9)],), None),
    "dict": (({"a": x(7), "b": 3},), None),
    "namedtuple": ((Pair(x(8), x(8)),), None),
    "empty containers": ((x(6), (), [], {}), None),
    "kwargs with tensors": ((x(30),), {"mask": x(30, 1), "scale": 2.0}),
    "kwargs only": ((), {"x": x(10)}),
    "kwargs without tensors pad the inputs": ((x(10),), {"scale": 2.0}),
    "no arguments": ((), None),
}


@pytest.mark.parametrize("devices", [1, 2, 3, 8])
@pytest.mark.parametrize("case", list(CASES))
def test_scatter_kwargs_matches_torch(torch_reference, case, devices):
    inputs, kwargs = CASES[case]
    targets = list(range(devices))
    expected = torch_reference.scatter_kwargs(inputs, kwargs, targets, dim=0)
    assert_same(simulated_scatter_kwargs(inputs, kwargs, devices, dim=0), expected)


@pytest.mark.parametrize("dim", [1, -1])
def test_scatter_along_another_dim_matches_torch(torch_reference, dim):
    inputs = (torch.randn(4, 9, 2).transpose(0, 2),)  # shape (2, 9, 4), not contiguous
    kwargs = {"h": torch.randn(2, 9)}
    expected = torch_reference.scatter_kwargs(inputs, kwargs, [0, 1, 2], dim=dim)
    actual = simulated_scatter_kwargs(inputs, kwargs, 3, dim)
    assert_same(actual, expected)
    pieces = [args[0] for args in actual[0] if args]  # padded replicas get ()
    # the simulation hands out views of the input (no copies, the same values)
    storage = inputs[0].untyped_storage().data_ptr()
    assert pieces and all(piece.untyped_storage().data_ptr() == storage for piece in pieces)
    torch.testing.assert_close(torch.cat(pieces, dim), inputs[0])


def test_scatter_of_a_single_tensor_is_a_tuple_like_torch(torch_reference):
    assert_same(simulated_scatter(x(10), 3), torch_reference.scatter(x(10), [0, 1, 2]))


def test_real_scatter_of_non_tensors_runs_on_cpu_and_agrees():
    # no tensor: torch's real scatter needs no GPU, so this compares against it unpatched
    obj = ("a", 3, {"k": None})
    assert_same(simulated_scatter(obj, 3), scatter_gather.scatter(obj, [0, 1, 2]))


OUTPUTS = {
    "tensors": [x(4), x(4), x(2)],
    "tuples": [(x(2), x(2, 1)), (x(3), x(3, 1))],
    "dicts": [{"y": x(2), "n": None}, {"y": x(1), "n": None}],
    "namedtuples": [Pair(x(2), x(2)), Pair(x(5), x(5))],
    "lists": [[x(1)], [x(2)]],
}


@pytest.mark.parametrize("case", list(OUTPUTS))
def test_gather_matches_torch(torch_reference, case):
    outputs = OUTPUTS[case]
    assert_same(simulated_gather(outputs, 0), torch_reference.gather(outputs, "cpu", 0))


def test_gather_of_scalars_gives_a_vector_with_torchs_warning():
    with pytest.warns(UserWarning, match="all input tensors were scalars"):
        out = simulated_gather([torch.tensor(1.0), torch.tensor(2.0)], 0)
    assert torch.equal(out, torch.tensor([1.0, 2.0]))


def test_gather_of_dicts_with_different_keys_fails_like_torch():
    with pytest.raises(ValueError, match="same number of keys"):
        simulated_gather([{"a": x(1)}, {"a": x(1), "b": x(1)}], 0)


# --------------------------------------------------------------------------- the module


def test_output_and_split_equal_the_module_on_the_whole_batch():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 7), nn.ReLU(), nn.Linear(7, 2))
    data = torch.randn(30, 5)
    for devices in (1, 2, 3, 8):
        dp = simulated_data_parallel(model, devices)
        torch.testing.assert_close(dp(data), model(data))
        assert dp.last_replica_sizes == replica_sizes(30, devices)


def test_gradients_equal_the_single_device_run():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 2))
    single = copy.deepcopy(model)
    data, target = torch.randn(30, 5), torch.randn(30, 2)
    nn.functional.mse_loss(single(data), target).backward()
    nn.functional.mse_loss(simulated_data_parallel(model, 8)(data), target).backward()
    for p, q in zip(model.parameters(), single.parameters(), strict=True):
        assert p.grad is not None
        torch.testing.assert_close(p.grad, q.grad)


def test_gradients_also_reach_the_input():
    data = torch.randn(10, 5, requires_grad=True)
    ref = data.detach().clone().requires_grad_()
    model = nn.Linear(5, 2)
    simulated_data_parallel(model, 3)(data).sum().backward()
    model(ref).sum().backward()
    torch.testing.assert_close(data.grad, ref.grad)


def test_replicas_share_storage_on_device_0_only_and_are_rebuilt():
    model = nn.Linear(5, 2)
    first = simulated_replicate(model, 3)
    second = simulated_replicate(model, 3)
    assert first[0] is not model and first[0] is not second[0]
    assert first[0].weight.data_ptr() == model.weight.data_ptr()
    assert all(r.weight.data_ptr() != model.weight.data_ptr() for r in first[1:])
    assert all(not isinstance(r.weight, nn.Parameter) for r in first)
    assert list(first[1].parameters()) == []  # as in torch: replicas expose no parameters


def test_replicas_under_no_grad_are_detached():
    model = nn.Linear(5, 2)
    with torch.no_grad():
        out = simulated_data_parallel(model, 3)(torch.randn(9, 5))
    assert not out.requires_grad


class Counter(nn.Module):
    """Counts its forward calls in an attribute, the example of DataParallel's docs."""

    def __init__(self):
        super().__init__()
        self.calls = 0
        self.fc = nn.Linear(2, 2)

    def forward(self, x):
        self.calls += 1
        return self.fc(x)


def test_attribute_updates_in_forward_are_lost_as_with_dataparallel():
    model = Counter()
    simulated_data_parallel(model, 3)(torch.randn(6, 2))
    assert model.calls == 0  # the replicas counted, and were thrown away
    simulated_data_parallel(model, 1)(torch.randn(6, 2))
    assert model.calls == 1  # one device: DataParallel calls the module itself


def test_batchnorm_running_stats_come_from_replica_0_only():
    torch.manual_seed(0)
    bn, ref = nn.BatchNorm1d(4), nn.BatchNorm1d(4)
    data = torch.randn(12, 4) * 3 + 1
    simulated_data_parallel(bn, 3)(data)
    ref(data[:4])  # the first piece, the one on "GPU 0"
    torch.testing.assert_close(bn.running_mean, ref.running_mean)
    torch.testing.assert_close(bn.running_var, ref.running_var)
    assert int(bn.num_batches_tracked) == 1


def test_batchnorm_fails_on_a_one_row_piece_as_on_gpus():
    dp = simulated_data_parallel(nn.BatchNorm1d(4), 8)
    with pytest.raises(ValueError, match="Expected more than 1 value per channel") as info:
        dp(torch.randn(9, 4))  # pieces 2, 2, 2, 2, 1
    assert "simulated replica 4" in "".join(getattr(info.value, "__notes__", []))


class Takes(nn.Module):
    """A module with keyword arguments and structured outputs."""

    def forward(self, x, mask=None, scale=1.0):
        return {"y": x * scale if mask is None else x * mask * scale, "none": None}


def test_kwargs_are_scattered_and_outputs_gathered():
    data, mask = x(10), torch.ones(10, 1)
    out = simulated_data_parallel(Takes(), 3)(data, mask=mask, scale=2.0)
    torch.testing.assert_close(out["y"], data * 2.0)
    assert out["none"] is None


def test_number_outputs_fail_to_gather_as_in_torch(torch_reference):
    with pytest.raises(TypeError, match="not iterable"):
        torch_reference.gather([4, 4, 2], "cpu", 0)
    with pytest.raises(TypeError, match="not iterable"):
        simulated_gather([4, 4, 2], 0)


class KeywordOnly(nn.Module):
    """A module that records the rows of the tensor it gets as the keyword argument `x`."""

    def __init__(self):
        super().__init__()
        self.rows = []

    def forward(self, *args, x=None):
        self.rows.append(x.shape[0])
        return x


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (lambda dp: dp(x=torch.randn(10, 5)), [4, 4, 2]),  # keyword only: the inputs are padded with ()
        (lambda dp: dp(2.0, x=torch.randn(7, 5)), [3, 3, 1]),  # the positional argument is no tensor
    ],
)
def test_last_replica_sizes_counts_keyword_tensors_too(call, expected):
    module = KeywordOnly()
    dp = simulated_data_parallel(module, 3)
    call(dp)
    assert module.rows == expected  # what the replicas really got...
    assert dp.last_replica_sizes == expected  # ...is what the wrapper records


def test_mismatched_kwargs_raise_a_clear_error():
    with pytest.raises(ValueError, match="same batch size"):
        simulated_data_parallel(Takes(), 3)(x(30), x(30), mask=x(2, 3))


def test_dim_1_splits_the_second_dimension():
    seq_first = torch.randn(4, 6, 5)  # (time, batch, features)
    dp = simulated_data_parallel(nn.Linear(5, 2), 3, dim=1)
    out = dp(seq_first)
    assert dp.last_replica_sizes == [2, 2, 2] and out.shape == (4, 6, 2)


@pytest.mark.parametrize("bad", [0, -2])
def test_bad_device_counts_say_what_to_pass(bad):
    with pytest.raises(ValueError, match=r"at least 1 .*pass e\.g\. num_devices=2"):
        simulated_data_parallel(nn.Linear(2, 2), bad)


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(TypeError, match="must be an int"):
        simulated_data_parallel(nn.Linear(2, 2), 2.0)
    with pytest.raises(TypeError, match="dim must be an int"):
        simulated_data_parallel(nn.Linear(2, 2), 2, dim="0")
    with pytest.raises(TypeError, match=r"wraps an nn\.Module"):
        simulated_data_parallel(lambda t: t, 2)


def test_a_dim_the_input_lacks_says_which_dims_exist():
    dp = simulated_data_parallel(nn.Linear(5, 2), 2, dim=2)
    with pytest.raises(IndexError, match=r"dim=2 is out of range .*\[30, 5\].*between -2 and 1"):
        dp(torch.randn(30, 5))


def test_an_empty_batch_is_refused_with_advice():
    with pytest.raises(ValueError, match=r"empty batch.*Skip empty batches"):
        simulated_data_parallel(nn.Linear(5, 2), 2)(torch.randn(0, 5))


def test_a_scalar_tensor_argument_is_refused_with_advice():
    with pytest.raises(ValueError, match="0-dimensional"):
        simulated_data_parallel(Takes(), 2)(x(4), scale=torch.tensor(2.0))


def test_parallel_apply_needs_matching_lengths():
    with pytest.raises(ValueError, match="one input"):
        simulated_parallel_apply([nn.Linear(2, 2)] * 2, [x(1, 2)])


def test_it_says_it_is_a_simulation():
    dp = simulated_data_parallel(nn.Linear(5, 2), 3)
    assert isinstance(dp, SimulatedDataParallel)
    assert "SIMULATION" in repr(dp) and "num_devices=3" in repr(dp)
    for fn in (simulated_data_parallel, simulated_scatter, simulated_replicate, simulated_gather):
        assert "SIMULATION" in fn.__doc__


# nn.DataParallel.__init__ warns ("There is an imbalance between your GPUs", from `_check_balance`)
# on a machine whose GPUs differ by more than 25% in memory or cores. That says something about
# the machine, not about this code, and pytest's filterwarnings=error would turn it into a failure.
GPU_IMBALANCE = r"ignore:\s*There is an imbalance between your GPUs:UserWarning"


def test_the_imbalance_filter_matches_torchs_warning(monkeypatch):
    """Two fake GPUs, one with half the memory: torch's own check warns, and GPU_IMBALANCE silences it."""
    data_parallel_module = sys.modules["torch.nn.parallel.data_parallel"]
    Props = namedtuple("Props", "total_memory multi_processor_count")
    fake = {0: Props(80 * 2**30, 132), 1: Props(40 * 2**30, 132)}
    monkeypatch.setattr(data_parallel_module, "_get_device_index", lambda device, optional=False: device)
    monkeypatch.setattr(data_parallel_module, "_get_devices_properties", lambda ids: [fake[i] for i in ids])
    with pytest.warns(UserWarning, match="less than 75% of the memory or cores of GPU 0"):
        data_parallel_module._check_balance([0, 1])
    action, message, category = GPU_IMBALANCE.split(":")
    assert (action, category) == ("ignore", "UserWarning")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings(action, message, UserWarning)
        data_parallel_module._check_balance([0, 1])  # silenced: no error


@pytest.mark.filterwarnings(GPU_IMBALANCE)
def test_state_dict_keys_match_dataparallel():
    model = nn.Linear(5, 2)
    assert list(simulated_data_parallel(model, 2).state_dict()) == list(nn.DataParallel(model).state_dict())


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks DataParallel on a machine without CUDA")
def test_real_dataparallel_without_gpus_just_calls_the_module():
    out = io.StringIO()
    model = SeedModel(5, 2)
    dp = nn.DataParallel(model)
    assert dp.device_ids == []
    data = torch.randn(30, 5)
    with contextlib.redirect_stdout(out):
        result = dp(data)
    assert out.getvalue().count("In Model") == 1 and "[30, 5]" in out.getvalue()
    torch.testing.assert_close(result, model(data))
    with pytest.raises(RuntimeError, match="device type could not be determined"):
        nn.parallel.data_parallel(model, data, [0, 1])


def test_a_scalar_on_the_meta_device_gets_the_scalar_error_too():
    with pytest.raises(ValueError, match=r"0-dimensional tensor \(a scalar on meta\) has no dimension"):
        simulated_scatter(torch.tensor(1.0, device="meta"), 2)
    with pytest.raises(ValueError, match=r"\(a scalar, here 1\.5\)"):
        simulated_scatter(torch.tensor(1.5), 2)


def test_pieces_of_a_meta_tensor_stay_on_meta():
    pieces = simulated_scatter(torch.empty(4, 3, device="meta"), 2)
    assert [(p.device.type, p.shape[0]) for p in pieces] == [("meta", 2), ("meta", 2)]


@pytest.mark.parametrize("huge", [1025, 10**12])
def test_more_devices_than_one_process_can_drive_are_refused(huge):
    with pytest.raises(ValueError, match=r"up to 1024, one replica each\); pass the number of GPUs"):
        replica_sizes(8, huge)
    with pytest.raises(ValueError, match="up to 1024"):
        simulated_replicate(nn.Linear(2, 2), huge)
    assert len(replica_sizes(2048, 1024)) == 1024


@pytest.mark.parametrize("bad", [float("inf"), 2.0, True, "2", None])
def test_device_counts_that_are_not_ints_are_refused_everywhere(bad):
    for name, call in (
        ("num_devices", lambda: replica_sizes(8, bad)),
        ("num_devices", lambda: simulated_scatter(x(4, 2), bad)),
        ("num_replicas", lambda: simulated_replicate(nn.Linear(2, 2), bad)),
        ("num_devices", lambda: simulated_data_parallel(nn.Linear(2, 2), bad)),
    ):
        with pytest.raises(TypeError, match=rf"^{name} must be an int .*pass e\.g\. {name}=2$"):
            call()


def test_replicate_scatter_kwargs_apply_and_gather_refuse_what_they_cannot_use():
    with pytest.raises(TypeError, match=r"simulated_replicate copies an nn\.Module, got function"):
        simulated_replicate(lambda t: t, 2)
    with pytest.raises(TypeError, match=r"inputs is the tuple of positional arguments .*such as \(batch,\)"):
        simulated_scatter_kwargs(x(4, 2), None, 2)
    with pytest.raises(TypeError, match=r"kwargs is the dict of keyword arguments .*not list"):
        simulated_scatter_kwargs((x(4, 2),), [1], 2)
    with pytest.raises(ValueError, match="replicas is a non-empty list of modules"):
        simulated_parallel_apply([], [])
    with pytest.raises(TypeError, match=r"every replica must be an nn\.Module"):
        simulated_parallel_apply([lambda t: t], [x(1, 2)])
    with pytest.raises(TypeError, match="one entry per replica"):
        simulated_parallel_apply([nn.Linear(2, 2)], x(1, 2))
    with pytest.raises(ValueError, match="outputs is the non-empty list of the replicas' outputs"):
        simulated_gather([])
    with pytest.raises(ValueError, match="outputs is the non-empty list"):
        simulated_gather(x(4, 2))
    with pytest.raises(TypeError, match="dim must be an int"):
        simulated_gather([x(1, 2)], dim=0.0)
    out_of_range = r"dim=2 is out of range for the replicas' outputs of shape \[1, 2\]"
    with pytest.raises(IndexError, match=out_of_range):
        simulated_gather([x(1, 2), x(1, 2)], dim=2)
    assert simulated_gather([x(1, 2), x(1, 2)], dim=-1).shape == (1, 4)  # a negative dim counts from the end


def test_the_simulation_speaks_chinese_where_the_notebook_asks(monkeypatch):
    monkeypatch.setenv("COURSE_LANGUAGE", "zh-CN")
    model = simulated_data_parallel(nn.Linear(5, 2), num_devices=4)
    assert "在一个设备上的模拟（SIMULATION）：各副本按设备顺序依次运行；没有使用 GPU" in repr(model)
    with pytest.raises(ValueError, match=r"^形状为 \[0, 5\] 的输入沿 dim=0 是一个空批量：没有东西可以切分。"):
        model(torch.zeros(0, 5))
