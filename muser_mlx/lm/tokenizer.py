"""A GGUF file's tokenizer, from its ``tokenizer.ggml.*`` metadata: a Hugging Face fast tokenizer
built with the ``tokenizers`` library (no torch), in mlx-lm's ``TokenizerWrapper``.

It gives llama.cpp's ids (``llama-vocab.cpp``), which it mirrors as follows:
- ``llama`` (SentencePiece) vocabularies: llama.cpp merges adjacent symbols, highest score of the
  merged token first, and spells a symbol that is no token in its bytes (``<0xXX>``). That is a
  BPE over every split of every token into two tokens, ranked by the whole token's score, with
  byte fallback. A space is ``▁``; ``add_space_prefix`` puts one before the text and after each
  special token (a ``Prepend`` normalizer, which runs on each piece between added tokens).
- ``gpt2`` vocabularies (Qwen, Llama 3): byte-level BPE over the file's merges, text split first by
  the regular expressions llama.cpp uses for ``tokenizer.ggml.pre``, in turn.
- Control and unknown tokens (types 3, 2) are special tokens: parsed in text unless the tokenizer's
  ``encode_special_tokens`` is set (llama.cpp's ``parse_special=false``); user-defined tokens (4)
  are always split out of the text, as llama.cpp does with or without ``parse_special``. Tokens
  that llama.cpp takes for end-of-turn, end-of-generation or fill-in-the-middle tokens by their
  text are control tokens whatever their type in the file; the end-of-generation ones are the
  wrapper's ``eos_token_ids``.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

from gguf import TokenType

from ..errors import GGUFError
from ..gguf_values import ArrayInfo, is_integer

log = logging.getLogger("muser_mlx")

# llama.cpp's expressions (llama-vocab.cpp, llm_tokenizer_bpe)
_CONTRACTIONS = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
_LLAMA3 = _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
_QWEN2 = _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
_GPT4O = (
    r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+" + _CONTRACTIONS + "?"
    r"|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*" + _CONTRACTIONS + "?"
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_TEKKEN = (
    r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+"
    r"|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*"
    r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


# llama.cpp's special ids where the file has no key (llama-vocab.cpp, load): SentencePiece's
# <unk> <s> </s> layout; 11 for gpt2's BOS and EOS (kept only inside the vocabulary).
DEFAULT_IDS = {"llama": {"unknown": 0, "bos": 1, "eos": 2}, "gpt2": {"bos": 11, "eos": 11}}


@dataclass(frozen=True)
class PreTokenizer:
    """llama.cpp's handling of one ``tokenizer.ggml.pre``: the expressions that split the text in
    turn (each splits every piece the one before left, matches and the text between them both
    kept: ``unicode_regex_split``), whether a piece that is a token is taken whole
    (``ignore_merges``), and whether a BOS is added where the file has no add_bos_token."""

    expressions: tuple[str, ...]
    ignore_merges: bool = False
    add_bos: bool = False


def _names(names: str, pre: PreTokenizer) -> dict[str, PreTokenizer]:
    return dict.fromkeys(names.split(), pre)


# By tokenizer.ggml.pre, as llama.cpp's name -> type -> expressions switches group them; "default"
# is also what a file without the key gets.
PRE_TOKENIZERS = {
    "default": PreTokenizer((r"[\p{P}\$\+<=>\^~\|]+", _GPT2, r"\p{N}+", "[0-9][0-9][0-9]")),
    **_names(
        "gpt-2 phi-2 gigachat a.x-4.0 mellum exaone4 mpt olmo jais trillion granite-docling", PreTokenizer((_GPT2,))
    ),
    **_names(
        "llama3 llama-v3 llama-bpe falcon3 falcon-h1 pixtral midm-2.0 lfm2 jina-v5-nano",
        PreTokenizer((_LLAMA3,), ignore_merges=True, add_bos=True),
    ),
    **_names("dbrx smaug-bpe", PreTokenizer((_LLAMA3,))),
    **_names("qwen2 deepseek-r1-qwen kormo f2llmv2 megrez stablelm2 hunyuan solar-open", PreTokenizer((_QWEN2,))),
    **_names("starcoder refact command-r smollm codeshell exaone minerva-7b mellum2", PreTokenizer((r"\p{N}", _GPT2))),
    "falcon": PreTokenizer((r"[\p{P}\$\+<=>\^~\|`]+", _GPT2, "[0-9][0-9][0-9]")),
    "tekken": PreTokenizer((_TEKKEN,), ignore_merges=True, add_bos=True),
    **_names("gpt-4o llama4 kanana2 talkie minimax-m2", PreTokenizer((_GPT4O,))),
}

# llama.cpp's special tokens found by their text where the file gives no id (llama-vocab.cpp,
# load): the first it meets of each kind (its hash map's order; here the lowest id) becomes a
# control token.
FOUND_BY_TEXT = {
    kind: tuple(texts.split())
    for kind, texts in {
        "eot": "<|eot_id|> <|im_end|> <|end|> <end_of_turn> <|endoftext|> <|end_of_text|> <EOT> _<EOT> [EOT] "
        "<｜end▁of▁sentence｜> <end_of_utterance>",
        "eom": "<|eom_id|>",
        "fim_pre": "<|fim_prefix|> <fim-prefix> <fim_prefix> <｜fim▁begin｜> <PRE> ▁<PRE> <|code_prefix|> <|prefix|>",
        "fim_suf": "<|fim_suffix|> <fim-suffix> <fim_suffix> <｜fim▁hole｜> <SUF> ▁<SUF> <|code_suffix|> <|suffix|>",
        "fim_mid": "<|fim_middle|> <fim-middle> <fim_middle> <｜fim▁end｜> <MID> ▁<MID> <|code_middle|> <|middle|>",
        "fim_pad": "<|fim_pad|> <fim-pad> <fim_pad> <PAD> [PAD]",
        "fim_rep": "<|fim_repo|> <|repo_name|> <fim-repo> <REPO> <reponame>",
        "fim_sep": "<|file_sep|>",
    }.items()
}
# Every token of these texts ends generation (and becomes a control token), as do the eos, eot and
# eom tokens and the fill-in-the-middle pad, repo and separator ones.
EOG_TEXTS = frozenset(
    "<|eot_id|> <|im_end|> <|end|> <|return|> <|call|> <|flush|> <|calls|> <end_of_turn> <|endoftext|> </s> "
    "<|eom_id|> <EOT> _<EOT> [EOT] [EOS] <|end_of_text|> <end_of_utterance> <eos> <turn|> <|tool_response> "
    "<｜end▁of▁sentence｜> [e~[".split()
)


def stripped_after(types: list[int], index: dict[str, int], name: str | None) -> list[int]:
    """The tokens after which llama.cpp drops the whitespace (llama-vocab.cpp, load, by
    general.name): where the name says Phi-3, every control, user-defined and unknown token and
    ``</s>``, but ``<unk>``, ``<s>`` and ``<|endoftext|>``; none for other names."""
    if not name or not any(phi in name.lower() for phi in ("phi-3", "phi3")):
        return []
    special = {i for i, t in enumerate(types) if t in (TokenType.CONTROL, TokenType.USER_DEFINED, TokenType.UNKNOWN)}
    special |= {index["</s>"]} if "</s>" in index else set()
    return sorted(special - {index[t] for t in ("<unk>", "<s>", "<|endoftext|>") if t in index})


def special_tokens(
    tokens: list[str], types: list[int], index: dict[str, int], ids: dict[str, int]
) -> tuple[list[int], list[int]]:
    """llama.cpp's token types after its search by text, and its end-of-generation ids (sorted);
    ``index``: each text's id (``Vocab.index``); ``ids``: the file's ids by kind ("eos" and the
    kinds of ``FOUND_BY_TEXT``)."""
    types = list(types)
    ids = dict(ids)
    for kind, texts in FOUND_BY_TEXT.items():
        hits = [index[t] for t in texts if t in index]
        if kind not in ids and hits:
            ids[kind] = min(hits)
            types[ids[kind]] = TokenType.CONTROL
    eog = {ids[kind] for kind in ("fim_pad", "fim_rep", "fim_sep") if kind in ids}
    for text in EOG_TEXTS & index.keys():
        eog.add(index[text])
        types[index[text]] = TokenType.CONTROL
    eog |= {ids[kind] for kind in ("eos", "eot", "eom") if kind in ids}
    texts = {tokens[i]: i for i in eog}
    # o200k_harmony and solar-open: <|end|> ends a message there, not the generation
    if "<|end|>" in texts and {"<|call|>", "<|calls|>"} & texts.keys() and {"<|return|>", "<|flush|>"} & texts.keys():
        eog.discard(texts["<|end|>"])
        types[texts["<|end|>"]] = TokenType.USER_DEFINED
    if "<|tool_response>" in texts and "</s>" in texts:  # Gemma 4
        eog.discard(texts["</s>"])
        types[texts["</s>"]] = TokenType.NORMAL
    return types, sorted(eog)


# A SentencePiece byte token's text. llama.cpp reads the two characters after "<0x" with strtol
# ("<0xZZ>" would be byte 0), mlx-lm's detokenizer with int(..., 16) (a ValueError there), so a
# byte token with another text is refused.
BYTE_TOKEN = re.compile(r"<0x[0-9A-Fa-f]{2}>")


@dataclass
class Vocab:
    """What ``tokenizer.ggml.*`` says: the tokens (id order), their scores and types, the BPE
    merges (``gpt2`` only), and the special ids and flags; ``special_ids``: the file's other
    special ids by kind (eot, eom, fim_pre ... fim_sep); ``name``: general.name. ``types`` become
    llama.cpp's after its search for special tokens by text (``special_tokens``), which also
    gives ``eog``, the ids that end generation; ``rstrip``: the tokens after which whitespace is
    dropped (``stripped_after``); ``index``: each token text's id. An empty text becomes
    ``[EMPTY_<id>]``, as llama.cpp names it (with a warning on the ``muser_mlx`` logger), so that
    a vocabulary with several loads as it does there. A text at two ids is refused, as llama.cpp
    refuses it ("duplicate token in vocabulary"; before, ``GGML_ASSERT``): the tokenizer holds one
    id a text, and mlx-lm's detokenizers read every id's."""

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
    special_ids: dict[str, int] = field(default_factory=dict)
    name: str | None = None
    index: dict[str, int] = field(init=False, repr=False)
    eog: list[int] = field(init=False)
    rstrip: list[int] = field(init=False)

    def __post_init__(self):
        if self.chat_template is not None and not isinstance(self.chat_template, str):
            # an array reads as transformers' named templates and failed there with a TypeError
            kind = "an array" if isinstance(self.chat_template, ArrayInfo) else type(self.chat_template).__name__
            raise ValueError(f"tokenizer.chat_template is {kind}, not a string")
        if self.model == "gpt2" and self.pre not in PRE_TOKENIZERS:
            raise ValueError(
                f"tokenizer.ggml.pre {self.pre!r} is not supported; supported: {', '.join(PRE_TOKENIZERS)}"
            )
        empty = [i for i, token in enumerate(self.tokens) if not token]
        if empty:
            log.warning("empty token texts at ids %s: named [EMPTY_<id>], as llama.cpp names them", empty)
            self.tokens = [token or f"[EMPTY_{i}]" for i, token in enumerate(self.tokens)]
        self.index = {}
        for i, token in enumerate(self.tokens):
            if self.index.setdefault(token, i) != i:
                raise ValueError(f"duplicate token in vocabulary: {token!r} has ids {self.index[token]} and {i}")
            if self.model == "llama" and self.types[i] == TokenType.BYTE and not BYTE_TOKEN.fullmatch(token):
                raise ValueError(f"token {i} {token!r} is a byte token (type BYTE) but not '<0xNN>'")
        ids = self.special_ids | ({"eos": self.eos} if self.eos is not None else {})
        self.types, self.eog = special_tokens(self.tokens, self.types, self.index, ids)
        self.rstrip = stripped_after(self.types, self.index, self.name)

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
                value = DEFAULT_IDS[model].get(name)
                return value if value is not None and value < n else None
            if not is_integer(value) or not 0 <= value < n:
                raise GGUFError(f"{f.path}: tokenizer.ggml.{name}_token_id {value!r} is no id of the {n} tokens")
            return int(value)

        spm = model == "llama"
        bos_by_default = spm or (pre in PRE_TOKENIZERS and PRE_TOKENIZERS[pre].add_bos)
        ids = {kind: special(kind) for kind in FOUND_BY_TEXT}
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
            bool(f.get("tokenizer.ggml.add_bos_token", bos_by_default)),
            bool(f.get("tokenizer.ggml.add_eos_token", False)),
            bool(f.get("tokenizer.ggml.add_space_prefix", spm)),
            f.get("tokenizer.chat_template"),
            {kind: i for kind, i in ids.items() if i is not None},
            f.get("general.name"),
        )
        try:
            return cls(*fields)
        except ValueError as e:  # Vocab's own checks: the pre-tokenizer, repeated texts, the byte tokens
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

    ids = vocab.index
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
        pre = PRE_TOKENIZERS[vocab.pre]
        tok = Tokenizer(models.BPE(ids, merges, unk_token=unk, fuse_unk=False, ignore_merges=pre.ignore_merges))
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Split(Regex(e), behavior="isolated") for e in pre.expressions]
            + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
        )
        tok.decoder = decoders.ByteLevel()
    rstrip = set(vocab.rstrip)
    tok.add_tokens(
        [
            AddedToken(vocab.tokens[i], special=False, normalized=False, rstrip=i in rstrip)
            for i, t in enumerate(vocab.types)
            if t == TokenType.USER_DEFINED
        ]
    )
    tok.add_special_tokens(
        [
            AddedToken(vocab.tokens[i], special=True, normalized=False, rstrip=i in rstrip)
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
    return TokenizerWrapper(fast, detokenizer, eos_token_ids=vocab.eog)
