"""The examples run: the tour notebook from a clean kernel, and the tiny model (checked against
the same model over the dequantized float table)."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_notebook_runs_from_a_clean_kernel(tmp_path, monkeypatch):
    nbclient = pytest.importorskip("nbclient", reason="the notebook extra is not installed: pip install -e .[notebook]")
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("ipykernel")
    pytest.importorskip("matplotlib")
    # A kernelspec of this interpreter under a name of its own, first on JUPYTER_PATH, so the kernel
    # is this venv's python whatever other "python3" kernelspecs the machine has.
    spec = tmp_path / "jupyter" / "kernels" / "muser-mlx-test"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "muser_mlx test", "language": "python"})
    )
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("MUSER_MLX_NOTEBOOK_IMAGES", str(tmp_path / "images"))  # leave examples/images alone

    nb = nbformat.read(EXAMPLES / "embedding_tour.ipynb", as_version=4)
    client = nbclient.NotebookClient(
        nb, kernel_name="muser-mlx-test", timeout=300, resources={"metadata": {"path": str(EXAMPLES)}}
    )
    client.execute()  # raises CellExecutionError on the first cell that fails

    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "readable NumPy == muser_mlx, bit for bit: True" in text
    assert "equals gguf-py's dequantization bit for bit" in text
    assert "last row" in text and "IndexError" in text
    assert "gemma3_text.Model: 268,098,176 parameters" in text and "The capital of France is the capital of" in text
    assert sum(o.output_type == "display_data" for c in nb.cells if c.cell_type == "code" for o in c.outputs) == 4
    assert sorted(p.name for p in (tmp_path / "images").iterdir()) == [
        "dequant_error.png",
        "lookup_time.png",
        "memory.png",
        "q4k_block.png",
    ]


def test_tiny_model_script():
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "tiny_model.py")], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert "bit-identical: True" in result.stdout
    assert "same tokens as the float-table model: True" in result.stdout


def _tiny_model():
    spec = importlib.util.spec_from_file_location("tiny_model", EXAMPLES / "tiny_model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tiny_model_on_its_own_gguf(tmp_path, capsys):
    tiny = _tiny_model()
    tiny.run(tiny.make_gguf(tmp_path), steps=3)  # asserts logits and tokens equal the float model's
    out = capsys.readouterr().out
    assert "vocab 1000" in out and "bit-identical: True" in out


def test_tiny_model_tied_head(tmp_path, capsys):
    tiny = _tiny_model()
    path = tiny.make_gguf(tmp_path, vocab=300)
    tiny.run(path, tied=True, steps=3)
    assert "tied head" in capsys.readouterr().out


def test_gemma_example(gemma_path):
    pytest.importorskip("mlx_lm", reason="the lm extra is not installed: pip install -e .[lm]")
    from muser_mlx import FORMATS

    if "Q5_0" not in FORMATS:
        pytest.skip("Gemma 3 270M's projections are Q5_0, not among muser_mlx.FORMATS in this tree")
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "gemma.py"), "--max-tokens", "4"], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr
    assert "gemma3_text.Model" in result.stdout and "as float16" in result.stdout
    assert "The capital of France is the capital of" in result.stdout and "tokens/s" in result.stdout
