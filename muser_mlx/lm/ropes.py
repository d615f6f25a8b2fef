"""Ropes that a file's tensors give and mlx-lm's models cannot take from their args: each layer
of the model gets one in place of its own (``Architecture.rope``).

- llama's ``rope_freqs.weight`` (Llama 3.1's "llama3" rope scaling, which convert_hf_to_gguf.py
  writes as one divisor of the angle a rotated pair, not as its settings): :class:`FactoredRoPE`.
- Phi-3.5's ``rope_factors_long`` / ``_short.weight`` (the same divisors, for contexts past
  ``rope.scaling.original_context_length`` and within it): :class:`LongRoPE`. mlx-lm's
  SuScaledRoPE always takes the long ones; Hugging Face's Phi-3 takes the short ones while a
  call's positions stay within the original context, and llama.cpp while its context does.
"""

from __future__ import annotations

import math

import mlx.core as mx
from mlx import nn

from ..errors import GGUFError
from .vectors import decoded

ROPE_FREQS = "rope_freqs.weight"
ROPE_FACTORS_LONG, ROPE_FACTORS_SHORT = "rope_factors_long.weight", "rope_factors_short.weight"


def rope_factors(f, name: str, count: int) -> mx.array:
    """Tensor ``name`` of ``f``: ``count`` finite positive factors (float32), one a rotated pair,
    else ``GGUFError``."""
    info = f.tensors.get(name)
    factors = decoded(f, name) if info is not None and len(info.shape) == 1 else None
    if factors is None or factors.size != count or not mx.all(mx.isfinite(factors) & (factors > 0)).item():
        shape = list(info.shape) if info is not None else "missing"
        raise GGUFError(f"{f.path}: {name} {shape} is not {count} finite positive factors (one a rotated pair)")
    return factors


def periods(dims: int, base: float, factors: mx.array) -> mx.array:
    """``mx.fast.rope``'s periods of pairs i < dims / 2: base^(2i/dims) (mlx-lm's) times the
    factors, which divide each pair's angle as llama.cpp's rope factors do."""
    return base ** (mx.arange(0, dims, 2, dtype=mx.float32) / dims) * factors


class FactoredRoPE(nn.Module):
    """mlx-lm's rope (halves rotated) with pair i's angle divided by ``factors[i]``; ``scale``
    multiplies the positions (linear rope scaling)."""

    def __init__(self, dims: int, base: float, factors: mx.array, scale: float = 1.0):
        super().__init__()
        self.dims, self.scale = dims, scale
        self._periods = periods(dims, base, factors)

    def __call__(self, x, offset=0):
        return mx.fast.rope(
            x, self.dims, traditional=False, base=None, scale=self.scale, offset=offset, freqs=self._periods
        )


class LongRoPE(nn.Module):
    """Phi-3.5's rope as Hugging Face's Phi-3 runs it: the short factors while a call's last
    position is within ``original``, the long ones past it; the rotated dims of q and k scaled by
    ``magnitude`` (rope.scaling.attn_factor), as llama.cpp's rope scales its cos and sin."""

    def __init__(self, dims: int, base: float, short: mx.array, long: mx.array, original: int, magnitude: float):
        super().__init__()
        self.dims, self.original, self.magnitude = dims, original, magnitude
        self._short, self._long = periods(dims, base, short), periods(dims, base, long)

    def __call__(self, x, offset=0):
        end = mx.max(mx.array(offset)) + x.shape[-2]  # one past the last position (offset: int or per batch)
        freqs = mx.where(end > self.original, self._long, self._short)
        if self.magnitude != 1.0:  # the rotated dims only, as llama.cpp's scaled cos and sin
            scaled = x[..., : self.dims] * self.magnitude
            x = scaled if self.dims == x.shape[-1] else mx.concatenate([scaled, x[..., self.dims :]], axis=-1)
        return mx.fast.rope(x, self.dims, traditional=False, base=None, scale=1.0, offset=offset, freqs=freqs)


def llama_rope(f, args: dict) -> FactoredRoPE | None:
    """The rope of ``f``'s ``rope_freqs.weight`` (None without one; ``args``: the model's), under
    no rope scaling or a linear one, else ``GGUFError``."""
    if ROPE_FREQS not in f.tensors:
        return None
    factors = rope_factors(f, ROPE_FREQS, args["head_dim"] // 2)
    scaling = args.get("rope_scaling") or {"type": "linear", "factor": 1.0}
    if scaling["type"] != "linear":
        raise GGUFError(f"{f.path}: {ROPE_FREQS} with {scaling['type']} rope scaling is not supported (linear is)")
    return FactoredRoPE(args["head_dim"], args["rope_theta"], factors, 1 / scaling["factor"])


def phi3_magnitude(context: int, original: int) -> float:
    """What convert_hf_to_gguf.py writes as Phi-3.5's rope.scaling.attn_factor (Hugging Face's
    attention scaling): sqrt(1 + ln(s) / ln(original)), s = context / original, 1 where s <= 1."""
    s = context / original
    return math.sqrt(1 + math.log(s) / math.log(original)) if s > 1 else 1.0


def phi3_rope(f, args: dict) -> LongRoPE | None:
    """The rope of ``f``'s Phi-3.5 factors (None without them; ``args``: the model's, from
    ``architectures._phi3``)."""
    if not {ROPE_FACTORS_LONG, ROPE_FACTORS_SHORT} & f.tensors.keys():
        return None
    head_dim = args["hidden_size"] // args["num_attention_heads"]
    dims = f.get("phi3.rope.dimension_count", head_dim)
    original = args["original_max_position_embeddings"]
    return LongRoPE(
        dims,
        args["rope_theta"],
        rope_factors(f, ROPE_FACTORS_SHORT, dims // 2),
        rope_factors(f, ROPE_FACTORS_LONG, dims // 2),
        original,
        phi3_magnitude(args["max_position_embeddings"], original),
    )
