"""Kernel sources (read as text by muser_mlx.backends.source; shipped as muser_mlx.kernels)."""
