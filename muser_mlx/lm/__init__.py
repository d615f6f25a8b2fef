"""GGUF models in mlx-lm: ``load(path) -> (model, tokenizer)``, mirroring ``mlx_lm.load``.

Needs the ``lm`` extra (``pip install "muser_mlx[lm]"``: mlx-lm and tokenizers); mlx-lm is imported
when a model is loaded, not before.
"""

from .loader import load

__all__ = ["load"]
