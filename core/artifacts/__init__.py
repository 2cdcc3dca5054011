"""Stage 5, served artifacts: what an engine's file serves, and whether it is what the config
declares.

:mod:`~ropekit.artifacts.served` holds the values every reader returns; the readers
(:mod:`~ropekit.artifacts.arrays`, :mod:`~ropekit.artifacts.onnx_pack`,
:mod:`~ropekit.artifacts.gguf_file`, :mod:`~ropekit.artifacts.safetensors_file`) import it;
:mod:`~ropekit.artifacts.read` picks a reader by path; :mod:`~ropekit.artifacts.audit` compares
what was read with the declared tables and names what was served instead."""
