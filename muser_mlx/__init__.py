"""GGUF quantized token-embedding tables for MLX, gathered and dequantized row by row."""

from .embedding import Embedding, embedding
from .errors import GGUFError
from .formats import FORMATS
from .linear import as_linear
from .table import Table

__all__ = ["Embedding", "embedding", "as_linear", "GGUFError", "FORMATS", "Table"]
__version__ = "0.1.0"
