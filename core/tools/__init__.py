"""Stage 6, tools: what the command line runs on loaded tables. :mod:`~ropekit.tools.export`
(tables and a manifest for native forwards), :mod:`~ropekit.tools.plot`,
:mod:`~ropekit.tools.scan` (a catalogue of models at once) and
:mod:`~ropekit.tools.conformance` (the plugin conformance suite; public path
``ropekit.testing``)."""
