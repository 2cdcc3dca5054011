"""The built-in rope_type plugins. Each registers in the ``ropekit.schemes`` entry-point group
exactly as a third-party plugin does; none is imported until its rope_type is asked for."""
