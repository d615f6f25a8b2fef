"""Kernel sources (read as text by muser_mlx.backends.kernel; shipped as muser_mlx.kernels)."""
