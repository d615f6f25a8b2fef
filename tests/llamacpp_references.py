"""What llama.cpp computes for files the tests write, recorded in tests/data/ for the tests that
hold the package to it (tests/test_llamacpp_references.py):

- llamacpp_bpe.json: a byte-level BPE vocabulary (600 tokens trained by ``tokenizers`` on the
  README) written once per ``tokenizer.ggml.pre`` name of
  ``muser_mlx.lm.tokenizer.PRE_TOKENIZERS`` with two control tokens after it, and llama.cpp's ids
  for each of ``TEXTS`` without and with special-token parsing (no BOS), and for the first with
  its BOS; for each of ``EOG_CASES`` (the vocabulary with those special tokens after it)
  llama.cpp's end-of-generation ids and what type each special token acts as; and Phi-3's chat
  tokens under each of ``NAMES`` (llama.cpp drops the whitespace after special tokens where
  general.name says Phi-3), with and without parsing them.
- llamacpp_logits.npz: llama.cpp's logits (float16) at each of 64 positions for the files of
  ``model_files`` (``test_architectures.write_model``'s llama, granite, smollm3, qwen2, qwen3,
  olmo2, OLMo 3, phi3, gemma2 and gemma3 files, some with rope scalings and factors, and
  tiny-llama with Llama 3.1-style ``rope_freqs.weight``), each with a hash of its keys and tensors
  (``content_hash``), so that a file the writers no longer reproduce fails as such.

Regenerate where llama-cpp-python 0.3.36 (llama.cpp's CPU build) is installed, from the
repository root: ``python tests/llamacpp_references.py`` (the tests themselves never need it).
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path

import gguf
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from conftest import fixture, rewrite_gguf, write_out  # noqa: E402

DATA = Path(__file__).parent / "data"
POSITIONS = list(range(3, 67))  # the token ids evaluated, one per position
CONTROL = ["<|endoftext|>", "<|im_end|>"]
TEXTS = [
    "don't stop: $1234567 a+b ~~",
    "Hello, World! It's 2026-12-05; we'll see.",
    "  leading spaces\n\nand\ttabs   \n",
    "naïve café résumé Ünïcödé",
    "日本語のテキスト、そして中文。",
    "emoji 🎉🚀 and ZWJ 👨\u200d👩\u200d👧",
    "HTTPServer camelCaseWord XMLHttpRequest",
    "numbers 1 12 123 1234 12345 3.14159 1,000,000",
    "code: def f(x): return x**2 // 3 != 4 && y || z",
    "symbols <=> ^_^ |pipe| `tick` @home #tag %50 &amp;",
    "mixed123abc ABC123def 42nd",
    "I'M YOU'RE THEY'VE SHE'LL HE'D",
    "line1\r\nline2\rline3\n",
    "½ ² ٣ Ⅷ",
    "a\u00a0b\u3000c\u0085d",
    "<|im_end|> inside text",
    "a<|im_end|>b <|endoftext|> c<|im_end|>",
    "   ",
    "x",
    "The quick brown fox jumps over the lazy dog.",
    "'''quotes''' \"double\" «guillemets»",
]


# Vocabularies of special tokens whose end-of-generation ids and types llama.cpp works out from
# their text: (extra tokens, their types where not normal, the file's ids by key). One text a kind
# (llama.cpp takes the first of a kind in its hash map's order).
EOG_CASES = {
    "found by text": (
        ["<|im_end|>", "<|fim_pad|>", "<|repo_name|>", "<my_eot>", "<|fim_prefix|>", "<x>", "</s>"],
        {"</s>": 4},
        {"eos": "<x>", "eot": "<my_eot>"},
    ),
    "gpt-oss": (["<|end|>", "<|return|>", "<|call|>"], {}, {}),
    "solar-open": (["<|end|>", "<|calls|>", "<|flush|>"], {}, {}),
    "end and return": (["<|end|>", "<|return|>"], {}, {}),
    "gemma 4": (["</s>", "<|tool_response>"], {}, {}),
}


# Phi-3's chat tokens, control (3), user-defined (4) and unknown (2), for llama.cpp's rule on
# general.name (whose load fails unless </s>, <unk>, <s> and <|endoftext|> are all tokens)
PHI3_TOKENS = {"<|user|>": 3, "<|end|>": 3, "<|assistant|>": 3, "<|endoftext|>": 3, "<s>": 3, "</s>": 3, "<unk>": 2}
PHI3_TOKENS["<u>"] = 4
PHI3_TEXT = "<|user|>\n Hi<|end|>\n<|assistant|>\n\tHello <u>  x<|endoftext|> y <s> z </s> w <unk> v"
NAMES = ("Phi-3-mini-4k-instruct", "Phi3", "Phi 3 Mini")  # the last not llama.cpp's Phi-3


def write_bpe(path: Path, vocab: dict, pre: str, case: str | None = None, name: str | None = None) -> Path:
    """A qwen2 file of no tensors holding ``vocab`` (tokens, merges) under tokenizer.ggml.pre
    ``pre``, then the control tokens (the EOS the first), or the special tokens of
    ``EOG_CASES[case]``, or with a general.name ``name`` the ``PHI3_TOKENS``."""
    if case:
        extra, types, keys = EOG_CASES[case]
    elif name:
        extra, types, keys = list(PHI3_TOKENS), PHI3_TOKENS, {}
    else:
        extra, types, keys = CONTROL, dict.fromkeys(CONTROL, 3), {"eos": CONTROL[0]}
    tokens = vocab["tokens"] + extra
    w = gguf.GGUFWriter(path, "qwen2")
    if name:
        w.add_name(name)
    w.add_block_count(1)
    w.add_context_length(512)
    w.add_embedding_length(64)
    w.add_feed_forward_length(96)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types([types.get(t, 1) for t in tokens])
    w.add_token_merges(vocab["merges"])
    for kind, token in keys.items():
        w.add_uint32(f"tokenizer.ggml.{kind}_token_id", tokens.index(token))
    write_out(w)
    return path


def kind(attr: int) -> str:
    """llama.cpp's token attributes as the token type they act as."""
    import llama_cpp

    if attr & llama_cpp.LLAMA_TOKEN_ATTR_CONTROL:
        return "control"
    return "user-defined" if attr & llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED else "normal"


def model_files(folder: Path) -> dict[str, Path]:
    """The small models whose logits are recorded, written into ``folder``."""
    from test_architectures import phi3_long_rope, write_model
    from test_load import LLAMA3_SCALING, llama3_rope_factors

    def yarn(w):
        w.add_string("qwen3.rope.scaling.type", "yarn")
        w.add_float32("qwen3.rope.scaling.factor", 4.0)
        w.add_uint32("qwen3.rope.scaling.original_context_length", 64)

    def linear8(w):
        w.add_string("gemma3.rope.scaling.type", "linear")
        w.add_float32("gemma3.rope.scaling.factor", 8.0)

    write_model(folder / "granite.gguf", "granite", tied=True)
    write_model(folder / "smollm3.gguf", "smollm3", tied=True, pre="smollm")
    write_model(folder / "olmo2.gguf", "olmo2", tied=False)
    write_model(folder / "olmo3.gguf", "olmo3", tied=False)
    write_model(folder / "phi3.gguf", "phi3", tied=False)
    # llama.cpp takes the long factors where its context (128, padded to 256) is past the original,
    # ours where the last of the 64 positions is
    write_model(folder / "phi3_rope_long.gguf", "phi3", tied=False, more=lambda w: phi3_long_rope(w, 32))
    write_model(folder / "phi3_rope_short.gguf", "phi3", tied=False, more=lambda w: phi3_long_rope(w, 256))
    write_model(folder / "gemma2.gguf", "gemma2", tied=True)
    write_model(folder / "gemma3.gguf", "gemma3", tied=True)
    write_model(folder / "gemma3_linear8.gguf", "gemma3", tied=True, more=linear8)
    write_model(folder / "llama_head_dim_32.gguf", "llama", tied=False, pre="llama-bpe", head_dim=32)
    write_model(folder / "qwen2.gguf", "qwen2", tied=False)
    write_model(folder / "qwen3.gguf", "qwen3", tied=True)
    write_model(folder / "qwen3_yarn.gguf", "qwen3", tied=True, more=yarn)
    factors = llama3_rope_factors(128, 10000.0, LLAMA3_SCALING)
    rewrite_gguf(fixture("tiny-llama-Q8_0.gguf"), folder / "llama_rope_freqs.gguf", {"rope_freqs.weight": factors})
    return {p.stem: p for p in sorted(folder.glob("*.gguf"))}


def content_hash(path: Path) -> str:
    """SHA-256 of what a GGUF file says, not of its layout: every key and value (arrays read) and
    every tensor's name, type, shape and bytes, in name order; a gguf-py that pads or orders its
    files otherwise makes the same hash."""
    from muser_mlx.gguf import ArrayInfo, open_gguf

    digest = hashlib.sha256()
    with open_gguf(path) as f:
        for key in sorted(f.metadata):
            value = f.array(key) if isinstance(f.metadata[key], ArrayInfo) else f.get(key)
            digest.update(repr((key, value.tolist() if isinstance(value, np.ndarray) else value)).encode())
        for name in sorted(f.tensors):
            info = f.tensors[name]
            digest.update(repr((name, info.qtype, info.shape)).encode())
            digest.update(f.read(name).tobytes())
    return digest.hexdigest()


def train_vocab() -> dict:
    """600 byte-level BPE tokens (id order) and their merges, trained on the README."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=600, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tok.train_from_iterator((Path(__file__).parent.parent / "README.md").read_text().split("\n"), trainer)
    model = json.loads(tok.to_str())["model"]
    tokens = sorted(model["vocab"], key=model["vocab"].get)
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    return {"tokens": tokens, "merges": merges}


def main() -> None:
    import llama_cpp

    from muser_mlx.lm.tokenizer import PRE_TOKENIZERS

    vocab = train_vocab()
    ids = {}
    with tempfile.TemporaryDirectory() as tmp:
        for pre in PRE_TOKENIZERS:
            llm = llama_cpp.Llama(
                model_path=str(write_bpe(Path(tmp) / f"{pre}.gguf", vocab, pre)), vocab_only=True, verbose=False
            )
            ids[pre] = {  # each text without and with special-token parsing, and the first with its BOS
                "plain": [llm.tokenize(t.encode(), add_bos=False, special=False) for t in TEXTS],
                "special": [llm.tokenize(t.encode(), add_bos=False, special=True) for t in TEXTS],
                "bos": llm.tokenize(TEXTS[0].encode(), add_bos=True, special=False),
            }
        eog = {}
        for case, (extra, _, _) in EOG_CASES.items():
            path = write_bpe(Path(tmp) / "case.gguf", vocab, "qwen2", case)
            llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)  # held: it owns the vocabulary
            table = llama_cpp.llama_model_get_vocab(llm.model)
            first = len(vocab["tokens"])
            eog[case] = {
                "eog": [i for i in range(first + len(extra)) if llama_cpp.llama_vocab_is_eog(table, i)],
                "kinds": {t: kind(llama_cpp.llama_vocab_get_attr(table, first + j)) for j, t in enumerate(extra)},
            }
        named = {}
        for name in NAMES:
            llm = llama_cpp.Llama(
                model_path=str(write_bpe(Path(tmp) / "named.gguf", vocab, "qwen2", name=name)),
                vocab_only=True,
                verbose=False,
            )
            named[name] = [
                llm.tokenize(PHI3_TEXT.encode(), add_bos=False, special=special) for special in (True, False)
            ]
        made_by = f"llama-cpp-python {llama_cpp.__version__}"
        record = {"made_by": made_by, "vocab": vocab, "texts": TEXTS, "ids": ids, "eog": eog, "named": named}
        (DATA / "llamacpp_bpe.json").write_text(json.dumps(record, ensure_ascii=False) + "\n")
        logits = {}
        (Path(tmp) / "models").mkdir()
        for name, path in model_files(Path(tmp) / "models").items():
            llm = llama_cpp.Llama(model_path=str(path), n_ctx=128, logits_all=True, verbose=False, n_threads=2)
            llm.eval(POSITIONS)
            logits[name] = np.array(llm.scores[: len(POSITIONS)], np.float16)
            logits[name + ".hash"] = np.array(content_hash(path))
        np.savez_compressed(DATA / "llamacpp_logits.npz", made_by=np.array(made_by), **logits)


if __name__ == "__main__":
    main()
