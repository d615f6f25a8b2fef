"""The tokenizer built from a GGUF file's tokenizer.ggml.* metadata gives llama.cpp's ids
(../shared/fixtures/llamacpp/*.json: each string without special-token parsing, each prompt
with BOS) and decodes them back; mlx-lm's TokenizerWrapper and streaming detokenizer hold it."""

import json
import re
from pathlib import Path

import numpy as np
import pytest
from gguf import TokenType

import muser_mlx
from muser_mlx import GGUFError
from muser_mlx.gguf import open_gguf
from muser_mlx.lm.tokenizer import (
    Vocab,
    build_tokenizer,
    spm_merges,
    tokenizer_wrapper,
)

from conftest import FIXTURES, byte_level_alphabet, fixture, rewrite_gguf, write_out

pytest.importorskip("tokenizers", reason="the lm extra is not installed: pip install -e .[lm]")
LLAMA_FILES = ["tiny-llama-Q4_K_M", "tiny-llama-Q8_0", "ollama-llama-2-tiny-random"]


def llama_cpp(name: str) -> dict:
    return json.loads(fixture(f"llamacpp/{name}.json").read_text())


def check_against_llama_cpp(tok, expected: dict) -> None:
    tok.encode_special_tokens = True  # llama.cpp's parse_special=false, as the fixtures were made
    for text, ids in zip(expected["strings"], expected["string_ids"], strict=True):
        assert tok.encode(text, add_special_tokens=False).ids == ids, text
    for prompt in expected["prompts"]:
        assert tok.encode(prompt["text"]).ids == prompt["ids"], prompt["text"]


@pytest.mark.parametrize("name", LLAMA_FILES)
def test_llama_vocabularies_give_llama_cpps_ids(name):
    with open_gguf(fixture(f"{name}.gguf")) as f:
        check_against_llama_cpp(build_tokenizer(Vocab.from_gguf(f)), llama_cpp(name))


@pytest.fixture(scope="module")
def gemma(gemma_path):
    """(Vocab, mlx-lm TokenizerWrapper) of Gemma 3 270M."""
    with open_gguf(gemma_path) as f:
        vocab = Vocab.from_gguf(f)
    return vocab, tokenizer_wrapper(vocab)


def test_gemma_gives_llama_cpps_ids(gemma):
    vocab, wrapper = gemma
    assert vocab.add_space_prefix is False and vocab.bos == 2
    tok = wrapper._tokenizer.backend_tokenizer.__class__.from_str(wrapper._tokenizer.backend_tokenizer.to_str())
    check_against_llama_cpp(tok, llama_cpp("gemma-3-270m-q4_k_m"))


def test_gemma_in_mlx_lms_wrapper(gemma):
    gemma_vocab, wrapper = gemma
    text = "The capital of France is Paris.\n\nnaïve café 🎉"
    ids = wrapper.encode(text)
    assert ids[0] == gemma_vocab.bos and wrapper.decode(ids, skip_special_tokens=True) == text
    detokenizer = wrapper.detokenizer
    detokenizer.reset()
    for i in ids[1:]:
        detokenizer.add_token(i)
    detokenizer.finalize()
    assert detokenizer.text == text
    assert wrapper.encode("<start_of_turn>user")[1] == gemma_vocab.tokens.index(
        "<start_of_turn>"
    )  # parsed, as llama.cpp's prompts are
    assert {gemma_vocab.eos, gemma_vocab.tokens.index("<end_of_turn>")} <= wrapper.eos_token_ids


def test_spm_merges_rank_by_the_merged_tokens_score():
    tokens = ["a", "b", "c", "ab", "bc", "abc"]
    assert spm_merges(tokens, [0, 0, 0, -2, -1, -3]) == [("b", "c"), ("a", "b"), ("a", "bc"), ("ab", "c")]


def synthetic_spm(
    add_space_prefix: bool, extra: tuple[str, ...] = (), byte_text: dict[int, str] | None = None
) -> Vocab:
    """Bytes, three control tokens, a user-defined one, some pieces, then ``extra`` (normal, score
    -7): llama.cpp's layout of a SentencePiece vocabulary; ``byte_text``: other texts of byte tokens."""
    pieces = ["▁", "h", "i", "▁h", "▁hi", "hi", "<u>", *extra]
    byte_tokens = [(byte_text or {}).get(b, f"<0x{b:02X}>") for b in range(256)]
    tokens = ["<unk>", "<s>", "</s>"] + byte_tokens + pieces
    types = (
        [2, TokenType.CONTROL, TokenType.CONTROL]
        + [TokenType.BYTE] * 256
        + [TokenType.NORMAL] * 6
        + [TokenType.USER_DEFINED]
        + [TokenType.NORMAL] * len(extra)
    )
    scores = [0.0] * 259 + [-1.0, -2.0, -3.0, -4.0, -5.0, -6.0, 0.0] + [-7.0] * len(extra)
    return Vocab("llama", tokens, types, scores, bos=1, eos=2, unk=0, add_space_prefix=add_space_prefix)


@pytest.mark.parametrize("prefix", [True, False])
def test_space_prefix_bytes_and_user_defined_tokens(prefix):
    vocab = synthetic_spm(prefix)
    tok = build_tokenizer(vocab)
    ids = {t: i for i, t in enumerate(vocab.tokens)}
    got = tok.encode("hi<u>hi é", add_special_tokens=False).ids
    first = [ids["▁hi"]] if prefix else [ids["hi"]]
    after_user = [ids["▁hi"]] if prefix else [ids["hi"]]  # llama.cpp: a prefix again after a special token
    assert got == first + [ids["<u>"]] + after_user + [ids["▁"], ids["<0xC3>"], ids["<0xA9>"]]
    # llama.cpp's detokenizer drops the prefix's space at the start only
    assert tok.decode(got) == ("hi<u> hi é" if prefix else "hi<u>hi é")


def test_a_file_without_a_vocabulary_is_a_clear_error(tmp_path):
    import numpy as np

    from conftest import write_gguf

    path = write_gguf(tmp_path / "novocab.gguf", {"token_embd.weight": np.zeros((4, 32), np.float32)})
    with open_gguf(path) as f, pytest.raises(ValueError, match="tokenizer.ggml.model is None"):
        Vocab.from_gguf(f)


TEXT = "don't stop: $1234567 a+b ~~"
# The pieces of TEXT that llama.cpp's expressions for each tokenizer.ggml.pre give, one expression
# after another (unicode_regex_split): "default" takes punctuation out first, so no contraction is
# left for the gpt-2 expression, then splits numbers into threes.
PIECES = {
    "default": ["don", "'", "t", " stop", ":", " ", "$", "123", "456", "7", " a", "+", "b", " ", "~~"],
    "gpt-2": ["don", "'t", " stop", ":", " $", "1234567", " a", "+", "b", " ~~"],
    "smollm": ["don", "'t", " stop", ":", " $", "1", "2", "3", "4", "5", "6", "7", " a", "+", "b", " ~~"],
    "falcon": ["don", "'", "t", " stop", ":", " ", "$", "123", "456", "7", " a", "+", "b", " ", "~~"],
    "llama3": ["don", "'t", " stop", ":", " $", "123", "456", "7", " a", "+b", " ~~"],
    "qwen2": ["don", "'t", " stop", ":", " $", "1", "2", "3", "4", "5", "6", "7", " a", "+b", " ~~"],
}


def synthetic_bpe(pre: str, extra: list[str], types: dict[str, int] = {}, **kw) -> Vocab:  # noqa: B006
    """A byte-level vocabulary: the 256 byte tokens, then ``extra`` (normal unless ``types`` says),
    and the one merge "Ġ h" where "Ġh" is among them."""
    tokens = byte_level_alphabet() + extra
    kinds = [types.get(t, TokenType.NORMAL) for t in tokens]
    return Vocab("gpt2", tokens, kinds, merges=["Ġ h"] if "Ġh" in extra else [], pre=pre, **kw)


@pytest.mark.parametrize("pre", PIECES)
def test_pre_tokenizers_split_as_llama_cpps_expressions(pre):
    tok = build_tokenizer(synthetic_bpe(pre, ["Ġh"]))
    assert [TEXT[a:b] for _, (a, b) in tok.pre_tokenizer.pre_tokenize_str(TEXT)] == PIECES[pre]


@pytest.mark.parametrize("pre, whole", [("llama3", True), ("tekken", True), ("smaug-bpe", False), ("qwen2", False)])
def test_a_piece_that_is_a_token_is_taken_whole_where_llama_cpp_ignores_merges(pre, whole):
    vocab = synthetic_bpe(pre, ["Ġh", "Ġhello"])  # no merges reach "Ġhello"
    ids = build_tokenizer(vocab).encode(" hello", add_special_tokens=False).ids
    assert ids == ([256 + 1] if whole else [256, *(ord(c) for c in "ello")])


def test_end_of_generation_and_control_tokens_as_llama_cpp_finds_them_by_text():
    extra = ["<|im_end|>", "<|fim_pad|>", "<|repo_name|>", "<fim-repo>", "<my_eot>", "<|fim_prefix|>", "<x>", "</s>"]
    vocab = synthetic_bpe(
        "qwen2", extra, types={"</s>": TokenType.USER_DEFINED}, eos=256 + 6, special_ids={"eot": 256 + 4}
    )
    im_end, pad, repo, fim_repo, my_eot, prefix, x, s = range(256, 264)
    # <|im_end|> and </s> by text; the pad and the repo token found first (lowest id); eot by its
    # key (not by text); eos whatever its text; <|fim_prefix|> is no end but becomes a control
    assert vocab.eog == [im_end, pad, repo, my_eot, x, s]
    control = [i for i, t in enumerate(vocab.types) if t == TokenType.CONTROL]
    assert control == [im_end, pad, repo, prefix, s]


@pytest.mark.parametrize(
    "extra, ended",
    [
        (["<|end|>", "<|return|>", "<|call|>"], ["<|return|>", "<|call|>"]),  # gpt-oss
        (["<|end|>", "<|calls|>", "<|flush|>"], ["<|calls|>", "<|flush|>"]),  # solar-open
        (["<|end|>", "<|return|>"], ["<|end|>", "<|return|>"]),
        (["</s>", "<|tool_response>"], ["<|tool_response>"]),  # Gemma 4
    ],
)
def test_llama_cpps_exceptions_to_its_end_of_generation_texts(extra, ended):
    vocab = synthetic_bpe("qwen2", extra)
    assert [vocab.tokens[i] for i in vocab.eog] == ended
    kinds = {vocab.tokens[i]: TokenType(vocab.types[i]) for i in range(256, len(vocab.tokens))}
    assert kinds.get("<|end|>", TokenType.USER_DEFINED) == (
        TokenType.CONTROL if "<|end|>" in ended else TokenType.USER_DEFINED
    )
    if "</s>" in kinds:
        assert kinds["</s>"] == TokenType.NORMAL


@pytest.mark.parametrize("model, bos, eos, unk", [("llama", 1, 2, 0), ("gpt2", 11, 11, None)])
def test_special_ids_without_keys_are_llama_cpps_defaults(tmp_path, model, bos, eos, unk):
    """llama.cpp's ids where the file has none: <unk> <s> </s> at 0, 1, 2 for SentencePiece, 11 for
    gpt2's BOS and EOS; the end of generation follows the EOS."""
    import gguf

    w = gguf.GGUFWriter(tmp_path / "v.gguf", "llama")
    w.add_tokenizer_model(model)
    w.add_token_list([f"t{i}" for i in range(20)])
    if model == "gpt2":
        w.add_token_merges(["t 1"])
    w.add_tensor("token_embd.weight", np.zeros((20, 32), np.float32))
    write_out(w)
    with open_gguf(tmp_path / "v.gguf") as f:
        vocab = Vocab.from_gguf(f)
    assert (vocab.bos, vocab.eos, vocab.unk, vocab.eog) == (bos, eos, unk, [eos])


def test_the_wrapper_reads_control_tokens_as_text_when_asked():
    """docs/mlx_lm.md's way to read control tokens as text through mlx-lm's wrapper. transformers 5
    sets the backend's ``encode_special_tokens`` from ``split_special_tokens`` on every encode, so
    setting the former on the backend has no effect there."""
    with open_gguf(fixture("ollama-llama-2-tiny-random.gguf")) as f:
        wrapper = tokenizer_wrapper(Vocab.from_gguf(f))
    eos = wrapper.eos_token_id
    parsed = wrapper.encode("a</s>b")
    assert eos in parsed[1:]
    wrapper._tokenizer.split_special_tokens = True
    as_text = wrapper.encode("a</s>b")
    assert eos not in as_text[1:] and wrapper.decode(as_text[1:]) == "a</s>b"


def test_the_wrappers_eos_ids_are_the_end_of_generation_ids():
    vocab = synthetic_bpe("qwen2", ["<|im_end|>", "<|endoftext|>"], eos=257)
    assert set(tokenizer_wrapper(vocab).eos_token_ids) == {256, 257}


def tiny_llama_with(tmp_path, change) -> Path:
    """tiny-llama-Q8_0.gguf written again with ``change(tokens)`` done to its list of token texts."""

    def more(writer):
        change(writer.kv_data[0]["tokenizer.ggml.tokens"].value)

    return rewrite_gguf(fixture("tiny-llama-Q8_0.gguf"), tmp_path / "v.gguf", more=more)


def test_a_text_at_two_ids_is_refused(tmp_path):
    """As llama.cpp refuses it; mlx-lm's streaming detokenizer failed on the id the tokenizer had
    no text for (AttributeError: 'NoneType' object has no attribute 'startswith')."""
    with pytest.raises(ValueError, match="duplicate token in vocabulary: 'hi' has ids 264 and 266"):
        synthetic_spm(False, extra=("hi",))

    def repeat(tokens):
        tokens[300] = tokens[301]

    path = tiny_llama_with(tmp_path, repeat)
    with pytest.raises(
        GGUFError, match=re.escape(f"{path}: duplicate token in vocabulary:") + ".* has ids 300 and 301"
    ):
        muser_mlx.load(path)


def test_empty_token_texts_are_named_as_llama_cpp_names_them(tmp_path, caplog):
    """llama.cpp names an empty token text ``[EMPTY_<id>]`` (llama-vocab.cpp, with the warning
    "empty token at index"), so a vocabulary with two empty texts loads there; here too, with the
    same names, and the other ids as before. The texts the caller gave stay as they were."""
    vocab = synthetic_spm(False)
    tokens = vocab.tokens[:-2] + ["", ""]
    with caplog.at_level("WARNING", logger="muser_mlx"):
        named = Vocab("llama", tokens, vocab.types, vocab.scores, bos=1, eos=2, unk=0, add_space_prefix=False)
    n = len(tokens)
    assert named.tokens[-2:] == [f"[EMPTY_{n - 2}]", f"[EMPTY_{n - 1}]"] and tokens[-2:] == ["", ""]
    assert named.index[f"[EMPTY_{n - 1}]"] == n - 1
    assert f"empty token texts at ids [{n - 2}, {n - 1}]" in caplog.text

    def empty_two(texts):
        texts[300] = texts[301] = ""

    model, tok = muser_mlx.load(tiny_llama_with(tmp_path, empty_two))
    _, before = muser_mlx.load(fixture("tiny-llama-Q8_0.gguf"))
    assert tok.convert_ids_to_tokens([300, 301]) == ["[EMPTY_300]", "[EMPTY_301]"]
    text = "Hello world, once upon a time"
    assert tok.encode(text) == before.encode(text)


def test_a_chat_template_that_is_no_string_is_refused(tmp_path):
    """An array read as transformers' named templates and failed there with a TypeError."""

    def more(writer):
        writer.kv_data[0].pop("tokenizer.chat_template", None)
        writer.add_array("tokenizer.chat_template", ["a", "b"])

    path = rewrite_gguf(fixture("tiny-llama-Q8_0.gguf"), tmp_path / "t.gguf", more=more)
    with pytest.raises(GGUFError, match=re.escape(f"{path}: tokenizer.chat_template is an array, not a string")):
        muser_mlx.load(path)


@pytest.mark.parametrize("text", ["<0xZZ>", "<0x4>", "<0x041>", "A"])
def test_a_byte_token_that_is_no_byte_is_refused(text):
    with pytest.raises(ValueError, match=f"token {3 + 0x41} '{text}' is a byte token"):
        synthetic_spm(True, byte_text={0x41: text})


def test_load_names_a_byte_token_that_is_no_byte(tmp_path):
    def spoil(tokens):
        tokens[3] = "<0xZZ>"

    path = tiny_llama_with(tmp_path, spoil)
    with pytest.raises(GGUFError, match=re.escape(f"{path}: token 3 '<0xZZ>' is a byte token")):
        muser_mlx.load(path)


assert FIXTURES  # the fixtures folder is configured in conftest
