"""Stage 6, engines: ropekit's tables inside the frameworks users run. :mod:`~ropekit.engines.torch`
(PyTorch modules, a transformers bridge, live audits) and :mod:`~ropekit.engines.mlx` (MLX and
MLX-LM). Each imports its framework; the core never does. Public paths: ``ropekit.torch``,
``ropekit.mlx``."""
