"""Stage 1, the plugin contract: what a scheme declares (:mod:`~ropekit.contract.scheme`: ``Key``,
``Scheme``, ``Geometry``, ``Frequencies``, ``Example``) and the one pluggy hook that returns it
(:mod:`~ropekit.contract.hookspecs`). Every later stage builds on these types; they import
nothing of ropekit but :mod:`ropekit.errors`."""
