"""One folder per format of engine artifact: ``onnx`` (onnxruntime-genai packs and graphs that compute
their rotary), ``gguf`` (llama.cpp), ``pte`` (ExecuTorch programs), ``safetensors`` (state dicts)
and ``arrays`` (dumps). Each folder's ``__init__`` defines ``FORMAT`` (a
:class:`~ropekit.artifacts.format.Format`: read, judge, plan and write its fix) and imports its own
modules only when asked; :mod:`~ropekit.artifacts.format` finds them by name. The formats stand
above the neutral comparison and diagnosis, and import neither each other nor anything above them.
"""
