"""A faithful CPU *simulation* of `nn.DataParallel` over N GPUs, for machines that lack them.

`nn.DataParallel(module)` does four things on every forward call (see
`torch/nn/parallel/data_parallel.py`):

1. **scatter**: `scatter_kwargs` cuts every tensor argument with `tensor.chunk(len(device_ids), dim)`
   (in C++, `torch::cuda::scatter`) and copies the pieces that belong on another GPU there;
   other objects are handed to every device, tuples, lists and dicts are walked into.
   `chunk` makes every piece `ceil(B / N)` rows except the last, so a small batch gives
   *fewer* pieces than GPUs (batch 10 on 8 GPUs: 5 pieces of 2). Then the shorter of the
   two lists (positional pieces, keyword pieces) is padded with `()` or `{}`, with a quirk:
   the keyword list is padded only when it is shorter than the number of positional
   *arguments* (not pieces), so the two counts can stay unequal, and then `parallel_apply`
   refuses the call.
2. **replicate**: one copy of the module per piece, made again on every call; the copy on
   `device_ids[0]` shares storage with the module, the others are copies wired into autograd
   so that their gradients are summed back into the module.
3. **parallel_apply**: each replica runs its piece, one Python *thread* per GPU.
4. **gather**: the outputs are concatenated along `dim` on `output_device` (default: GPU 0).

The functions here do the same on one device (normally the CPU), with the one difference
that is the point of the simulation: the replicas run one after another, in device order,
instead of in threads on separate GPUs. The split, the number of replicas, the values and
the gradients are those of `nn.DataParallel`. The errors are not always the same:

- An exception raised inside a replica is raised as it is, with a note naming the simulated
  replica. Real DataParallel catches it in the replica's thread and, after all threads are
  joined, raises a new exception of the same type (a `RuntimeError` when that type cannot
  be made from one message) whose message reads "Caught ValueError in replica 4 on device 4."
  followed by "Original Traceback (most recent call last):" and the replica's traceback.
- Positional and keyword pieces whose counts differ raise a `ValueError` here that says
  what to change; in torch, `parallel_apply` raises an `AssertionError`.
- An empty batch and a 0-dimensional tensor argument are refused here with a `ValueError`
  that says what to do. DataParallel runs every replica on an empty piece, and fails on a
  0-dimensional tensor inside `chunk` with a `RuntimeError`.

Everything here calls itself a simulation where it shows (class name, `repr`, docs),
because it is one.
"""

from __future__ import annotations

import reprlib
import warnings
from collections import OrderedDict
from collections.abc import Sequence
from itertools import zip_longest
from typing import Any

import torch
from torch import nn

from course_utils._checks import flag
from course_utils.i18n import N_, _, translated

__all__ = [
    "SimulatedDataParallel",
    "replica_sizes",
    "simulated_data_parallel",
    "simulated_gather",
    "simulated_parallel_apply",
    "simulated_replicate",
    "simulated_scatter",
    "simulated_scatter_kwargs",
]

MAX_DEVICES = 1024  # far more GPUs than one DataParallel process can drive; a bigger number is a slip
MAX_ROWS = 2**63 - 1  # a tensor's size along a dimension is a signed 64-bit int
SIMULATION_NOTE = N_(
    "SIMULATION on one device: replicas run one after another, in device order; no GPUs used"
)


def _check_num_devices(num_devices: object, name: str = "num_devices") -> int:
    """Return the count if it is an int from 1 to MAX_DEVICES, else raise an error that names `name` and
    says what to pass."""
    if isinstance(num_devices, bool) or not isinstance(num_devices, int):
        raise TypeError(
            _(
                "{name} must be an int (how many GPUs to simulate), got {type_name} "
                "{num_devices!r}; pass e.g. {name}=2"
            ).format(name=name, type_name=type(num_devices).__name__, num_devices=num_devices)
        )
    if num_devices < 1:
        raise ValueError(
            _(
                "{name} must be at least 1 (the number of GPUs to simulate), got {num_devices}; "
                "nn.DataParallel needs at least one device, pass e.g. {name}=2"
            ).format(name=name, num_devices=num_devices)
        )
    if num_devices > MAX_DEVICES:
        raise ValueError(
            _(
                "{name}={num_devices} is more GPUs than one process can drive (the simulation "
                "accepts up to {max_devices}, one replica each); pass the number of GPUs of one "
                "machine, e.g. 8"
            ).format(name=name, num_devices=num_devices, max_devices=MAX_DEVICES)
        )
    return num_devices


def _check_dim(dim: object) -> int:
    """Return dim if it is an int, else raise an error that says what to pass."""
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(
            _(
                "dim must be an int (the batch dimension to split), got {type_name} {dim!r}; "
                "pass dim=0 when the batch comes first"
            ).format(type_name=type(dim).__name__, dim=dim)
        )
    return dim


def replica_sizes(batch_size: int, num_devices: int) -> list[int]:
    """Rows each replica gets when DataParallel splits a batch of `batch_size` over `num_devices`.

    This is DataParallel's rule itself, `torch.chunk(batch, num_devices)`, applied to an
    empty tensor of that many rows: every piece has `ceil(batch_size / num_devices)` rows
    except the last, and there can be fewer pieces than devices (10 rows on 8 GPUs: 5 x 2).
    """
    num_devices = _check_num_devices(num_devices)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(
            _(
                "batch_size must be a positive int, got {batch_size!r}; an empty batch gives DataParallel "
                "nothing to split"
            ).format(batch_size=batch_size)
        )
    if batch_size > MAX_ROWS:
        raise ValueError(
            _("batch_size must be at most {most}, the most rows a tensor can hold, not {batch_size}").format(
                most=MAX_ROWS, batch_size=batch_size
            )
        )
    return [piece.shape[0] for piece in torch.empty(batch_size, 0).chunk(num_devices)]


def _chunk(tensor: torch.Tensor, num_devices: int, dim: int) -> tuple[torch.Tensor, ...]:
    """Split one tensor with the rule of `torch::cuda::scatter`, `chunk(num_devices, dim)`.

    The pieces are views of `tensor` (`torch::cuda::scatter` also leaves the piece that stays
    on the input's GPU a view, and copies the others to their GPUs); the values are the same.
    """
    if tensor.dim() == 0:
        value = (
            _(", here {value!r}").format(value=tensor.item())
            if tensor.device.type == "cpu"
            else _(" on {device}").format(device=tensor.device)
        )
        raise ValueError(
            _(
                "DataParallel scatters every tensor argument along dim, and a 0-dimensional tensor "
                "(a scalar{value}) has no dimension to split; pass it as a Python number "
                "(numbers are copied to every replica) or give it a batch dimension"
            ).format(value=value)
        )
    if not -tensor.dim() <= dim < tensor.dim():
        raise IndexError(
            _(
                "dim={dim} is out of range for an input of shape {shape} "
                "({dims} dimensions); pass a dim between {low} and {high}, "
                "the dimension that holds the batch (usually dim=0)"
            ).format(
                dim=dim, shape=list(tensor.shape), dims=tensor.dim(), low=-tensor.dim(), high=tensor.dim() - 1
            )
        )
    if tensor.shape[dim] == 0:
        raise ValueError(
            _(
                "the input of shape {shape} is an empty batch along dim={dim}: there is "
                "nothing to split. Skip empty batches before the forward call (nn.DataParallel would "
                "run every replica on an empty piece)"
            ).format(shape=list(tensor.shape), dim=dim)
        )
    return tensor.chunk(num_devices, dim)


def _is_namedtuple(obj: object) -> bool:
    """The namedtuple test of `torch.nn.parallel.scatter_gather`."""
    return isinstance(obj, tuple) and hasattr(obj, "_asdict") and hasattr(obj, "_fields")


def simulated_scatter(inputs: Any, num_devices: int, dim: int = 0) -> Any:
    """SIMULATION of `torch.nn.parallel.scatter`: the same pieces, as views on the tensors' device.

    Tensors are chunked along `dim`; tuples, lists, dicts and namedtuples are walked into
    and zipped, so the shortest chunking decides how many replicas there are; any other
    object is repeated once per device. Like the real function, a single tensor gives a
    tuple of pieces and anything else a list.
    """
    num_devices = _check_num_devices(num_devices)
    dim = _check_dim(dim)

    def scatter_map(obj: Any) -> Any:
        if isinstance(obj, torch.Tensor):
            return _chunk(obj, num_devices, dim)
        if _is_namedtuple(obj):
            return [type(obj)(*args) for args in zip(*map(scatter_map, obj), strict=False)]
        if isinstance(obj, tuple) and len(obj) > 0:
            return list(zip(*map(scatter_map, obj), strict=False))
        if isinstance(obj, list) and len(obj) > 0:
            return [list(i) for i in zip(*map(scatter_map, obj), strict=False)]
        if isinstance(obj, dict) and len(obj) > 0:
            return [type(obj)(i) for i in zip(*map(scatter_map, obj.items()), strict=False)]
        return [obj for _ in range(num_devices)]

    return scatter_map(inputs)


def simulated_scatter_kwargs(
    inputs: tuple[Any, ...], kwargs: dict[str, Any] | None, num_devices: int, dim: int = 0
) -> tuple[tuple[Any, ...], tuple[dict[str, Any], ...]]:
    """SIMULATION of `scatter_kwargs`: per-replica positional and keyword arguments.

    Positional inputs and keyword arguments are scattered separately, then the shorter list
    is padded (with `()` or `{}`) exactly where `torch.nn.parallel.scatter_kwargs` pads it.
    """
    if not isinstance(inputs, tuple):
        raise TypeError(
            _(
                "inputs is the tuple of positional arguments of the forward call, such as (batch,), "
                "not {type_name}"
            ).format(type_name=type(inputs).__name__)
        )
    if kwargs is not None and not isinstance(kwargs, dict):
        raise TypeError(
            _(
                "kwargs is the dict of keyword arguments of the forward call (or None), not {type_name}"
            ).format(type_name=type(kwargs).__name__)
        )
    scattered_inputs = simulated_scatter(inputs, num_devices, dim) if inputs else []
    scattered_kwargs = simulated_scatter(kwargs, num_devices, dim) if kwargs else []
    if len(scattered_inputs) < len(scattered_kwargs):
        scattered_inputs.extend(() for _ in range(len(scattered_kwargs) - len(scattered_inputs)))
    elif len(scattered_kwargs) < len(inputs):  # sic: torch compares with len(inputs) here
        scattered_kwargs.extend({} for _ in range(len(scattered_inputs) - len(scattered_kwargs)))
    return tuple(scattered_inputs), tuple(scattered_kwargs)


def _copy_for_replica(tensor: torch.Tensor, replica: int, detach: bool) -> torch.Tensor:
    """What `Broadcast` gives replica `replica`: the same storage on device 0, a copy elsewhere.

    With autograd on, the copies stay connected to the original, so their gradients are
    summed into it in backward, as `Broadcast.backward` (a reduce-add) does.
    """
    if detach:
        return tensor.detach() if replica == 0 else tensor.detach().clone()
    return tensor.view_as(tensor) if replica == 0 else tensor.clone()


def simulated_replicate(network: nn.Module, num_replicas: int, detach: bool = False) -> list[nn.Module]:
    """SIMULATION of `torch.nn.parallel.replicate`: `num_replicas` replicas of `network`.

    Built the way the real function builds them (`_replicate_for_data_parallel`, parameters
    set as plain tensors): replica 0 shares storage with `network`, the others hold copies.
    Unless `detach`, every replica's parameters are non-leaf tensors whose gradients flow
    back into `network`'s parameters, summed over replicas.
    """
    if not isinstance(network, nn.Module):
        raise TypeError(
            _("simulated_replicate copies an nn.Module, got {type_name}; pass your model").format(
                type_name=type(network).__name__
            )
        )
    num_replicas = _check_num_devices(num_replicas, "num_replicas")
    flag("detach", detach)
    params = list(network.parameters())
    param_indices = {param: idx for idx, param in enumerate(params)}
    param_copies = [[_copy_for_replica(p, j, detach) for p in params] for j in range(num_replicas)]
    buffers = list(network.buffers())
    buffer_indices = {buf: idx for idx, buf in enumerate(buffers)}
    buffer_copies = [
        [_copy_for_replica(b, j, detach or not b.requires_grad) for b in buffers] for j in range(num_replicas)
    ]

    modules = list(network.modules())
    module_indices = {module: i for i, module in enumerate(modules)}
    module_copies: list[list[nn.Module]] = [[] for _ in range(num_replicas)]
    for module in modules:
        for j in range(num_replicas):
            replica = module._replicate_for_data_parallel()
            replica._former_parameters = OrderedDict()
            module_copies[j].append(replica)

    for i, module in enumerate(modules):
        for key, child in module._modules.items():
            for j in range(num_replicas):
                replica = module_copies[j][i]
                if child is None:
                    replica._modules[key] = None
                else:
                    setattr(replica, key, module_copies[j][module_indices[child]])
        for key, param in module._parameters.items():
            for j in range(num_replicas):
                replica = module_copies[j][i]
                if param is None:
                    replica._parameters[key] = None
                else:
                    copy = param_copies[j][param_indices[param]]
                    setattr(replica, key, copy)  # replicas hold plain tensors, not Parameters
                    replica._former_parameters[key] = copy
        for key, buf in module._buffers.items():
            for j in range(num_replicas):
                replica = module_copies[j][i]
                if buf is None:
                    replica._buffers[key] = None
                else:
                    setattr(replica, key, buffer_copies[j][buffer_indices[buf]])
    return [module_copies[j][0] for j in range(num_replicas)]


def simulated_parallel_apply(
    replicas: Sequence[nn.Module], inputs: Sequence[Any], kwargs_tup: Sequence[dict[str, Any]] | None = None
) -> list[Any]:
    """SIMULATION of `torch.nn.parallel.parallel_apply`: replica i runs inputs[i], in device order.

    The real function starts one thread per GPU, so replicas finish (and print) in any
    order; here they run one after another, replica 0 first. An error raised in a replica
    carries a note saying which simulated replica it came from.
    """
    if not isinstance(replicas, Sequence) or not replicas:
        raise ValueError(
            _(
                "replicas is a non-empty list of modules, as simulated_replicate returns it, not {replicas}"
            ).format(replicas=reprlib.repr(replicas))
        )
    if not all(isinstance(replica, nn.Module) for replica in replicas):
        raise TypeError(_("every replica must be an nn.Module; make them with simulated_replicate(model, n)"))
    if not isinstance(inputs, Sequence) or (kwargs_tup is not None and not isinstance(kwargs_tup, Sequence)):
        raise TypeError(
            _("inputs (and kwargs_tup) hold one entry per replica, as simulated_scatter_kwargs returns them")
        )
    if kwargs_tup is None:
        kwargs_tup = [{} for _ in replicas]
    if not len(replicas) == len(inputs) == len(kwargs_tup):
        raise ValueError(
            _(
                "{replicas} replicas, {inputs} inputs and {kwargs} kwargs: "
                "parallel_apply needs one input and one kwargs dict per replica"
            ).format(replicas=len(replicas), inputs=len(inputs), kwargs=len(kwargs_tup))
        )
    outputs = []
    for i, (replica, args, kwargs) in enumerate(zip(replicas, inputs, kwargs_tup, strict=True)):
        if not isinstance(args, (list, tuple)):
            args = (args,)
        try:
            outputs.append(replica(*args, **kwargs))
        except Exception as err:
            err.add_note(_("(raised in simulated replica {i}, which stands for GPU {i})").format(i=i))
            raise
    return outputs


def simulated_gather(outputs: Sequence[Any], dim: int = 0) -> Any:
    """SIMULATION of `torch.nn.parallel.gather`: concatenate the replicas' outputs along `dim`.

    Tensors are concatenated (scalars along dim 0 become a vector, with the warning the
    real `Gather` gives); dicts, tuples, lists and namedtuples are gathered element by
    element; `None` stays `None`. The result stays on the outputs' device.
    """
    dim = _check_dim(dim)
    if isinstance(outputs, str | bytes) or not isinstance(outputs, Sequence) or not outputs:
        raise ValueError(
            _(
                "outputs is the non-empty list of the replicas' outputs, one per replica, as "
                "simulated_parallel_apply returns it; got {outputs}"
            ).format(outputs=reprlib.repr(outputs))
        )

    def gather_map(outputs: Sequence[Any]) -> Any:
        out = outputs[0]
        if isinstance(out, torch.Tensor):
            tensors = list(outputs)
            if all(t.dim() == 0 for t in tensors) and dim == 0:
                warnings.warn(
                    "Was asked to gather along dimension 0, but all input tensors were scalars; "
                    "will instead unsqueeze and return a vector.",
                    stacklevel=3,
                )
                tensors = [t.view(1) for t in tensors]
            if not -tensors[0].dim() <= dim < tensors[0].dim():
                raise IndexError(
                    _(
                        "dim={dim} is out of range for the replicas' outputs of shape {shape} ({dims} "
                        "dimensions); pass a dim between {low} and {high}: the dimension the batch was "
                        "split along (usually dim=0)"
                    ).format(
                        dim=dim,
                        shape=list(tensors[0].shape),
                        dims=tensors[0].dim(),
                        low=-tensors[0].dim(),
                        high=tensors[0].dim() - 1,
                    )
                )
            return torch.cat(tensors, dim)
        if out is None:
            return None
        if isinstance(out, dict):
            if not all(len(out) == len(d) for d in outputs):
                raise ValueError("All dicts must have the same number of keys")
            return type(out)((k, gather_map([d[k] for d in outputs])) for k in out)
        if _is_namedtuple(out):
            return type(out)._make(map(gather_map, zip(*outputs, strict=True)))
        return type(out)(map(gather_map, zip(*outputs, strict=True)))

    return gather_map(outputs)


def _first_tensor(obj: Any) -> torch.Tensor | None:
    """The first tensor found in a (nested) replica input, as `parallel_apply.get_a_var` finds it."""
    if isinstance(obj, torch.Tensor):
        return obj
    if isinstance(obj, (list, tuple)):
        for item in obj:
            found = _first_tensor(item)
            if found is not None:
                return found
    if isinstance(obj, dict):
        for item in obj.items():
            found = _first_tensor(item)
            if found is not None:
                return found
    return None


class SimulatedDataParallel(nn.Module):
    """A SIMULATION of `nn.DataParallel(module)` on `num_devices` GPUs, run on one device.

    Forward does what DataParallel's forward does (scatter, replicate, parallel_apply,
    gather) with the same split, values and gradients, but runs the replicas one after
    another in device order on the module's own device. The wrapped module is `.module`,
    so state_dict keys get the same `module.` prefix as with DataParallel.
    `last_replica_sizes` holds how many rows (along `dim`) each replica got in the last call.
    """

    def __init__(self, module: nn.Module, num_devices: int, dim: int = 0) -> None:
        super().__init__()
        if not isinstance(module, nn.Module):
            raise TypeError(
                _(
                    "simulated_data_parallel wraps an nn.Module (like nn.DataParallel), got "
                    "{type_name}; pass your model instance"
                ).format(type_name=type(module).__name__)
            )
        self.module = module
        self.num_devices = _check_num_devices(num_devices)
        self.dim = _check_dim(dim)
        self.last_replica_sizes: list[int] = []

    def extra_repr(self) -> str:
        """Say in the repr that this is a simulation and of how many GPUs."""
        return f"num_devices={self.num_devices}, dim={self.dim}, {translated(SIMULATION_NOTE)}"

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        """Scatter the arguments, run one replica per piece in device order, gather the outputs."""
        scattered, module_kwargs = simulated_scatter_kwargs(inputs, kwargs, self.num_devices, self.dim)
        if not scattered and not module_kwargs:
            scattered, module_kwargs = ((),), ({},)
        self.last_replica_sizes = []
        for args, kw in zip_longest(scattered, module_kwargs, fillvalue=()):
            tensor = _first_tensor((args, kw))  # a keyword-only call has its tensors in kw, args is ()
            self.last_replica_sizes.append(0 if tensor is None else tensor.shape[self.dim])
        if self.num_devices == 1:
            return self.module(*scattered[0], **module_kwargs[0])
        if len(scattered) != len(module_kwargs):
            raise ValueError(
                _(
                    "the positional inputs split into {positional} pieces but the keyword arguments "
                    "into {keyword}; nn.DataParallel fails here too (an AssertionError in "
                    "parallel_apply). Give every tensor argument the same batch size along dim"
                ).format(positional=len(scattered), keyword=len(module_kwargs))
            )
        replicas = simulated_replicate(self.module, len(scattered), detach=not torch.is_grad_enabled())
        outputs = simulated_parallel_apply(replicas, scattered, module_kwargs)
        return simulated_gather(outputs, self.dim)


def simulated_data_parallel(module: nn.Module, num_devices: int, dim: int = 0) -> SimulatedDataParallel:
    """Wrap `module` like `nn.DataParallel(module)` on `num_devices` GPUs: a labelled SIMULATION.

    Use it where the machine has fewer GPUs than the lesson needs: it computes what
    DataParallel computes (split by `torch.chunk` along `dim`, one replica per piece, the
    outputs concatenated along `dim`, gradients summed into `module`) on one device.
    """
    return SimulatedDataParallel(module, num_devices, dim)
