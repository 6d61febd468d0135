"""Where a training step's memory goes, counted in bytes from real tensors (notebook 10's accounting).

Notebook 10 teaches the four lines of a data-parallel rank's memory: parameters, gradients,
optimizer state and activations, the last counted as the bytes autograd saves for the backward
pass (caught with `torch.autograd.graph.saved_tensors_hooks`, parameters left out). Notebook 12
changes one technique at a time and reads the same four lines again, so the counting lives here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from course_utils.i18n import N_, _, translated

__all__ = ["LINES", "line_label", "saved_activation_bytes", "step_memory", "tensor_bytes"]

# The lines of the table, in the order notebook 10 prints them.
LINES = ("parameters", "gradients", "optimizer state", "activations")
_LABELS = {
    "parameters": N_("parameters"),
    "gradients": N_("gradients"),
    "optimizer state": N_("optimizer state"),
    "activations": N_("activations"),
}


def line_label(line: str) -> str:
    """How a table names one of `LINES`, in the notebook's language (the keys stay English)."""
    if not isinstance(line, str) or line not in _LABELS:
        raise ValueError(
            _("line must be one of {lines}, not {line!r}").format(lines=", ".join(LINES), line=line)
        )
    return translated(_LABELS[line])


def tensor_bytes(t: torch.Tensor) -> int:
    """Bytes this process holds for `t`: for a DTensor only its local shard (as in notebook 10)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(
            _("tensor_bytes counts a torch.Tensor, not a {type_name}").format(type_name=type(t).__name__)
        )
    local = t.to_local() if hasattr(t, "to_local") else t
    return local.numel() * local.element_size()


def saved_activation_bytes(forward: Callable[[], Any], params: list[torch.Tensor]) -> tuple[Any, int]:
    """Run `forward()` and count the bytes autograd saves for backward, the tensors in `params` excluded.

    A tensor saved twice (the same data and shape) counts once. Returns forward's result and the bytes.
    """
    if not callable(forward):
        raise TypeError(_("pass the forward pass as a function without arguments, e.g. lambda: model(x)"))
    if not isinstance(params, list | tuple) or not all(isinstance(p, torch.Tensor) for p in params):
        raise TypeError(
            _("params must be a list of tensors, e.g. list(model.parameters()), not {params!r}").format(
                params=params
            )
        )
    skip = {p.untyped_storage().data_ptr() for p in params}
    saved: dict[tuple[int, int, torch.Size, torch.dtype], int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        if t.untyped_storage().data_ptr() not in skip:
            saved[t.untyped_storage().data_ptr(), t.storage_offset(), t.shape, t.dtype] = tensor_bytes(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = forward()
    return out, sum(saved.values())


def step_memory(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loss_of: Callable[[nn.Module], torch.Tensor],
    state_of: Callable[[torch.optim.Optimizer], list[torch.Tensor]] | None = None,
) -> dict[str, int]:
    """One training step (`loss_of(model)`, backward, `optimizer.step()`), its memory by line, in bytes.

    `state_of(optimizer)` lists the optimizer's state tensors (default: every tensor in
    `optimizer.state` with at least one dimension, so Adam's step counters are left out). The
    gradients are those set after backward; their memory is freed by `zero_grad()` afterwards.
    """
    for name, value, kind, example in (
        ("model", model, nn.Module, "nn.Linear(4, 2)"),
        ("optimizer", optimizer, torch.optim.Optimizer, "torch.optim.SGD(model.parameters(), lr=0.1)"),
    ):
        if not isinstance(value, kind):
            raise TypeError(
                _("{name} must be a torch {kind} such as {example}, not {value!r}").format(
                    name=name, kind=kind.__name__, example=example, value=value
                )
            )
    if not callable(loss_of):
        raise TypeError(
            _("loss_of must be a function of the model, such as lambda m: m(x).sum(), not {value!r}").format(
                value=loss_of
            )
        )
    if state_of is not None and not callable(state_of):
        raise TypeError(
            _(
                "state_of must be None or a function that lists the optimizer's state tensors, not {value!r}"
            ).format(value=state_of)
        )
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError(_("the model has no trainable parameters: nothing to count"))
    loss, activations = saved_activation_bytes(lambda: loss_of(model), params)
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
        raise ValueError(_("loss_of(model) must return the loss, a tensor with one number"))
    loss.backward()
    grads = sum(tensor_bytes(p.grad) for p in params if p.grad is not None)
    optimizer.step()
    if state_of is None:
        state = [
            v
            for s in optimizer.state.values()
            for v in s.values()
            if isinstance(v, torch.Tensor) and v.dim() > 0
        ]
    else:
        state = state_of(optimizer)
    return {
        "parameters": sum(tensor_bytes(p) for p in params),
        "gradients": grads,
        "optimizer state": sum(tensor_bytes(v) for v in state),
        "activations": activations,
    }
