"""Stage 5, served artifacts: what an engine's file serves, and whether it is what the config
declares.

The neutral core, lowest first: :mod:`~ropekit.artifacts.served` (the values every reader returns),
:mod:`~ropekit.artifacts.report` (the typed audit report), :mod:`~ropekit.artifacts.compare` (is a
table the declared one, within which tolerances), :mod:`~ropekit.artifacts.rules` (an engine's
run-time rules, as the judgement asks them), :mod:`~ropekit.artifacts.diagnose` (what was served
instead), :mod:`~ropekit.artifacts.judge` (tables paired with layer types and judged),
:mod:`~ropekit.artifacts.fixing` and :mod:`~ropekit.artifacts.files` (a repair's plan and its file
moves), and :mod:`~ropekit.artifacts.format` (the :class:`~ropekit.artifacts.format.Format` protocol
and the lazy table of formats). Above them, ``formats/<format>/``: each format's reader, judgement
and fix. On top, the dispatchers that find a format through the table and never import one:
:mod:`~ropekit.artifacts.read`, :mod:`~ropekit.artifacts.audit` and :mod:`~ropekit.artifacts.repair`."""
