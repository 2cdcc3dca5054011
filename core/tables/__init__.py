"""Stage 3, tables: the results and everything computed from them.

:mod:`~ropekit.tables.table` (``RopeTable``, ``ModelRope``, their one JSON form),
:mod:`~ropekit.tables.rotary` (cos/sin with float64 angles, ``apply_rotary``), below it
:mod:`~ropekit.tables.fill` (how rows are computed), :mod:`~ropekit.tables.plan` (what a table's
cos/sin needs, cached) and :mod:`~ropekit.tables.workers` (helper threads), and
:mod:`~ropekit.tables.gap` (how far a table is from plain RoPE)."""
