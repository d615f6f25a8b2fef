"""The muser-mlx command line: inspect, embed, demo, generate."""

import subprocess
import sys

import numpy as np
import pytest

from muser_mlx import Table, save_gguf
from muser_mlx.cli import main

from conftest import fixture, reference, rewrite_gguf


def test_inspect(capsys):
    assert main(["inspect", str(fixture("tiny-llama-Q4_K_M.gguf"))]) == 0
    out = capsys.readouterr().out
    assert "token_embd.weight: Q4_K, ggml shape [512, 1003]" in out and "288 bytes = 2 blocks" in out
    assert "float32 copy   2.0 MiB" in out
    gatherable = out.split("tensors muser_mlx can gather", 1)[1]
    assert "output.weight" in gatherable and "Q6_K [512, 1003]" in gatherable and "token_embd.weight" in gatherable


def test_embed_prints_and_saves(tmp_path, capsys):
    path = fixture("tiny-llama-Q4_K_M.gguf")
    assert main(["embed", str(path), "--ids", "1", "7"]) == 0
    assert capsys.readouterr().out.startswith("1: [")
    assert main(["embed", str(path), "--ids", "1", "7", "--out", str(tmp_path / "r.npy")]) == 0
    import gguf

    raw = next(t for t in gguf.GGUFReader(path).tensors if t.name == "token_embd.weight")
    assert np.array_equal(np.load(tmp_path / "r.npy"), reference(np.asarray(raw.data), "Q4_K", [1, 7]))


def test_embed_out_is_the_path_as_given(tmp_path, capsys):
    """--out is written as it is, with no .npy added; a folder or a missing parent folder is a
    one-line error (np.save wrote DIR.npy beside an existing folder DIR)."""
    path = str(fixture("tiny-llama-Q4_K_M.gguf"))
    assert main(["embed", path, "--ids", "1", "7", "--out", str(tmp_path / "rows")]) == 0
    assert f"to {tmp_path / 'rows'}" in capsys.readouterr().out
    assert np.load(tmp_path / "rows").shape == (2, 512) and not (tmp_path / "rows.npy").exists()
    (tmp_path / "folder").mkdir()
    for out, reason in [
        (tmp_path / "folder", "Is a directory"),
        (f"{tmp_path / 'folder'}/", "Is a directory"),
        (tmp_path / "absent" / "rows.npy", "No such file or directory"),
    ]:
        assert main(["embed", path, "--ids", "1", "--out", str(out)]) == 1
        err = capsys.readouterr().err
        assert err == f"muser-mlx: --out {out}: {reason}\n", err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder", "rows"]


def test_bad_id_and_bad_file_are_one_line_errors(tmp_path, capsys):
    assert main(["embed", str(fixture("tiny-llama-Q4_K_M.gguf")), "--ids", "5000"]) == 1
    assert "token id 5000 at position 0 is out of range" in capsys.readouterr().err
    assert main(["embed", str(fixture("tiny-llama-Q4_K_M.gguf")), "--ids", "1", str(10**20)]) == 1
    assert f"token id {10**20} at position 1 is out of range" in capsys.readouterr().err
    (tmp_path / "n.gguf").write_text("hello")
    assert main(["inspect", str(tmp_path / "n.gguf")]) == 1
    assert "not a readable GGUF" in capsys.readouterr().err


def test_inspect_prints_names_from_the_file_escaped(tmp_path, capsys):
    """A tensor name or architecture holding terminal control characters is printed escaped."""
    table = Table.from_bytes(np.zeros((2, 34), np.uint8), "Q8_0", 32)
    path = save_gguf(tmp_path / "e.gguf", {"token_embd.weight": table, "evil\x1b[2J\r.weight": table}, {}, "a\x1bb")
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\r" not in out
    assert "architecture   a\\x1bb" in out and "evil\\x1b[2J\\r.weight" in out


def test_demo_runs_as_a_module():
    result = subprocess.run([sys.executable, "-m", "muser_mlx", "demo"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "gguf-py's dequantization of the same rows: bit-identical" in result.stdout


def test_generate_prints_the_text_and_tokens_per_second(capsys):
    pytest.importorskip("mlx_lm", reason="the lm extra is not installed: pip install -e .[lm]")
    import json

    expected = json.loads(fixture("llamacpp/ollama-llama-2-tiny-random.json").read_text())["prompts"][0]
    assert (
        main(
            [
                "generate",
                str(fixture("ollama-llama-2-tiny-random.gguf")),
                "--prompt",
                expected["text"],
                "--max-tokens",
                "6",
            ]
        )
        == 0
    )
    text, stats = capsys.readouterr().out.rstrip("\n").rsplit("\n", 1)
    assert expected["completion"].startswith(expected["text"] + text)
    assert "generation: 6 tokens" in stats and "tokens/s" in stats


TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}[assistant]{% endif %}"
)


def test_generate_puts_the_prompt_in_the_files_chat_template(tmp_path, capsys):
    """As mlx_lm.generate: the prompt (and --system-prompt) in the file's tokenizer.chat_template,
    no second BOS; --ignore-chat-template gives the prompt as it is, after a BOS."""
    pytest.importorskip("mlx_lm", reason="the lm extra is not installed: pip install -e .[lm]")
    from muser_mlx.gguf import open_gguf
    from muser_mlx.lm.tokenizer import Vocab, tokenizer_wrapper

    path = rewrite_gguf(
        fixture("ollama-llama-2-tiny-random.gguf"), tmp_path / "chat.gguf", more=lambda w: w.add_chat_template(TEMPLATE)
    )
    with open_gguf(path) as f:
        tok = tokenizer_wrapper(Vocab.from_gguf(f))

    def prompt_tokens(*options):
        assert main(["generate", str(path), "--prompt", "Hi there", "--max-tokens", "1", *options]) == 0
        return int(capsys.readouterr().out.rsplit("prompt: ", 1)[1].split(" ")[0])

    def ids(text):
        return len(tok.encode(text, add_special_tokens=False))

    assert prompt_tokens() == ids("<s>[user] Hi there\n[assistant]")
    assert prompt_tokens("--system-prompt", "Be brief.") == ids("<s>[system] Be brief.\n[user] Hi there\n[assistant]")
    assert prompt_tokens("--ignore-chat-template") == ids("<s>Hi there")


@pytest.mark.parametrize(
    "template, options, message",
    [
        ("{% for m in messages %}{{ m['content'] }", [], "TemplateSyntaxError"),
        (
            "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}",
            ["--system-prompt", "Be brief."],
            "System role not supported",
        ),
        ("{% for i in range(10**9) %}{% endfor %}", [], "OverflowError"),  # past jinja's sandbox
        ("{{ 1 / 0 }}", [], "ZeroDivisionError"),
        ("{{ raise_exception('one\\ntwo\\x1b[2J') }}", [], "one\\ntwo\\x1b[2J"),  # the file's text, escaped
    ],
)
def test_a_chat_template_that_fails_is_a_one_line_error(tmp_path, capsys, template, options, message):
    pytest.importorskip("mlx_lm", reason="the lm extra is not installed: pip install -e .[lm]")
    import gguf

    def add_template(w):
        w.add_key_value(gguf.Keys.Tokenizer.CHAT_TEMPLATE, template, gguf.GGUFValueType.get_type(template))

    path = rewrite_gguf(fixture("ollama-llama-2-tiny-random.gguf"), tmp_path / "bad.gguf", more=add_template)
    assert main(["generate", str(path), "--prompt", "Hi", "--max-tokens", "1", *options]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "tokenizer.chat_template fails" in err and message in err, err
    assert main(["generate", str(path), "--prompt", "Hi", "--max-tokens", "1", "--ignore-chat-template"]) == 0


@pytest.mark.parametrize(
    "option, value",
    [("--temp", "nan"), ("--temp", "-1"), ("--temp", "inf"), ("--max-tokens", "0"), ("--max-tokens", "-1")],
)
def test_generate_refuses_a_temperature_or_token_count_out_of_range(tmp_path, capsys, option, value):
    """argparse's error (exit status 2) before any file is read."""
    with pytest.raises(SystemExit) as raised:
        main(["generate", str(tmp_path / "absent.gguf"), "--prompt", "Hi", option, value])
    assert raised.value.code == 2
    assert f"argument {option}: {value!r} is not" in capsys.readouterr().err
