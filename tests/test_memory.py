"""course_utils.memory counts a training step's bytes by line, as notebook 10 does by hand."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from course_utils import i18n
from course_utils.memory import LINES, line_label, saved_activation_bytes, step_memory, tensor_bytes


def mlp() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def test_tensor_bytes_counts_elements_times_their_size():
    assert tensor_bytes(torch.zeros(3, 5)) == 60
    assert tensor_bytes(torch.zeros(3, dtype=torch.bfloat16)) == 6
    assert tensor_bytes(torch.zeros(7, device="meta")) == 28
    with pytest.raises(TypeError, match=r"torch\.Tensor"):
        tensor_bytes([1.0, 2.0])


def test_saved_activation_bytes_leaves_parameters_out():
    model = mlp()
    x = torch.randn(5, 4)
    out, saved = saved_activation_bytes(lambda: model(x), list(model.parameters()))
    # Linear 1 saves x (5x4), ReLU its output (5x8), Linear 2 its input: the same tensor, counted once.
    assert saved == (5 * 4 + 5 * 8) * 4
    assert torch.equal(out, model(x))
    _, with_params = saved_activation_bytes(lambda: model(x), [])
    assert with_params > saved  # the weights the Linears saved are counted when not excluded


def test_saved_activation_bytes_sees_checkpoint_keep_only_inputs():
    model = mlp()
    x = torch.randn(5, 4)
    _, plain = saved_activation_bytes(lambda: model(x), list(model.parameters()))
    _, kept = saved_activation_bytes(
        lambda: checkpoint(model, x, use_reentrant=False), list(model.parameters())
    )
    assert kept == 5 * 4 * 4 < plain  # only the input of the checkpointed block


def test_saved_activation_bytes_wants_a_function():
    with pytest.raises(TypeError, match="lambda"):
        saved_activation_bytes(torch.zeros(2), [])


def test_step_memory_gives_the_four_lines_for_adam_and_sgd():
    x, y = torch.randn(5, 4), torch.randn(5, 2)
    model = mlp()
    lines = step_memory(model, torch.optim.Adam(model.parameters()), lambda m: F.mse_loss(m(x), y))
    params = sum(p.numel() for p in model.parameters()) * 4
    assert list(lines) == list(LINES)
    assert lines["parameters"] == lines["gradients"] == params
    assert lines["optimizer state"] == 2 * params  # exp_avg, exp_avg_sq; step counters left out
    assert lines["activations"] == (5 * 4 + 5 * 8 + 5 * 2 + 5 * 2) * 4  # + the loss's input and target
    sgd = mlp()
    assert (
        step_memory(sgd, torch.optim.SGD(sgd.parameters(), lr=0.1), lambda m: F.mse_loss(m(x), y))[
            "optimizer state"
        ]
        == 0
    )


def test_step_memory_takes_the_state_a_sharded_optimizer_names():
    model = mlp()
    x, y = torch.randn(5, 4), torch.randn(5, 2)
    optimizer = torch.optim.Adam(model.parameters())
    first = next(model.parameters())
    lines = step_memory(
        model, optimizer, lambda m: F.mse_loss(m(x), y), lambda opt: [opt.state[first]["exp_avg"]]
    )
    assert lines["optimizer state"] == tensor_bytes(first)


def test_step_memory_rejects_what_it_cannot_count():
    frozen = mlp().requires_grad_(False)
    with pytest.raises(ValueError, match="no trainable parameters"):
        step_memory(
            frozen,
            torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1),
            lambda m: m(torch.ones(1, 4)).sum(),
        )
    model = mlp()
    with pytest.raises(ValueError, match="one number"):
        step_memory(model, torch.optim.SGD(model.parameters(), lr=0.1), lambda m: m(torch.ones(3, 4)))


def test_a_model_without_trainable_parameters_is_explained_in_chinese_where_the_notebook_asks(monkeypatch):
    monkeypatch.setenv("COURSE_LANGUAGE", "zh-CN")
    frozen = mlp().requires_grad_(False)
    with pytest.raises(ValueError, match=r"^这个模型没有可训练的参数：没有东西可以统计$"):
        step_memory(
            frozen, torch.optim.SGD([torch.zeros(1, requires_grad=True)]), lambda m: m(torch.ones(1, 4)).sum()
        )


@pytest.mark.parametrize(
    ("kwargs", "names"),
    [
        ({"model": None}, "model must be a torch Module"),
        ({"optimizer": "adam"}, "optimizer must be a torch Optimizer"),
        ({"loss_of": None}, "loss_of must be a function of the model"),
        ({"state_of": []}, "state_of must be None or a function"),
    ],
)
def test_step_memory_names_the_bad_argument(kwargs, names):
    model = nn.Linear(2, 1)
    good = {
        "model": model,
        "optimizer": torch.optim.SGD(model.parameters(), lr=0.1),
        "loss_of": lambda m: m(torch.ones(1, 2)).sum(),
    }
    with pytest.raises(TypeError, match=names):
        step_memory(**(good | kwargs))


@pytest.mark.parametrize("params", [None, [None], torch.ones(2)])
def test_saved_activation_bytes_needs_a_list_of_tensors(params):
    with pytest.raises(TypeError, match="params must be a list of tensors"):
        saved_activation_bytes(lambda: None, params)


@pytest.mark.parametrize(
    ("language", "labels"), [("en", list(LINES)), ("zh-CN", ["参数", "梯度", "优化器状态", "激活值"])]
)
def test_a_tables_labels_follow_the_notebooks_language_and_the_keys_stay(monkeypatch, language, labels):
    monkeypatch.setenv(i18n.LANGUAGE_VARIABLE, language)
    assert [line_label(line) for line in LINES] == labels
    with pytest.raises(ValueError, match=r"parameters, gradients, optimizer state, activations.*'weights'"):
        line_label("weights")
    with pytest.raises(ValueError, match=r"\['activations'\]"):
        line_label(["activations"])
