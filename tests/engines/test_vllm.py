"""ropekit's vLLM plugin where vLLM is not installed (this run): the entry point is declared by
ropekit itself, importing the module needs neither torch nor vLLM, and ``register()`` changes
nothing and says so in one line. The plugin against the real engine is
``tests/engines/vllm_engine_check.py``, run in vLLM's own virtualenv (``.ci/run``'s vLLM step)."""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
import sys
from collections.abc import Iterator

import pytest

import ropekit.engines.vllm as rv


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def records() -> Iterator[list[logging.LogRecord]]:
    """The plugin logs under ``vllm.ropekit`` (a child of vLLM's logger, which does not propagate)."""
    handler = Lines()
    logger = logging.getLogger("vllm.ropekit")
    logger.addHandler(handler)
    yield handler.records
    logger.removeHandler(handler)


def block_vllm(monkeypatch: pytest.MonkeyPatch) -> None:
    """``import vllm`` (and any submodule) raises ImportError, whether vLLM is installed and imported or not."""
    for name in [name for name in sys.modules if name == "vllm" or name.startswith("vllm.")] + ["vllm"]:
        monkeypatch.setitem(sys.modules, name, None)


def test_the_entry_point_is_ropekits_own() -> None:
    found = [entry for entry in importlib.metadata.entry_points(group="vllm.general_plugins") if entry.name == "ropekit"]
    assert [entry.value for entry in found] == ["ropekit.engines.vllm:register"]
    assert found[0].dist is not None and found[0].dist.name == "ropekit"
    assert found[0].load() is rv.register


def test_without_vllm_register_logs_one_line_and_patches_nothing(monkeypatch: pytest.MonkeyPatch,
                                                                 records: list[logging.LogRecord]) -> None:
    block_vllm(monkeypatch)
    rv.register()
    assert len(records) == 1
    message = records[0].getMessage()
    assert records[0].levelno == logging.WARNING
    assert message.startswith("ropekit ") and "vLLM plugin inactive" in message and message.endswith("nothing patched")
    rv.unregister()  # without vLLM: nothing to undo, no error


def test_the_module_imports_without_torch_or_vllm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    block_vllm(monkeypatch)
    monkeypatch.delitem(sys.modules, "ropekit.engines.vllm")
    module = importlib.import_module("ropekit.engines.vllm")
    assert module.STRICT_ENV == "ROPEKIT_VLLM_STRICT" and module.SERVE_ENV == "ROPEKIT_VLLM_SERVE"
    with pytest.raises(ImportError):
        module.RopekitRotaryEmbedding  # noqa: B018 - defined on first use, from vLLM's class
    monkeypatch.undo()
    assert sys.modules["ropekit.engines.vllm"] is rv
