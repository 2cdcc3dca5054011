"""The facts ropekit holds about transformers' classes are derived from transformers itself, at the
pinned reference release: regenerating them must give the committed file exactly."""

from __future__ import annotations

import json
from types import ModuleType

import pytest

from ropekit.config.classes import transformers_version

from ..support import ROOT, load_script

SCRIPT = ROOT / "scripts" / "transformers_classes.py"
COMMITTED = ROOT / "core" / "config" / "transformers_classes.json"


def _script() -> ModuleType:
    return load_script("transformers_classes")


def test_the_committed_class_facts_are_what_the_pinned_transformers_gives() -> None:
    transformers = pytest.importorskip("transformers", reason="the reference extra (pip install -e '.[reference]')")
    if transformers.__version__ != transformers_version():
        pytest.skip(f"transformers {transformers.__version__} is installed; the facts are for "
                    f"{transformers_version()} (the reference extra pins it)")
    fresh = _script().build()
    committed = json.loads(COMMITTED.read_text(encoding="utf-8"))
    assert fresh["transformers"] == committed["transformers"]
    differing = sorted(name for name in fresh["classes"].keys() | committed["classes"].keys()
                       if fresh["classes"].get(name) != committed["classes"].get(name))
    assert differing == [], f"regenerate with {committed['command']}: {differing[:20]}"
    assert fresh["layer_type_renames"] == committed["layer_type_renames"]


FACTS = json.loads(COMMITTED.read_text(encoding="utf-8"))["classes"]


@pytest.mark.parametrize("model_type", sorted(name for name, entry in FACTS.items()
                                              if isinstance(entry.get("theta"), float)))
def test_a_config_stating_no_base_gets_the_class_default(model_type: str) -> None:
    """Every class with one base: a config that states none loads with the base the class's own
    default instance carries (derived, so a class whose base is not 10000 is never served 10000)."""
    import warnings

    import ropekit

    config = {"model_type": model_type, "hidden_size": 256, "num_attention_heads": 2, "head_dim": 128}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rope = ropekit.load(config)
    except ropekit.RopekitError:  # a class that needs more than this minimal config: refused by name
        return
    bases = {table.geometry.theta for table in rope.tables.values()}
    if not rope.tables or any(table.rope_type != "default" for table in rope.tables.values()):
        return  # a class default scheme or fixed base: covered by the family's own tests
    assert FACTS[model_type]["theta"] in bases, (model_type, bases)


def test_class_theta_is_a_view_of_the_derived_bases() -> None:
    from ropekit.families import CLASS_LOCAL_THETA, CLASS_THETA

    assert CLASS_THETA["paddleocr_vl_text"] == 500000.0 and CLASS_THETA["gemma3_text"] == 1e6
    assert "llama" not in CLASS_THETA  # 10000: not listed
    for model_type, local in CLASS_LOCAL_THETA.items():  # the hand-kept local bases agree with the derived ones
        assert FACTS[model_type]["theta"]["sliding_attention"] == local, model_type


@pytest.mark.parametrize("model_type", sorted(name for name, entry in FACTS.items() if entry.get("rope_block")))
def test_a_config_stating_no_rope_block_gets_the_class_block(model_type: str) -> None:
    """Ministral-3's default yarn, Apertus' llama3, Moonshine's partial rotary factor, a vision
    tower's axial rope: a config stating no rope block gets what the class fills in, or a refusal
    naming it; never plain RoPE instead."""
    import warnings

    import ropekit

    block = FACTS[model_type]["rope_block"]
    config = {"model_type": model_type, "hidden_size": 256, "num_attention_heads": 2, "head_dim": 128,
              "num_hidden_layers": 2, "max_position_embeddings": 8192}
    refusal = ""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            table = ropekit.load(config).table
    except ropekit.RopekitError as error:
        refusal = str(error)
    if refusal:  # a scheme ropekit does not serve (axial) is named; a geometry the class cannot run, too
        assert block.get("rope_type", "default") in refusal or "rope" in refusal, (model_type, refusal)
        return
    assert table.rope_type == block.get("rope_type", "default"), model_type
    factor = block.get("partial_rotary_factor", 1.0)
    if table.head_dim < 128:  # an MLA rope sub-head (Mistral-4: the factor over the whole head names it)
        assert (table.rotary_dim, table.geometry.partial_rotary_factor) == (table.head_dim, 1.0), model_type
        assert int(128 * factor) in (table.head_dim, 128), model_type
        return
    assert table.geometry.partial_rotary_factor == pytest.approx(factor), model_type


@pytest.mark.parametrize("model_type", sorted(name for name, entry in FACTS.items()
                                              if "rotary_dim" in entry.get("unread", ())))
def test_a_key_the_class_is_observed_to_ignore_is_not_read(model_type: str) -> None:
    """MiniMax-M3-VL's text config declares ``rotary_dim`` 64, and its rotary module rotates the
    whole head whatever it says: a config stating it (or leaving it to the class) rotates the head."""
    import ropekit

    assert model_type == "minimax_m3_vl_text"
    assert "rotary_dim" not in FACTS[model_type]["defaults"]
    config = {"model_type": model_type, "hidden_size": 256, "num_attention_heads": 2, "head_dim": 128,
              "num_hidden_layers": 2, "max_position_embeddings": 8192, "rope_theta": 10000.0}
    assert ropekit.load(config).table.geometry.rotary_dim == 128
    with pytest.warns(UserWarning, match=r"rotary_dim: minimax_m3_vl_text's code ignores it"):
        assert ropekit.load({**config, "rotary_dim": 64}).table.geometry.rotary_dim == 128
    gptj = {key: value for key, value in config.items() if key != "rope_theta"}
    assert ropekit.load({**gptj, "model_type": "gptj", "rotary_dim": 64}).table.geometry.rotary_dim == 64


def test_a_wrappers_own_rope_keys_are_not_read_as_its_text_models() -> None:
    """MusicFlamingo's top-level rope block (base 1200, a fifth of the audio width 1280) drives a
    time embedding added to audio features; its Qwen2 text model rotates with its own defaults."""
    import ropekit

    assert set(FACTS["musicflamingo"]["own_keys"]) >= {"rope_parameters", "head_dim"}
    config = {"model_type": "musicflamingo", "head_dim": 1280, "max_position_embeddings": 1200,
              "rope_parameters": {"rope_type": "default", "rope_theta": 1200.0, "partial_rotary_factor": 0.2},
              "text_config": {"model_type": "qwen2", "hidden_size": 3584, "num_attention_heads": 28}}
    geometry = ropekit.load(config).table.geometry
    assert (geometry.head_dim, geometry.rotary_dim, geometry.theta) == (128, 128, 10000.0)


def test_a_class_that_folds_mlp_blocks_into_layers_is_planned_as_it_builds_them() -> None:
    """Dory's released configs list (attention, "mlp") pairs; its config class keeps every other
    entry and halves num_hidden_layers: layer 3 is the fourth attention entry, a full layer."""
    import ropekit

    assert FACTS["dory"]["folds"] == "mlp"
    kinds = ["sliding_attention"] * 3 + ["full_attention"]
    config = {"model_type": "dory", "num_hidden_layers": 16, "hidden_size": 2560, "num_attention_heads": 16,
              "head_dim": 256, "layer_types": [block for kind in kinds * 2 for block in (kind, "mlp")],
              "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1e7},
                                  "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}}
    rope = ropekit.load(config)
    assert [table.geometry.theta if table else None for table in map(rope.for_layer, range(8))] == \
        [1e4, 1e4, 1e4, 1e7] * 2
    unpaired = {**config, "layer_types": ["sliding_attention", "mlp", "mlp", "full_attention"] * 4}
    with pytest.raises(ropekit.RopeConfigError, match=r"layer_types: dory's config class folds each 'mlp'"):
        ropekit.load(unpaired)


IGNORES_PARTIAL = sorted(name for name, entry in FACTS.items() if "partial_rotary_factor" in entry.get("unread", ()))


@pytest.mark.parametrize("model_type", IGNORES_PARTIAL)
def test_plain_rope_of_a_class_that_ignores_the_partial_factor_rotates_the_whole_head(model_type: str) -> None:
    """Llama and the classes copied from it compute plain RoPE over the whole head and never read
    ``partial_rotary_factor`` (observed on each class's rotary module): ropekit serves the whole
    head, with a warning naming the key; a scaled scheme, whose frequencies do read it, keeps it."""
    import warnings

    import ropekit

    if "qk_rope_head_dim" in FACTS[model_type]["defaults"]:
        return  # MLA: the rope sub-head is qk_rope_head_dim whatever the factor (covered by the probe's sweep)
    config = {"model_type": model_type, "hidden_size": 256, "num_attention_heads": 2, "head_dim": 128,
              "num_hidden_layers": 2, "max_position_embeddings": 8192,
              "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5}}
    refusal = ""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            rope = ropekit.load(config)
        except ropekit.RopekitError as error:  # a class refused whatever its factor (no RoPE, a direction)
            refusal = str(error)
    if refusal:
        assert "partial_rotary_factor" not in refusal, (model_type, refusal)
        return
    assert any(f"partial_rotary_factor: {model_type}'s rotary module does not apply" in str(warning.message)
               for warning in caught), model_type
    assert {table.geometry.rotary_dim for table in rope.tables.values()} == {128}, model_type


def test_the_classes_that_ignore_the_partial_factor_are_the_llama_copies() -> None:
    assert {"llama", "mistral", "qwen2", "qwen3", "gemma", "olmo2"} <= set(IGNORES_PARTIAL)
    assert not {"phi", "glm", "gpt_neox", "stablelm", "persimmon", "nemotron", "phi3"} & set(IGNORES_PARTIAL)
    import ropekit

    yarn = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 2, "max_position_embeddings": 8192,
            "rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e4, "partial_rotary_factor": 0.5}}
    assert ropekit.load(yarn).table.geometry.rotary_dim == 64


@pytest.mark.parametrize("model_type", sorted(name for name, entry in FACTS.items() if entry.get("flat_scaling")))
def test_a_flat_scaling_block_scales_the_layer_types_the_class_scales(model_type: str) -> None:
    """A transformers v4 flat ``rope_scaling`` for a class with rope parameters per layer type: the
    layer types its config class scales (derived) get it, the others keep the class's plain base;
    a legacy ``type`` key the class does not read is refused (the class would drop the scheme)."""
    import ropekit

    facts = FACTS[model_type]["flat_scaling"]
    config = {"model_type": model_type, "hidden_size": 512, "num_attention_heads": 4, "head_dim": 128,
              "num_hidden_layers": 12, "max_position_embeddings": 8192}
    if not facts["layer_types"]:  # the class drops the block (Cohere2-MoE): it would serve plain RoPE
        with pytest.raises(ropekit.RopeConfigError, match="drops a flat rope_scaling block") as dropped:
            ropekit.load({**config, "rope_scaling": {"rope_type": "linear", "factor": 4.0}})
        assert dropped.value.path == "rope_scaling"
        return
    plan = FACTS[model_type].get("layer_plan") or {}
    if not plan.get("pattern"):  # which layer is which is unknown
        with pytest.raises(ropekit.RopeConfigError, match="state layer_types") as unplanned:
            ropekit.load({**config, "rope_scaling": {"rope_type": "linear", "factor": 4.0}})
        assert unplanned.value.path == "layer_types"  # refused at load, never a table that fails at for_layer
        return
    if not set(plan["types"]) & set(FACTS[model_type]["theta"]):  # blocks keyed by labels no layer is named by
        with pytest.raises(ropekit.RopeConfigError, match="not the layer types of its layers") as unplaced:
            ropekit.load({**config, "rope_scaling": {"rope_type": "linear", "factor": 4.0}})
        assert unplaced.value.path == "rope_parameters"  # DeepSeek-V4's main / compress
        return
    rope = ropekit.load({**config, "rope_scaling": {"rope_type": "linear", "factor": 4.0}})
    assert all(rope.for_layer(index) is not None for index in range(12)), model_type
    scaled = {name for name, table in rope.tables.items() if table.rope_type == "linear"}
    assert scaled == set(facts["layer_types"]) & set(rope.tables), model_type
    for name, table in rope.tables.items():
        assert table.geometry.theta == FACTS[model_type]["theta"][name], (model_type, name)
    legacy = {**config, "rope_scaling": {"type": "linear", "factor": 4.0}}
    if facts["reads_type"]:
        assert {n for n, t in ropekit.load(legacy).tables.items() if t.rope_type == "linear"} == scaled
    else:
        with pytest.raises(ropekit.RopeConfigError, match=r"reads only rope_type in a flat block") as caught:
            ropekit.load(legacy)
        assert caught.value.path == "rope_scaling.type"


@pytest.mark.parametrize("model_type", sorted(name for name, entry in FACTS.items() if entry.get("last_layer")))
def test_a_last_layer_the_class_forces_is_served_as_the_class_runs_it(model_type: str) -> None:
    """Gemma-4's config class makes its last layer full attention whatever ``layer_types`` says
    (observed): a list ending in a sliding layer is served so, with a warning naming the index."""
    import ropekit

    last = FACTS[model_type]["last_layer"]
    stated = ["sliding_attention", last] * 2 + ["sliding_attention"]
    config = {"model_type": model_type, "hidden_size": 512, "num_attention_heads": 4, "head_dim": 128,
              "num_hidden_layers": len(stated), "layer_types": stated,
              "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1e6},
                                  "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}}
    with pytest.warns(UserWarning, match=rf"layer_types\[4\]: {model_type}'s config class makes the last layer"):
        rope = ropekit.load(config)
    assert rope.layer_types == (*stated[:-1], last)
    assert rope.for_layer(4) is rope.tables[last]
