"""Stage 2, reading configs: from a source (mapping, file, model folder) to one ``RopeBlock`` per
layer type, every RoPE-bearing key read or refused.

:mod:`~ropekit.config.source` reads safely, :mod:`~ropekit.config.view` sees the language part
of a config as one mapping, :mod:`~ropekit.config.lookalike` and :mod:`~ropekit.config.screen`
refuse keys that look like RoPE but are not read, :mod:`~ropekit.config.families` holds what a
family's code does that its config does not say, :mod:`~ropekit.config.layers` which layers
rotate, :mod:`~ropekit.config.parse` where every value comes from, and
:mod:`~ropekit.config.validation` checks a block against a scheme's keys. Nothing here knows the
plugin host."""
