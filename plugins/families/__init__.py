"""The built-in model-family declarations: remote-code families transformers has no class for.

Each module declares one ``model_type`` with :class:`~ropekit.ModelFamily` and registers in the
``ropekit.families`` entry-point group exactly as a third party's family plugin does (see
``docs/plugin-guide.md``), so these declarations prove that path too. Each names the code it was
checked against (``code``); the code is quoted, with its source, in
``tests/data/configs/published/REMOTE_CODE.md``, and ``tests/config/test_remote_families.py``
checks each family's published configs against a numpy port of that code
(``scripts/family_reference.py``). None is imported until a config names its model_type (or, for a
config stating none, one of its ``architectures``).
"""
