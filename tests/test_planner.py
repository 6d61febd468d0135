"""course_utils.planner against the real thing: transformers' parameter counts, FSDP2's shards, the
bytes autograd saves, FlopCounterMode's FLOPs; and its arithmetic, presets and refusals."""

from __future__ import annotations

import math

import pytest
import torch
import torch.distributed as dist
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from torch.testing._internal.distributed.fake_pg import FakeStore
from torch.utils.flop_counter import FlopCounterMode
from transformers import LlamaConfig, LlamaForCausalLM, MixtralConfig, MixtralForCausalLM

from course_utils import planner as P
from course_utils.memory import saved_activation_bytes

SMALL = dict(vocab_size=300, hidden_size=64, intermediate_size=176, num_hidden_layers=2)
LLAMAS = {
    "capstone": dict(SMALL, vocab_size=512, num_attention_heads=4, num_key_value_heads=2),
    "tied, no GQA": dict(SMALL, num_attention_heads=4, num_key_value_heads=4, tie_word_embeddings=True),
    "head_dim 12, biases": dict(
        SMALL, num_attention_heads=8, num_key_value_heads=2, head_dim=12, attention_bias=True, mlp_bias=True
    ),
}


def llama_config(kwargs: dict, attention: str = "eager") -> LlamaConfig:
    return LlamaConfig(
        **{"tie_word_embeddings": False, **kwargs}, use_cache=False, attn_implementation=attention
    )


def spec_of(config) -> P.ModelSpec:
    return P.ModelSpec.from_config(config.to_dict())


# ------------------------------------------------------------------------------- parameter counts


@pytest.mark.parametrize("name", LLAMAS)
def test_parameter_count_equals_transformers_llama(name):
    config = llama_config(LLAMAS[name])
    with torch.device("meta"):
        model = LlamaForCausalLM(config)
    assert spec_of(config).parameter_count() == sum(p.numel() for p in model.parameters())


def test_parameter_count_equals_transformers_mixtral():
    config = MixtralConfig(
        **SMALL, num_attention_heads=4, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2
    )
    with torch.device("meta"):
        model = MixtralForCausalLM(config)
    spec = spec_of(config)
    assert (spec.num_experts, spec.experts_per_token, spec.moe_intermediate_size) == (4, 2, 176)
    assert spec.parameter_count() == sum(p.numel() for p in model.parameters())


def test_the_capstone_preset_is_notebook_15s_model():
    assert P.TINY_CAPSTONE.parameter_count() == 158_016  # notebook 15 prints "158,016 parameters"
    assert P.TINY_CAPSTONE.matmul_parameters_per_token() == 124_928  # and "6N = 6 x 124,928"


@pytest.mark.parametrize(
    ("model", "published"),
    [
        (P.LLAMA_3_1_8B, 8_030_261_248),
        (P.LLAMA_3_1_70B, 70_553_706_496),
        (P.LLAMA_3_1_405B, 405_853_388_800),
        (P.MIXTRAL_8X7B, 46_702_792_704),
    ],
)
def test_presets_count_their_published_parameters(model, published):
    assert model.parameter_count() == published


def test_mixtral_activates_its_published_12_9_billion():
    active = P.MIXTRAL_8X7B.matmul_parameters_per_token() + 32000 * 4096  # plus the embedding
    assert round(active / 1e9, 1) == 12.9


def test_deepseek_preset_differs_from_671b_by_mla_and_says_so():
    mla = 7168 * 1536 + 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 + 512 * 128 * 256 + 128 * 128 * 7168
    standard = 4 * 7168 * 128 * 128
    router_bias = 256 * (61 - 3)
    count = P.DEEPSEEK_V3.parameter_count()
    assert round(count / 1e9, 1) == 688.3
    assert round((count - 61 * (standard - mla) + router_bias) / 1e9) == 671
    assert "MLA" in P.DEEPSEEK_V3.notes


# ---------------------------------------------------------------------------------------- sharding


def test_dp_shard_4_divides_the_capstone_exactly_by_4():
    n = P.TINY_CAPSTONE.parameter_count()
    one = P.plan(P.TINY_CAPSTONE, P.Mesh(), seq_len=64, policy=P.FP32).memory[0]
    four = P.plan(P.TINY_CAPSTONE, P.Mesh(dp_shard=4), seq_len=64, policy=P.FP32).memory[0]
    assert (one.parameters, one.gradients, one.optimizer_state) == (4 * n, 4 * n, 8 * n)
    assert (four.parameters, four.gradients, four.optimizer_state) == (n, n, 2 * n)


def test_an_uneven_shard_is_padded_per_parameter_as_fsdp2_pads_dim_0():
    model = P.ModelSpec.from_config(dict(LLAMAS["capstone"], vocab_size=301))
    tensors = model.embedding_tensors() + model.head_tensors()
    tensors += [t for layer in range(model.num_layers) for t in model.layer_tensors(layer)]
    padded = sum(math.ceil(t.shape[0] / 3) * t.numel // t.shape[0] for t in tensors)
    assert padded > math.ceil(model.parameter_count() / 3)  # 301 vocabulary rows, 64 norm weights: padding
    assert P.plan(model, P.Mesh(dp_shard=3), seq_len=64).parameters_per_gpu == (padded,)


def rank0_fsdp2_elements(dp: int, tp: int, config: LlamaConfig) -> int:
    """Elements rank 0 of a fake process group holds after torchtitan's TP plan and fully_shard."""
    dist.init_process_group("fake", rank=0, world_size=dp * tp, store=FakeStore())
    try:
        mesh = init_device_mesh("cpu", (dp, tp), mesh_dim_names=("dp_shard", "tp"))
        with torch.device("meta"):
            model = LlamaForCausalLM(config)
        if tp > 1:
            vocab_rows = RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1))
            parallelize_module(
                model, mesh["tp"], {"model.embed_tokens": vocab_rows, "lm_head": ColwiseParallel()}
            )
            columns = [f"self_attn.{n}_proj" for n in "qkv"] + ["mlp.gate_proj", "mlp.up_proj"]
            rows = ["self_attn.o_proj", "mlp.down_proj"]
            plan = {n: ColwiseParallel() for n in columns} | {n: RowwiseParallel() for n in rows}
            for layer in model.model.layers:
                parallelize_module(layer, mesh["tp"], plan)
        units = [*model.model.layers, model.model.embed_tokens, model]
        for unit in units:
            fully_shard(unit, mesh=mesh["dp_shard"])
        # FSDP2's storage of each sharded parameter: padded to ceil(dim 0 / dp) rows on every rank
        return sum(
            fsdp_param._sharded_param_data.numel()
            for unit in units
            for fsdp_param in unit._get_fsdp_state()._fsdp_param_group.fsdp_params
        )
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize(("dp", "tp", "vocab"), [(3, 1, 301), (2, 2, 301), (3, 2, 300)])
def test_shards_equal_fully_shard_and_tensor_parallel_on_a_fake_process_group(dp, tp, vocab):
    config = llama_config(dict(LLAMAS["capstone"], vocab_size=vocab))
    planned = P.plan(spec_of(config), P.Mesh(dp_shard=dp, tp=tp), seq_len=64).parameters_per_gpu
    assert planned == (rank0_fsdp2_elements(dp, tp, config),)


def test_the_mixed_policy_keeps_fp32_shards_and_gathers_bf16():
    mesh = P.Mesh(dp_shard=8)
    mixed = P.plan(P.LLAMA_3_1_8B, mesh, policy=P.BF16_MIXED).memory[0]
    fp32 = P.plan(P.LLAMA_3_1_8B, mesh, policy=P.FP32).memory[0]
    assert (mixed.parameters, mixed.gradients, mixed.optimizer_state) == (
        fp32.parameters,
        fp32.gradients,
        fp32.optimizer_state,
    )
    layer = sum(t.numel for t in P.LLAMA_3_1_8B.layer_tensors(0))
    head = 128256 * 4096 + 4096  # the largest unit: the final norm and the head, run after the last layer
    assert mixed.fsdp_buffers == (layer + head) * 2 + head * (2 + 4)  # bf16 gathered; bf16 and fp32 grads
    assert fp32.fsdp_buffers == (layer + head) * 4 + head * (4 + 4)
    assert P.plan(P.LLAMA_3_1_8B, P.Mesh(dp_replicate=8)).memory[0].fsdp_buffers == 0  # no FSDP
    logits = 8192 * 128256  # one sequence's logits over the whole vocabulary
    assert (mixed.logits, fp32.logits) == (logits * (2 + 4), logits * 4)  # bf16, and its fp32 upcast


def test_pipeline_stages_hold_their_layers_and_p_minus_i_micro_batches():
    mesh = P.Mesh(pp=4)
    p = P.plan(P.LLAMA_3_1_8B, mesh, seq_len=4096, micro_batches=8)
    layer = sum(t.numel for t in P.LLAMA_3_1_8B.layer_tensors(0))
    embedding = 128256 * 4096
    assert p.parameters_per_gpu == (8 * layer + embedding, 8 * layer, 8 * layer, 8 * layer + embedding + 4096)
    per_micro_batch = [
        sum(
            sum(P.activation_tensors(P.LLAMA_3_1_8B, i, 1, 4096, P.BF16_MIXED).values())
            for i in range(8 * stage, 8 * stage + 8)
        )
        + sum(P.model_level_tensors(P.LLAMA_3_1_8B, 1, 4096, P.BF16_MIXED, stage == 0, stage == 3).values())
        for stage in range(4)
    ]
    assert [m.activations for m in p.memory] == [(4 - i) * per_micro_batch[i] for i in range(4)]
    assert [m.logits > 0 for m in p.memory] == [False, False, False, True]
    (send,) = p.communication  # a middle stage's: it sends forward and backward to two neighbours
    assert (send.op, send.count, send.link) == ("send/recv", 2 * 8 * 2, "NVLink")
    assert send.bytes == 2 * 8 * 2 * 4096 * 4096 * 2 and send.seconds == send.bytes / 450e9


# ------------------------------------------------------------------------------------ activations


def saved_storage_bytes(model, rows: torch.Tensor) -> int:
    """Bytes of the distinct storages autograd saves for backward (weights left out): real memory, each
    tensor once however many views of it are saved."""
    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        if t.untyped_storage().data_ptr() not in weights:
            storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(rows, labels=rows).loss.backward()
    return sum(storages.values())


def measured(
    name: str, attention: str, dtype: torch.dtype, checkpointed: bool = False, b: int = 3, s: int = 20
):
    """(distinct saved bytes, saved_activation_bytes, the planner's activations, the spec) of one forward."""
    config = llama_config(LLAMAS[name], attention)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(dtype)
    if checkpointed:
        for i, block in enumerate(model.model.layers):
            model.model.layers[i] = checkpoint_wrapper(block)
    rows = torch.randint(0, config.vocab_size, (b, s))
    _, counted = saved_activation_bytes(lambda: model(rows, labels=rows).loss, list(model.parameters()))
    policy = P.FP32 if dtype == torch.float32 else P.BF16_MIXED
    plan = P.plan(
        spec_of(config),
        P.Mesh(),
        seq_len=s,
        micro_batch=b,
        policy=policy,
        checkpointing="full" if checkpointed else "none",
        attention=attention,
    )
    return saved_storage_bytes(model, rows), counted, plan.memory[0].activations, spec_of(config)


@pytest.mark.parametrize("name", LLAMAS)
def test_fp32_eager_activations_equal_what_autograd_saves(name):
    distinct, counted, planned, spec = measured(name, "eager", torch.float32)
    assert planned == distinct
    # saved_activation_bytes counts a tensor saved under two shapes twice: eager's softmax output is
    # saved as (b, a, s, s) by the softmax and as (b*a, s, s) by the product with the values
    b, s = 3, 20
    assert counted - distinct == spec.num_layers * 4 * b * spec.num_heads * s * s


@pytest.mark.parametrize("name", LLAMAS)
@pytest.mark.parametrize("attention", ["eager", "sdpa"])
def test_bf16_and_sdpa_activations_equal_what_autograd_saves(name, attention):
    for dtype in (torch.float32, torch.bfloat16):
        distinct, counted, planned, spec = measured(name, attention, dtype)
        assert planned == distinct, (attention, dtype)
        if attention == "sdpa":  # SDPA's output is saved as (b, a, s, d) and by o_proj as (b*s, a*d)
            c = dtype.itemsize
            assert counted - distinct == spec.num_layers * c * 3 * 20 * spec.q_dim


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_full_checkpointing_keeps_the_block_inputs_and_cos_sin_outside_autograd(dtype):
    distinct, counted, planned, spec = measured("capstone", "eager", dtype, checkpointed=True)
    assert counted == distinct
    # the planner also counts RoPE's cos and sin, which the checkpoint keeps for the recomputation
    # as keyword arguments, not through autograd's saved tensors
    assert planned - distinct == 2 * dtype.itemsize * 20 * spec.head_dim


def test_selective_checkpointing_drops_the_attention_core_only():
    none = P.activation_tensors(P.LLAMA_3_1_8B, 0, 1, 4096, P.BF16_MIXED, "none", "eager")
    selective = P.activation_tensors(P.LLAMA_3_1_8B, 0, 1, 4096, P.BF16_MIXED, "selective", "eager")
    dropped = {k: v for k, v in none.items() if k not in selective}
    assert set(dropped) == {
        "key repeated to every query head",
        "value repeated to every query head",
        "softmax output (fp32)",
        "attention probabilities cast back",
    }
    assert selective["key"] == selective["value"] == 2 * 4096 * 1024  # at the key/value heads' width
    full = P.activation_tensors(P.LLAMA_3_1_8B, 0, 1, 4096, P.BF16_MIXED, "full", "eager")
    assert full == {"layer input": 2 * 4096 * 4096}
    for checkpointing, kept in (("selective", selective), ("full", full)):
        p = P.plan(P.LLAMA_3_1_8B, P.Mesh(), seq_len=4096, checkpointing=checkpointing, attention="eager")
        assert p.memory[0].recompute == sum(none.values()) - sum(kept.values())  # one layer rebuilt


def test_tensor_parallelism_shards_all_but_the_gathered_linear_inputs():
    one = P.activation_tensors(P.LLAMA_3_1_8B, 0, 2, 4096, P.BF16_MIXED, tp=1)
    eight = P.activation_tensors(P.LLAMA_3_1_8B, 0, 2, 4096, P.BF16_MIXED, tp=8)
    gathered = {k for k in eight if "gathered" in k}
    assert len(gathered) == 2
    assert all(eight[k] == 2 * 2 * 4096 * 4096 for k in gathered)
    rest = sorted(v for k, v in eight.items() if k not in gathered)
    assert rest == sorted(v // 8 for k, v in one.items() if "input (the norm" not in k)


def test_context_parallelism_divides_the_sequence():
    whole = P.plan(P.LLAMA_3_1_8B, P.Mesh(dp_shard=2), seq_len=8192).memory[0]
    split = P.plan(P.LLAMA_3_1_8B, P.Mesh(dp_shard=1, cp=2), seq_len=8192).memory[0]
    assert split.parameters == whole.parameters  # FSDP shards over dp_shard x cp
    assert split.activations == 32 * sum(
        P.activation_tensors(P.LLAMA_3_1_8B, 0, 1, 4096, P.BF16_MIXED).values()
    ) + sum(P.model_level_tensors(P.LLAMA_3_1_8B, 1, 4096, P.BF16_MIXED, True, True).values())
    cp = rows_of(P.plan(P.LLAMA_3_1_8B, P.Mesh(cp=2), seq_len=8192), "cp")
    keys_and_values = 8192 * 2 * 1024 * 2  # the whole sequence's, bf16
    assert cp["all-gather"].bytes == 2 * 32 * keys_and_values and cp["all-gather"].count == 2 * 32
    assert cp["reduce-scatter"].bytes == 32 * keys_and_values


# ------------------------------------------------------------------------------- compute, comms


def test_flops_per_token_equal_flop_counter_mode():
    config = llama_config(LLAMAS["head_dim 12, biases"])
    model = LlamaForCausalLM(config)
    rows = torch.randint(0, config.vocab_size, (3, 20))
    with FlopCounterMode(display=False) as counter:
        model(rows, labels=rows).loss.backward()
    compute = P.plan(spec_of(config), P.Mesh(), seq_len=20, micro_batch=3).compute
    assert compute.model_flops_per_step == counter.get_total_flops()
    assert compute.flops_per_token == 6 * spec_of(config).matmul_parameters_per_token() + 12 * 2 * 96 * 20


def test_recomputation_adds_hardware_flops_and_mfu_reads_a_step_time():
    none = P.plan(P.LLAMA_3_1_8B, P.Mesh(dp_shard=8), seq_len=8192)
    full = P.plan(P.LLAMA_3_1_8B, P.Mesh(dp_shard=8), seq_len=8192, checkpointing="full")
    attention = 12 * 32 * 4096 * 8192
    head = 128256 * 4096
    extra = (2 * (P.LLAMA_3_1_8B.matmul_parameters_per_token() - head) + attention // 3) * 8 * 8192
    assert full.compute.hardware_flops_per_step - none.compute.hardware_flops_per_step == extra
    tokens_per_s = 8 * 8192 / 1.0
    assert P.mfu(none, 1.0) == pytest.approx(tokens_per_s * none.compute.flops_per_token / (8 * 989e12))
    assert none.compute.seconds == pytest.approx(none.compute.model_flops_per_step / (8 * 989e12))


def test_pipeline_bubble_stretches_the_compute_bound():
    p = P.plan(P.LLAMA_3_1_8B, P.Mesh(pp=4, dp_shard=2), seq_len=4096, micro_batches=8)
    assert p.compute.bubble == (8 + 3) / 8
    assert p.compute.seconds == pytest.approx(p.compute.hardware_flops_per_step / (8 * 989e12) * 11 / 8)


def rows_of(p: P.Plan, dim: str) -> dict[str, P.Collective]:
    return {c.op: c for c in p.communication if c.dim == dim}


def test_fsdp_gathers_twice_and_reduce_scatters_once_per_micro_batch():
    p = P.plan(P.LLAMA_3_1_8B, P.Mesh(dp_shard=8), micro_batches=2)
    fsdp = rows_of(p, "dp_shard")
    n = P.LLAMA_3_1_8B.parameter_count()  # every dim 0 divides by 8: no padding
    assert fsdp["all-gather"].bytes == 2 * 2 * n * 2 and fsdp["all-gather"].count == 2 * 2 * 34
    assert fsdp["reduce-scatter"].bytes == 2 * n * 4 and fsdp["reduce-scatter"].count == 2 * 34
    assert fsdp["all-gather"].bus_factor == fsdp["reduce-scatter"].bus_factor == 7 / 8
    assert fsdp["all-gather"].link == "NVLink"
    assert fsdp["all-gather"].seconds == pytest.approx(4 * n * 2 * 7 / 8 / 450e9)
    assert set(rows_of(p, "tp")) == set()


def test_a_group_across_nodes_uses_the_network_with_the_all_reduce_factor():
    p = P.plan(P.LLAMA_3_1_70B, P.Mesh(dp_replicate=4, tp=8), seq_len=4096)
    tp, dp = rows_of(p, "tp"), rows_of(p, "dp_replicate")
    assert tp["all-gather"].link == "NVLink" and tp["all-gather"].count == 80 * 4 + 2
    assert tp["all-gather"].bytes == tp["all-gather"].count * 4096 * 8192 * 2
    assert dp["all-reduce"].link == "network" and dp["all-reduce"].bus_factor == 2 * 3 / 4
    assert dp["all-reduce"].bytes == p.parameters_per_gpu[0] * 4
    assert p.communication_seconds["network"] == pytest.approx(dp["all-reduce"].seconds)
    assert p.step_seconds == max(p.compute.seconds, *p.communication_seconds.values())


def test_experts_go_all_to_all_over_ep():
    p = P.plan(P.MIXTRAL_8X7B, P.Mesh(dp_shard=8, ep=8), seq_len=4096)
    a2a = rows_of(p, "ep")["all-to-all"]
    assert a2a.count == 4 * 32 and a2a.bytes == 4 * 32 * 4096 * 2 * 4096 * 2
    assert a2a.bus_factor == 7 / 8
    assert "expert parameters" not in {c.what.split(",")[0] for c in p.communication}  # one expert rank each
    experts = 32 * 3 * 14336 * 4096  # one expert a rank, whole: no FSDP over the 8 / 8 = 1 rank left
    dense = (P.MIXTRAL_8X7B.parameter_count() - 8 * experts) // 8
    assert p.parameters_per_gpu == (dense + experts,)


def test_fewer_local_experts_than_fsdp_ranks_shard_the_experts_dim_1():
    p = P.plan(P.MIXTRAL_8X7B, P.Mesh(dp_shard=16, ep=2), seq_len=4096)  # 4 experts a rank, 8 ranks each
    h, vocab, kv = 4096, 32000, 1024
    dense = 2 * vocab * h // 16 + h // 16
    dense += 32 * (2 * h // 16 + 2 * (h // 16) * h + 2 * (kv // 16) * h + 1 * h)  # router: ceil(8 / 16) rows
    experts = 32 * 3 * 4 * (14336 // 8) * h  # 4 experts, each split 8 ways along its width
    assert p.parameters_per_gpu == (dense + experts,)
    (gather,) = [
        c for c in p.communication if c.what.startswith("expert parameters") and c.op == "all-gather"
    ]
    assert (gather.group_size, gather.link) == (8, "network")  # 8 ranks 2 apart: across two nodes


# ------------------------------------------------------------------------------ fits, launching


@pytest.mark.parametrize("hardware", P.HARDWARE.values(), ids=list(P.HARDWARE))
def test_every_preset_plans_on_every_gpu(hardware):
    for model in P.MODELS.values():
        mesh = P.Mesh(dp_shard=8, ep=8 if model.num_experts else 1)
        p = P.plan(model, mesh, hardware, seq_len=4096, micro_batches=2, checkpointing="full")
        (memory,) = p.memory
        assert all(isinstance(v, int) and v > 0 for v in vars(memory).values()), model.name
        assert p.global_batch == 2 * 8 and p.compute.tokens_per_step == 2 * 8 * 4096
        assert p.step_seconds >= p.compute.seconds > 0


def test_fits_says_what_the_memory_allows():
    small = P.plan(P.LLAMA_3_1_8B, P.Mesh(dp_shard=8), seq_len=8192, checkpointing="full")
    huge = P.plan(P.LLAMA_3_1_405B, P.Mesh(dp_shard=8), seq_len=8192, checkpointing="full")
    assert P.fits(small) and not P.fits(huge)
    assert not P.fits(small, reserve=P.H100_SXM.memory - small.peak_memory + 1)
    assert P.fits(P.plan(P.LLAMA_3_1_8B, P.Mesh(dp_shard=8), hardware=P.H200, seq_len=8192))


def test_launch_command_for_two_nodes_and_for_one():
    mesh = P.Mesh(dp_shard=2, tp=8)
    text = P.launch_command(mesh, 8, "train.py", "node0:29500")
    assert text.splitlines() == [
        "torchrun --nnodes=2 --nproc-per-node=8 --rdzv-backend=c10d --rdzv-endpoint=node0:29500 train.py",
        '# in train.py: mesh = init_device_mesh("cuda", (2, 8), mesh_dim_names=("dp_shard", "tp"))',
    ]
    assert P.launch_command(P.Mesh(dp_shard=4)).splitlines()[0] == (
        "torchrun --nnodes=1 --nproc-per-node=4 --standalone train.py"
    )
    assert 'mesh_dim_names=("dp_shard",)' in P.launch_command(P.Mesh())
    assert "ep=8" in P.launch_command(P.Mesh(dp_shard=8, ep=8))


# ------------------------------------------------------------------------------------- refusals


BAD_SIZES = [0, -1, True, 2.0, float("nan"), float("inf"), "2", None, 10**400, 10**5000]


@pytest.mark.parametrize("bad", BAD_SIZES, ids=[f"{type(v).__name__}-{i}" for i, v in enumerate(BAD_SIZES)])
@pytest.mark.parametrize("dim", ["pp", "dp_replicate", "dp_shard", "cp", "tp", "ep"])
def test_a_mesh_dimension_must_be_a_positive_int(dim, bad):
    with pytest.raises((TypeError, ValueError), match=rf"^{dim} must"):
        P.Mesh(**{dim: bad})


@pytest.mark.parametrize(
    ("mesh", "match"),
    [
        (P.Mesh(tp=3), r"tp=3 must divide num_heads=32"),
        (P.Mesh(tp=16), r"tp=16 must divide num_kv_heads=8"),
        (P.Mesh(pp=3), r"pp=3 must divide num_layers=32"),
        (P.Mesh(dp_shard=2, ep=2), r"ep=2 needs a model with experts"),
    ],
)
def test_a_mesh_that_cannot_split_the_model_is_refused(mesh, match):
    with pytest.raises(ValueError, match=match):
        P.plan(P.LLAMA_3_1_8B, mesh)


def test_experts_and_world_size_must_divide():
    with pytest.raises(ValueError, match=r"ep=3 must divide num_experts=8"):
        P.Mesh(dp_shard=3, ep=3).check(P.MIXTRAL_8X7B)
    with pytest.raises(ValueError, match=r"ep=4 must divide dp_shard \* cp=2"):
        P.Mesh(dp_shard=2, ep=4)
    with pytest.raises(ValueError, match=r"world_size=16 must equal .* = 8"):
        P.Mesh(dp_shard=8).check(P.LLAMA_3_1_8B, world_size=16)
    with pytest.raises(ValueError, match=r"gpus_per_node=8 must divide world size=12"):
        P.plan(P.LLAMA_3_1_8B, P.Mesh(dp_shard=12))


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(seq_len=0), ValueError, r"^seq_len must be at least 1"),
        (dict(seq_len=2048.0), TypeError, r"^seq_len must be a whole number"),
        (dict(micro_batch=True), TypeError, r"^micro_batch must be a whole number"),
        (dict(micro_batches=float("nan")), TypeError, r"^micro_batches must be a whole number"),
        (
            dict(checkpointing="some"),
            ValueError,
            r"^checkpointing must be one of 'none', 'selective', 'full'",
        ),
        (dict(attention="flash"), ValueError, r"^attention must be one of 'sdpa', 'eager'"),
        (dict(seq_len=4097, mesh=P.Mesh(tp=2)), ValueError, r"cp x tp=2 must divide seq_len=4097"),
        (dict(mesh=P.Mesh(cp=2), attention="eager"), ValueError, r"cp > 1 needs attention='sdpa'"),
        (dict(mesh=P.Mesh(pp=4), micro_batches=2), ValueError, r"micro_batches=2 must be at least pp=4"),
        (dict(mesh=(8,)), TypeError, r"^mesh must be a Mesh"),
        (dict(hardware="H100"), TypeError, r"^hardware must be a Hardware"),
        (dict(policy="bf16"), TypeError, r"^policy must be a DtypePolicy"),
    ],
)
def test_plan_refuses_bad_arguments_by_name(kwargs, error, match):
    arguments = {"mesh": P.Mesh(), "seq_len": 4096} | kwargs
    with pytest.raises(error, match=match):
        P.plan(P.LLAMA_3_1_8B, **arguments)


@pytest.mark.parametrize(
    ("config", "error", "match"),
    [
        ({"hidden_size": 64}, ValueError, r"config lacks 'vocab_size'"),
        (
            dict(LLAMAS["capstone"], num_attention_heads=0),
            ValueError,
            r"num_attention_heads'\] must be at least 1",
        ),
        (
            dict(LLAMAS["capstone"], num_attention_heads=5),
            ValueError,
            r"num_attention_heads'\]=5 must divide",
        ),
        (
            dict(LLAMAS["capstone"], num_key_value_heads=3),
            ValueError,
            r"num_kv_heads=3 must divide num_heads=4",
        ),
        (dict(LLAMAS["capstone"], vocab_size=-5), ValueError, r"^vocab_size must be at least 1"),
        (
            dict(LLAMAS["capstone"], tie_word_embeddings=1),
            TypeError,
            r"^tie_word_embeddings must be True or False",
        ),
        ([("vocab_size", 5)], TypeError, r"^config must be a dict"),
        (
            dict(LLAMAS["capstone"], num_local_experts=2, num_experts_per_tok=3),
            ValueError,
            r"experts_per_token=3",
        ),
    ],
)
def test_from_config_refuses_a_config_it_cannot_plan(config, error, match):
    with pytest.raises(error, match=match):
        P.ModelSpec.from_config(config)


def test_the_activation_tables_refuse_bad_arguments():
    with pytest.raises(ValueError, match=r"^layer must be below num_layers=2, not 2"):
        P.activation_tensors(P.TINY_CAPSTONE, 2, 1, 64)
    with pytest.raises(TypeError, match=r"^model must be a ModelSpec"):
        P.activation_tensors({"hidden_size": 64}, 0, 1, 64)
    with pytest.raises(TypeError, match=r"^policy must be a DtypePolicy"):
        P.model_level_tensors(P.TINY_CAPSTONE, 1, 64, "bf16", True, True)
    with pytest.raises(TypeError, match=r"^first must be True or False"):
        P.model_level_tensors(P.TINY_CAPSTONE, 1, 64, P.FP32, 1, True)
    with pytest.raises(ValueError, match=r"^compute must be a dtype's size in bytes"):
        P.DtypePolicy("fp24", 4, 4, 4, 3, 4)
    with pytest.raises(ValueError, match=r"^nvlink must be a positive finite number"):
        P.Hardware("x", 80 * P.GB, 1e15, 1e14, 0, 1e9, 8)


def test_fits_mfu_and_launch_refuse_bad_arguments():
    p = P.plan(P.TINY_CAPSTONE, P.Mesh(), seq_len=64)
    with pytest.raises(TypeError, match=r"^p must be a Plan"):
        P.fits("plan")
    with pytest.raises(ValueError, match=r"^reserve must be at least 0"):
        P.fits(p, reserve=-1)
    for bad in (0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match=r"^step_seconds must be a positive finite number"):
            P.mfu(p, bad)
    with pytest.raises(TypeError, match=r"^step_seconds must be a positive number"):
        P.mfu(p, True)
    with pytest.raises(TypeError, match=r"^gpus_per_node must be a whole number"):
        P.launch_command(P.Mesh(), gpus_per_node=8.0)
    with pytest.raises(ValueError, match=r"^script must be a non-empty str"):
        P.launch_command(P.Mesh(), script=" ")
    with pytest.raises(ValueError, match=r"gpus_per_node=8 must divide world size=12"):
        P.launch_command(P.Mesh(dp_shard=12))
