"""A GGUF file's tokenizer, from its ``tokenizer.ggml.*`` metadata: a Hugging Face fast tokenizer
built with the ``tokenizers`` library (no torch), in mlx-lm's ``TokenizerWrapper``.

It gives llama.cpp's ids (``llama-vocab.cpp``), which it mirrors as follows:
- ``llama`` (SentencePiece) vocabularies: llama.cpp merges adjacent symbols, highest score of the
  merged token first, and spells a symbol that is no token in its bytes (``<0xXX>``). That is a
  BPE over every split of every token into two tokens, ranked by the whole token's score, with
  byte fallback. A space is ``▁``; ``add_space_prefix`` puts one before the text and after each
  special token (a ``Prepend`` normalizer, which runs on each piece between added tokens).
- ``gpt2`` vocabularies (Qwen, Llama 3): byte-level BPE over the file's merges, text split first by
  the regular expression llama.cpp uses for ``tokenizer.ggml.pre``.
- Control and unknown tokens (types 3, 2) are special tokens: parsed in text unless the tokenizer's
  ``encode_special_tokens`` is set (llama.cpp's ``parse_special=false``); user-defined tokens (4)
  are always split out of the text, as llama.cpp does with or without ``parse_special``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from gguf import TokenType

from ..errors import GGUFError

# llama.cpp's pre-tokenizer expressions by tokenizer.ggml.pre (llama-vocab.cpp, llm_tokenizer_bpe)
_CONTRACTIONS = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
PRE_TOKENIZERS = {
    "default": r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
    "llama-bpe": _CONTRACTIONS
    + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "qwen2": _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
}
PRE_TOKENIZERS["gpt-2"] = PRE_TOKENIZERS["default"]
for _name in ("llama3", "llama-v3", "smaug-bpe"):  # llama.cpp's names of the llama-bpe expression
    PRE_TOKENIZERS[_name] = PRE_TOKENIZERS["llama-bpe"]
# The pre-tokenizers whose vocabularies llama.cpp gives a BOS unless add_bos_token says otherwise
BOS_BY_DEFAULT = ("llama3", "llama-v3", "llama-bpe")


@dataclass
class Vocab:
    """What ``tokenizer.ggml.*`` says: the tokens (id order), their scores and types, the BPE
    merges (``gpt2`` only), and the special ids and flags."""

    model: str
    tokens: list[str]
    types: list[int]
    scores: list[float] = field(default_factory=list)
    merges: list[str] = field(default_factory=list)
    pre: str = "default"
    bos: int | None = None
    eos: int | None = None
    unk: int | None = None
    pad: int | None = None
    add_bos: bool = True
    add_eos: bool = False
    add_space_prefix: bool = True
    chat_template: str | None = None

    def __post_init__(self):
        if self.model == "gpt2" and self.pre not in PRE_TOKENIZERS:
            raise ValueError(
                f"tokenizer.ggml.pre {self.pre!r} is not supported; supported: {', '.join(PRE_TOKENIZERS)}"
            )

    @classmethod
    def from_gguf(cls, f) -> Vocab:
        """From an open GGUF file (``muser_mlx.gguf.GGUFFile``); ``GGUFError`` without a vocabulary."""
        model = f.get("tokenizer.ggml.model")
        if model not in ("llama", "gpt2"):
            raise GGUFError(
                f"{f.path}: tokenizer.ggml.model is {model!r}; supported: 'llama' (SentencePiece), 'gpt2' (BPE)"
            )
        if "tokenizer.ggml.tokens" not in f.metadata:
            raise GGUFError(f"{f.path}: no tokenizer.ggml.tokens; a model needs its vocabulary")
        pre = f.get("tokenizer.ggml.pre", "default")
        tokens = list(f.array("tokenizer.ggml.tokens"))
        n = len(tokens)
        types = (
            [int(t) for t in f.array("tokenizer.ggml.token_type")]
            if "tokenizer.ggml.token_type" in f.metadata
            else [TokenType.NORMAL] * n
        )
        scores = (
            [float(s) for s in f.array("tokenizer.ggml.scores")] if "tokenizer.ggml.scores" in f.metadata else [0.0] * n
        )
        merges = list(f.array("tokenizer.ggml.merges")) if "tokenizer.ggml.merges" in f.metadata else []
        if len(types) != n or len(scores) != n:
            raise GGUFError(f"{f.path}: {n} tokens but {len(types)} token types and {len(scores)} scores")
        if model == "gpt2" and not merges:
            raise GGUFError(f"{f.path}: a 'gpt2' tokenizer without tokenizer.ggml.merges")

        def special(name):
            value = f.get(f"tokenizer.ggml.{name}_token_id")
            if value is None:
                return None
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or not 0 <= value < n:
                raise GGUFError(f"{f.path}: tokenizer.ggml.{name}_token_id {value!r} is no id of the {n} tokens")
            return int(value)

        spm = model == "llama"
        fields = (
            model,
            tokens,
            types,
            scores,
            merges,
            pre,
            special("bos"),
            special("eos"),
            special("unknown"),
            special("padding"),
            bool(f.get("tokenizer.ggml.add_bos_token", spm or pre in BOS_BY_DEFAULT)),
            bool(f.get("tokenizer.ggml.add_eos_token", False)),
            bool(f.get("tokenizer.ggml.add_space_prefix", spm)),
            f.get("tokenizer.chat_template"),
        )
        try:
            return cls(*fields)
        except ValueError as e:  # Vocab's own check of the pre-tokenizer
            raise GGUFError(f"{f.path}: {e}") from e


def spm_merges(tokens: list[str], scores: list[float]) -> list[tuple[str, str]]:
    """Every (left, right) pair of tokens whose concatenation is a token, highest score of the
    concatenation first (ties in id order): llama.cpp's SentencePiece bigram queue as BPE ranks."""
    known = set(tokens)
    merges = []
    for i in sorted(range(len(tokens)), key=scores.__getitem__, reverse=True):
        token = tokens[i]
        merges.extend(
            (token[:cut], token[cut:]) for cut in range(1, len(token)) if token[:cut] in known and token[cut:] in known
        )
    return merges


def build_tokenizer(vocab: Vocab):
    """The ``tokenizers.Tokenizer`` of ``vocab``."""
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
    )

    ids = {token: i for i, token in enumerate(vocab.tokens)}
    unk = vocab.tokens[vocab.unk] if vocab.unk is not None else None
    if vocab.model == "llama":
        model = models.BPE(
            ids, spm_merges(vocab.tokens, vocab.scores), unk_token=unk, byte_fallback=True, fuse_unk=False
        )
        tok = Tokenizer(model)
        replace = normalizers.Replace(" ", "▁")
        tok.normalizer = (
            normalizers.Sequence([normalizers.Prepend("▁"), replace]) if vocab.add_space_prefix else replace
        )
        steps = [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
        tok.decoder = decoders.Sequence(steps + ([decoders.Strip(" ", 1, 0)] if vocab.add_space_prefix else []))
    else:
        merges = [tuple(m.split(" ", 1)) for m in vocab.merges]
        tok = Tokenizer(models.BPE(ids, merges, unk_token=unk, fuse_unk=False, ignore_merges=vocab.pre == "llama-bpe"))
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(PRE_TOKENIZERS[vocab.pre]), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
        tok.decoder = decoders.ByteLevel()
    tok.add_tokens(
        [
            AddedToken(vocab.tokens[i], special=False, normalized=False)
            for i, t in enumerate(vocab.types)
            if t == TokenType.USER_DEFINED
        ]
    )
    tok.add_special_tokens(
        [
            AddedToken(vocab.tokens[i], special=True, normalized=False)
            for i, t in enumerate(vocab.types)
            if t in (TokenType.CONTROL, TokenType.UNKNOWN)
        ]
    )
    bos = [vocab.tokens[vocab.bos]] if vocab.add_bos and vocab.bos is not None else []
    eos = [vocab.tokens[vocab.eos]] if vocab.add_eos and vocab.eos is not None else []
    specials = [(t, ids[t]) for t in dict.fromkeys(bos + eos)]
    tok.post_processor = processors.TemplateProcessing(
        single=" ".join(bos + ["$A"] + eos),
        pair=" ".join(bos + ["$A"] + eos + bos + ["$B"] + eos),
        special_tokens=specials,
    )
    return tok


def tokenizer_wrapper(vocab: Vocab):
    """mlx-lm's ``TokenizerWrapper`` over a ``transformers.PreTrainedTokenizerFast`` of
    :func:`build_tokenizer`, with mlx-lm's streaming detokenizer for the vocabulary's kind."""
    from functools import partial

    from mlx_lm.tokenizer_utils import (
        BPEStreamingDetokenizer,
        SPMStreamingDetokenizer,
        TokenizerWrapper,
    )
    from transformers import PreTrainedTokenizerFast

    def name(i):
        return vocab.tokens[i] if i is not None else None

    fast = PreTrainedTokenizerFast(
        tokenizer_object=build_tokenizer(vocab),
        bos_token=name(vocab.bos),
        eos_token=name(vocab.eos),
        unk_token=name(vocab.unk),
        pad_token=name(vocab.pad),
        chat_template=vocab.chat_template,
        clean_up_tokenization_spaces=False,
    )
    if vocab.model == "llama":
        detokenizer = partial(SPMStreamingDetokenizer, trim_space=vocab.add_space_prefix)
    else:
        detokenizer = BPEStreamingDetokenizer
    eos = [
        i
        for i, (token, kind) in enumerate(zip(vocab.tokens, vocab.types, strict=True))
        if kind == TokenType.CONTROL and token in ("<end_of_turn>", "<|im_end|>", "<|eot_id|>", "<|endoftext|>")
    ]
    return TokenizerWrapper(fast, detokenizer, eos_token_ids=eos + ([vocab.eos] if vocab.eos is not None else []))
