"""Multimodal (mrope) tables: cos/sin at 3-axis positions equal what transformers' own multimodal
rotary modules compute (``golden/mrope.json``, from ``scripts/mrope_golden.py``), for every class
of the pinned transformers whose rotary module composes multimodal positions."""

from __future__ import annotations

import doctest
import json
import re
import warnings
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pytest

import ropekit
from ropekit.config.classes import class_facts
from ropekit.config.families import FAMILIES
from ropekit.tables.mrope import COMPOSITIONS, MropeMap, describe_axes
from tests.support import DATA, ROOT, SEED_CONFIG

GOLDEN = json.loads((DATA / "golden" / "mrope.json").read_text(encoding="utf-8"))
CASES = {case["model_type"]: case for case in GOLDEN["cases"]}
FACTS = json.loads((ROOT / "core" / "config" / "transformers_classes.json").read_text())["classes"]

QWEN25_VL: dict[str, Any] = {
    "model_type": "qwen2_5_vl",
    "text_config": {"model_type": "qwen2_5_vl_text", "hidden_size": 2048, "num_attention_heads": 16,
                    "num_hidden_layers": 36, "max_position_embeddings": 128000,
                    "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24], "rope_theta": 1000000.0}},
}


def _table(case: dict[str, Any]) -> ropekit.RopeTable:
    rope = ropekit.load(case["config"])
    return rope.rotating_table(case["layer_type"]) if case["layer_type"] in rope.tables else rope.rotating_table()


def _float32_angle_error(positions: np.ndarray[Any, Any]) -> float:
    """transformers forms angles in float32: about ``position * 6e-8`` radians off."""
    return float(np.max(positions)) * 1.2e-7 + 2e-6


def test_golden_covers_every_multimodal_class_and_composition() -> None:
    multimodal = {name for name, entry in FACTS.items()
                  if entry.get("mrope") and entry["mrope"]["composition"] != "unknown"}
    assert multimodal == set(CASES)
    assert {case["model_type"] for case in CASES.values()} >= {"qwen2_vl_text", "qwen2_5_vl_text", "qwen3_vl_text",
                                                                "glm4v_text", "ernie4_5_vl_moe_text"}
    seen = {_table(case).mrope_composition for case in CASES.values()}
    assert seen == set(COMPOSITIONS)


def _reference_transformers() -> Any:
    """The pinned transformers, or a skip (these tests read its source)."""
    transformers = pytest.importorskip("transformers", reason="the reference extra (pip install -e '.[reference]')")
    if transformers.__version__ != GOLDEN["transformers"]:
        pytest.skip(f"transformers {transformers.__version__} is installed; the facts are for {GOLDEN['transformers']}")
    return transformers


def _mrope_fact(model_type: str) -> dict[str, Any] | None:
    """The ``mrope`` fact of ``model_type``, through a wrapper's default text model."""
    entry = FACTS[model_type]
    if entry["kind"] == "composite" and entry.get("text_type") in FACTS:
        entry = FACTS[entry["text_type"]]
    return entry.get("mrope")  # type: ignore[no-any-return]


def _config_classes(folder: str) -> list[tuple[str, type]]:
    """The configuration classes ``transformers.models.<folder>`` defines, with their model_types
    (deprecated aliases such as ``Ernie4_5_VL_MoeTextConfig`` too)."""
    import importlib

    module = importlib.import_module(f"transformers.models.{folder}.configuration_{folder}")
    found = []
    for member in vars(module).values():
        model_type: object = getattr(member, "model_type", None)
        if isinstance(member, type) and member.__module__ == module.__name__ and isinstance(model_type, str) \
                and model_type:
            found.append((model_type, member))
    return found


def _folders_mentioning(prefix: str) -> list[str]:
    models = Path(_reference_transformers().__file__).parent / "models"
    return sorted(path.parent.name for path in models.glob(f"*/{prefix}_*.py")
                  if "mrope_section" in path.read_text(encoding="utf-8"))


def test_every_configuration_class_with_mrope_section_is_served_or_refused_by_name() -> None:
    """Read from transformers' configuration code, not from the facts' own script: every config class
    whose source mentions ``mrope_section`` has a multimodal fact, served (a composition with a golden
    case) or refused by name (``unknown``, with its reason)."""
    import inspect

    mentioning = sorted({model_type for folder in _folders_mentioning("configuration")
                         for model_type, config_class in _config_classes(folder)
                         if "mrope_section" in inspect.getsource(config_class)})
    assert len(mentioning) >= 19 and {"glm_image_text", "ernie4_5_vl_moe_text"} <= set(mentioning)
    for model_type in mentioning:
        fact = _mrope_fact(model_type)
        assert fact is not None, f"{model_type}: its config class reads mrope_section; no mrope fact"
        if fact["composition"] == "unknown":
            assert fact["reason"], model_type
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with pytest.raises(ropekit.RopeConfigError, match="has not identified"):
                    ropekit.load({"model_type": model_type, "hidden_size": 64, "num_attention_heads": 2})
        else:
            assert fact["composition"] in COMPOSITIONS and model_type in CASES, model_type


def test_every_modeling_file_reading_mrope_section_has_a_multimodal_class() -> None:
    for folder in _folders_mentioning("modeling"):
        served = [model_type for model_type, _ in _config_classes(folder) if _mrope_fact(model_type) is not None]
        assert served, f"{folder}: its modeling code reads mrope_section; no model_type of it has an mrope fact"


def test_glm_image_is_served_as_consecutive_sections() -> None:
    """GLM-Image's language model (``GlmImageTextRotaryEmbedding``: its family name holds "Image")."""
    config = {"model_type": "glm_image", "text_config": {
        "model_type": "glm_image_text", "hidden_size": 4096, "num_attention_heads": 32,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5}}}
    table = ropekit.load(config).table  # no warning that the class builds no multimodal module
    assert (table.mrope_composition, table.mrope_section, table.mrope_axes, table.layout) == (
        "sections", (8, 12, 12), 3, "neox")
    t, h, w = 5, 40, 900
    cos, _ = table.cos_sin(np.array([[t], [h], [w]]), dtype=np.float64)
    angles = np.concatenate([t * table.inv_freq[:8], h * table.inv_freq[8:20], w * table.inv_freq[20:]])
    assert np.allclose(cos[0], np.cos(np.concatenate([angles, angles])), atol=1e-12)


@pytest.mark.parametrize("model_type", sorted(CASES))
def test_cos_sin_at_multimodal_positions_equals_transformers(model_type: str) -> None:
    case = CASES[model_type]
    table = _table(case)
    positions = np.array(case["positions"])
    assert positions.shape[0] == table.mrope_axes
    module_layout = class_facts(model_type).mrope["layout"]  # type: ignore[union-attr,index]
    cos, sin = table.cos_sin(positions, dtype=np.float64, layout=module_layout)  # as the rotary module emits them
    expected_cos, expected_sin = np.array(case["cos"]), np.array(case["sin"])
    assert cos.shape == expected_cos.shape == (*positions.shape[1:], table.rotary_dim)
    tolerance = _float32_angle_error(positions)
    assert np.max(np.abs(cos - expected_cos)) < tolerance
    assert np.max(np.abs(sin - expected_sin)) < tolerance


@pytest.mark.parametrize("model_type", sorted(CASES))
def test_layout_and_default_section_are_the_observed_ones(model_type: str) -> None:
    fact = class_facts(model_type).mrope  # type: ignore[union-attr]
    assert fact is not None
    table = _table(CASES[model_type])
    assert table.mrope_composition == fact["composition"]
    # the pairs attention rotates: the module's own, unless the family's attention re-pairs its output
    # (HY-V4-VL takes half the module's neox cos/sin, repeat_interleaves it and rotates interleaved pairs)
    family = FAMILIES.get(model_type)
    assert table.layout == (family.layout if family is not None else fact["layout"])


def test_text_positions_on_a_multimodal_table_are_the_same_position_on_every_axis() -> None:
    for case in CASES.values():
        table = _table(case)
        text = np.array([0, 5, 77, 4095])
        stacked = np.stack([text] * table.mrope_axes)
        one = table.cos_sin(text)
        every = table.cos_sin(stacked)
        assert np.max(np.abs(one[0] - every[0])) < 3e-7 and np.max(np.abs(one[1] - every[1])) < 3e-7


def test_a_class_default_section_is_used_when_the_config_states_none() -> None:
    config = {"model_type": "qwen2_vl", "text_config": {"model_type": "qwen2_vl_text", "hidden_size": 1536,
                                                        "num_attention_heads": 12}}
    table = ropekit.load(config).table
    assert table.mrope_section == (16, 24, 24) and table.mrope_composition == "sections"
    assert table.to_json()["mrope_composition"] == "sections"


def test_sections_follow_the_axes_the_way_qwen2_vl_composes_them() -> None:
    table = ropekit.load(QWEN25_VL).table
    t, h, w = 7, 300, 5000
    cos, _ = table.cos_sin(np.array([[t], [h], [w]]), dtype=np.float64)
    angles = np.concatenate([t * table.inv_freq[:16], h * table.inv_freq[16:40], w * table.inv_freq[40:]])
    assert np.allclose(cos[0], np.cos(np.concatenate([angles, angles])), atol=1e-12)


def test_batched_positions_give_batched_rows_and_fill_out() -> None:
    table = ropekit.load(QWEN25_VL).table
    rng = np.random.default_rng(0)
    positions = rng.integers(0, 100_000, size=(3, 2, 9))
    cos, sin = table.cos_sin(positions)
    assert cos.shape == (2, 9, 128) and cos.dtype == np.float32
    for row in range(2):
        single = table.cos_sin(positions[:, row])
        assert np.array_equal(single[0], cos[row]) and np.array_equal(single[1], sin[row])
    out = (np.empty((2, 9, 128), np.float32), np.empty((2, 9, 128), np.float32))
    filled = table.cos_sin(positions, out=out)
    assert (filled[0] is out[0] or filled[0].base is out[0]) and np.array_equal(out[0], cos) and np.array_equal(out[1], sin)
    half = table.cos_sin(positions, layout="half")
    assert np.array_equal(half[0], cos[..., :64])


def test_threads_do_not_change_a_long_multimodal_run() -> None:
    table = ropekit.load(QWEN25_VL).table
    positions = np.stack([np.arange(20_000), np.arange(20_000) // 3, np.arange(20_000) % 97])
    one = table.cos_sin(positions, threads=1)
    many = table.cos_sin(positions, threads=4)
    assert np.array_equal(one[0], many[0]) and np.array_equal(one[1], many[1])


def test_several_rows_on_a_text_table_are_refused_by_name() -> None:
    table = ropekit.load(SEED_CONFIG).table
    with pytest.raises(ropekit.ArgumentError, match=r"positions: shape \(3, 8\).*no mrope sections"):
        table.cos_sin(np.zeros((3, 8), dtype=np.int64))
    with pytest.raises(ropekit.ArgumentError, match="no mrope sections"):
        table.cos_sin([[0, 1], [0, 1], [0, 1]])


def test_the_wrong_number_of_axes_is_refused() -> None:
    table = ropekit.load(QWEN25_VL).table
    with pytest.raises(ropekit.ArgumentError, match=r"expected 3 rows of positions"):
        table.cos_sin(np.zeros((2, 8), dtype=np.int64))
    with pytest.raises(ropekit.ArgumentTypeError, match="integer positions"):
        table.cos_sin(np.zeros((3, 8)))


@pytest.mark.parametrize(("positions", "shown"), [
    ([[0, 4], [-1, 7], [0, 0]], "got -1..7 in row 1 (of 3 axes)"),
    ([[0, 1], [2, 3], [-5, 2**33]], "got -5..8589934592 in row 2 (of 3 axes)"),
    ([[[0, 2**40]], [[1, 1]], [[0, 0]]], "got 0..1099511627776 in row 0 (of 3 axes)"),
])
def test_positions_out_of_range_are_named_as_given(positions: list[Any], shown: str) -> None:
    table = ropekit.load(QWEN25_VL).table
    limit = 2**32 - 1
    with pytest.raises(ropekit.ArgumentError) as caught:
        table.cos_sin(np.array(positions, dtype=np.int64))
    assert str(caught.value) == f"positions: positions must lie in [0, {limit}], {shown}"
    assert "range(" not in str(caught.value)


@pytest.mark.parametrize("layout", ["neox", "gptj", "half"])
@pytest.mark.parametrize("shape", [(3, 0), (3, 2, 0), (3, 0, 5)])
def test_no_positions_give_no_rows(shape: tuple[int, ...], layout: Any) -> None:
    """As the text path gives ``(0, width)`` for no positions."""
    for case in (CASES["qwen2_5_vl_text"], CASES["qwen3_vl_text"], CASES["ernie4_5_vl_moe_text"]):
        table = _table(case)
        width = table.rotary_dim // 2 if layout == "half" else table.rotary_dim
        cos, sin = table.cos_sin(np.zeros(shape, dtype=np.int64), layout=layout)
        assert cos.shape == sin.shape == (*shape[1:], width) and cos.dtype == np.float32
        out = (np.empty((*shape[1:], width), np.float64), np.empty((*shape[1:], width), np.float64))
        filled = table.cos_sin(np.zeros(shape, dtype=np.uint8), layout=layout, dtype=np.float64, out=out)
        assert (filled[0] is out[0] or filled[0].base is out[0]) and (filled[1] is out[1] or filled[1].base is out[1])


def test_served_as_names_each_composition_once() -> None:
    interleaved = MropeMap("interleaved", (8, 12, 12), 32, "neox").axis
    consecutive = MropeMap("sections", (8, 12, 12), 32, "neox").axis
    assert describe_axes("sections", (8, 12, 12), 32, "neox", interleaved.tolist()) == (
        "interleaved sections [8, 12, 12] where the model's code composes sections [8, 12, 12]")
    assert describe_axes("interleaved", (8, 12, 12), 32, "neox", consecutive.tolist()) == (
        "sections [8, 12, 12] where the model's code composes interleaved sections [8, 12, 12]")


def test_full_width_sections_have_no_half_cache() -> None:
    case = CASES["hunyuan_vl_text"]
    table = _table(case)
    with pytest.raises(ropekit.ArgumentError, match="layout: .*valid: neox"):
        table.cos_sin(np.zeros((table.mrope_axes, 2), dtype=np.int64), layout="half")


def test_the_class_decides_the_composition_whatever_the_flag_says() -> None:
    config = {**QWEN25_VL, "text_config": {**QWEN25_VL["text_config"], "rope_scaling": {
        "type": "mrope", "mrope_section": [16, 24, 24], "mrope_interleaved": True}}}
    with pytest.warns(UserWarning, match="mrope_interleaved: True is not read by qwen2_5_vl_text's code"):
        table = ropekit.load(config).table
    assert table.mrope_composition == "sections" and not table.mrope_interleaved


def test_code_known_only_from_the_config_follows_its_flag() -> None:
    config = {"hidden_size": 1024, "num_attention_heads": 8,
              "rope_parameters": {"rope_type": "default", "mrope_section": [24, 20, 20], "mrope_interleaved": True}}
    assert ropekit.load(config).table.mrope_composition == "interleaved"
    config["rope_parameters"] = {"rope_type": "default", "mrope_section": [16, 24, 24]}
    assert ropekit.load(config).table.mrope_composition == "sections"


def test_sections_on_a_class_without_a_multimodal_module_give_a_text_table() -> None:
    config = {"model_type": "qwen2", "hidden_size": 1024, "num_attention_heads": 8,
              "rope_scaling": {"type": "default", "mrope_section": [16, 24, 24]}}
    with pytest.warns(UserWarning, match="builds no multimodal rotary module"):
        table = ropekit.load(config).table
    assert table.mrope_composition is None and table.mrope_axes == 1


def test_sections_that_do_not_fit_are_refused_by_key() -> None:
    config = {**QWEN25_VL, "text_config": {**QWEN25_VL["text_config"], "rope_scaling": {
        "type": "mrope", "mrope_section": [16, 24, 20]}}}
    with pytest.raises(ropekit.RopeConfigError, match=r"mrope_section: sections \[16, 24, 20\] sum to 60"):
        ropekit.load(config)
    ernie = {"model_type": "ernie4_5_vl_moe_text", "hidden_size": 1024, "num_attention_heads": 8,
             "rope_parameters": {"rope_type": "default", "mrope_section": [20, 24, 20]}}
    with pytest.raises(ropekit.RopeConfigError, match="first two equal"):
        ropekit.load(ernie)


def test_a_class_without_a_default_section_needs_one() -> None:
    config = {"model_type": "hunyuan_vl_text", "hidden_size": 1024, "num_attention_heads": 8, "head_dim": 128}
    with pytest.raises(ropekit.RopeConfigError, match="mrope_section: missing"):
        ropekit.load(config)


def test_a_composition_not_identified_is_refused() -> None:
    unknown = sorted(name for name, entry in FACTS.items()
                     if entry.get("mrope") and entry["mrope"]["composition"] == "unknown")
    assert unknown, "every multimodal module identified: keep this test honest by removing it"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ropekit.RopeConfigError, match="has not identified"):
            ropekit.load({"model_type": unknown[0], "hidden_size": 64, "num_attention_heads": 2})


@pytest.mark.parametrize("composition", COMPOSITIONS)
def test_every_column_map_is_a_permutation_of_the_text_columns(composition: str) -> None:
    section = {"row_col": (), "full_width": (8, 8, 8, 8), "paired_hw": (12, 12, 8)}.get(composition, (8, 12, 12))
    mapping = MropeMap(composition, section, 32, "neox")
    assert sorted(mapping.freq.tolist()) == sorted(list(range(32)) * 2)
    assert set(mapping.axis.tolist()) == set(range(mapping.axes))


def test_the_documented_example_prints_what_it_shows() -> None:
    """The worked example of docs/multimodal.md, run as written: every printed output is the real one."""
    docs = (ROOT / "docs" / "multimodal.md").read_text(encoding="utf-8")
    block = docs.split("## Worked example", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    example = doctest.DocTestParser().get_doctest(block, {}, "multimodal.md", str(ROOT / "docs" / "multimodal.md"), 0)
    assert len(example.examples) >= 9 and any("cos[0, 4, [0, 16, 40]]" in step.source for step in example.examples)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    with np.printoptions(legacy=False):
        result = runner.run(example)
    assert result.failed == 0


def test_the_benchmark_repeats_what_the_docs_say() -> None:
    benchmark = (ROOT / "benchmarks" / "mrope.py").read_text(encoding="utf-8")
    default = re.search(r'add_argument\("--repeats", type=int, default=(\d+)\)', benchmark)
    documented = re.search(r"Medians of\s+(\d+)", (ROOT / "docs" / "multimodal.md").read_text(encoding="utf-8"))
    assert default is not None and documented is not None
    assert default.group(1) == documented.group(1)


@pytest.mark.parametrize("model_type", sorted(CASES))
def test_few_tokens_and_chunks_give_the_general_paths_bits(model_type: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A decode step (a few tokens inside one block per axis, the vectorised path) and a long call
    split into chunks and threads give the bits of the general per-axis path, for every composition."""
    from ropekit.tables import axes, mrope

    table = _table(CASES[model_type])
    rng = np.random.default_rng(5)
    n = table.mrope_axes
    layouts: list[Literal["neox", "gptj", "half"]] = (["neox"] if table.mrope_composition == "full_width"
                                                     else ["neox", "gptj", "half"])
    few = [np.stack([np.full(3, 40)] * n), np.stack([np.arange(16) + 7 * a for a in range(n)]),
           np.stack([np.arange(16) + 300] * n), np.stack([np.arange(16) + 300] * n)[:, None],  # text tokens
           np.stack([np.full(64, 9)] + [9 + np.arange(64) % (a + 5) for a in range(1, n)]), np.full((n, 1), 123456)]
    many = [np.stack([np.arange(5000) + 3 * a for a in range(n)]), rng.integers(0, 60000, (n, 3000))]
    for layout in layouts:
        for dtype in (np.float32, np.float64, np.float16):
            fast = [table.cos_sin(p, layout=layout, dtype=dtype) for p in few]
            whole = [table.cos_sin(p, layout=layout, dtype=dtype, threads=1) for p in many]
            with monkeypatch.context() as patched:
                patched.setattr(mrope, "small_axes", lambda *args: False)  # the general path only
                patched.setattr(mrope, "small_runs", lambda *args: None)
                patched.setattr(axes, "CHUNK_TOKENS", 97)  # odd chunks
                slow = [table.cos_sin(p, layout=layout, dtype=dtype) for p in few]
                chunked = [table.cos_sin(p, layout=layout, dtype=dtype, threads=3) for p in many]
            for got, want in zip(fast + whole, slow + chunked, strict=True):
                assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


@pytest.mark.parametrize("model_type", sorted(CASES))
def test_decode_steps_at_kept_lows_and_text_tokens_are_exact(model_type: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A decode step of a batch (every axis a run inside one block, or one position) takes the short path:
    its base rows are kept per set of axis lows, and text tokens (every axis at the same positions) gather
    whole offset rows. Called again, at new lows, for text and for image tokens, the values are the
    general path's bits and within 5e-7 of float64 (float16: its own rounding)."""
    from ropekit.tables import mrope

    table = _table(CASES[model_type])
    n = table.mrope_axes
    mapping = table.mrope_map(table.layout)
    steps = [np.stack([np.arange(16) + 300] * n), np.stack([np.arange(16) + 301] * n),
             np.stack([np.arange(16) + 300 + 5 * a for a in range(n)]), np.stack([np.arange(16) + 300] * n)[:, None],
             np.stack([np.arange(64) * 3 + 70_000 + a for a in range(n)]),
             np.stack([np.full(16, 500)] + [500 + np.arange(16) * (a % 2) for a in range(1, n)])]  # image tokens
    for dtype in (np.float32, np.float64, np.float16):
        first = [table.cos_sin(p, dtype=dtype) for p in steps]
        again = [table.cos_sin(p, dtype=dtype) for p in steps]  # from the kept base rows
        with monkeypatch.context() as patched:
            patched.setattr(mrope, "small_runs", lambda *args: None)
            patched.setattr(mrope, "small_axes", lambda *args: False)
            general = [table.cos_sin(p, dtype=dtype) for p in steps]
        for p, a, b, c in zip(steps, first, again, general, strict=True):
            assert np.array_equal(a[0], c[0]) and np.array_equal(a[1], c[1])
            assert np.array_equal(b[0], c[0]) and np.array_equal(b[1], c[1])
            rows = p.reshape(n, -1)
            angles = rows[mapping.axis].T.astype(np.float64) * table.inv_freq[mapping.freq]
            cos = a[0].reshape(rows.shape[1], -1)
            bound = 5e-7 if dtype != np.float16 else 1e-3
            assert np.abs(cos - np.cos(angles) * table.attention_factor).max() <= bound
