"""Regenerate ``tests/data/golden/position_ids.json``: 3-axis position ids from transformers' own code.

    pip install -e ".[reference]"   # torch + the pinned transformers; CPU is enough
    python scripts/position_ids_golden.py

For every model_type ``ropekit.positions`` supports, a few seeded cases (text only, one image, two
images, a video, image + video, left padding in a batch of two, one long sequence) are run through
the model class's own ``get_rope_index`` (called unbound on a holder of the real config object,
with the class's own ``get_vision_position_ids``), with ``mm_token_type_ids`` built by the family's
processor code (``create_mm_token_type_ids``, called unbound on a stub holding the token ids). The
long case is stored compactly: ``input_ids`` run-length encoded and the positions as a sha256 of
their little-endian int64 bytes. The tests compare ropekit against this file without torch, and
re-run :func:`reference` on random cases when torch is installed.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import random
import warnings
from pathlib import Path
from types import MethodType, SimpleNamespace
from typing import Any

import numpy as np
import torch
import transformers
from transformers import AutoConfig
from transformers.models.auto.configuration_auto import CONFIG_MAPPING
from transformers.processing_utils import ProcessorMixin

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "golden" / "position_ids.json"
SEED = 20240613

MODEL_CLASSES = {
    "qwen2_vl": "Qwen2VLModel",
    "paddleocr_vl": "PaddleOCRVLModel",
    "qwen2_5_vl": "Qwen2_5_VLModel",
    "qwen3_vl": "Qwen3VLModel",
    "qwen3_vl_moe": "Qwen3VLMoeModel",
    "qwen3_5": "Qwen3_5Model",
    "qwen3_5_moe": "Qwen3_5MoeModel",
    "qwen4_exp": "Qwen4ExpModel",
    "cosmos3_edge": "Cosmos3EdgeModel",
    "cosmos3_omni": "Cosmos3OmniModel",
    "cohere_compass": "CohereCompassModel",
    "glm4v": "Glm4vModel",
    "glm4v_moe": "Glm4vMoeModel",
    "glm46v": "Glm46VModel",
    "glm_ocr": "GlmOcrModel",
    "ernie4_5_vl_moe": "Ernie4_5_VLMoeModel",
}
"""model_type -> the class whose ``get_rope_index`` is the reference."""
GLM = {"glm4v", "glm4v_moe", "glm46v", "glm_ocr"}
PER_FRAME = {"qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe", "qwen4_exp", "cosmos3_edge", "cosmos3_omni",
             "cohere_compass"} | GLM
"""Families whose processor writes every video frame as its own run (behind a timestamp)."""
IMAGES_ONLY = {"paddleocr_vl"}
"""Families whose processor writes no video tokens."""
VISION_KEYS = ("spatial_merge_size", "tokens_per_second", "temporal_merge_size")


def built_config(config: dict[str, Any]) -> Any:
    """The transformers config object for a (reduced) config dict."""
    rest = {key: value for key, value in config.items() if key != "model_type"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return AutoConfig.for_model(config["model_type"], **rest)


def reduced_config(model_type: str, **vision: int) -> dict[str, Any]:
    """The class's ``to_dict()``, reduced to the keys position ids depend on; ``vision`` overrides."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = CONFIG_MAPPING[model_type]().to_dict()
    config: dict[str, Any] = {"model_type": model_type}
    config.update({key: value for key, value in full.items() if key.endswith("_token_id") and value is not None})
    vision_full = full.get("vision_config") or {}
    config["vision_config"] = {key: vision_full[key] for key in VISION_KEYS if key in vision_full}
    config["vision_config"].update(vision)
    return config


class _MixinStub:
    """Just enough of a processor for ``ProcessorMixin.create_mm_token_type_ids``: its own token-id properties."""

    image_token_ids = ProcessorMixin.image_token_ids
    video_token_ids = ProcessorMixin.video_token_ids
    audio_token_ids = ProcessorMixin.audio_token_ids


def processor_token_types(model_type: str, built: Any, input_ids: list[list[int]]) -> list[list[int]]:
    """``mm_token_type_ids`` as the family's processor code builds them from ``input_ids``."""
    if model_type in GLM:
        name = "glm46v" if model_type == "glm46v" else "glm4v"
        module = importlib.import_module(f"transformers.models.{name}.processing_{name}")
        processor = next(getattr(module, cls) for cls in dir(module) if cls.endswith("Processor"))
        stub = SimpleNamespace(image_token_id=built.image_token_id, video_start_id=built.video_start_token_id,
                               video_end_id=built.video_end_token_id)
        result: list[list[int]] = processor.create_mm_token_type_ids(stub, input_ids)
        return result
    mixin: Any = _MixinStub()
    mixin.image_token_id = built.image_token_id
    if model_type not in IMAGES_ONLY:  # PaddleOCRVLProcessor sets no video_token_id
        mixin.video_token_id = built.video_token_id
    types: list[list[int]] = ProcessorMixin.create_mm_token_type_ids(mixin, input_ids)
    return types


def reference(config: dict[str, Any], inputs: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """transformers' ``(position_ids, deltas)`` for ``inputs`` and the token types it was given."""
    model_type = config["model_type"]
    built = built_config(config)
    module = importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
    model_class = getattr(module, MODEL_CLASSES[model_type])
    holder = SimpleNamespace(config=built)
    holder.get_vision_position_ids = MethodType(model_class.get_vision_position_ids, holder)
    types = inputs.get("mm_token_type_ids") or processor_token_types(model_type, built, inputs["input_ids"])
    kwargs: dict[str, Any] = {"input_ids": torch.tensor(inputs["input_ids"]),
                              "mm_token_type_ids": torch.tensor(types)}
    for key in ("image_grid_thw", "video_grid_thw", "attention_mask"):
        if inputs.get(key) is not None:
            kwargs[key] = torch.tensor(inputs[key])
    if inputs.get("second_per_grid_ts") is not None:
        kwargs["second_per_grid_ts"] = torch.as_tensor(np.asarray(inputs["second_per_grid_ts"],
                                                                  dtype=inputs.get("seconds_dtype", "float32")))
    with torch.no_grad():
        position_ids, deltas = model_class.get_rope_index(holder, **kwargs)
    return position_ids.numpy(), deltas.numpy(), np.asarray(types)


class Builder:
    """Token sequences for one config, written as the family's processor writes them."""

    def __init__(self, config: dict[str, Any], rng: random.Random) -> None:
        self.model_type = config["model_type"]
        self.built = built_config(config)
        vision = self.built.vision_config
        self.merge = vision.spatial_merge_size
        self.temporal_merge = getattr(vision, "temporal_merge_size", 1) if self.model_type == "ernie4_5_vl_moe" else 1
        self.rng = rng
        specials = {value for key, value in config.items() if key.endswith("_token_id") and isinstance(value, int)}
        self.text_pool = [token for token in range(1000, 1400) if token not in specials]

    def text(self, count: int, token: int | None = None) -> list[int]:
        """``count`` text tokens (random, or all ``token``)."""
        return [token if token is not None else self.rng.choice(self.text_pool) for _ in range(count)]

    def _id(self, name: str) -> int:
        value = getattr(self.built, name, None)
        return int(value) if value is not None else self.text_pool[0]

    def image(self, grid: tuple[int, int, int]) -> list[int]:
        """An image's placeholder run, wrapped in the family's start/end tokens."""
        count = grid[0] * grid[1] * grid[2] // self.merge**2
        if self.model_type in GLM or self.model_type == "ernie4_5_vl_moe":
            return [self._id("image_start_token_id"), *[self._id("image_token_id")] * count,
                    self._id("image_end_token_id")]
        return [self._id("vision_start_token_id"), *[self._id("image_token_id")] * count,
                self._id("vision_end_token_id")]

    def video(self, grid: tuple[int, int, int], stamp: int | None = None) -> list[int]:
        """A video's placeholder tokens: one run, or one run per frame behind timestamp text."""
        t, h, w = grid
        frame = h * w // self.merge**2
        if self.model_type in GLM:
            tokens = [self._id("video_start_token_id")]
            for _ in range(t):
                tokens += [self._id("image_start_token_id"), *[self._id("image_token_id")] * frame,
                           self._id("image_end_token_id"), *self.text(2, stamp)]
            return [*tokens, self._id("video_end_token_id")]
        if self.model_type in PER_FRAME:
            tokens = []
            for _ in range(t):
                tokens += [*self.text(3, stamp), self._id("vision_start_token_id"),
                           *[self._id("video_token_id")] * frame, self._id("vision_end_token_id")]
            return tokens
        count = t // self.temporal_merge * frame
        if self.model_type == "ernie4_5_vl_moe":
            return [self._id("video_start_token_id"), *[self._id("video_token_id")] * count,
                    self._id("video_end_token_id")]
        return [self._id("vision_start_token_id"), *[self._id("video_token_id")] * count,
                self._id("vision_end_token_id")]


def _rle(tokens: list[int]) -> list[list[int]]:
    runs: list[list[int]] = []
    for token in tokens:
        if runs and runs[-1][0] == token:
            runs[-1][1] += 1
        else:
            runs.append([token, 1])
    return runs


def digest(position_ids: np.ndarray) -> str:
    """sha256 of ``position_ids`` as little-endian int64 bytes."""
    return hashlib.sha256(np.ascontiguousarray(position_ids, dtype="<i8").tobytes()).hexdigest()


def family_cases(model_type: str, rng: random.Random) -> list[dict[str, Any]]:
    """The seeded cases of one family: name, config and inputs (not yet evaluated)."""
    ernie = model_type == "ernie4_5_vl_moe"
    vision = {"tokens_per_second": 2} if model_type == "qwen2_5_vl" else {}
    config = reduced_config(model_type, **vision)
    build = Builder(config, rng)
    m = build.merge
    frames = 4 if ernie else 3
    seconds: dict[str, Any] = {"second_per_grid_ts": [0.7]} if model_type == "qwen2_5_vl" else {}
    cases: list[dict[str, Any]] = []

    def add(name: str, rows: list[list[int]], case_config: dict[str, Any] | None = None, **extra: Any) -> None:
        width = max(len(row) for row in rows)
        inputs: dict[str, Any] = {"input_ids": [[0] * (width - len(row)) + row for row in rows], **extra}
        if len(rows) > 1 or any(len(row) < width for row in rows):
            inputs["attention_mask"] = [[0] * (width - len(row)) + [1] * len(row) for row in rows]
        cases.append({"model_type": model_type, "name": name, "config": case_config or config, "inputs": inputs})

    image_a, image_b = (1, 2 * m, 3 * m), (1, 3 * m, m)
    video = (frames, 2 * m, 2 * m)
    add("text_only", [build.text(12)])
    add("one_image_class_defaults", [build.text(3) + build.image(image_a) + build.text(4)],
        {"model_type": model_type}, image_grid_thw=[list(image_a)])
    add("two_images", [build.text(2) + build.image(image_a) + build.text(3) + build.image(image_b) + build.text(2)],
        image_grid_thw=[list(image_a), list(image_b)])
    if model_type not in IMAGES_ONLY:
        add("video", [build.text(4) + build.video(video) + build.text(3)], video_grid_thw=[list(video)], **seconds)
        add("image_and_video",
            [build.text(2) + build.image(image_b) + build.text(2) + build.video(video) + build.text(5)],
            image_grid_thw=[list(image_b)], video_grid_thw=[list(video)], **seconds)
    padded = [build.text(2) + build.image(image_a) + build.text(3),
              build.text(5) + build.image(image_b) + build.text(2) + build.image(image_a) + build.text(6)]
    add("left_padding_batch_of_2", padded, image_grid_thw=[list(image_a), list(image_b), list(image_a)])
    cases[-1]["inputs"]["mm_token_type_ids"] = processor_token_types(model_type, build.built,
                                                                     cases[-1]["inputs"]["input_ids"])
    long_video = (frames * 2, 8 * m, 6 * m)
    long_row = build.text(300, 1001)
    for _ in range(4):
        long_row += build.image((1, 8 * m, 8 * m)) + build.text(200, 1001)
    long_media: dict[str, Any] = {"image_grid_thw": [[1, 8 * m, 8 * m]] * 4}
    if model_type not in IMAGES_ONLY:
        long_row += build.video(long_video, 1002)
        long_media["video_grid_thw"] = [list(long_video)]
        if model_type == "qwen2_5_vl":
            long_media["second_per_grid_ts"] = [0.25]
    add("long", [long_row + build.text(1500, 1001)], **long_media)
    return cases


def evaluate(case: dict[str, Any]) -> dict[str, Any]:
    """``case`` with transformers' result (the long case compactly)."""
    position_ids, deltas, _ = reference(case["config"], case["inputs"])
    out = dict(case)
    if case["name"] == "long":
        inputs = dict(case["inputs"])
        inputs["input_ids_rle"] = [_rle(row) for row in inputs.pop("input_ids")]
        out["inputs"] = inputs
        out["expected"] = {"shape": list(position_ids.shape), "sha256": digest(position_ids),
                           "deltas": deltas.tolist()}
    else:
        out["expected"] = {"position_ids": position_ids.tolist(), "deltas": deltas.tolist()}
    return out


def main() -> None:
    """Write the golden file."""
    transformers.logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    rng = random.Random(SEED)
    cases = [evaluate(case) for model_type in MODEL_CLASSES for case in family_cases(model_type, rng)]
    document = {
        "generator": "scripts/position_ids_golden.py",
        "transformers": transformers.__version__,
        "torch": torch.__version__.split("+")[0],
        "cases": cases,
    }
    lines = ",\n".join(json.dumps(case, separators=(",", ":")) for case in cases)
    head = json.dumps({key: value for key, value in document.items() if key != "cases"})[:-1]
    OUT.write_text(f'{head}, "cases": [\n{lines}\n]}}\n', encoding="utf-8")
    print(f"{len(cases)} cases -> {OUT} ({OUT.stat().st_size // 1024} KB)")


if __name__ == "__main__":
    main()
