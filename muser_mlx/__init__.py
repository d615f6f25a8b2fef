"""GGUF quantized token-embedding tables for MLX, gathered and dequantized row by row."""

from .check import TableReport, check_table
from .embedding import Embedding, embedding
from .errors import GGUFError
from .formats import FORMATS
from .table import Table

__all__ = ["Embedding", "embedding", "GGUFError", "FORMATS", "Table", "TableReport", "check_table"]
__version__ = "0.1.0"
