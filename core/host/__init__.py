"""Stage 2, the plugin host: which plugin serves a rope_type.

:mod:`~ropekit.host.discovery` reads the ``ropekit.schemes`` entry-point group once, from metadata
alone; :mod:`~ropekit.host.registry` resolves claims, conflicts and blocking and imports a plugin
only when its rope_type is asked for; :mod:`~ropekit.host.loaded` runs what a plugin returns
inside one containment, so a broken plugin breaks only its own rope_type. Nothing here reads
configs."""
