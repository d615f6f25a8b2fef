"""GGUF quantized token-embedding tables for MLX, gathered and dequantized row by row."""

from .check import TableReport, check_table
from .distributed import ShardedEmbedding, ShardedLinear, shard_embedding
from .embedding import Embedding, embedding, quantize_embeddings
from .errors import GGUFError
from .formats import FORMATS
from .linear import Linear, as_linear
from .lm import load
from .quantize import quantize
from .sharding import shard
from .table import Table
from .tensor_parallel import AllToShardedLinear, ShardedToAllLinear, shard_linear
from .writer import save_gguf

__all__ = [
    "Embedding",
    "embedding",
    "Linear",
    "as_linear",
    "load",
    "quantize_embeddings",
    "GGUFError",
    "FORMATS",
    "quantize",
    "Table",
    "save_gguf",
    "TableReport",
    "check_table",
    "ShardedEmbedding",
    "shard_embedding",
    "shard",
    "ShardedLinear",
    "shard_linear",
    "AllToShardedLinear",
    "ShardedToAllLinear",
]
__version__ = "0.1.0"
