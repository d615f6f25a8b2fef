"""The package against what llama.cpp computed (tests/data/, made by tests/llamacpp_references.py
with llama-cpp-python 0.3.36): every pre-tokenizer name's ids for texts of many scripts and
spacings, end-of-generation ids and token types, Phi-3's whitespace rule, and the logits of small
files of every architecture, their rope scalings and factors among them."""

import json

import mlx.core as mx
import numpy as np
import pytest

import muser_mlx
from muser_mlx.gguf import open_gguf

from llamacpp_references import DATA, PHI3_TEXT, POSITIONS, content_hash, model_files, write_bpe

pytest.importorskip("tokenizers", reason="the lm extra is not installed: pip install -e .[lm]")
BPE = json.loads((DATA / "llamacpp_bpe.json").read_text())
LOGITS = np.load(DATA / "llamacpp_logits.npz")
# The relative L2 of a position's logits, at most and on average: llama.cpp's Q8_0 dot products
# round x to 8 bits (docs/mlx_lm.md has each file's), more over Gemma 3's six layers.
BOUNDS = {"gemma3": (0.08, 0.04), "gemma3_linear8": (0.08, 0.04)}
MAX_ERROR, MEAN_ERROR = 0.04, 0.02


def test_every_pre_tokenizer_name_has_llama_cpps_ids():
    from muser_mlx.lm.tokenizer import PRE_TOKENIZERS

    assert set(BPE["ids"]) == set(PRE_TOKENIZERS)


@pytest.mark.parametrize("pre", BPE["ids"])
def test_pre_tokenizers_give_llama_cpps_ids(tmp_path, pre):
    from muser_mlx.lm.tokenizer import Vocab, build_tokenizer

    with open_gguf(write_bpe(tmp_path / "v.gguf", BPE["vocab"], pre)) as f:
        tok = build_tokenizer(Vocab.from_gguf(f))
    assert tok.encode(BPE["texts"][0]).ids == BPE["ids"][pre]["bos"]
    for text, ids in zip(BPE["texts"], BPE["ids"][pre]["special"], strict=True):
        assert tok.encode(text, add_special_tokens=False).ids == ids, text
    tok.encode_special_tokens = True  # llama.cpp's special=False
    for text, ids in zip(BPE["texts"], BPE["ids"][pre]["plain"], strict=True):
        assert tok.encode(text, add_special_tokens=False).ids == ids, text


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    pytest.importorskip("mlx_lm", reason="the lm extra is not installed: pip install -e .[lm]")
    return model_files(tmp_path_factory.mktemp("models"))


@pytest.mark.parametrize("name", [k for k in LOGITS.files if k != "made_by" and not k.endswith(".hash")])
def test_small_models_give_llama_cpps_logits(models, name):
    path = models[name]
    assert content_hash(path) == str(LOGITS[name + ".hash"]), "the writers no longer make the file llama.cpp ran"
    model, _ = muser_mlx.load(path, mx.float32)
    ours = np.array(model(mx.array([POSITIONS]))[0])
    theirs = LOGITS[name].astype(np.float32)
    error = np.linalg.norm(ours - theirs, axis=1) / np.linalg.norm(theirs, axis=1)
    most, mean = BOUNDS.get(name, (MAX_ERROR, MEAN_ERROR))
    assert error.max() < most and error.mean() < mean, (error.max(), error.mean())


@pytest.mark.parametrize("case", BPE["eog"])
def test_end_of_generation_and_special_tokens_as_llama_cpp_finds_them(tmp_path, case):
    from gguf import TokenType

    from muser_mlx.lm.tokenizer import Vocab

    with open_gguf(write_bpe(tmp_path / "v.gguf", BPE["vocab"], "qwen2", case)) as f:
        vocab = Vocab.from_gguf(f)
    names = {TokenType.CONTROL: "control", TokenType.USER_DEFINED: "user-defined", TokenType.NORMAL: "normal"}
    first = len(BPE["vocab"]["tokens"])
    assert vocab.eog == BPE["eog"][case]["eog"]
    assert {t: names[vocab.types[first + j]] for j, t in enumerate(BPE["eog"][case]["kinds"])} == BPE["eog"][case][
        "kinds"
    ]


@pytest.mark.parametrize("name", BPE["named"])
def test_whitespace_after_special_tokens_as_llama_cpp_drops_it_for_phi3(tmp_path, name):
    from muser_mlx.lm.tokenizer import Vocab, build_tokenizer

    with open_gguf(write_bpe(tmp_path / "v.gguf", BPE["vocab"], "qwen2", name=name)) as f:
        tok = build_tokenizer(Vocab.from_gguf(f))
    parsed, plain = BPE["named"][name]
    assert tok.encode(PHI3_TEXT, add_special_tokens=False).ids == parsed
    tok.encode_special_tokens = True
    assert tok.encode(PHI3_TEXT, add_special_tokens=False).ids == plain
