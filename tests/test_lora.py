"""mlx_lm-style LoRA on Gemma 3 270M straight off its GGUF file (CPU): the adapters mlx-lm's
tuner puts on the projections train through the kernels' vjp, the bytes stay frozen, and a few
steps lower the loss."""

import mlx.core as mx
import mlx.optimizers as optim
import numpy as np
import pytest
from mlx import nn
from mlx.utils import tree_flatten

import muser_mlx
from muser_mlx import FORMATS

pytest.importorskip("mlx_lm", reason="the lm extra is not installed: pip install -e .[lm]")
from mlx_lm.tuner.lora import LoRALinear
from mlx_lm.tuner.trainer import default_loss
from mlx_lm.tuner.utils import linear_to_lora_layers

TEXT = "The muser_mlx package keeps GGUF tensors as bytes and trains adapters through its kernels."


def test_a_few_lora_steps_lower_gemmas_loss(gemma_path, tmp_path):
    if "Q5_0" not in FORMATS:
        pytest.skip("Gemma 3 270M's projections are Q5_0, not among muser_mlx.FORMATS in this tree")
    model, tokenizer = muser_mlx.load(gemma_path, dtype=mx.float32)
    model.freeze()
    linear_to_lora_layers(model, 2, {"rank": 4, "scale": 10.0, "dropout": 0.0})
    adapted = [m for _, m in model.named_modules() if isinstance(m, LoRALinear)]
    assert len(adapted) == 2 * 7 and all(isinstance(m.linear, muser_mlx.Linear) for m in adapted)
    trainable = {k for k, _ in tree_flatten(model.trainable_parameters())}
    assert trainable and all(k.endswith(("lora_a", "lora_b")) for k in trainable)
    frozen = np.array(adapted[0].linear.weight)

    batch = mx.array([tokenizer.encode(TEXT)])
    lengths = mx.array([[1, batch.shape[1] - 1]])
    loss_and_grad = nn.value_and_grad(model, lambda m: default_loss(m, batch, lengths)[0])
    optimizer = optim.Adam(learning_rate=3e-4)
    losses = []
    for _ in range(3):
        loss, grads = loss_and_grad(model)
        optimizer.update(model, grads)
        mx.eval(model.parameters(), optimizer.state, loss)
        losses.append(loss.item())
    losses.append(default_loss(model, batch, lengths)[0].item())
    assert losses[-1] < losses[0] - 0.05, losses
    assert np.array_equal(np.array(adapted[0].linear.weight), frozen)


def test_compiled_training_step_as_mlx_lms_trainer():
    """mlx-lm's trainer compiles its step with the model's and optimizer's state as inputs and
    outputs; through the projections' and the untied head's kernels (tiny-llama, CPU) it trains."""
    from functools import partial

    from conftest import fixture

    model, tokenizer = muser_mlx.load(fixture("tiny-llama-Q4_K_M.gguf"), dtype=mx.float32)
    model.freeze()
    mx.random.seed(0)  # the adapters' initial A: MLX's default seed changes from run to run
    linear_to_lora_layers(model, 1, {"rank": 4, "scale": 10.0, "dropout": 0.0})
    batch = mx.array([tokenizer.encode("The quick brown fox jumps over the lazy dog.")])
    lengths = mx.array([[1, batch.shape[1] - 1]])
    optimizer = optim.Adam(learning_rate=3e-4)  # 1e-2 overshot on the third step for 4 of 8 seeds
    loss_and_grad = nn.value_and_grad(model, default_loss)
    state = [model.state, optimizer.state, mx.random.state]

    @partial(mx.compile, inputs=state, outputs=state)
    def step(batch, lengths):
        (loss, _), grads = loss_and_grad(model, batch, lengths)
        optimizer.update(model, grads)
        return loss

    losses = []
    for _ in range(3):
        losses.append(step(batch, lengths))
        mx.eval(state, losses[-1])
    assert losses[-1].item() < losses[0].item(), [loss.item() for loss in losses]


def test_lora_on_the_embedding_matches_mlx_lms_on_its_float_twin():
    """``Embedding.to_lora``: mlx-lm's LoRAEmbedding around the bytes (linear_to_lora_layers refused
    a muser_mlx.Embedding: "Can't convert layer of type Embedding to LoRA"); its lookup and tied
    head, and their gradients, are those of the same adapter on the dequantized float table."""
    from mlx_lm.tuner.lora import LoRAEmbedding

    from conftest import fixture

    model, _ = muser_mlx.load(fixture("tiny-llama-Q4_K_M.gguf"), dtype=mx.float32)
    model.freeze()
    linear_to_lora_layers(model, 1, {"rank": 4, "scale": 10.0, "dropout": 0.0, "keys": ["model.embed_tokens"]})
    lora = model.model.embed_tokens
    assert isinstance(lora, LoRAEmbedding) and isinstance(lora.embedding, muser_mlx.Embedding)
    assert {k for k, _ in tree_flatten(model.trainable_parameters())} == {
        "model.embed_tokens.lora_a",
        "model.embed_tokens.lora_b",
    }
    table = lora.embedding
    twin = LoRAEmbedding.from_base(nn.Embedding(table.num_embeddings, table.dims), r=4, scale=10.0)
    twin.embedding.weight = table(mx.arange(table.num_embeddings))
    lora.lora_b = mx.random.normal(lora.lora_b.shape, key=mx.random.key(1))  # B starts at zero
    twin.update({"lora_a": lora.lora_a, "lora_b": lora.lora_b})
    twin.embedding.freeze()
    ids = mx.array([[3, 17, 900, 3]])
    x = mx.random.normal((2, table.dims), key=mx.random.key(2))

    def loss(m):
        return (m(ids) ** 2).sum() + (m.as_linear(x) ** 2).mean()

    got, got_grads = nn.value_and_grad(lora, loss)(lora)
    want, want_grads = nn.value_and_grad(twin, loss)(twin)
    assert abs(got.item() - want.item()) <= 1e-5 * abs(want.item())
    for name in ("lora_a", "lora_b"):
        g, w = np.array(got_grads[name]), np.array(want_grads[name])
        assert np.abs(g - w).max() <= 1e-4 * np.abs(w).max(), name
