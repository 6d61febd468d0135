"""Checks for notebook 03 (models on devices).

The checks use the `meta` device as the target where a second device is needed: it exists
on every machine and PyTorch really moves modules and tensors there.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from course_utils.checkpoints import save_with_location
from course_utils.devices import best_device, module_devices
from course_utils.exercises import CheckResult, call_reader, describe_error, failed, passed, unanswered
from course_utils.exercises.sandbox import trial_verdict
from course_utils.i18n import N_, _, translated


def check_prepare_batch(
    prepare_batch: Callable[[torch.Tensor, torch.Tensor, torch.device], tuple[torch.Tensor, torch.Tensor]],
) -> CheckResult:
    """Exercise 1: seed 000's batch preparation with today's API.

    `prepare_batch(images, labels, device)` gets uint8 images of shape (N, 1, 4, 4) and int32
    labels of shape (N, 1) on the CPU, and returns float32 images and int64 labels of shape
    (N,) on `device`, for any N (the last batch of an epoch is often smaller).
    """
    if not callable(prepare_batch):
        return failed(_("pass your function itself, e.g. check_prepare_batch(prepare_batch)"))
    goal = _("return the images as float32 and the labels as int64 of shape (N,), both on device")
    if (verdict := unanswered(prepare_batch, "prepare_batch(images, labels, device)", goal)) is not None:
        return verdict
    generator = torch.Generator().manual_seed(0)
    for device in (torch.device("meta"), best_device()):
        for n in (4, 3, 1):
            images = torch.randint(0, 256, (n, 1, 4, 4), dtype=torch.uint8, generator=generator)
            labels = torch.randint(0, 10, (n, 1), dtype=torch.int32, generator=generator)
            where = _("a batch of {n} sent to {device}").format(n=n, device=device.type)
            outcome = call_reader(prepare_batch, images.clone(), labels.clone(), device)
            if outcome.problem is not None:
                return failed(
                    _(
                        "for {where} your function {problem}. It must work for any batch size, "
                        "and on meta, whose tensors have no values to read"
                    ).format(where=where, problem=outcome.problem)
                )
            out = outcome.value
            if not isinstance(out, tuple | list) or len(out) != 2:
                got = (
                    _("None: did you forget `return`?")
                    if out is None
                    else _("a {type}").format(type=type(out).__name__)
                )
                return failed(
                    _("for {where} it should return (images, labels); it returned {got}").format(
                        where=where, got=got
                    )
                )
            out_images, out_labels = out
            for name, tensor, dtype in (
                (N_("images"), out_images, torch.float32),
                (N_("labels"), out_labels, torch.int64),
            ):
                what = translated(name)
                if not isinstance(tensor, torch.Tensor):
                    return failed(
                        _("for {where} the {name} are a {type}, not a tensor").format(
                            where=where, name=what, type=type(tensor).__name__
                        )
                    )
                if tensor.device != device:
                    return failed(
                        _("for {where} the {name} are on {device}, not on the device given").format(
                            where=where, name=what, device=tensor.device
                        )
                    )
                if tensor.dtype != dtype:
                    return failed(
                        _("for {where} the {name} are {dtype}; the loss wants {wanted}").format(
                            where=where, name=what, dtype=tensor.dtype, wanted=dtype
                        )
                    )
            if out_images.shape != images.shape:
                return failed(
                    _("for {where} the images changed shape to {shape}").format(
                        where=where, shape=tuple(out_images.shape)
                    )
                )
            if out_labels.shape != (n,):
                return failed(
                    _("for {where} the labels have shape {shape}; cross_entropy wants ({n},)").format(
                        where=where, shape=tuple(out_labels.shape), n=n
                    )
                )
            if device.type != "meta":
                if not torch.equal(out_images.cpu(), images.float()):
                    return failed(
                        _("for {where} the image values changed: convert, do not rescale").format(where=where)
                    )
                if not torch.equal(out_labels.cpu(), labels.long().view(-1)):
                    return failed(
                        _("for {where} the label values are not the labels given").format(where=where)
                    )
    return passed(_("one call per tensor moves and converts it, and any batch size works"))


def check_model_and_optimizer(
    make_model_and_optimizer: Callable[[torch.device], tuple[nn.Module, torch.optim.Optimizer]],
) -> CheckResult:
    """Exercise 2: `make_model_and_optimizer(device)` returns a model on `device` and its optimizer.

    Checked on the `meta` device, where `.to()` replaces the parameter objects: an optimizer
    built before the move holds the old CPU tensors, which the model no longer uses; then on
    this machine's best device, so a device written into the function does not pass.
    """
    if not callable(make_model_and_optimizer):
        return failed(
            _("pass your function itself, e.g. check_model_and_optimizer(make_model_and_optimizer)")
        )
    goal = _("return a model on device and an optimizer of its parameters")
    if (
        verdict := unanswered(make_model_and_optimizer, "make_model_and_optimizer(device)", goal)
    ) is not None:
        return verdict
    for device in (torch.device("meta"), best_device()):
        verdict = _model_and_optimizer_on(make_model_and_optimizer, device)
        if verdict is not None:
            return verdict
    return passed(_("the model is on the device and the optimizer updates the very tensors it uses"))


def _model_and_optimizer_on(
    make_model_and_optimizer: Callable[[torch.device], tuple[nn.Module, torch.optim.Optimizer]],
    device: torch.device,
) -> CheckResult | None:
    """The hint for what the reader's function returns for `device`; None when it is right."""
    outcome = call_reader(make_model_and_optimizer, device)
    if outcome.problem is not None:
        return failed(
            _(
                "make_model_and_optimizer(torch.device({device!r})) {problem}. On meta, "
                "tensors have shapes but no values: nothing may read them"
            ).format(device=device.type, problem=outcome.problem)
        )
    out = outcome.value
    if not isinstance(out, tuple | list) or len(out) != 2:
        got = (
            _("None: did you forget `return`?")
            if out is None
            else _("a {type}").format(type=type(out).__name__)
        )
        return failed(_("it should return (model, optimizer); it returned {got}").format(got=got))
    model, optimizer = out
    if not isinstance(model, nn.Module):
        return failed(
            _("the first thing returned is a {type}, not an nn.Module").format(type=type(model).__name__)
        )
    if not isinstance(optimizer, torch.optim.Optimizer):
        return failed(
            _("the second thing returned is a {type}, not a torch.optim optimizer").format(
                type=type(optimizer).__name__
            )
        )
    if not list(model.parameters()):
        return failed(_("the model has no parameters: build one with at least one layer"))
    devices = module_devices(model)
    if devices != {device}:
        return failed(
            _("for {device} the model's parameters are on {devices}, not all on the device given").format(
                device=device.type, devices=sorted(map(str, devices))
            )
        )
    in_optimizer = {id(p) for group in optimizer.param_groups for p in group["params"]}
    in_model = {id(p) for p in model.parameters()}
    if in_optimizer != in_model:
        return failed(
            _(
                "the optimizer does not hold the model's current parameters: look at when it is created "
                "compared with the move"
            )
        )
    return None


def _load_hint(err: BaseException) -> str:
    """A hint for an error raised while loading the exercise's checkpoint, not the fix itself."""
    message = str(err)
    if "Unexpected key(s)" in message or "Missing key(s)" in message:
        return _(
            ". Compare the checkpoint's key names with the model's: the file was saved from "
            "nn.DataParallel, which puts a `module.` prefix on every key"
        )
    if "deserialize object on a CUDA device" in message:
        return _(
            ". The file was saved on a GPU: torch.load must be told where this machine wants the tensors"
        )
    return _(". Read the message: it says which step failed")


class _Net(nn.Module):
    """The small model of the exercise: two linear layers."""

    def __init__(self) -> None:
        super().__init__()
        self.hidden = nn.Linear(4, 3)
        self.out = nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.hidden(x)))


def exercise_model() -> nn.Module:
    """A fresh instance of the exercise's model (two linear layers, 4 -> 3 -> 2)."""
    return _Net()


def check_load_gpu_checkpoint(load_weights: Callable[[nn.Module, Path], object]) -> CheckResult:
    """Exercise 3: `load_weights(model, path)` loads a checkpoint saved from a DataParallel model on a GPU.

    The check writes, in a temporary folder, the state_dict of `nn.DataParallel(model)` with
    storages tagged `cuda:0`, then calls the reader's function with a bare model on this
    machine's best device and compares the weights. The function is tried first
    (`sandbox.trial_verdict`), and the folder is removed whatever it does.
    """
    if not callable(load_weights):
        return failed(_("pass your function itself, e.g. check_load_gpu_checkpoint(load_weights)"))
    goal = _("load the checkpoint at path into model, on the device model is on")
    if (verdict := unanswered(load_weights, "load_weights(model, path)", goal)) is not None:
        return verdict
    trained = exercise_model()
    generator = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))
    with torch.no_grad():  # weights no seed in the reader's code can rebuild
        for param in trained.parameters():
            param.copy_(torch.randn(param.shape, generator=generator))
    expected = [t.detach().clone() for t in trained.state_dict().values()]  # DataParallel may move it
    device = best_device()
    # The folder goes also when the function removed it, or a file in it, itself.
    with tempfile.TemporaryDirectory(prefix="course-checkpoint-", ignore_cleanup_errors=True) as folder:
        path = Path(folder) / "trained_on_gpu.pt"
        save_with_location(nn.DataParallel(trained).state_dict(), path, "cuda:0")
        model = exercise_model().to(device)
        names = list(model.state_dict())
        if (verdict := trial_verdict(load_weights, model, path)) is not None:
            return verdict  # it ended its process or hung
        try:
            returned = load_weights(model, path)
        except (Exception, SystemExit) as err:
            return failed(
                _("load_weights {error}{hint}").format(error=describe_error(err), hint=_load_hint(err))
            )
    if list(model.state_dict()) != names:
        return failed(
            _("after your function the model has other parameters: load into it, do not replace them")
        )
    if isinstance(returned, nn.Module) and returned is not model:
        return failed(
            _(
                "your function returns another model; the check looks at the one it was given: load the "
                "weights into that one"
            )
        )
    if module_devices(model) != {device}:
        return failed(_("after loading, the model's parameters are not all on the device the model was on"))
    for (name, got), want in zip(model.state_dict().items(), expected, strict=True):
        if got.is_meta or got.shape != want.shape or not torch.equal(got.detach().cpu(), want):
            return failed(
                _("the model's {name} does not hold the saved weights: was the state_dict loaded?").format(
                    name=name
                )
            )
    return passed(_("the GPU checkpoint loads on this machine and the module. prefix is gone"))
