"""No silently wrong table from any real config: every RoPE-bearing key is read or refused.

Each test is an attack or a published family config: a near-miss rope key that nobody would read,
a family's top-level keys checked against a port of its own modeling code, layers without RoPE,
a required parameter missing, hostile JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ropekit
from ropekit.config.families import READ_KEYS
from ropekit.config.screen import UNRELATED_KEYS
from ropekit.config.source import MAX_CONFIG_BYTES

from ..support import CONFIGS

FAMILIES = CONFIGS / "families"
REFERENCE = json.loads((FAMILIES / "reference.json").read_text())
LLAMA3_BLOCK = {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192}
BASE = {"head_dim": 64, "rope_theta": 500000.0, "max_position_embeddings": 131072}


def _load(config: dict[str, Any], **kwargs: Any) -> ropekit.ModelRope:
    return ropekit.load(config, **kwargs)


# --- near misses of keys ropekit reads ---------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "meant"),
    [
        ("rope_scalling", "rope_scaling"),
        ("Rope_Scaling", "rope_scaling"),
        ("rope_scaling ", "rope_scaling"),
        (" rope_scaling", "rope_scaling"),
        ("r\u043epe_scaling", "rope_scaling"),  # Cyrillic o
        ("rope_paramters", "rope_parameters"),
        ("rope-scaling", "rope_scaling"),
        ("ROPE_THETA", "rope_theta"),
        ("rope_thetta", "rope_theta"),
        ("rope_scaling\u200b", "rope_scaling"),  # zero-width space
        ("partial_rotary_facter", "partial_rotary_factor"),
        ("rotery_emb_base", "rotary_emb_base"),
        ("max_position_embedings", "max_position_embeddings"),
        ("Head_Dim", "head_dim"),
    ],
)
def test_near_miss_of_a_read_key_is_refused(key: str, meant: str) -> None:
    config = {**BASE, key: LLAMA3_BLOCK if "scal" in key or "param" in key else 1000.0}
    with pytest.raises(ropekit.RopeConfigError, match="did you mean") as caught:
        _load(config)
    assert caught.value.path == key
    assert repr(meant) in str(caught.value)


def test_near_miss_in_text_config_is_refused() -> None:
    config = {"model_type": "llava", "text_config": {**BASE, "rope_scalling": LLAMA3_BLOCK}}
    with pytest.raises(ropekit.RopeConfigError) as caught:
        _load(config)
    assert caught.value.path == "text_config.rope_scalling"


def test_lenient_mode_warns_never_silent() -> None:
    config = {**BASE, "rope_scalling": LLAMA3_BLOCK}
    with pytest.warns(UserWarning, match=r"rope_scalling: unknown key; did you mean 'rope_scaling'"):
        model = _load(config, strict=False)
    assert model.table.rope_type == "default"  # what the config really declares, said out loud


@pytest.mark.parametrize("key", ["rope_in_fp32", "use_rope", "rotary_emb_scale_base", "layer_rope_theta",
                                 "nope_layer_mask", "my_rotary_thing"])
def test_unknown_rope_looking_keys_are_refused(key: str) -> None:
    with pytest.raises(ropekit.RopeConfigError) as caught:
        _load({**BASE, key: 1})
    assert caught.value.path == key


def test_rope_key_in_another_nested_object_is_refused() -> None:
    """DBRX keeps its theta in attn_config: ropekit does not read it there, so a value other than the
    one served is refused; the served value itself is ignored with a warning."""
    config = {**BASE, "attn_config": {"rope_theta": 10000, "kv_n_heads": 8}}
    with pytest.raises(ropekit.RopeConfigError) as caught:
        _load(config)
    assert caught.value.path == "attn_config.rope_theta"
    with pytest.warns(UserWarning, match="states what ropekit serves"):
        assert _load({**BASE, "attn_config": {"rope_theta": 500000}}).table.geometry.theta == 500000


def test_vision_subconfigs_are_out_of_scope() -> None:
    config = {**BASE, "vision_config": {"rope_theta": 10000.0, "rope_scalling": {}}}
    assert _load(config).table.rope_type == "default"


def test_no_real_transformers_key_is_a_false_positive() -> None:
    """Every key of every transformers config class that does not bear on RoPE passes the screen."""
    keys = json.loads((CONFIGS / "transformers_config_keys.json").read_text())["keys"]
    refused = []
    for key in keys:
        if key in READ_KEYS or key in UNRELATED_KEYS or key == "architectures":  # a list of names, checked as one
            continue
        try:
            _load({**BASE, key: 1})
        except ropekit.RopeConfigError as error:
            if error.path == key:
                refused.append(key)
    rope_words = [k for k in refused if any(w in k.lower() for w in ("rope", "rotary", "nope"))]
    assert sorted(set(refused) - set(rope_words)) == []
    # the RoPE-looking ones ropekit does not read are refused on purpose (SAM2's memory rope, speech encoders)
    assert "layer_rope_theta" in rope_words and "rope_scaling_layers" in rope_words


# --- required parameters never default into plain RoPE -------------------------------------------


@pytest.mark.parametrize("block", [
    {"rope_type": "yarn"},
    {"rope_type": "yarn", "original_max_position_embeddings": 4096},
    {"type": "yarn", "beta_fast": 32},
])
def test_yarn_without_factor_is_refused(block: dict[str, Any]) -> None:
    with pytest.raises(ropekit.RopeConfigError, match="missing: required") as caught:
        _load({**BASE, "rope_scaling": block})
    assert caught.value.path.endswith("rope_scaling.factor")


@pytest.mark.parametrize(("rope_type", "key"), [("linear", "factor"), ("dynamic", "factor"),
                                                 ("longrope", "short_factor"), ("llama3", "factor")])
def test_every_builtin_refuses_a_missing_scale(rope_type: str, key: str) -> None:
    with pytest.raises(ropekit.RopeConfigError, match="missing") as caught:
        _load({**BASE, "rope_scaling": {"rope_type": rope_type}})
    assert key in caught.value.path


# --- families: their own code is the reference --------------------------------------------------


BUILTIN_FAMILY_CONFIGS = {name for name in REFERENCE if json.loads((FAMILIES / name.split("@")[0]).read_text()).get(
    "model_type") in ropekit.Registry(read_env=False).families.names()}
"""Configs of the built-in family declarations: tests/families/test_remote_families.py checks them."""


@pytest.mark.parametrize("name", sorted(k for k in REFERENCE if "@" not in k and not k.startswith("qwen")
                                        and k not in BUILTIN_FAMILY_CONFIGS))
def test_family_config_matches_its_own_code(name: str) -> None:
    expected = REFERENCE[name]
    model = ropekit.load(FAMILIES / name)
    tables = list(model.tables.values())
    assert len(tables) == 1
    table = tables[0]
    np.testing.assert_allclose(table.inv_freq, expected["inv_freq"], rtol=2e-6, atol=0)
    assert table.rotary_dim == expected["rotary_dim"]
    assert table.layout == expected["layout"]
    assert table.attention_factor == pytest.approx(expected["attention_factor"], rel=2e-6)


def test_qwen_v1_dynamic_ntk_is_refused_by_name() -> None:
    with pytest.raises(ropekit.RopeConfigError, match="Qwen v1 dynamic NTK") as caught:
        ropekit.load(FAMILIES / "qwen-7b.json")
    assert caught.value.path == "use_dynamic_ntk"
    config = json.loads((FAMILIES / "qwen-7b.json").read_text())
    config["use_dynamic_ntk"] = False
    with pytest.raises(ropekit.RopeConfigError, match="query scaling") as caught:
        ropekit.load(config)
    assert caught.value.path == "use_logn_attn"
    config["use_logn_attn"] = False  # plain up to any length: the family code at alpha 1
    np.testing.assert_allclose(ropekit.load(config).table.inv_freq, REFERENCE["qwen-7b.json"]["inv_freq"], rtol=2e-6)


def test_minimax_layers_follow_attn_type_list() -> None:
    model = ropekit.load(FAMILIES / "minimax-m1.json")
    kinds = json.loads((FAMILIES / "minimax-m1.json").read_text())["attn_type_list"]
    for index, kind in enumerate(kinds):
        table = model.for_layer(index)
        assert (table is not None) == bool(kind)
    assert model.to_json()["layers"]["linear_attention"] == {"no_rope": True}


@pytest.mark.parametrize(("name", "nope"), [("smollm3-3b.json", [3, 7, 11, 15, 19, 23, 27, 31, 35]),
                                            ("llama-4-scout-17b-16e.json", list(range(3, 48, 4)))])
def test_nope_layers_are_explicit(name: str, nope: list[int]) -> None:
    model = ropekit.load(FAMILIES / name)
    assert list(model.no_rope_layers) == nope
    assert model.to_json()["no_rope_layers"] == nope
    assert model.for_layer(nope[0]) is None and model.for_layer(0) is not None


def test_no_rope_layers_one_means_uses_rope() -> None:
    config = {**BASE, "num_hidden_layers": 4, "no_rope_layers": [1, 0, 1, 1]}
    model = _load(config)
    assert model.no_rope_layers == (1,)
    with pytest.raises(ropekit.RopeConfigError, match="lists 3 layers") as caught:
        _load({**config, "no_rope_layers": [1, 0, 1]})
    assert caught.value.path == "no_rope_layers"
    with pytest.raises(ropekit.RopeConfigError) as caught:
        _load({**config, "no_rope_layers": [1, 2, 1, 1]})
    assert caught.value.path == "no_rope_layers[1]"


def test_llama4_empty_list_is_the_default_smollm3_interval_too() -> None:
    llama4 = {**BASE, "model_type": "llama4_text", "num_hidden_layers": 8, "no_rope_layers": []}
    assert _load(llama4).no_rope_layers == (3, 7)
    smol = {**BASE, "model_type": "smollm3", "num_hidden_layers": 6, "no_rope_layer_interval": 3}
    assert _load(smol).no_rope_layers == (2, 5)


@pytest.mark.parametrize(("layer_types", "rotating"), [
    (["linear_attention", "linear_attention", "linear_attention", "full_attention"], [3]),
    (["conv", "full_attention", "conv"], [1]),
    (["mamba", "attention"], [1]),
])
def test_non_attention_layers_get_no_table(layer_types: list[str], rotating: list[int]) -> None:
    model = _load({**BASE, "num_hidden_layers": len(layer_types), "layer_types": layer_types})
    assert [i for i in range(len(layer_types)) if model.for_layer(i) is not None] == rotating


def test_hybrid_layer_plans_are_derived_as_their_config_classes_do() -> None:
    qwen3_next = {**BASE, "model_type": "qwen3_next", "head_dim": 256, "num_hidden_layers": 8}
    model = _load(qwen3_next)
    assert [i for i in range(8) if model.for_layer(i) is not None] == [3, 7]
    assert model.rotating_table().rotary_dim == 64  # partial_rotary_factor 0.25 by default in its config class
    lfm2 = {**BASE, "num_hidden_layers": 4, "full_attn_idxs": [1, 3]}
    assert _load(lfm2).layer_types == ("conv", "full_attention", "conv", "full_attention")


def test_layer_types_must_match_the_layer_count_and_be_known() -> None:
    with pytest.raises(ropekit.RopeConfigError, match="lists 2 layers, but num_hidden_layers is 3"):
        _load({**BASE, "num_hidden_layers": 3, "layer_types": ["full_attention"] * 2})
    with pytest.raises(ropekit.RopeConfigError, match="unknown layer type 'ful_attention'") as caught:
        _load({**BASE, "layer_types": ["full_attention", "ful_attention"]})
    assert caught.value.path == "layer_types[1]"


def test_nested_null_means_that_layer_type_has_no_rope() -> None:
    config = {"head_dim": 64, "layer_types": ["sliding_attention", "full_attention"],
              "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
                                  "full_attention": None}}
    model = _load(config)
    assert model.for_layer(1) is None and model.for_layer(0) is not None
    assert model.to_json()["layers"]["full_attention"] == {"no_rope": True}


@pytest.mark.parametrize(("config", "path", "reason"), [
    ({"model_type": "falcon", "alibi": True, "hidden_size": 64, "num_attention_heads": 1}, "alibi", "ALiBi"),
    ({"model_type": "bloom", "hidden_size": 64, "num_attention_heads": 1}, "model_type", "ALiBi"),
    ({"model_type": "jamba", "hidden_size": 64, "num_attention_heads": 1}, "model_type", "no rotary"),
    ({"model_type": "granitemoehybrid", "hidden_size": 64, "num_attention_heads": 1}, "position_embedding_type",
     "position_embedding_type"),
    ({"hidden_size": 64, "num_attention_heads": 1, "position_embedding_type": "absolute"}, "position_embedding_type",
     "not rope"),
    ({"model_type": "gpt2", "n_embd": 64, "n_head": 1}, "model_type", "learned absolute position embeddings"),
    ({"model_type": "gpt_bigcode", "n_embd": 64, "n_head": 1}, "model_type", "learned absolute position embeddings"),
    ({"model_type": "t5", "d_model": 64}, "model_type", "relative position buckets"),
    ({"model_type": "esm", "hidden_size": 64, "num_attention_heads": 1}, "position_embedding_type", "not rope"),
    ({"model_type": "llava", "text_config": {"model_type": "mpt"}}, "text_config.model_type", "ALiBi"),
])
def test_models_without_rope_are_refused_by_name(config: dict[str, Any], path: str, reason: str) -> None:
    """A model whose code applies no RoPE gets no table: the refusal names the key and the reason,
    in lenient mode too (strict=False relaxes unknown keys and model_types, nothing else)."""
    for strict in (True, False):
        with pytest.raises(ropekit.NoRopeError, match=reason) as caught:
            ropekit.load(config, strict=strict)
        assert caught.value.path == path
        assert isinstance(caught.value, ropekit.RopeConfigError)


def test_cohere2_full_layers_are_nope() -> None:
    model = _load({**BASE, "model_type": "cohere2", "num_hidden_layers": 4})
    assert model.layer_types == ("sliding_attention",) * 3 + ("full_attention",)
    assert [model.for_layer(i) is None for i in range(4)] == [False, False, False, True]


def test_family_defaults_never_silently_full_rotary() -> None:
    # GPT-NeoX's config class reads its base from rotary_emb_base: a top-level rope_theta is ignored
    with pytest.warns(UserWarning, match=r"rope_theta: gpt_neox's code ignores it"):
        neox = _load({**BASE, "model_type": "gpt_neox"}).table
    assert neox.rotary_dim == 16 and neox.geometry.theta == 10000.0  # rotary_pct 0.25, rotary_emb_base 10000
    assert _load({**BASE, "model_type": "phi"}).table.rotary_dim == 32  # partial_rotary_factor 0.5
    glm = _load({**BASE, "model_type": "glm"}).table
    assert glm.rotary_dim == 32 and glm.layout == "gptj"
    # Bamba's config class sets its own factor 0.5 and never reads a top-level one: served as its code runs
    with pytest.warns(UserWarning, match=r"partial_rotary_factor: bamba's code ignores it"):
        assert _load({**BASE, "model_type": "bamba", "partial_rotary_factor": 1.0}).rotating_table().rotary_dim == 32


def test_rotary_dim_is_honoured_and_checked() -> None:
    table = _load({"model_type": "minimax_m1", "head_dim": 128, "rotary_dim": 64, "rope_theta": 1e7}).rotating_table()
    assert table.rotary_dim == 64 and table.head_dim == 128  # MiniMax-M1's remote code rotates rotary_dim
    # transformers' own MiniMax class computes plain RoPE over the whole head whatever the config says
    with pytest.warns(UserWarning, match=r"rotary_dim: minimax's code ignores it"):
        table = _load({"model_type": "minimax", "head_dim": 128, "rotary_dim": 64, "rope_theta": 1e7}).rotating_table()
    assert table.rotary_dim == 128
    with pytest.raises(ropekit.RopeConfigError, match="conflicts with") as caught:
        _load({"head_dim": 128, "rotary_dim": 64, "partial_rotary_factor": 1.0})
    assert caught.value.path == "rotary_dim"


def test_fixed_base_families_refuse_a_theta_their_code_ignores() -> None:
    with pytest.raises(ropekit.RopeConfigError, match="ignores it") as caught:
        _load({"model_type": "gptj", "n_embd": 256, "n_head": 4, "rotary_dim": 32, "rope_theta": 5e5})
    assert caught.value.path == "rope_theta"
    with pytest.raises(ropekit.RopeConfigError, match="chatglm"):
        _load({"model_type": "llama", "head_dim": 64, "rope_ratio": 500})


def test_layout_is_the_tables_default_and_an_argument_wins(tmp_path: Path) -> None:
    table = ropekit.load(FAMILIES / "gpt-j-6b.json").table
    cos, _ = table.cos_sin(3)
    assert np.array_equal(cos[:, 0], cos[:, 1])  # interleaved pairs: c0, c0, c1, c1, ...
    neox, _ = table.cos_sin(3, layout="neox")
    assert np.array_equal(neox[:, 0], neox[:, table.rotary_dim // 2])


def test_interleave_key_sets_the_layout() -> None:
    config = {"model_type": "deepseek_v3", "qk_rope_head_dim": 64, "rope_theta": 10000.0}
    assert _load(config).table.layout == "gptj"
    assert _load({**config, "rope_interleave": False}).table.layout == "neox"


# --- hostile JSON -----------------------------------------------------------------------------


def _cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ropekit", *args], capture_output=True, text=True, timeout=60,
                          input=stdin, check=False)


HOSTILE = [
    (b'{"head_dim": 64, "rope_theta": 1e4, "rope_theta": 5e5}', "appears twice"),
    (b'{"head_dim": 64, "rope_scaling": {"rope_type": "linear", "factor": 2, "factor": 4}}', "appears twice"),
    (b'[' * 100000 + b']' * 100000, "nested deeper"),
    (b'{"a":' * 50 + b'1' + b'}' * 50, "nested deeper"),
    (b'{"head_dim": 64, "rope_theta": "\xff\xfe"}', "not UTF-8"),
    (b'{"head_dim": 64, "rope_theta": ' + b'9' * 400 + b'}', "400 digits"),
    (b'{"head_dim": 64, "max_position_embeddings": ' + b'9' * 30 + b'}', "exceeds"),
    (b'{"head_dim": 64, "rope_theta": 5e-324}', "rope_theta"),
    (b'{"head_dim": 64, "rope_theta": 1e400}', "rope_theta"),
    (b'{"head_dim": 64, "rope_scaling": {"rope_type": "linear", "factor": 1e400}}', "factor"),
    (b'', "not valid JSON"),
]


@pytest.mark.parametrize(("content", "words"), HOSTILE, ids=[f"{i}-{words}" for i, (_, words) in enumerate(HOSTILE)])
def test_hostile_json_is_exit_2_with_one_line(tmp_path: Path, content: bytes, words: str) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(content)
    result = _cli("table", str(path), "--json")
    assert result.returncode == 2, result.stderr
    error = json.loads(result.stdout)  # with --json, the error is also one JSON object on stdout
    assert error["exit"] == 2 and words in error["error"] and len(result.stdout.splitlines()) == 1
    assert len(result.stderr.strip().splitlines()) == 1 and words in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs a POSIX FIFO")
def test_a_fifo_is_refused_without_opening_it(tmp_path: Path) -> None:
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    result = _cli("table", str(fifo))  # would block forever if opened
    assert result.returncode == 2 and "not a regular file (a FIFO)" in result.stderr


def test_devices_and_huge_files_are_refused(tmp_path: Path) -> None:
    assert "character device" in _cli("table", "/dev/zero").stderr
    big = tmp_path / "big.json"
    with open(big, "wb") as handle:
        handle.truncate(MAX_CONFIG_BYTES + 1)
    result = _cli("table", str(big))
    assert result.returncode == 2 and "a config is at most" in result.stderr


def test_control_characters_are_escaped_in_every_message(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"head_dim": 64, "rope_scaling": {"rope_type": "linear", "factor": 2,
                                                                 "bad\nkey\x1b[31m": 1}}))
    result = _cli("table", str(path))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "\x1b" not in result.stderr and "bad\\nkey\\x1b[31m" in result.stderr


def test_a_mapping_that_contains_itself_is_refused() -> None:
    config: dict[str, Any] = {"head_dim": 64}
    config["text_config"] = config
    with pytest.raises(ropekit.ConfigSourceError, match="nested deeper"):
        _load(config)


def test_every_command_reports_layers_without_rope(tmp_path: Path) -> None:
    config = str(FAMILIES / "minimax-m1.json")
    table = json.loads(_cli("table", config, "--json").stdout)
    gap = json.loads(_cli("gap", config, "--json").stdout)
    assert table["layers"]["linear_attention"] == gap["layers"]["linear_attention"] == {"no_rope": True}
    smol = str(FAMILIES / "smollm3-3b.json")
    assert json.loads(_cli("gap", smol, "--json").stdout)["no_rope_layers"][:2] == [3, 7]
    assert "layers without RoPE: 3, 7" in _cli("inspect", smol).stdout
    out = tmp_path / "export"
    assert _cli("export", config, "--out", str(out)).returncode == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["layers"]["linear_attention"] == {"no_rope": True}
    falcon = tmp_path / "falcon.json"
    falcon.write_text(json.dumps({"model_type": "falcon", "alibi": True, "hidden_size": 64, "num_attention_heads": 1}))
    for command in (("plot", str(falcon), "-o", str(tmp_path / "p.png")), ("table", str(falcon), "--json"),
                    ("gap", str(falcon)), ("inspect", str(falcon))):
        result = _cli(*command)
        assert result.returncode == 2
        assert result.stdout == "" if "--json" not in command else json.loads(result.stdout)["key"] == "alibi"
        assert result.stderr == "ropekit: error: alibi: true: the model uses ALiBi, not RoPE; there is no RoPE table to serve\n"


def test_class_defaults_fill_what_a_saved_composite_omits() -> None:
    """transformers drops values equal to the class default when it saves a composite config:
    published Gemma-3 text_configs state no rope_theta and no rope_local_base_freq."""
    config = {"model_type": "gemma3", "text_config": {"model_type": "gemma3_text", "head_dim": 128,
                                                      "num_hidden_layers": 12,
                                                      "rope_scaling": {"rope_type": "linear", "factor": 8.0}}}
    model = _load(config)
    full, sliding = model.rotating_table("full_attention"), model.rotating_table("sliding_attention")
    assert (full.geometry.theta, full.rope_type, full.params["factor"]) == (1e6, "linear", 8.0)
    assert (sliding.geometry.theta, sliding.rope_type) == (1e4, "default")
    first, sixth = model.for_layer(0), model.for_layer(5)
    assert first is sliding and sixth is full
    assert _load({"model_type": "llama4_text", "head_dim": 128, "num_hidden_layers": 4}).rotating_table().geometry.theta == 5e5
    assert _load({"model_type": "llama", "head_dim": 128}).table.geometry.theta == 1e4
    # a class keeping its rope parameters per layer type fills each type's own default base in (MellumConfig
    # from {"layer_types": [...]}: full_attention 5e5, sliding_attention 1e4)
    mellum = _load({"model_type": "mellum", "head_dim": 64, "num_hidden_layers": 2,
                    "layer_types": ["sliding_attention", "full_attention"]})
    assert [mellum.rotating_table("sliding_attention").geometry.theta, mellum.rotating_table("full_attention").geometry.theta] == [1e4, 5e5]
    assert (mellum.for_layer(0), mellum.for_layer(1)) == (mellum["sliding_attention"], mellum["full_attention"])


def test_blocking_a_scheme_also_blocks_its_aliases(monkeypatch: pytest.MonkeyPatch) -> None:
    blocked = ropekit.Registry(block=["longrope"], read_env=False)
    config = {"head_dim": 8, "max_position_embeddings": 64, "original_max_position_embeddings": 32,
              "rope_scaling": {"type": "su", "short_factor": [1.0] * 4, "long_factor": [2.0] * 4}}
    with pytest.raises(ropekit.PluginBlockedError, match="'longrope'"):
        ropekit.load(config, registry=blocked)


def test_rope_keys_nested_elsewhere_are_refused_but_not_other_keys() -> None:
    attn_config: dict[str, Any] = {"alibi": False, "rope_theta": 1}
    nested: dict[str, Any] = {**BASE, "attn_config": attn_config}
    with pytest.raises(ropekit.RopeConfigError) as caught:
        _load(nested)
    assert caught.value.path == "attn_config.rope_theta"
    attn_config["rope_theta"] = BASE["rope_theta"]  # states what is served anyway: a warning
    with pytest.warns(UserWarning, match=r"attn_config.rope_theta: not read by ropekit; its value"):
        _load(nested)
    deep = {**BASE, "text_config": {"text_config": {"rope_scaling": {"rope_type": "linear", "factor": 8.0}}}}
    with pytest.raises(ropekit.RopeConfigError) as caught:
        _load(deep)  # one level too deep: read by nobody, so refused, not silently plain
    assert caught.value.path == "text_config.text_config.rope_scaling"
    mpt: dict[str, Any] = {"model_type": "mpt", "d_model": 256, "n_heads": 4, "attn_config": {"alibi": True}}
    with pytest.raises(ropekit.NoRopeError, match="'mpt' applies no RoPE: ALiBi"):  # attn_config.alibi is no RoPE key
        _load(mpt)
    blip = {**BASE, "qformer_config": {"hidden_size": 768, "num_attention_heads": 12}}
    assert _load(blip).table.rope_type == "default"
