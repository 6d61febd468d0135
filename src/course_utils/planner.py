"""Plan a training run of a decoder-only transformer before renting the GPUs (notebook 16).

From a model's Hugging Face config, a device mesh and a GPU model, `plan` works out what one training
step costs on each GPU: the memory, term by term; the collectives of every mesh dimension, with the
least time the links allow; the FLOPs, the least time the GPUs allow, and the MFU of a measured step.
`fits` says whether the memory fits, and `launch_command` writes the torchrun line and the mesh.

The module imports only the standard library, so it can be copied out of the course. The rules it
follows are PyTorch's, read in its sources, and Hugging Face `transformers`' Llama; its tests compare
them with the real thing: parameter counts with `LlamaForCausalLM`, FSDP2's shards with `fully_shard`,
activations with what autograd saves, FLOPs with `FlopCounterMode`.

Conventions (what a mesh dimension does, as in torchtitan, whose mesh order this follows):

- `tp` shards the attention heads and the MLP's intermediate width (Megatron's column- and row-wise
  linears, with sequence parallelism between them), the embedding and the head by vocabulary rows;
  RMSNorm weights and the MoE router are replicated. Experts are sharded by `tp` like a dense MLP.
- `dp_shard` is FSDP2 (`fully_shard`): it shards every parameter, gradient and optimizer state over
  `dp_shard * cp` ranks (the `cp` ranks hold the same weights). `dp_replicate` replicates (DDP, or
  HSDP with `dp_shard`).
- `cp` splits the sequence (context parallelism); `pp` splits the layers into `pp` stages, the
  embedding on the first and the final norm and head on the last, scheduled 1F1B.
- `ep` splits the experts of a MoE layer; its ranks are carved out of the `dp_shard * cp` ones, so
  `ep` does not add to the world size, and the experts are FSDP-sharded over the remaining
  `dp_shard * cp / ep` ranks.
- The FSDP units are the layers, the embedding, and the final norm with the head. The gradients are
  reduced on every micro-batch's backward (FSDP2's default); what torch's pipeline schedules do
  instead with FSDP (keep unsharded gradients until the last micro-batch) is not modelled.
"""

from __future__ import annotations

import itertools
import math
import operator
import shlex
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

__all__ = [
    "A100_80GB",
    "BF16_MIXED",
    "DEEPSEEK_V3",
    "FP32",
    "H100_SXM",
    "H200",
    "HARDWARE",
    "LLAMA_3_1_8B",
    "LLAMA_3_1_70B",
    "LLAMA_3_1_405B",
    "MIXTRAL_8X7B",
    "MODELS",
    "TINY_CAPSTONE",
    "Collective",
    "Compute",
    "DtypePolicy",
    "Hardware",
    "Memory",
    "Mesh",
    "ModelSpec",
    "ParamTensor",
    "Plan",
    "activation_tensors",
    "fits",
    "launch_command",
    "mfu",
    "model_level_tensors",
    "plan",
]

CHECKPOINTING = ("none", "selective", "full")
ATTENTION = ("sdpa", "eager")
MESH_DIMS = ("pp", "dp_replicate", "dp_shard", "cp", "tp")  # outermost first: tp's ranks are neighbours
INT64 = 8  # bytes of a token id or label
FP32_BYTES = 4
MAX_SIZE = 2**50  # larger than any model's size, batch or memory, and far from float's limits


def _count(name: str, value: object, low: int = 1) -> int:
    """`value` as an int from `low` to 2**50, else an error naming `name` (no bool, no float, even 2.0);
    the bound keeps every product of sizes within what a float holds."""
    number = None
    if not isinstance(value, bool):
        try:
            number = operator.index(value)  # type: ignore[call-overload]
        except TypeError:
            pass
    if number is None:
        raise TypeError(f"{name} must be a whole number (an int such as 2), not {value!r}")
    if number < low:
        raise ValueError(f"{name} must be at least {low}, not {number}")
    if number > MAX_SIZE:
        digits = math.floor(number.bit_length() * math.log10(2)) + 1  # str() refuses over 4300 digits
        raise ValueError(f"{name} must be at most 2**50, not an int of about {digits} digits")
    return number


def _flag(name: str, value: object) -> bool:
    """`value` if it is a bool, else a TypeError naming `name`."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, not {value!r}")
    return value


def _choice(name: str, value: object, allowed: tuple[str, ...]) -> str:
    """`value` if it is one of `allowed`, else a ValueError naming `name` and listing them."""
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}, not {value!r}")
    return value


def _rate(name: str, value: object) -> float:
    """`value` as a positive finite float (an int counts), else an error naming `name`."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a positive number, not {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number, not {value!r}")
    return float(value)


def _expect(name: str, value: object, kind: type, example: str) -> None:
    """A TypeError naming `name` unless `value` is a `kind`; `example` shows one."""
    if not isinstance(value, kind):
        raise TypeError(f"{name} must be a {kind.__name__} (e.g. {example}), not {value!r}")


def _divides(name: str, value: int, by_name: str, by: int) -> None:
    """A ValueError naming both sizes unless `by` divides `value`."""
    if value % by:
        raise ValueError(f"{by_name}={by} must divide {name}={value}: choose sizes where it does")


# ---------------------------------------------------------------------------------------------- model


@dataclass(frozen=True)
class ParamTensor:
    """One parameter tensor of a layer: its shape, the dim `tp` shards (None: replicated), and whether it
    holds experts (dim 0 is the expert index, split by `ep`)."""

    name: str
    shape: tuple[int, ...]
    tp_dim: int | None = None
    expert: bool = False

    @property
    def numel(self) -> int:
        """Its number of elements."""
        return math.prod(self.shape)


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer, as a Hugging Face Llama, Mixtral or DeepSeek config describes it.

    `intermediate_size` is the dense MLP's width; for a MoE model, `num_experts` experts of width
    `moe_intermediate_size` replace it in every layer after the first `first_dense_layers`, each token
    going to `experts_per_token` of them, plus a shared expert of width `shared_expert_size` (0: none).
    """

    name: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    tie_word_embeddings: bool = False
    attention_bias: bool = False
    mlp_bias: bool = False
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int = 0
    shared_expert_size: int = 0
    first_dense_layers: int = 0
    notes: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TypeError(f"name must be a str, not {self.name!r}")
        for f in ("vocab_size", "hidden_size", "num_layers", "num_heads", "num_kv_heads", "head_dim"):
            _count(f, getattr(self, f))
        for f in ("tie_word_embeddings", "attention_bias", "mlp_bias"):
            _flag(f, getattr(self, f))
        for f in (
            "num_experts",
            "experts_per_token",
            "moe_intermediate_size",
            "shared_expert_size",
            "first_dense_layers",
        ):
            _count(f, getattr(self, f), low=0)
        _count("intermediate_size", self.intermediate_size, low=0 if self.num_experts else 1)
        _divides("num_heads", self.num_heads, "num_kv_heads", self.num_kv_heads)
        if self.num_experts:
            _count("experts_per_token", self.experts_per_token)
            _count("moe_intermediate_size", self.moe_intermediate_size)
            if self.experts_per_token > self.num_experts:
                raise ValueError(
                    f"experts_per_token={self.experts_per_token} must be at most "
                    f"num_experts={self.num_experts}"
                )
            if self.first_dense_layers > self.num_layers:
                raise ValueError(
                    f"first_dense_layers={self.first_dense_layers} must be at most "
                    f"num_layers={self.num_layers}"
                )
            if self.first_dense_layers:
                _count("intermediate_size", self.intermediate_size)
        elif self.experts_per_token or self.moe_intermediate_size or self.shared_expert_size:
            raise ValueError(
                "experts_per_token, moe_intermediate_size and shared_expert_size need num_experts > 0"
            )

    @classmethod
    def from_config(cls, config: Mapping[str, Any], name: str = "") -> ModelSpec:
        """The model a Hugging Face style config dict describes (`AutoConfig(...).to_dict()` gives one).

        Llama keys, with `num_key_value_heads` defaulting to `num_attention_heads` and `head_dim` to
        `hidden_size // num_attention_heads` as transformers does; for MoE, `num_local_experts`
        (Mixtral, whose `intermediate_size` is then the experts'), `n_routed_experts` (DeepSeek) or
        `num_experts`, with `num_experts_per_tok`, `moe_intermediate_size`, `n_shared_experts` or
        `shared_expert_intermediate_size`, and `first_k_dense_replace`.
        """
        if not isinstance(config, Mapping):
            raise TypeError(f"config must be a dict of a Hugging Face config, not {config!r}")
        for key in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads"):
            if key not in config:
                raise ValueError(f"config lacks {key!r}: pass a config dict such as LlamaConfig().to_dict()")
        heads = _count("config['num_attention_heads']", config["num_attention_heads"])
        hidden = _count("config['hidden_size']", config["hidden_size"])
        head_dim = config.get("head_dim")
        if head_dim is None:
            _divides("config['hidden_size']", hidden, "config['num_attention_heads']", heads)
            head_dim = hidden // heads
        kv_heads = config.get("num_key_value_heads")
        experts = next(
            (config[k] for k in ("num_local_experts", "n_routed_experts", "num_experts") if config.get(k)), 0
        )
        dense = config.get("intermediate_size", 0)
        moe = shared = 0
        if experts:
            moe = config.get("moe_intermediate_size") or dense  # Mixtral's intermediate_size is the experts'
            shared = (
                config.get("shared_expert_intermediate_size") or (config.get("n_shared_experts") or 0) * moe
            )
        return cls(
            name=name,
            vocab_size=config["vocab_size"],
            hidden_size=hidden,
            intermediate_size=dense,
            num_layers=config["num_hidden_layers"],
            num_heads=heads,
            num_kv_heads=heads if kv_heads is None else kv_heads,
            head_dim=head_dim,
            tie_word_embeddings=config.get("tie_word_embeddings", False),
            attention_bias=config.get("attention_bias", False),
            mlp_bias=config.get("mlp_bias", False),
            num_experts=experts,
            experts_per_token=config.get("num_experts_per_tok", 0) if experts else 0,
            moe_intermediate_size=moe,
            shared_expert_size=shared,
            first_dense_layers=(config.get("first_k_dense_replace") or 0) if experts else 0,
        )

    @property
    def q_dim(self) -> int:
        """Width of the queries (and of the attention output): heads x head_dim."""
        return self.num_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """Width of the keys and of the values: key/value heads x head_dim."""
        return self.num_kv_heads * self.head_dim

    def is_moe_layer(self, layer: int) -> bool:
        """Whether layer `layer` (0-based) has experts instead of a dense MLP."""
        return self.num_experts > 0 and layer >= self.first_dense_layers

    def embedding_tensors(self) -> list[ParamTensor]:
        """The token embedding (vocabulary rows, sharded by tp as torchtitan's row-wise embedding)."""
        return [ParamTensor("embed_tokens.weight", (self.vocab_size, self.hidden_size), tp_dim=0)]

    def head_tensors(self, with_tied_copy: bool = False) -> list[ParamTensor]:
        """The final RMSNorm and the output projection (none when tied, unless a pipeline stage holds
        a copy of the tied embedding: `with_tied_copy`)."""
        out = [ParamTensor("norm.weight", (self.hidden_size,))]
        if not self.tie_word_embeddings or with_tied_copy:
            out.append(ParamTensor("lm_head.weight", (self.vocab_size, self.hidden_size), tp_dim=0))
        return out

    def layer_tensors(self, layer: int) -> list[ParamTensor]:
        """The parameter tensors of decoder layer `layer`, as transformers' Llama (or Mixtral) holds them."""
        h, q, kv = self.hidden_size, self.q_dim, self.kv_dim
        out = [
            ParamTensor("input_layernorm.weight", (h,)),
            ParamTensor("self_attn.q_proj.weight", (q, h), 0),
            ParamTensor("self_attn.k_proj.weight", (kv, h), 0),
            ParamTensor("self_attn.v_proj.weight", (kv, h), 0),
            ParamTensor("self_attn.o_proj.weight", (h, q), 1),
            ParamTensor("post_attention_layernorm.weight", (h,)),
        ]
        if self.attention_bias:
            out += [
                ParamTensor("self_attn.q_proj.bias", (q,), 0),
                ParamTensor("self_attn.k_proj.bias", (kv,), 0),
                ParamTensor("self_attn.v_proj.bias", (kv,), 0),
                ParamTensor("self_attn.o_proj.bias", (h,)),
            ]
        if not self.is_moe_layer(layer):
            return out + self._mlp("mlp", self.intermediate_size)
        e, i = self.num_experts, self.moe_intermediate_size
        out += [
            ParamTensor("mlp.gate.weight", (e, h)),  # the router: replicated over tp
            ParamTensor("mlp.experts.gate_proj", (e, i, h), 1, expert=True),
            ParamTensor("mlp.experts.up_proj", (e, i, h), 1, expert=True),
            ParamTensor("mlp.experts.down_proj", (e, h, i), 2, expert=True),
        ]
        return out + (
            self._mlp("mlp.shared_experts", self.shared_expert_size) if self.shared_expert_size else []
        )

    def _mlp(self, prefix: str, width: int) -> list[ParamTensor]:
        """A SwiGLU MLP of `width`: gate and up column-wise, down row-wise."""
        h = self.hidden_size
        out = [
            ParamTensor(f"{prefix}.gate_proj.weight", (width, h), 0),
            ParamTensor(f"{prefix}.up_proj.weight", (width, h), 0),
            ParamTensor(f"{prefix}.down_proj.weight", (h, width), 1),
        ]
        if self.mlp_bias:
            out += [
                ParamTensor(f"{prefix}.gate_proj.bias", (width,), 0),
                ParamTensor(f"{prefix}.up_proj.bias", (width,), 0),
                ParamTensor(f"{prefix}.down_proj.bias", (h,)),
            ]
        return out

    def parameter_count(self) -> int:
        """Parameters as `sum(p.numel() for p in model.parameters())` counts them (a tied matrix once)."""
        tensors = self.embedding_tensors() + self.head_tensors()
        tensors += [t for layer in range(self.num_layers) for t in self.layer_tensors(layer)]
        return sum(t.numel for t in tensors)

    def matmul_parameters_per_token(self) -> int:
        """The weights a token is multiplied by: every matrix but the embedding lookup, for MoE only the
        router, the `experts_per_token` experts it goes to and the shared expert (the head counts,
        tied or not: it is a matrix product). Biases are additions, not counted."""
        total = self.vocab_size * self.hidden_size  # the head
        for layer in range(self.num_layers):
            for t in self.layer_tensors(layer):
                if len(t.shape) == 2:
                    total += t.numel
                elif len(t.shape) == 3:
                    total += t.numel // self.num_experts * self.experts_per_token
        return total


def _preset(name: str, notes: str = "", **config: Any) -> ModelSpec:
    """A preset from its published config values."""
    spec = ModelSpec.from_config(config, name=name)
    return ModelSpec(**{**asdict(spec), "notes": notes})


# Llama 3.1: the config.json files of meta-llama/Llama-3.1-{8B,70B,405B} (Meta, July 2024); RoPE
# scaling and rms_norm_eps do not change a count. Published parameters: 8,030,261,248,
# 70,553,706,496 and 405,853,388,800.


def _llama_3_1(name: str, hidden: int, intermediate: int, layers: int, heads: int) -> ModelSpec:
    """A Llama 3.1 model: what its sizes share (vocabulary, 8 key/value heads, an untied head)."""
    return _preset(
        name,
        vocab_size=128256,
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=8,
        tie_word_embeddings=False,
    )


LLAMA_3_1_8B = _llama_3_1("Llama 3.1 8B", hidden=4096, intermediate=14336, layers=32, heads=32)
LLAMA_3_1_70B = _llama_3_1("Llama 3.1 70B", hidden=8192, intermediate=28672, layers=80, heads=64)
LLAMA_3_1_405B = _llama_3_1("Llama 3.1 405B", hidden=16384, intermediate=53248, layers=126, heads=128)
# Mixtral 8x7B: mistralai/Mixtral-8x7B-v0.1's config.json; 46,702,792,704 parameters, 12.9B active.
MIXTRAL_8X7B = _preset(
    "Mixtral 8x7B",
    vocab_size=32000,
    hidden_size=4096,
    intermediate_size=14336,
    num_hidden_layers=32,
    num_attention_heads=32,
    num_key_value_heads=8,
    num_local_experts=8,
    num_experts_per_tok=2,
    tie_word_embeddings=False,
)
# DeepSeek-V3: deepseek-ai/DeepSeek-V3's config.json, simplified: its multi-head latent attention
# (MLA: low-rank query and key/value projections, 192-wide query/key heads) is counted as standard
# attention with 128 heads of 128 (q, k, v, o each 7168 x 16384: 470M parameters a layer instead of
# MLA's 187M), the router's bias and the multi-token-prediction module are left out. So it counts
# 688.3B parameters where DeepSeek publishes 671B (37B active); with MLA's 187,107,328 parameters a
# layer and the routers' biases the same count gives 671.0B (tests/test_planner.py).
DEEPSEEK_V3 = _preset(
    "DeepSeek-V3-style MoE",
    notes="approximate: MLA counted as standard attention (688.3B parameters, not the published 671B)",
    vocab_size=129280,
    hidden_size=7168,
    intermediate_size=18432,
    moe_intermediate_size=2048,
    num_hidden_layers=61,
    num_attention_heads=128,
    num_key_value_heads=128,
    head_dim=128,
    n_routed_experts=256,
    n_shared_experts=1,
    num_experts_per_tok=8,
    first_k_dense_replace=3,
    tie_word_embeddings=False,
)
# Notebook 15's capstone model: its LlamaConfig with the 512-token vocabulary its tokenizer learns.
TINY_CAPSTONE = _preset(
    "capstone (notebook 15)",
    vocab_size=512,
    hidden_size=64,
    intermediate_size=176,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    tie_word_embeddings=False,
)
MODELS = {
    m.name: m for m in (LLAMA_3_1_8B, LLAMA_3_1_70B, LLAMA_3_1_405B, MIXTRAL_8X7B, DEEPSEEK_V3, TINY_CAPSTONE)
}


# ------------------------------------------------------------------------------------- mesh, dtypes


@dataclass(frozen=True)
class Mesh:
    """The device mesh: sizes of its dimensions. The world size is pp x dp_replicate x dp_shard x cp x tp;
    `ep` is carved out of dp_shard x cp and does not multiply it."""

    pp: int = 1
    dp_replicate: int = 1
    dp_shard: int = 1
    cp: int = 1
    tp: int = 1
    ep: int = 1

    def __post_init__(self) -> None:
        for f in fields(self):
            _count(f.name, getattr(self, f.name))
        _divides("dp_shard * cp", self.dp_shard * self.cp, "ep", self.ep)

    @property
    def world_size(self) -> int:
        """The number of GPUs: the product of every dimension but ep."""
        return math.prod(getattr(self, d) for d in MESH_DIMS)

    @property
    def fsdp(self) -> int:
        """The ranks FSDP shards dense parameters over: dp_shard x cp."""
        return self.dp_shard * self.cp

    def check(self, model: ModelSpec, world_size: int | None = None) -> None:
        """A ValueError naming the sizes unless this mesh can hold `model` (and has `world_size` GPUs)."""
        _expect("model", model, ModelSpec, "planner.LLAMA_3_1_8B")
        if world_size is not None and _count("world_size", world_size) != self.world_size:
            raise ValueError(
                f"world_size={world_size} must equal pp x dp_replicate x dp_shard x cp x tp "
                f"= {self.world_size}"
            )
        _divides("num_layers", model.num_layers, "pp", self.pp)
        _divides("num_heads", model.num_heads, "tp", self.tp)
        _divides("num_kv_heads", model.num_kv_heads, "tp", self.tp)
        for name in ("intermediate_size", "moe_intermediate_size", "shared_expert_size"):
            if getattr(model, name):
                _divides(name, getattr(model, name), "tp", self.tp)
        if self.ep > 1 and not model.num_experts:
            raise ValueError(
                f"ep={self.ep} needs a model with experts; {model.name or 'this model'} has none"
            )
        if model.num_experts:
            _divides("num_experts", model.num_experts, "ep", self.ep)

    def shape(self) -> str:
        """The mesh as `init_device_mesh` takes it, only the dimensions larger than 1 (dp_shard when none)."""
        dims = [d for d in MESH_DIMS if getattr(self, d) > 1] or ["dp_shard"]
        sizes = ", ".join(str(getattr(self, d)) for d in dims)
        names = ", ".join(f'"{d}"' for d in dims)
        comma = "," if len(dims) == 1 else ""
        return f'init_device_mesh("cuda", ({sizes}{comma}), mesh_dim_names=({names}{comma}))'


@dataclass(frozen=True)
class DtypePolicy:
    """Bytes per element of what a rank holds: the sharded parameters, their gradients, each AdamW state;
    `compute` of the unsharded parameters and of the activations; `reduce` of the gradient reduction."""

    name: str
    param: int
    grad: int
    optimizer: int
    compute: int
    reduce: int

    def __post_init__(self) -> None:
        for f in ("param", "grad", "optimizer", "compute", "reduce"):
            if _count(f, getattr(self, f)) not in (1, 2, 4, 8):
                raise ValueError(
                    f"{f} must be a dtype's size in bytes (1, 2, 4 or 8), not {getattr(self, f)}"
                )


FP32 = DtypePolicy("fp32", param=4, grad=4, optimizer=4, compute=4, reduce=4)
# FSDP2's fully_shard(mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)):
# the sharded parameters stay fp32 (they are the master weights: no other copy), the sharded
# gradients are fp32, AdamW's states fp32 (zeros_like the parameter). Only the unsharded parameters
# that the all-gather makes, one or two FSDP units at a time, are bf16, and so are the activations;
# each unit's bf16 gradients are cast to fp32 into the reduce-scatter's input.
BF16_MIXED = DtypePolicy("bf16 compute, fp32 sharded parameters (FSDP2)", 4, 4, 4, 2, 4)


# ------------------------------------------------------------------------------------------ hardware


@dataclass(frozen=True)
class Hardware:
    """A GPU model and its links: memory in bytes, dense peaks in FLOP/s, bandwidths in bytes/s per GPU
    and direction, GPUs per node (joined by NVLink; nodes by the network)."""

    name: str
    memory: int
    peak_bf16: float
    peak_fp32: float
    nvlink: float
    network: float
    gpus_per_node: int
    source: str = ""

    def __post_init__(self) -> None:
        _count("memory", self.memory)
        _count("gpus_per_node", self.gpus_per_node)
        for f in ("peak_bf16", "peak_fp32", "nvlink", "network"):
            _rate(f, getattr(self, f))

    def peak(self, policy: DtypePolicy) -> float:
        """The dense peak for the policy's compute dtype (fp32 without TF32)."""
        return self.peak_bf16 if policy.compute == 2 else self.peak_fp32


GB = 10**9
TERA = 1e12
# NVIDIA H100 Tensor Core GPU data sheet (SXM5): BF16 1,979 TFLOP/s with sparsity, so 989 dense; FP32
# 67 TFLOP/s; 80 GB HBM3; NVLink 900 GB/s, i.e. 450 GB/s each way. DGX H100: one 400 Gb/s ConnectX-7
# (InfiniBand NDR) per GPU, 50 GB/s each way. Memory is the data sheet's decimal GB; CUDA reports a
# little more (81,559 MiB), of which the context and the allocator take some.
H100_SXM = Hardware(
    "H100 SXM 80GB", 80 * GB, 989 * TERA, 67 * TERA, 450 * GB, 50 * GB, 8, "NVIDIA H100 data sheet"
)
# NVIDIA H200 data sheet (SXM): 141 GB HBM3e, the H100's compute, NVLink 900 GB/s; HGX H200 with
# 400 Gb/s ConnectX-7 per GPU.
H200 = Hardware(
    "H200 SXM 141GB", 141 * GB, 989 * TERA, 67 * TERA, 450 * GB, 50 * GB, 8, "NVIDIA H200 data sheet"
)
# NVIDIA A100 data sheet (SXM 80GB): BF16 312 TFLOP/s dense, FP32 19.5; NVLink 600 GB/s, 300 each way.
# DGX A100: one 200 Gb/s ConnectX-6 (InfiniBand HDR) per GPU, 25 GB/s each way.
A100_80GB = Hardware(
    "A100 SXM 80GB", 80 * GB, 312 * TERA, 19.5 * TERA, 300 * GB, 25 * GB, 8, "NVIDIA A100 data sheet"
)
HARDWARE = {h.name: h for h in (H100_SXM, H200, A100_80GB)}


# --------------------------------------------------------------------------------------- activations


def activation_tensors(
    model: ModelSpec,
    layer: int,
    micro_batch: int,
    seq_len: int,
    policy: DtypePolicy = FP32,
    checkpointing: str = "none",
    attention: str = "sdpa",
    tp: int = 1,
) -> dict[str, int]:
    """The tensors that autograd keeps for backward in decoder layer `layer`, by name, in bytes on one GPU.

    `seq_len` is this GPU's share of the sequence (divided by cp already); `tp` shards the heads and
    the MLP, and with sequence parallelism the sequence of the norms. Read from transformers' Llama
    (and checked against it by saved_tensors_hooks), element by element for b sequences of s tokens,
    h = hidden, q and kv the query and key/value widths, a heads, I the MLP width, c bytes of the
    compute dtype:

    - each RMSNorm (two a layer) computes in fp32: it keeps its input in fp32 (4bsh; in an fp32 model
      the input itself), 1/rms (4bs) and the normalised input before the weight (c·bsh); its output
      is kept by the linears it feeds (c·bsh, shared by q/k/v and by gate/up). Under tp the norm
      works on a sequence shard (s/tp), and its output is all-gathered before the linears, which keep
      the gathered tensor: PyTorch's DTensor tensor parallelism saves it whole, where Korthikanti et
      al. keep the shard and gather again in backward.
    - attention, `"eager"` (transformers' eager_attention_forward): the query after RoPE (c·bsq), the
      key and the value repeated to every query head (c·bsq each, GQA saves nothing here), the softmax
      in fp32 (4·b·a·s²) and, in a 16-bit model, its cast back (c·b·a·s²), then the output (c·bsq),
      which o_proj keeps. RoPE keeps only cos and sin (shared by all layers: `model_level`).
      `"sdpa"` (a fused flash kernel, as on GPUs and on the CPU): query (c·bsq), key and value at
      their own width (c·bs·kv each), the output (c·bsq, the same memory o_proj keeps) and the
      log-sum-exp of each row (4·b·a·s): no s² term.
    - the SwiGLU MLP: gate's output (SiLU's input), SiLU's output, up's output and their product
      (down's input): 4·c·bsI. Llama has no dropout, so no masks.

    So an fp32 eager layer keeps 4·(6bsh + 2bs + 4bsq + b·a·s² + 4bsI) bytes, a 16-bit one
    bs(16h + 8 + 8q + 8I) + 6·b·a·s². Korthikanti et al. (2022), "Reducing Activation Recomputation in
    Large Transformer Models", count sbh(34 + 5as/h) for a 16-bit GPT layer (LayerNorm, a 4h GeLU
    MLP, dropout masks, MHA); for Llama 3.1 8B (q = h, I = 3.5h) the count above is
    sbh(52 + 6as/h) + 8sb: the SwiGLU MLP is wider and the norms keep fp32 copies; no dropout masks.
    `"selective"` recomputes the attention core (Korthikanti's selective recomputation): it
    keeps q, k and v at their own widths and the output, and drops the s² (or log-sum-exp) tensors.
    `"full"` keeps only the layer's input (c·bsh, a sequence shard under tp).

    MoE layers are an estimate (no test measures them): experts and router replace the MLP, tokens
    spread evenly over the experts; the router's fp32 probabilities (4·bs·E), each token's copy sent
    to its k experts and the copy coming back (2·c·bs·k·h), the experts' SwiGLU (4·c·bs·k·I/tp), and
    the shared expert's (4·c·bs·I_shared/tp).
    """
    _expect("model", model, ModelSpec, "planner.LLAMA_3_1_8B")
    _expect("policy", policy, DtypePolicy, "planner.BF16_MIXED")
    _count("layer", layer, low=0)
    if layer >= model.num_layers:
        raise ValueError(f"layer must be below num_layers={model.num_layers}, not {layer}")
    _choice("checkpointing", checkpointing, CHECKPOINTING)
    _choice("attention", attention, ATTENTION)
    b, s, tp = _count("micro_batch", micro_batch), _count("seq_len", seq_len), _count("tp", tp)
    c = policy.compute
    h, bs = model.hidden_size, b * s
    sp = bs // tp  # tokens of a sequence-parallel shard
    if checkpointing == "full":
        return {"layer input": c * sp * h}
    heads = model.num_heads // tp
    q, kv = model.q_dim // tp, model.kv_dim // tp
    out: dict[str, int] = {}
    for norm, feeds in (("input_layernorm", "q/k/v"), ("post_attention_layernorm", "MLP")):
        out[f"{norm} input (fp32)"] = FP32_BYTES * sp * h
        out[f"{norm} 1/rms (fp32)"] = FP32_BYTES * sp
        out[f"{norm} normalised"] = c * sp * h
        out[f"{feeds} input (the norm's output{', gathered over tp' if tp > 1 else ''})"] = c * bs * h
    out["query after RoPE"] = c * bs * q
    if attention == "eager" and checkpointing == "none":
        out["key repeated to every query head"] = c * bs * q
        out["value repeated to every query head"] = c * bs * q
        out["softmax output (fp32)"] = FP32_BYTES * b * heads * s * s
        if c != FP32_BYTES:
            out["attention probabilities cast back"] = c * b * heads * s * s
    else:
        out["key"] = c * bs * kv
        out["value"] = c * bs * kv
        if checkpointing == "none":
            out["log-sum-exp (fp32)"] = FP32_BYTES * b * heads * s
    out["attention output (o_proj input)"] = c * bs * q
    if not model.is_moe_layer(layer):
        out["MLP: gate, SiLU, up and their product"] = 4 * c * bs * model.intermediate_size // tp
        return out
    k = model.experts_per_token
    out["router probabilities (fp32)"] = FP32_BYTES * bs * model.num_experts
    out["tokens sent to and back from the experts"] = 2 * c * bs * k * h
    out["experts: gate, SiLU, up and their product"] = 4 * c * bs * k * model.moe_intermediate_size // tp
    if model.shared_expert_size:
        out["shared expert: gate, SiLU, up and their product"] = 4 * c * bs * model.shared_expert_size // tp
    return out


def model_level_tensors(
    model: ModelSpec,
    micro_batch: int,
    seq_len: int,
    policy: DtypePolicy,
    first: bool,
    last: bool,
    tp: int = 1,
) -> dict[str, int]:
    """What autograd keeps outside the layers, per micro-batch on a stage (`first` and `last` say which):
    the token ids the embedding keeps, RoPE's cos and sin, the final norm, the head's input, the
    loss's fp32 log-probabilities over the (tp-sharded) vocabulary, the labels and the loss's divisor."""
    _expect("model", model, ModelSpec, "planner.LLAMA_3_1_8B")
    _expect("policy", policy, DtypePolicy, "planner.BF16_MIXED")
    first, last = _flag("first", first), _flag("last", last)
    b, s, tp = _count("micro_batch", micro_batch), _count("seq_len", seq_len), _count("tp", tp)
    c, h = policy.compute, model.hidden_size
    bs, sp = b * s, b * s // tp
    out = {"RoPE cos and sin": 2 * c * s * model.head_dim}
    if first:
        out["token ids (int64)"] = INT64 * bs
    if last:
        out |= {
            "final norm input (fp32)": FP32_BYTES * sp * h,
            "final norm 1/rms (fp32)": FP32_BYTES * sp,
            "final norm normalised": c * sp * h,
            "head input (the norm's output)": c * bs * h,
            "log-probabilities (fp32)": FP32_BYTES * bs * math.ceil(model.vocab_size / tp),
            "labels (int64)": INT64 * bs,
            "loss divisor (fp32)": FP32_BYTES,
        }
    return out


# -------------------------------------------------------------------------------------------- plan


@dataclass(frozen=True)
class Memory:
    """Bytes one GPU holds at the peak of a step, term by term.

    `activations`: what autograd keeps for backward, for every micro-batch in flight; `recompute`: one
    layer's activations rebuilt during its backward under checkpointing; `fsdp_buffers`: the unsharded
    parameters of two neighbouring FSDP units in flight (one computing, the next prefetched; the
    largest such pair) and the unsharded gradient of the largest unit with its reduce-scatter input;
    `logits`: the head's output and its fp32 upcast for the loss. The transient terms do not all peak
    at once, so the total is an upper bound.
    """

    parameters: int
    gradients: int
    optimizer_state: int
    activations: int
    recompute: int
    fsdp_buffers: int
    logits: int

    @property
    def total(self) -> int:
        """All terms together."""
        return sum(asdict(self).values())


@dataclass(frozen=True)
class Collective:
    """The collectives of one kind on one mesh dimension in a step, on one GPU.

    `bytes` is the sum over the `count` calls of each call's whole buffer (an all-gather's output, a
    reduce-scatter's input, an all-reduce's buffer, what an all-to-all sends, a send's tensor);
    `seconds` = bytes x `bus_factor` / `bandwidth`, the least time the link allows (latency ignored).
    """

    dim: str
    op: str
    what: str
    group_size: int
    count: int
    bytes: int
    bus_factor: float
    link: str
    bandwidth: float

    @property
    def seconds(self) -> float:
        """The least time these calls take on their link."""
        return self.bytes * self.bus_factor / self.bandwidth


BUS_FACTOR = {
    # nccl-tests' bus bandwidth (PERFORMANCE.md): the fraction of a buffer each GPU must send.
    "all-reduce": lambda n: 2 * (n - 1) / n,
    "all-gather": lambda n: (n - 1) / n,
    "reduce-scatter": lambda n: (n - 1) / n,
    "all-to-all": lambda n: (n - 1) / n,
    "send/recv": lambda n: 1.0,
}
GATHER_SCATTER = ("all-gather", "reduce-scatter")


@dataclass(frozen=True)
class Compute:
    """FLOPs of a step and the least time they take.

    FLOPs per token = 6N + 12·L·a·d·s, PaLM's (Chowdhery et al. 2022, appendix B) and torchtitan's:
    N the weights a token is multiplied by (the embedding lookup not, the head yes; for MoE only its
    experts), 2 FLOPs per weight forward and 4 backward; attention's QK^T and AV, 2·s·a·d each forward
    per layer, three times that with backward. No causal halving: FlopCounterMode counts the full s x s
    products eager attention computes, and MFU conventions count them too. `hardware_flops_per_step`
    adds the forward that checkpointing runs again. `seconds` is hardware FLOPs per GPU at the dense
    peak, stretched by the 1F1B bubble (m + pp - 1) / m.
    """

    flops_per_token: int
    tokens_per_step: int
    model_flops_per_step: int
    hardware_flops_per_step: int
    peak: float
    world_size: int
    bubble: float

    @property
    def seconds(self) -> float:
        """The least compute time of a step."""
        return self.hardware_flops_per_step / (self.world_size * self.peak) * self.bubble


@dataclass(frozen=True)
class Plan:
    """Everything `plan` works out; `memory` has one entry per pipeline stage."""

    model: ModelSpec
    mesh: Mesh
    hardware: Hardware
    policy: DtypePolicy
    seq_len: int
    micro_batch: int
    micro_batches: int
    checkpointing: str
    attention: str
    memory: tuple[Memory, ...]
    communication: tuple[Collective, ...]
    compute: Compute
    parameters_per_gpu: tuple[int, ...]

    @property
    def peak_memory(self) -> int:
        """The largest total over the stages: the GPU that must fit."""
        return max(m.total for m in self.memory)

    @property
    def global_batch(self) -> int:
        """Sequences per step: micro_batch x micro_batches x dp_replicate x dp_shard."""
        return self.micro_batch * self.micro_batches * self.mesh.dp_replicate * self.mesh.dp_shard

    @property
    def communication_seconds(self) -> dict[str, float]:
        """The least time on each link kind: the calls that share a link add up."""
        out: dict[str, float] = {}
        for c in self.communication:
            out[c.link] = out.get(c.link, 0.0) + c.seconds
        return out

    @property
    def step_seconds(self) -> float:
        """A lower bound on the step: compute, or the busiest link if slower (perfect overlap)."""
        return max([self.compute.seconds, *self.communication_seconds.values()])


def _local_numel(t: ParamTensor, mesh: Mesh) -> int:
    """Elements rank 0 holds of `t` (the largest share): tp's chunk of its tp dim (torch.chunk: ceil),
    ep's share of the experts, then FSDP2's dim-0 shard, which rank 0 holds whole: ceil(dim0 / n) rows,
    the size FSDP2 pads every rank's shard to (_fsdp_param.py, `_init_sharded_param`)."""
    shape = list(t.shape)
    if t.tp_dim is not None:
        shape[t.tp_dim] = math.ceil(shape[t.tp_dim] / mesh.tp)
    n, dim = mesh.fsdp, 0
    if t.expert:
        shape[0] //= mesh.ep
        n //= mesh.ep
        if shape[0] < n:  # fewer local experts than ranks: torchtitan shards the experts' dim 1 instead
            dim = 1
            _divides(f"{t.name}'s dim 1", shape[1], "dp_shard x cp / ep", n)
    shape[dim] = math.ceil(shape[dim] / n)
    return math.prod(shape)


def _unsharded_numel(t: ParamTensor, mesh: Mesh) -> int:
    """Elements of `t`'s all-gathered (padded) tensor on a rank: its tp and ep share, FSDP's shards joined."""
    n = mesh.fsdp // mesh.ep if t.expert else mesh.fsdp
    return _local_numel(t, mesh) * n


def _stage_units(model: ModelSpec, mesh: Mesh, stage: int) -> list[list[ParamTensor]]:
    """The FSDP units of a pipeline stage: its layers, the embedding (first stage), norm and head (last)."""
    per = model.num_layers // mesh.pp
    units = [model.layer_tensors(layer) for layer in range(stage * per, (stage + 1) * per)]
    if stage == 0:
        units.insert(0, model.embedding_tensors())
    if stage == mesh.pp - 1:
        units.append(model.head_tensors(with_tied_copy=mesh.pp > 1))
    return units


def _link(mesh: Mesh, hardware: Hardware, group: int, stride: int) -> tuple[str, float]:
    """The link a group of `group` ranks `stride` apart crosses: NVLink when every such group lies in a node
    (ranks fill the nodes in order, tp's neighbours first), else the network."""
    if mesh.world_size <= hardware.gpus_per_node or hardware.gpus_per_node % (group * stride) == 0:
        return "NVLink", hardware.nvlink
    return "network", hardware.network


def _collectives(
    model: ModelSpec,
    mesh: Mesh,
    hardware: Hardware,
    policy: DtypePolicy,
    units: list[list[ParamTensor]],
    stage: int,
    tokens: int,
    micro_batches: int,
    checkpointing: str,
) -> list[Collective]:
    """The collectives of one pipeline stage in one step, per GPU (see Collective), for `tokens` tokens
    of each micro-batch on this GPU (its cp share of the sequence)."""
    m, c, h, tp, fsdp = micro_batches, policy.compute, model.hidden_size, mesh.tp, mesh.fsdp
    layers = model.num_layers // mesh.pp
    moe = sum(any(t.expert for t in u) for u in units)
    rows = []  # (dim, op, what, group, stride between its ranks, calls, bytes)
    for what, experts, group, stride, n in (
        ("parameters", False, fsdp, tp, len(units)),
        ("expert parameters", True, fsdp // mesh.ep, tp * mesh.ep, moe),
    ):
        gathered = m * sum(_unsharded_numel(t, mesh) for u in units for t in u if t.expert == experts)
        reduced, calls = gathered * policy.reduce, m * n
        shards, replicas = (group, stride), (mesh.dp_replicate, fsdp * tp)
        rows += [
            ("dp_shard", "all-gather", f"{what}, forward and backward", *shards, 2 * calls, 2 * gathered * c),
            ("dp_shard", "reduce-scatter", f"{what}' gradients", *shards, calls, reduced),
            ("dp_replicate", "all-reduce", f"{what}' gradients", *replicas, calls, reduced // group),
        ]
    # sequence parallelism: per layer an all-gather and a reduce-scatter around attention and around the
    # MLP, forward, and their mirror images backward (again forward when fully checkpointed); one more
    # each for the embedding (first stage) and the head (last)
    n = m * (layers * (6 if checkpointing == "full" else 4) + (stage == 0) + (stage == mesh.pp - 1))
    rows += [
        ("tp", op, "sequence-parallel activations", tp, 1, n, n * tokens * h * c) for op in GATHER_SCATTER
    ]
    kv = tokens * 2 * model.kv_dim // tp * c * mesh.cp  # keys and values of the whole sequence
    n = m * layers
    rows += [
        ("cp", "all-gather", "keys and values, forward and backward", mesh.cp, tp, 2 * n, 2 * n * kv),
        ("cp", "reduce-scatter", "gradients of keys and values", mesh.cp, tp, n, n * kv),
    ]
    n = 4 * m * moe  # dispatch and combine, forward and backward
    sent = tokens * model.experts_per_token * h * c
    rows.append(("ep", "all-to-all", "tokens to and from their experts", mesh.ep, tp, n, n * sent))
    n = 2 * m * ((stage > 0) + (stage < mesh.pp - 1))  # one send forward and one backward per neighbour
    sent = tokens // tp * h * c  # a sequence-parallel shard of the layer's output, or of its gradient
    rows.append(
        ("pp", "send/recv", "activations and gradients", mesh.pp, mesh.world_size // mesh.pp, n, n * sent)
    )
    out = []
    for dim, op, what, group, stride, count, nbytes in rows:
        if group > 1 and count:
            link, bandwidth = _link(mesh, hardware, group, stride)
            out.append(
                Collective(dim, op, what, group, count, nbytes, BUS_FACTOR[op](group), link, bandwidth)
            )
    return out


def plan(
    model: ModelSpec,
    mesh: Mesh,
    hardware: Hardware = H100_SXM,
    seq_len: int = 8192,
    micro_batch: int = 1,
    micro_batches: int = 1,
    policy: DtypePolicy = BF16_MIXED,
    checkpointing: str = "none",
    attention: str = "sdpa",
) -> Plan:
    """Memory per GPU, collectives and FLOPs of one training step of `model` with AdamW on `mesh`.

    Each data-parallel rank runs `micro_batches` micro-batches of `micro_batch` sequences of `seq_len`
    tokens per step (gradient accumulation, or the pipeline's micro-batches); the cp ranks share the
    sequence, the tp ranks share the heads. Bad input raises an error naming the argument.
    """
    _expect("model", model, ModelSpec, "planner.LLAMA_3_1_8B")
    _expect("mesh", mesh, Mesh, "Mesh(dp_shard=8)")
    _expect("hardware", hardware, Hardware, "planner.H100_SXM")
    _expect("policy", policy, DtypePolicy, "planner.BF16_MIXED")
    seq_len, micro_batch = _count("seq_len", seq_len), _count("micro_batch", micro_batch)
    micro_batches = _count("micro_batches", micro_batches)
    _choice("checkpointing", checkpointing, CHECKPOINTING)
    _choice("attention", attention, ATTENTION)
    mesh.check(model)
    _divides("seq_len", seq_len, "cp x tp", mesh.cp * mesh.tp)
    if mesh.cp > 1 and attention == "eager":
        raise ValueError(
            "cp > 1 needs attention='sdpa': context parallelism replaces the fused attention kernel"
        )
    if mesh.pp > 1 and micro_batches < mesh.pp:
        raise ValueError(f"micro_batches={micro_batches} must be at least pp={mesh.pp} for a 1F1B schedule")
    if mesh.world_size > hardware.gpus_per_node:
        _divides("world size", mesh.world_size, "gpus_per_node", hardware.gpus_per_node)
    s = seq_len // mesh.cp
    tokens = micro_batch * s
    per = model.num_layers // mesh.pp
    memory, params, communication = [], [], []
    for stage in range(mesh.pp):
        units = _stage_units(model, mesh, stage)
        local = sum(_local_numel(t, mesh) for u in units for t in u)
        layers = range(stage * per, (stage + 1) * per)
        acts = [
            activation_tensors(model, i, micro_batch, s, policy, checkpointing, attention, mesh.tp)
            for i in layers
        ]
        first, last = stage == 0, stage == mesh.pp - 1
        saved = sum(sum(a.values()) for a in acts)
        saved += sum(model_level_tensors(model, micro_batch, s, policy, first, last, mesh.tp).values())
        recompute = 0
        if checkpointing != "none":
            full = [
                activation_tensors(model, i, micro_batch, s, policy, "none", attention, mesh.tp)
                for i in layers
            ]
            recompute = max(sum(f.values()) - sum(a.values()) for f, a in zip(full, acts, strict=True))
        sizes = [sum(_unsharded_numel(t, mesh) for t in u) for u in units]  # in the order they run
        buffers = 0
        if mesh.fsdp > 1:
            in_flight_pair = max(map(sum, itertools.pairwise(sizes)), default=sizes[0])
            buffers = in_flight_pair * policy.compute + max(sizes) * (policy.compute + policy.reduce)
        logits = 0
        if last:
            vocab = math.ceil(model.vocab_size / mesh.tp)
            logits = tokens * vocab * (policy.compute + (FP32_BYTES if policy.compute != FP32_BYTES else 0))
        in_flight = min(mesh.pp - stage, micro_batches)
        memory.append(
            Memory(
                parameters=local * policy.param,
                gradients=local * policy.grad,
                optimizer_state=2 * local * policy.optimizer,
                activations=in_flight * saved,
                recompute=recompute,
                fsdp_buffers=buffers,
                logits=logits,
            )
        )
        params.append(local)
        communication.append(
            _collectives(model, mesh, hardware, policy, units, stage, tokens, micro_batches, checkpointing)
        )
    busiest = max(communication, key=lambda cs: sum(c.seconds for c in cs))
    return Plan(
        model=model,
        mesh=mesh,
        hardware=hardware,
        policy=policy,
        seq_len=seq_len,
        micro_batch=micro_batch,
        micro_batches=micro_batches,
        checkpointing=checkpointing,
        attention=attention,
        memory=tuple(memory),
        communication=tuple(busiest),
        compute=_compute(model, mesh, hardware, policy, seq_len, micro_batch, micro_batches, checkpointing),
        parameters_per_gpu=tuple(params),
    )


def _compute(
    model: ModelSpec,
    mesh: Mesh,
    hardware: Hardware,
    policy: DtypePolicy,
    seq_len: int,
    micro_batch: int,
    micro_batches: int,
    checkpointing: str,
) -> Compute:
    """The FLOPs of a step (see Compute)."""
    attention = 12 * model.num_layers * model.q_dim * seq_len
    per_token = 6 * model.matmul_parameters_per_token() + attention
    tokens = seq_len * micro_batch * micro_batches * mesh.dp_replicate * mesh.dp_shard
    head = model.vocab_size * model.hidden_size
    again = {
        "none": 0,
        "selective": attention // 3,
        "full": 2 * (model.matmul_parameters_per_token() - head) + attention // 3,
    }[checkpointing]
    return Compute(
        flops_per_token=per_token,
        tokens_per_step=tokens,
        model_flops_per_step=per_token * tokens,
        hardware_flops_per_step=(per_token + again) * tokens,
        peak=hardware.peak(policy),
        world_size=mesh.world_size,
        bubble=(micro_batches + mesh.pp - 1) / micro_batches,
    )


def fits(p: Plan, reserve: int = 0) -> bool:
    """Whether the busiest GPU's memory, plus `reserve` bytes (CUDA context, allocator slack), fits."""
    _expect("p", p, Plan, "plan(planner.LLAMA_3_1_8B, Mesh(dp_shard=8))")
    return p.peak_memory + _count("reserve", reserve, low=0) <= p.hardware.memory


def mfu(p: Plan, step_seconds: float) -> float:
    """Model FLOPs utilisation of a measured step: the model's FLOPs per second over the GPUs' dense peak."""
    _expect("p", p, Plan, "plan(planner.LLAMA_3_1_8B, Mesh(dp_shard=8))")
    seconds = _rate("step_seconds", step_seconds)
    return p.compute.model_flops_per_step / (seconds * p.compute.world_size * p.compute.peak)


def launch_command(
    mesh: Mesh, gpus_per_node: int = 8, script: str = "train.py", endpoint: str = "$HEAD_NODE:29500"
) -> str:
    """The torchrun line each node runs for `mesh`, and the mesh the script builds, as text for a student."""
    _expect("mesh", mesh, Mesh, "Mesh(dp_shard=8)")
    gpus = _count("gpus_per_node", gpus_per_node)
    for name, value in (("script", script), ("endpoint", endpoint)):
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"{name} must be a non-empty str, not {value!r}")
    world = mesh.world_size
    if world > gpus:
        _divides("world size", world, "gpus_per_node", gpus)
    nodes, per_node = max(1, world // gpus), min(world, gpus)
    rendezvous = f" --rdzv-backend=c10d --rdzv-endpoint={endpoint}" if nodes > 1 else " --standalone"
    lines = [
        f"torchrun --nnodes={nodes} --nproc-per-node={per_node}{rendezvous} {shlex.quote(script)}",
        f"# in {script}: mesh = {mesh.shape()}",
    ]
    if mesh.ep > 1:
        lines.append(f"# experts split over ep={mesh.ep} of the dp_shard x cp = {mesh.fsdp} ranks")
    return "\n".join(lines)
