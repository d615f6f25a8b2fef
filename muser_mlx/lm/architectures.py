"""How each supported GGUF architecture maps onto mlx-lm's own model definition: ModelArgs from
the metadata, GGUF tensor names to mlx-lm's, and what llama.cpp's converter did to the weights,
undone. One table per architecture; each quirk names the llama.cpp behaviour it mirrors."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..errors import GGUFError
from ..gguf import width_problem
from ..gguf_values import ArrayInfo, is_integer, is_number
from .ropes import ROPE_FACTORS_LONG, ROPE_FACTORS_SHORT, ROPE_FREQS, llama_rope, phi3_magnitude, phi3_rope

# GGUF block tensor -> mlx-lm module path inside ``model.layers.N`` (llama.cpp's LLM_TENSOR_NAMES,
# gguf-py's TensorNameMap), shared by every architecture here.
BLOCK_TENSORS = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "ffn_norm": "post_attention_layernorm",
    "post_attention_norm": "post_attention_layernorm",  # Gemma's and OLMo 2's norms after attention
    "post_ffw_norm": "post_feedforward_layernorm",  # and after the MLP
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
# A block's tensor: blk.<block>.<kind>.weight or .bias (the loader places it by kind; blocks count them)
BLOCK_TENSOR = re.compile(r"blk\.([0-9]+)\.(\w+)\.(weight|bias)")
MODEL_TENSORS = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}


@dataclass(frozen=True)
class Architecture:
    """``gguf``: the file's ``general.architecture``; ``model_type``: the mlx-lm module
    (``mlx_lm.models.<model_type>``); ``args``: its ModelArgs from the metadata (a ``Metadata``),
    which may name another module as their ``model_type`` (OLMo 3's olmo2 files);
    ``block_tensors``: names that differ from :data:`BLOCK_TENSORS`; ``norm_offset``: what the
    converter added to every norm weight; ``permuted_qk``: Q and K rows are in llama.cpp's rope
    order; ``rope(f, args)``: the rope module every layer takes in place of mlx-lm's, from the
    ``rope_tensors`` (no parameters; None where the file has none of them; :mod:`.ropes`);
    ``dtype``: the family's compute dtype (its checkpoints' ``torch_dtype``)."""

    gguf: str
    model_type: str
    args: Callable[[Metadata], dict]
    dtype: str
    block_tensors: dict = field(default_factory=dict)
    norm_offset: float = 0.0
    permuted_qk: bool = False
    rope: Callable | None = None
    rope_tensors: tuple[str, ...] = ()

    def tensor_names(self) -> dict[str, str]:
        """GGUF block tensor -> mlx-lm module path inside a layer."""
        return {**BLOCK_TENSORS, **self.block_tensors}


# llama.cpp's rope base where a file names none, for every architecture (rope_freq_base_train)
ROPE_BASE = 10000.0


class Metadata:
    """``{arch}.*`` keys of an open GGUF file, required ones raising ``GGUFError`` naming them."""

    def __init__(self, f, arch: str):
        self.f, self.arch = f, arch

    def get(self, key: str, default=None):
        return self.f.get(f"{self.arch}.{key}", default)

    def need(self, key: str):
        value = self.get(key)
        if value is None:
            raise GGUFError(f"{self.f.path}: metadata {self.arch}.{key} is missing; {self.arch} models need it")
        return value

    def count(self, key: str, default: int | None = None) -> int:
        """A size: ``need(key)`` (or ``default`` where absent), a positive integer, or a per-layer
        array of one value (as llama.cpp writes head counts); else ``GGUFError`` naming it."""
        value = self.need(key) if default is None else self.get(key, default)
        if isinstance(value, ArrayInfo):
            value = self.f.array(f"{self.arch}.{key}")
        if isinstance(value, np.ndarray) and value.size and (value == value.flat[0]).all():
            value = value.flat[0]
        if not is_integer(value) or value < 1:
            raise GGUFError(f"{self.f.path}: metadata {self.arch}.{key} is {value!r}; a positive integer is needed")
        return int(value)

    def number(self, key: str, default: float | None = None, zero: bool = False) -> float:
        """A finite number greater than 0 (or at least 0 where ``zero``): ``need(key)`` (or
        ``default`` where absent); else ``GGUFError`` naming it (a NaN rope base or norm epsilon
        gave NaN logits)."""
        value = self.need(key) if default is None else self.get(key, default)
        if not is_number(value) or not math.isfinite(value) or value < 0 or (value == 0 and not zero):
            needed = "a finite number of at least 0" if zero else "a finite positive number"
            raise GGUFError(f"{self.f.path}: metadata {self.arch}.{key} is {value!r}; {needed} is needed")
        return value

    def plain_head_dim(self, args: dict) -> int:
        """``args``' head dim, ``GGUFError`` unless it is hidden / heads (the models without a
        head_dim of their own); the dim leaves ``args``."""
        head_dim = args.pop("head_dim")
        if head_dim != args["hidden_size"] // args["num_attention_heads"]:
            raise GGUFError(
                f"{self.f.path}: {self.arch}.attention.key_length {head_dim} is not embedding_length / head_count "
                f"(mlx-lm's {self.arch} has no head dim of its own)"
            )
        return head_dim

    def one_rope_base(self, args: dict) -> None:
        """``GGUFError`` unless the sliding-window layers' rope base (rope.freq_base_swa) is the
        others' (the models with one rope base)."""
        local_base = self.get("rope.freq_base_swa", args["rope_theta"])
        if local_base != args["rope_theta"]:
            raise GGUFError(
                f"{self.f.path}: {self.arch}.rope.freq_base_swa {local_base!r} is not supported (one rope base, "
                f"here {args['rope_theta']!r})"
            )

    def _check_sizes(self, blocks: int, feed_forward: int, attention_width: int) -> None:
        """``GGUFError`` unless the sizes mlx-lm builds the model with are the file's: the model's
        width the token embedding's (gguf.width_problem), every one of ``blocks`` held by the file,
        the feed-forward length and the attention's width no larger than any tensor's dimension
        (mlx-lm's model, built before any weight is read, took a minute and 9 GB at a block_count
        of 100,000)."""
        path, arch, tensors = self.f.path, self.arch, self.f.tensors
        problem = width_problem(self.f, tensors["token_embd.weight"])
        if problem:
            raise GGUFError(f"{path}: tensor 'token_embd.weight' {problem}")
        held = {int(m.group(1)) for name in tensors if (m := BLOCK_TENSOR.fullmatch(name))}
        # all() stops at the first missing block; a block past the count is a tensor with no place (loader)
        if not all(i in held for i in range(blocks)):
            got = f"blocks {min(held)} to {max(held)}, {len(held)} of them" if held else "no block"
            raise GGUFError(f"{path}: {arch}.block_count is {blocks}, but the file's tensors hold {got}")
        largest = max(max(t.shape, default=0) for t in tensors.values())
        for key, size in (("feed_forward_length", feed_forward), ("attention width", attention_width)):
            if size > largest:
                raise GGUFError(f"{path}: {arch} {key} {size} is larger than any tensor's dimension ({largest})")

    def common(self, partial_rotary: bool = False, attn_factor: float = 1.0) -> dict:
        """The args every architecture takes; ``partial_rotary``: a rope over fewer dims than the
        head's is allowed (the caller gives mlx-lm its share); ``attn_factor``: the magnitude the
        model's rope gives q and k, which ``rope.scaling.attn_factor`` must be (llama.cpp scales q
        and k by it)."""
        if "token_embd.weight" not in self.f.tensors:
            raise GGUFError(f"{self.f.path}: no token_embd.weight; a {self.arch} model needs its token embedding")
        heads = self.count("attention.head_count")
        hidden = self.count("embedding_length")
        if hidden < heads:
            raise GGUFError(f"{self.f.path}: {self.arch}.embedding_length {hidden} is less than its {heads} heads")
        head_dim = self.count("attention.key_length", hidden // heads)
        kv_heads = self.count("attention.head_count_kv", heads)
        if heads % kv_heads:
            raise GGUFError(
                f"{self.f.path}: {self.arch}.attention.head_count {heads} is not whole groups of its {kv_heads} kv heads"
            )
        blocks, feed_forward = self.count("block_count"), self.count("feed_forward_length")
        self._check_sizes(blocks, feed_forward, heads * head_dim)
        rope_dims = self.get("rope.dimension_count", head_dim)
        if rope_dims != head_dim and not (partial_rotary and isinstance(rope_dims, int) and 0 < rope_dims < head_dim):
            raise GGUFError(
                f"{self.f.path}: {self.arch}.rope.dimension_count {rope_dims} is not the head dim {head_dim}; "
                "partial rotary embeddings are not supported"
            )
        args = {
            "hidden_size": hidden,
            "num_hidden_layers": blocks,
            "intermediate_size": feed_forward,
            "num_attention_heads": heads,
            "num_key_value_heads": kv_heads,
            "head_dim": head_dim,
            "rms_norm_eps": self.number("attention.layer_norm_rms_epsilon"),
            "vocab_size": self.f.tensors["token_embd.weight"].shape[1],
            "max_position_embeddings": self.count("context_length", 4096),
            "tie_word_embeddings": "output.weight" not in self.f.tensors,
            "rope_theta": self.number("rope.freq_base", ROPE_BASE),
        }
        # llama.cpp: the type linear unless named, the factor rope.scaling.factor or else the older
        # rope.scale_linear, none where it is 0 or 1. YaRN as llama.cpp runs it for these
        # architectures, which read no yarn_* key: beta_fast 32, beta_slow 1, extrapolation mix 1,
        # magnitude 1 + 0.1 ln(factor) (mlx-lm's YarnRoPE's defaults), the original context
        # rope.scaling.original_context_length or else the trained one.
        scaling = self.get("rope.scaling.type", "linear")
        factor = self.number("rope.scaling.factor", self.number("rope.scale_linear", 0.0, zero=True), zero=True)
        if scaling not in ("linear", "yarn", "none"):
            raise GGUFError(
                f"{self.f.path}: {self.arch}.rope.scaling.type {scaling!r} is not supported (linear and yarn are)"
            )
        file_factor = self.number("rope.scaling.attn_factor", 1.0)
        if not math.isclose(file_factor, attn_factor, rel_tol=1e-6):  # written as float32
            raise GGUFError(
                f"{self.f.path}: {self.arch}.rope.scaling.attn_factor {file_factor!r} is not supported "
                f"({attn_factor:.7g} is: mlx-lm's rope has no other)"
            )
        if scaling == "linear" and factor not in (0.0, 1.0):
            args["rope_scaling"] = {"type": "linear", "factor": factor}
        if scaling == "yarn" and factor not in (0.0, 1.0):
            original = self.count("rope.scaling.original_context_length", args["max_position_embeddings"])
            args["rope_scaling"] = {"type": "yarn", "factor": factor, "original_max_position_embeddings": original}
        return args


def _llama(m: Metadata) -> dict:
    return {
        **m.common(),
        "attention_bias": "blk.0.attn_q.bias" in m.f.tensors,
        "mlp_bias": "blk.0.ffn_up.bias" in m.f.tensors,
    }


def _granite(m: Metadata) -> dict:
    """IBM Granite 3: llama's layers with llama.cpp's scales (granite.logit_scale, needed; the
    embedding, residual and attention scales, where absent or 0 none and 1/sqrt(head_dim)), as
    mlx-lm's granite multipliers; its head dim hidden / heads."""
    args = _llama(m)
    head_dim = m.plain_head_dim(args)
    if not m.get("rope.scaling.finetuned", True):  # llama.cpp: no rope at all (Granite 4's hybrids)
        raise GGUFError(f"{m.f.path}: granite.rope.scaling.finetuned false (no rope) is not supported")
    scales = {
        "logits_scaling": m.need("logit_scale"),
        "embedding_multiplier": m.get("embedding_scale", 0.0) or 1.0,
        "residual_multiplier": m.get("residual_scale", 0.0) or 1.0,
        "attention_multiplier": m.get("attention.scale", 0.0) or 1 / math.sqrt(head_dim),
    }
    for key, value in scales.items():
        if not is_number(value) or not math.isfinite(value) or value == 0:
            raise GGUFError(f"{m.f.path}: granite's {key} is {value!r}; a finite non-zero number is needed")
    return {**args, **scales}


def _olmo2(m: Metadata) -> dict:
    """OLMo 2: norms after attention and the MLP, and over whole q and k projections (mlx-lm's
    olmo2). With a sliding window, OLMo 3 (mlx-lm's olmo3): the window in the layers
    ``attention.sliding_window_pattern`` marks, else in three of every four, as llama.cpp reads
    them; those layers' rope unscaled, with the one rope base mlx-lm's olmo3 has."""
    args = m.common()
    if m.get("attention.sliding_window") is None:
        return args
    m.one_rope_base(args)
    args.update(model_type="olmo3", sliding_window=m.count("attention.sliding_window"))
    if isinstance(m.get("attention.sliding_window_pattern"), ArrayInfo):
        pattern = [bool(p) for p in m.f.array("olmo2.attention.sliding_window_pattern")]
        if len(pattern) != args["num_hidden_layers"] or all(pattern) or not any(pattern):
            raise GGUFError(
                f"{m.f.path}: olmo2.attention.sliding_window_pattern {pattern} is not one flag a layer "
                "with sliding and full layers both"
            )
        args["layer_types"] = ["sliding_attention" if p else "full_attention" for p in pattern]
    return args


def _qwen2(m: Metadata) -> dict:
    args = _qwen3(m)
    m.plain_head_dim(args)
    return args


def _qwen3(m: Metadata) -> dict:
    return m.common()


def _phi3(m: Metadata) -> dict:
    """mlx-lm's phi3: its head dim hidden / heads and a rope over partial_rotary_factor of it.
    Where the file has Phi-3.5's rope factors, each layer's rope is ``ropes.LongRoPE``, whose
    magnitude the file's rope.scaling.attn_factor must be."""
    context = m.count("context_length", 4096)
    scaled = bool({ROPE_FACTORS_LONG, ROPE_FACTORS_SHORT} & m.f.tensors.keys())  # ropes.phi3_rope needs both
    original = m.count("rope.scaling.original_context_length", context) if scaled else context
    magnitude = phi3_magnitude(context, original) if scaled else 1.0
    args = m.common(partial_rotary=True, attn_factor=magnitude)
    head_dim = m.plain_head_dim(args)
    if "rope_scaling" in args:  # mlx-lm's phi3 takes only Su / LongRoPE settings
        raise GGUFError(f"{m.f.path}: phi3 with {args['rope_scaling']['type']} rope scaling is not supported")
    args["partial_rotary_factor"] = m.get("rope.dimension_count", head_dim) / head_dim
    args["original_max_position_embeddings"] = original
    return args


# Gemma values llama.cpp hard-codes (llama-model.cpp / models/gemma2.cpp, LLM_ARCH_GEMMA3 and
# LLM_ARCH_GEMMA2) rather than reads:
GEMMA3_LOCAL_ROPE_BASE = 10000.0  # rope_freq_base_train_swa, the sliding-window layers' rope base
GEMMA3_SLIDING_WINDOW_PATTERN = 6  # set_swa_pattern(6): every 6th layer attends globally
GEMMA_27B_LAYERS = {"gemma2": 46, "gemma3": 62}  # LLM_TYPE_27B, whose attention scale is 1/sqrt(hidden / heads)
GEMMA2_SOFTCAPS = {"attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0}  # llama_hparams' defaults


def _gemma(m: Metadata) -> dict:
    """What Gemma 2 and 3 share: the common args, the rope base, no tie flag (mlx-lm's models
    always tie), and the attention scale llama.cpp's f_attention_scale gives: 1/sqrt(head_dim),
    except 1/sqrt(hidden / heads) for the 27B models."""
    args = m.common()
    args.pop("tie_word_embeddings")
    args["query_pre_attn_scalar"] = args["head_dim"]
    if args["num_hidden_layers"] == GEMMA_27B_LAYERS[m.arch]:
        args["query_pre_attn_scalar"] = args["hidden_size"] // args["num_attention_heads"]
    return args


def _gemma3(m: Metadata) -> dict:
    return {
        **_gemma(m),
        "rope_local_base_freq": GEMMA3_LOCAL_ROPE_BASE,
        "sliding_window": m.count("attention.sliding_window"),
        "sliding_window_pattern": GEMMA3_SLIDING_WINDOW_PATTERN,
    }


def _gemma2(m: Metadata) -> dict:
    """mlx-lm's gemma2 has no rope scaling, one rope base and no sliding windows (every layer
    attends to the whole context: llama.cpp's every other layer to its last sliding_window
    tokens, 4,096 by default, gives the same logits until a sequence is longer)."""
    args = _gemma(m)
    if "rope_scaling" in args:
        raise GGUFError(f"{m.f.path}: gemma2 with rope scaling is not supported (mlx-lm's gemma2 has none)")
    m.one_rope_base(args)
    for key, default in GEMMA2_SOFTCAPS.items():
        args[key] = m.get(key, default)
        if not is_number(args[key]) or not 0 < args[key] < math.inf:  # inf: tanh(x / inf) * inf, NaN logits
            raise GGUFError(f"{m.f.path}: gemma2.{key} is {args[key]!r}; a finite positive number is needed")
    return args


GEMMA_BLOCK_TENSORS = {"ffn_norm": "pre_feedforward_layernorm"}  # where Gemma's names differ from BLOCK_TENSORS

ARCHITECTURES = {
    a.gguf: a
    for a in (
        # convert_hf_to_gguf.py LlamaModel.permute: Q and K rows of each head reordered from
        # Hugging Face's rotate-half pairs (i, i + d/2) to adjacent pairs (2i, 2i + 1), ggml's
        # LLAMA_ROPE_TYPE_NORM; mlx-lm's llama rotates halves (rope_traditional False).
        Architecture(
            "llama", "llama", _llama, "float16", permuted_qk=True, rope=llama_rope, rope_tensors=(ROPE_FREQS,)
        ),
        Architecture("granite", "granite", _granite, "bfloat16", permuted_qk=True),
        # SmolLM3: llama's layers (the converter's SmolLM3Model is its LlamaModel), every fourth
        # without rope, as llama.cpp hard-codes and mlx-lm's smollm3 defaults it.
        Architecture("smollm3", "smollm3", _llama, "bfloat16", permuted_qk=True),
        Architecture("qwen2", "qwen2", _qwen2, "bfloat16"),
        Architecture("qwen3", "qwen3", _qwen3, "bfloat16"),
        Architecture("olmo2", "olmo2", _olmo2, "bfloat16"),
        # convert_hf_to_gguf.py Phi3MiniModel: Phi-3's fused projections kept (attn_qkv: q, k and v
        # rows; ffn_up: gate then up rows), mlx-lm's qkv_proj and gate_up_proj.
        Architecture(
            "phi3",
            "phi3",
            _phi3,
            "bfloat16",
            block_tensors={"attn_qkv": "self_attn.qkv_proj", "ffn_up": "mlp.gate_up_proj"},
            rope=phi3_rope,
            rope_tensors=(ROPE_FACTORS_LONG, ROPE_FACTORS_SHORT),
        ),
        # convert_hf_to_gguf.py Gemma2Model, Gemma3Model: every norm weight is stored as 1 + w
        # (ggml multiplies by it; Hugging Face and mlx-lm multiply by 1 + w): four a block, six
        # with Gemma 3's Q and K norms.
        Architecture("gemma2", "gemma2", _gemma2, "bfloat16", norm_offset=1.0, block_tensors=GEMMA_BLOCK_TENSORS),
        Architecture("gemma3", "gemma3_text", _gemma3, "bfloat16", norm_offset=1.0, block_tensors=GEMMA_BLOCK_TENSORS),
    )
}


def architecture(f) -> Architecture:
    """The table for ``f``'s ``general.architecture``; ``GGUFError`` naming the supported ones."""
    arch = f.architecture
    if arch not in ARCHITECTURES:
        raise GGUFError(f"{f.path}: architecture {arch!r} is not supported; supported: {', '.join(ARCHITECTURES)}")
    return ARCHITECTURES[arch]


def unpermute_rows(rows: np.ndarray, heads: int) -> np.ndarray:
    """Undo LlamaModel.permute on a Q or K weight's rows (``[heads * head_dim, ...]``, any row
    type: whole rows of bytes move): GGUF row ``h * d + 2j + s`` is Hugging Face row
    ``h * d + s * d / 2 + j``."""
    n = rows.shape[0]
    return rows.reshape(heads, n // heads // 2, 2, *rows.shape[1:]).swapaxes(1, 2).reshape(rows.shape)
