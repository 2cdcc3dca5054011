"""``ropekit.position_ids`` against transformers' own ``get_rope_index``.

(a) The committed golden cases (``golden/position_ids.json``, from ``scripts/position_ids_golden.py``)
are re-checked without torch. (b) With torch and the pinned transformers, seeded random cases
(random grids, merge sizes, batches, left padding, video durations and their dtypes) are run
through both and compared, the config classes' defaults are compared with ropekit's, and the
families that share a rule are checked to still run the same code. (c) Bad configs and arguments
raise ropekit's errors naming the key or argument.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import inspect
import json
import random
import re
import subprocess
import sys
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import ropekit
from ropekit.positions import SUPPORTED, UNSUPPORTED
from ropekit.positions.families import FAMILIES
from ropekit.positions.settings import read_settings
from ropekit.positions.token_types import build_token_types
from tests.support import DATA, ROOT

GOLDEN = json.loads((DATA / "golden" / "position_ids.json").read_text(encoding="utf-8"))
REFERENCE_REASON = "live comparison needs the reference extra: pip install -e '.[reference]'"

QWEN25: dict[str, Any] = {"model_type": "qwen2_5_vl", "image_token_id": 151655, "video_token_id": 151656,
                          "vision_config": {"spatial_merge_size": 2, "tokens_per_second": 2}}
IMAGE, VIDEO, START, END = 151655, 151656, 151652, 151653


def _unpack(case: dict[str, Any]) -> tuple[np.ndarray[Any, Any], dict[str, Any]]:
    inputs = dict(case["inputs"])
    if "input_ids_rle" in inputs:
        inputs["input_ids"] = [[token for token, count in row for _ in range(count)]
                               for row in inputs.pop("input_ids_rle")]
    dtype = inputs.pop("seconds_dtype", None)
    if dtype is not None:
        inputs["second_per_grid_ts"] = np.asarray(inputs["second_per_grid_ts"], dtype=dtype)
    return np.asarray(inputs.pop("input_ids")), inputs


# --- (a) golden cases, no torch -------------------------------------------------------------------------------


@pytest.mark.parametrize("case", GOLDEN["cases"], ids=lambda case: f"{case['model_type']}-{case['name']}")
def test_a_golden_case_equals_transformers(case: dict[str, Any]) -> None:
    input_ids, inputs = _unpack(case)
    positions, deltas = ropekit.position_ids(case["config"], input_ids, **inputs)
    assert positions.dtype == np.int64 and deltas.dtype == np.int64
    expected = case["expected"]
    assert deltas.tolist() == expected["deltas"]
    if "sha256" in expected:
        assert list(positions.shape) == expected["shape"]
        assert hashlib.sha256(np.ascontiguousarray(positions, dtype="<i8").tobytes()).hexdigest() == expected["sha256"]
    else:
        assert positions.tolist() == expected["position_ids"]


def test_the_golden_file_covers_every_family_and_case() -> None:
    assert GOLDEN["transformers"] == "5.24.0"
    names: dict[str, set[str]] = {}
    for case in GOLDEN["cases"]:
        names.setdefault(case["model_type"], set()).add(case["name"])
    assert set(names) == set(SUPPORTED)
    common = {"text_only", "one_image_class_defaults", "two_images", "left_padding_batch_of_2", "long"}
    for model_type, cases in names.items():
        video = set() if model_type == "paddleocr_vl" else {"video", "image_and_video"}
        assert cases == common | video, model_type
    assert (DATA / "golden" / "position_ids.json").stat().st_size < 300_000


def test_a_config_file_and_a_model_directory_read_like_the_mapping(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(QWEN25))
    ids = np.array([[7, START, IMAGE, IMAGE, IMAGE, IMAGE, END, 8]])
    expected = ropekit.position_ids(QWEN25, ids, image_grid_thw=[[1, 4, 4]])
    for source in (tmp_path, tmp_path / "config.json", str(tmp_path)):
        got = ropekit.position_ids(source, ids, image_grid_thw=[[1, 4, 4]])
        assert [array.tolist() for array in got] == [array.tolist() for array in expected]


def test_the_documented_example() -> None:
    """The worked example in docs/positions.md, with its printed output."""
    ids = np.array([[101, 102, START, *[IMAGE] * 6, END, 103, 104]])
    positions, deltas = ropekit.position_ids(QWEN25, ids, image_grid_thw=[[1, 4, 6]])
    assert positions[:, 0].tolist() == [[0, 1, 2, 3, 3, 3, 3, 3, 3, 6, 7, 8],
                                        [0, 1, 2, 3, 3, 3, 4, 4, 4, 6, 7, 8],
                                        [0, 1, 2, 3, 4, 5, 3, 4, 5, 6, 7, 8]]
    assert deltas.tolist() == [[-3]]
    docs = (ROOT / "docs" / "positions.md").read_text(encoding="utf-8")
    assert f">>> positions[:, 0]\n{positions[:, 0]!r}\n>>> deltas\n{deltas!r}\n" in docs


def test_video_durations_follow_the_dtype_transformers_computes_in() -> None:
    """tokens_per_second * second_per_grid_ts is formed in the tensor's dtype, then truncated."""
    config = {**QWEN25, "vision_config": {"tokens_per_second": 3}}
    ids = np.array([[START, *[VIDEO] * 8, END]])
    grid = [[8, 2, 2]]
    as_float32 = ropekit.position_ids(config, ids, video_grid_thw=grid, second_per_grid_ts=[0.1])[0]
    as_float64 = ropekit.position_ids(config, ids, video_grid_thw=grid, second_per_grid_ts=np.array([0.1]))[0]
    # float32: 3 * 0.1f = 0.3000000119 -> 7 * 0.3f = 2.1000001; float64: 7 * 0.30000000000000004 = 2.1000000000000005
    assert as_float32[0, 0, 1:9].tolist() == [1, 1, 1, 1, 2, 2, 2, 3]
    assert as_float64[0, 0, 1:9].tolist() == [1, 1, 1, 1, 2, 2, 2, 3]
    tripled = ropekit.position_ids(config, ids, video_grid_thw=grid, second_per_grid_ts=[2])[0]
    assert tripled[0, 0, 1:9].tolist() == [1 + 6 * step for step in range(8)]


def test_importing_ropekit_leaves_positions_and_frameworks_unimported() -> None:
    code = ("import sys, ropekit; assert 'ropekit.positions' not in sys.modules; "
            "import ropekit.positions; assert ropekit.position_ids is ropekit.positions.position_ids; "
            "assert not {'torch', 'transformers'} & set(sys.modules), sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


# --- (b) live, against transformers ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def script() -> ModuleType:
    """``scripts/position_ids_golden.py``: its ``reference`` calls transformers' own code."""
    pytest.importorskip("torch", reason=REFERENCE_REASON)
    transformers = pytest.importorskip("transformers", reason=REFERENCE_REASON)
    if transformers.__version__ != GOLDEN["transformers"]:
        pytest.skip(f"transformers {transformers.__version__} is installed; ropekit follows {GOLDEN['transformers']}")
    spec = importlib.util.spec_from_file_location("position_ids_golden", ROOT / "scripts" / "position_ids_golden.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spec.loader.exec_module(module)
    transformers.logging.set_verbosity_error()
    return module


def _random_case(script: ModuleType, model_type: str, rng: random.Random) -> dict[str, Any]:
    """A random config (merge sizes, tokens per second) and batch of rows as the processor writes them."""
    vision: dict[str, int] = {"spatial_merge_size": rng.choice((1, 2, 2, 3))}
    if model_type == "qwen2_5_vl":
        vision["tokens_per_second"] = rng.choice((0, 1, 2, 3, 4, 25))
    if model_type == "ernie4_5_vl_moe":
        vision["temporal_merge_size"] = rng.choice((1, 2, 3))
    config = script.reduced_config(model_type, **vision)
    if rng.random() < 0.3:
        config["vision_config"].pop("spatial_merge_size")  # the class default
    build = script.Builder(config, rng)
    merge, frames = build.merge, build.temporal_merge
    videos_allowed = model_type != "paddleocr_vl"
    rows, images, videos = [], [], []
    for _ in range(rng.randint(1, 3)):
        row = build.text(rng.randint(0, 3))
        for _ in range(rng.randint(0, 5)):
            kind = rng.choice(("text", "image", "video") if videos_allowed else ("text", "image"))
            if kind == "text":
                row += build.text(rng.randint(1, 6))
            elif kind == "image":
                grid = (1, merge * rng.randint(1, 4), merge * rng.randint(1, 4))
                images.append(grid)
                row += build.image(grid)
            else:
                grid = (frames * rng.randint(1, 4), merge * rng.randint(1, 3), merge * rng.randint(1, 3))
                videos.append(grid)
                row += build.video(grid)
        rows.append(row or build.text(1))
    width = max(len(row) for row in rows)
    inputs: dict[str, Any] = {"input_ids": [[0] * (width - len(row)) + row for row in rows]}
    if len(rows) > 1 or rng.random() < 0.5:
        inputs["attention_mask"] = [[0] * (width - len(row)) + [1] * len(row) for row in rows]
    if images or rng.random() < 0.2:
        inputs["image_grid_thw"] = [list(grid) for grid in images]
    if videos:
        inputs["video_grid_thw"] = [list(grid) for grid in videos]
    if model_type == "qwen2_5_vl" and videos and rng.random() < 0.8:
        dtype = rng.choice(("float32", "float64", "int64"))
        if dtype == "int64":
            inputs["second_per_grid_ts"] = [rng.randint(0, 3) for _ in videos]
        else:
            inputs["second_per_grid_ts"] = [round(rng.uniform(0.05, 3.0), rng.randint(1, 6)) for _ in videos]
        inputs["seconds_dtype"] = dtype
    if rng.random() < 0.3:
        inputs["mm_token_type_ids"] = script.processor_token_types(model_type, build.built, inputs["input_ids"])
    return {"config": config, "inputs": inputs}


def _ropekit_inputs(case: dict[str, Any], rng: random.Random) -> tuple[np.ndarray[Any, Any], dict[str, Any]]:
    """The case as ropekit takes it: seconds as a list (read as float32) or an array of the dtype."""
    inputs = dict(case["inputs"])
    dtype = inputs.pop("seconds_dtype", None)
    if dtype == "float32" and rng.random() < 0.5:
        pass  # a list of Python floats: float32, as the processor's tensor
    elif dtype is not None:
        inputs["second_per_grid_ts"] = np.asarray(inputs["second_per_grid_ts"], dtype=dtype)
    return np.asarray(inputs.pop("input_ids")), inputs


LIVE_CASES_PER_FAMILY = 4


@pytest.mark.parametrize("model_type", sorted(SUPPORTED))
def test_random_cases_equal_transformers_live(script: ModuleType, model_type: str) -> None:
    rng = random.Random(f"position_ids:{model_type}")
    for number in range(LIVE_CASES_PER_FAMILY):
        case = _random_case(script, model_type, rng)
        expected, expected_deltas, processor_types = script.reference(case["config"], case["inputs"])
        input_ids, inputs = _ropekit_inputs(case, rng)
        positions, deltas = ropekit.position_ids(case["config"], input_ids, **inputs)
        assert positions.tolist() == expected.tolist(), (number, case)
        assert deltas.shape == expected_deltas.shape and deltas.tolist() == expected_deltas.tolist(), (number, case)
        built, _ = build_token_types(read_settings(case["config"]), input_ids)
        assert built.tolist() == processor_types.tolist(), (number, case)


def test_the_config_class_defaults_are_ropekits(script: ModuleType) -> None:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    for model_type, family in FAMILIES.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            built = CONFIG_MAPPING[model_type]()
        assert {key: getattr(built, key) for key in family.token_ids} == dict(family.token_ids), model_type
        assert {key: getattr(built.vision_config, key) for key in family.vision} == dict(family.vision), model_type


REPRESENTATIVES = {"qwen2_vl": "qwen2_vl", "qwen2_5_vl": "qwen2_5_vl", "qwen3_vl": "qwen3_vl",
                   "ernie4_5_vl_moe": "ernie4_5_vl_moe"}


def _code(script: ModuleType, model_type: str, method: str) -> str:
    module = importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
    source = inspect.getsource(getattr(getattr(module, script.MODEL_CLASSES[model_type]), method))
    source = re.sub(r'"""(.|\n)*?"""', "", source).replace(".clone()", "")  # cosmos3_edge copies what is new anyway
    return "\n".join(line.split("#")[0].rstrip() for line in source.splitlines() if line.split("#")[0].strip())


@pytest.mark.parametrize("model_type", sorted(SUPPORTED))
def test_a_family_runs_its_rules_code(script: ModuleType, model_type: str) -> None:
    """Families are listed under a rule only while their get_rope_index is the rule's, line for line."""
    rule = REPRESENTATIVES[SUPPORTED[model_type]]
    for method in ("get_rope_index", "get_vision_position_ids"):
        assert _code(script, model_type, method) == _code(script, rule, method), (model_type, method)


# --- (c) errors ------------------------------------------------------------------------------------------------

ONE_IMAGE = np.array([[7, START, IMAGE, IMAGE, IMAGE, IMAGE, END, 8]])


@pytest.mark.parametrize("model_type", ["llama", "qwen2_5_omni", "qwen2_5_vl_text"])
def test_a_model_type_without_a_rule_is_refused_naming_the_supported(model_type: str) -> None:
    with pytest.raises(ropekit.RopeConfigError, match=f"{model_type}.*qwen2_5_vl") as caught:
        ropekit.position_ids({"model_type": model_type}, ONE_IMAGE)
    assert caught.value.path == "model_type"
    assert "glm4v" in str(caught.value) and "ernie4_5_vl_moe" in str(caught.value)


@pytest.mark.parametrize("model_type", sorted(UNSUPPORTED))
def test_a_multimodal_family_without_a_rule_is_refused_with_its_reason(model_type: str) -> None:
    with pytest.raises(ropekit.RopeConfigError) as caught:
        ropekit.position_ids({"model_type": model_type}, ONE_IMAGE, image_grid_thw=[[1, 4, 4]])
    assert caught.value.path == "model_type"
    message = str(caught.value)
    assert f"model_type {model_type!r} ({UNSUPPORTED[model_type]}; not implemented)" in message
    assert message.endswith(f"supported: {', '.join(sorted(SUPPORTED))}")


def test_the_documented_refusals_are_the_codes() -> None:
    """docs/positions.md's table of refused families is :data:`UNSUPPORTED`, row for row."""
    docs = (ROOT / "docs" / "positions.md").read_text(encoding="utf-8")
    section = docs.split("Families with another rule are refused by name", 1)[1].split("\n\n", 2)[1]
    rows = dict(re.findall(r"^\| (\w+) \| (.+) \|$", section, flags=re.M)[1:])  # after the header row
    assert rows == dict(UNSUPPORTED)


def test_every_get_rope_index_of_transformers_is_served_or_refused_by_name() -> None:
    """Every model package of the pinned transformers whose model class has a ``get_rope_index``."""
    transformers = pytest.importorskip("transformers", reason=REFERENCE_REASON)
    if transformers.__version__ != GOLDEN["transformers"]:
        pytest.skip(f"transformers {transformers.__version__} is installed; ropekit follows {GOLDEN['transformers']}")
    models = Path(transformers.__file__).parent / "models"
    found = {path.parent.name for path in models.glob("*/modeling_*.py")
             if "def get_rope_index" in path.read_text(encoding="utf-8")}
    assert found == set(SUPPORTED) | set(UNSUPPORTED)
    assert not set(SUPPORTED) & set(UNSUPPORTED)


@pytest.mark.parametrize(("config", "path"), [
    ({}, "model_type"),
    ({"model_type": 3}, "model_type"),
    ({**QWEN25, "vision_config": {"spatial_merge_size": 2.0}}, "vision_config.spatial_merge_size"),
    ({**QWEN25, "vision_config": {"spatial_merge_size": 0}}, "vision_config.spatial_merge_size"),
    ({**QWEN25, "vision_config": {"tokens_per_second": True}}, "vision_config.tokens_per_second"),
    ({**QWEN25, "vision_config": [2]}, "vision_config"),
    ({**QWEN25, "image_token_id": None}, "image_token_id"),
])
def test_a_bad_config_value_is_refused_by_path(config: dict[str, Any], path: str) -> None:
    with pytest.raises(ropekit.RopeConfigError) as caught:
        ropekit.position_ids(config, ONE_IMAGE, image_grid_thw=[[1, 4, 4]])
    assert caught.value.path == path


@pytest.mark.parametrize(("config", "ids", "kwargs", "argument", "says"), [
    (QWEN25, ONE_IMAGE, {}, "image_grid_thw", "0 image grid"),
    (QWEN25, ONE_IMAGE, {"image_grid_thw": [[1, 4, 4], [1, 2, 2]]}, "image_grid_thw", "holds 1 run"),
    (QWEN25, ONE_IMAGE, {"image_grid_thw": [[1, 4, 6]]}, "image_grid_thw", r"image_grid_thw\[0\].*6 token.*holds 4"),
    (QWEN25, ONE_IMAGE, {"image_grid_thw": [[1, 3, 4]]}, "image_grid_thw", "multiples of .*spatial_merge_size 2"),
    (QWEN25, ONE_IMAGE, {"image_grid_thw": [[0, 4, 4]]}, "image_grid_thw", "positive"),
    (QWEN25, ONE_IMAGE, {"image_grid_thw": [1, 4, 4]}, "image_grid_thw", r"\(n, 3\)"),
    (QWEN25, ONE_IMAGE, {"image_grid_thw": [[1, 4, 4]], "video_grid_thw": [[2, 2, 2]]}, "video_grid_thw", "holds 0"),
    ({"model_type": "qwen3_vl"}, np.array([[1, START, *[VIDEO] * 3, END]]), {"video_grid_thw": [[3, 2, 2]]},
     "video_grid_thw", "3 frame.*own run"),
    ({"model_type": "paddleocr_vl"}, np.array([[1, *[100296] * 2]]), {"video_grid_thw": [[2, 2, 2]]},
     "video_grid_thw", "marks no video token"),
    ({"model_type": "ernie4_5_vl_moe"}, np.array([[1, *[103367] * 2]]), {"video_grid_thw": [[3, 2, 4]]},
     "video_grid_thw", "temporal_merge_size 2"),
    (QWEN25, ONE_IMAGE[0], {"image_grid_thw": [[1, 4, 4]]}, "input_ids", r"input_ids\[None\]"),
    (QWEN25, np.zeros((1, 0), dtype=np.int64), {}, "input_ids", "at least one"),
    (QWEN25, ONE_IMAGE, {"image_grid_thw": [[1, 4, 4]], "attention_mask": np.ones((1, 7))}, "attention_mask",
     "shape"),
    (QWEN25, ONE_IMAGE, {"image_grid_thw": [[1, 4, 4]], "attention_mask": [[0, 1, 2, 1, 1, 1, 1, 1]]},
     "attention_mask", "0 and 1"),
    (QWEN25, np.array([[5, 6], [7, 8]]), {"attention_mask": [[1, 1], [0, 0]]}, "attention_mask", "row 1"),
    (QWEN25, ONE_IMAGE, {"image_grid_thw": [[1, 4, 4]], "mm_token_type_ids": [[0, 0, 1, 1, 1, 1, 0, 3]]},
     "mm_token_type_ids", "audio"),
    (QWEN25, ONE_IMAGE, {"image_grid_thw": [[1, 4, 4]], "mm_token_type_ids": [[0, 1]]}, "mm_token_type_ids",
     "shape"),
    ({"model_type": "qwen2_vl"}, ONE_IMAGE, {"image_grid_thw": [[1, 4, 4]], "second_per_grid_ts": [1.0]},
     "second_per_grid_ts", "only qwen2_5_vl"),
    (QWEN25, np.array([[START, *[VIDEO] * 2, END]]), {"video_grid_thw": [[2, 2, 2]], "second_per_grid_ts": [1, 2]},
     "second_per_grid_ts", "1 non-negative"),
    (QWEN25, np.array([[START, *[VIDEO] * 2, END]]), {"video_grid_thw": [[2, 2, 2]], "second_per_grid_ts": [-1.0]},
     "second_per_grid_ts", "non-negative"),
    (QWEN25, np.array([[START, *[VIDEO] * 2, END]]), {"video_grid_thw": [[2, 2, 2]],
     "second_per_grid_ts": [float("nan")]}, "second_per_grid_ts", "non-negative"),
    (QWEN25, np.array([[START, *[VIDEO] * 2, END]]), {"video_grid_thw": [[2, 2, 2]],
     "second_per_grid_ts": np.array([1e300])}, "second_per_grid_ts", "2\\*\\*62"),
    (QWEN25, np.array([[START, *[VIDEO] * 2, END]]), {"video_grid_thw": [[2, 2, 2]], "second_per_grid_ts": [1e300]},
     "second_per_grid_ts", "overflows float32"),
])
def test_a_bad_argument_is_refused_naming_it(config: dict[str, Any], ids: Any, kwargs: dict[str, Any],
                                             argument: str, says: str) -> None:
    with pytest.raises(ropekit.ArgumentError, match=says) as caught:
        ropekit.position_ids(config, ids, **kwargs)
    assert caught.value.argument == argument
    assert str(caught.value).startswith(f"{argument}: ")


@pytest.mark.parametrize(("ids", "kwargs", "argument"), [
    (ONE_IMAGE.astype(np.float64), {}, "input_ids"),
    ([[1, 2], [3]], {}, "input_ids"),
    ("tokens", {}, "input_ids"),
    (ONE_IMAGE, {"image_grid_thw": [[1.0, 4.0, 4.0]]}, "image_grid_thw"),
    (ONE_IMAGE, {"image_grid_thw": [[1, 4, 4]], "attention_mask": np.ones((1, 8)) * 1.0}, "attention_mask"),
    (ONE_IMAGE, {"image_grid_thw": [[1, 4, 4]], "use_audio_in_video": True}, "use_audio_in_video"),
    (np.array([[START, VIDEO, VIDEO, END]]), {"video_grid_thw": [[2, 2, 2]],
     "second_per_grid_ts": np.array([1.0], dtype=np.float16)}, "second_per_grid_ts"),
    (np.array([[START, VIDEO, VIDEO, END]]), {"video_grid_thw": [[2, 2, 2]], "second_per_grid_ts": [True]},
     "second_per_grid_ts"),
])
def test_a_wrongly_typed_argument_is_refused_naming_it(ids: Any, kwargs: dict[str, Any], argument: str) -> None:
    with pytest.raises(ropekit.ArgumentTypeError) as caught:
        ropekit.position_ids(QWEN25, ids, **kwargs)
    assert caught.value.argument == argument


def test_an_unknown_keyword_names_the_family_extras() -> None:
    with pytest.raises(ropekit.ArgumentTypeError, match="use_audio_in_video: unknown keyword for model_type "
                       "'qwen2_5_vl'; its family-specific keywords: none"):
        ropekit.position_ids(QWEN25, ONE_IMAGE, image_grid_thw=[[1, 4, 4]], use_audio_in_video=True)


def test_garbage_raises_only_ropekit_errors() -> None:
    """Random shapes, dtypes and values: a ropekit error or a result, never a numpy or Python error."""
    rng = np.random.default_rng(7)
    pool: list[Any] = [None, 3, "x", [], [[]], [[1, 2, 3]], np.zeros((2, 3)), np.ones((1, 4, 3), dtype=np.int64),
                       np.array([[1, 2, 3]], dtype=np.uint64), [[1, 2], [3]], {"a": 1}, np.array([[2**63 - 1]])]
    for _ in range(300):
        ids = rng.choice([IMAGE, VIDEO, START, END, 5], size=(int(rng.integers(1, 3)), int(rng.integers(1, 12))))
        kwargs = {name: pool[int(rng.integers(len(pool)))] if rng.random() < 0.5 else
                  rng.integers(-1, 5, size=tuple(int(n) for n in rng.integers(0, 4, size=int(rng.integers(1, 3)))))
                  for name in ("image_grid_thw", "video_grid_thw", "attention_mask", "mm_token_type_ids",
                               "second_per_grid_ts") if rng.random() < 0.5}
        with contextlib.suppress(ropekit.RopekitError):
            ropekit.position_ids(QWEN25, ids, **kwargs)
