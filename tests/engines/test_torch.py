"""ropekit.torch against real torch and transformers: tiny random models give the same logits with
ropekit's rotary module as with their own, the bridge serves a third-party rope_type through
``from_pretrained``, and ``audit_module`` names what a live model serves."""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch", reason="torch is not installed: pip install 'ropekit[torch]'")
transformers = pytest.importorskip("transformers", reason="transformers is not installed: pip install transformers")

import torch  # noqa: E402

import ropekit  # noqa: E402
import ropekit.torch as rt  # noqa: E402
from ropekit.tables.rotary import cos_sin as numpy_cos_sin  # noqa: E402

TINY = {"vocab_size": 64, "hidden_size": 64, "intermediate_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64,
        "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}
PAIRS = 8  # head_dim 16

LLAMA_SCHEMES: dict[str, dict[str, Any]] = {
    "default": {"rope_type": "default", "rope_theta": 10000.0},
    "linear": {"rope_type": "linear", "factor": 4.0, "rope_theta": 10000.0},
    "dynamic": {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0},
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16, "rope_theta": 10000.0},
    "llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 16, "rope_theta": 500000.0},
    "longrope": {"rope_type": "longrope", "short_factor": [1.0 + i / 10 for i in range(PAIRS)],
                 "long_factor": [2.0 + i for i in range(PAIRS)], "original_max_position_embeddings": 32,
                 "rope_theta": 10000.0},
    "proportional": {"rope_type": "proportional", "factor": 2.0, "partial_rotary_factor": 0.5,
                     "rope_theta": 10000.0},
}


@pytest.fixture(autouse=True)
def quiet_transformers() -> Iterator[None]:
    """transformers logs (not warns) about tiny configs and prints progress bars: keep test output readable."""
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    torch.manual_seed(0)
    yield
    transformers.utils.logging.enable_progress_bar()
    transformers.logging.set_verbosity(verbosity)


def logits(model: Any, ids: Any) -> Any:
    with torch.no_grad():
        return model(ids).logits


def assert_same_logits_after_patch(model: Any, lengths: tuple[int, ...]) -> None:
    """Stock logits first (their modules hold state: do them in order), then the same with ropekit's module."""
    inputs = [torch.randint(3, 64, (2, n)) for n in lengths]
    stock = [logits(model.eval(), ids) for ids in inputs]
    assert rt.patch(model) == ["model.rotary_emb"]
    assert isinstance(model.model.rotary_emb, rt.RotaryEmbedding)
    for ids, expected in zip(inputs, stock, strict=True):
        torch.testing.assert_close(logits(model, ids), expected, rtol=1e-5, atol=1e-5)


# ---- the drop-in module on tiny real models -------------------------------------------------


@pytest.mark.parametrize("scheme", sorted(LLAMA_SCHEMES))
def test_llama_logits_match_for_every_builtin_scheme(scheme: str) -> None:
    config = transformers.LlamaConfig(**TINY, rope_parameters=dict(LLAMA_SCHEMES[scheme]))
    model = transformers.LlamaForCausalLM(config)
    # both sides of every seq-len switch: 40 and 20 positions fit (64, 32), 100 do not
    assert_same_logits_after_patch(model, (20, 40, 100, 20))


def test_llama3_generation_is_unchanged() -> None:
    config = transformers.LlamaConfig(**TINY, rope_parameters=dict(LLAMA_SCHEMES["llama3"]))
    model = transformers.LlamaForCausalLM(config).eval()
    prompt = torch.randint(3, 64, (1, 12))
    with torch.no_grad():
        stock = model.generate(prompt, max_new_tokens=8, do_sample=False)
        rt.patch(model)
        ours = model.generate(prompt, max_new_tokens=8, do_sample=False)
    assert ours.shape == (1, 20)
    assert torch.equal(ours, stock)


def test_phi3_longrope_with_partial_rotary() -> None:
    config = transformers.Phi3Config(**{**TINY, "max_position_embeddings": 128}, original_max_position_embeddings=32,
                                     rope_parameters={"rope_type": "longrope", "partial_rotary_factor": 0.5,
                                                      "short_factor": [1.0, 1.1, 1.2, 1.3],
                                                      "long_factor": [2.0, 3.0, 5.0, 8.0]})
    model = transformers.Phi3ForCausalLM(config)
    table = ropekit.load(config.to_dict()).table
    assert (table.rotary_dim, table.switch_at) == (8, 32)
    assert table.attention_factor == pytest.approx(np.sqrt(1 + np.log(4) / np.log(32)))
    assert_same_logits_after_patch(model, (20, 100, 20))


def test_qwen2_yarn() -> None:
    config = transformers.Qwen2Config(**TINY, rope_parameters={"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e6,
                                                               "original_max_position_embeddings": 16})
    model = transformers.Qwen2ForCausalLM(config)
    assert ropekit.load(config.to_dict()).table.attention_factor == pytest.approx(0.1 * np.log(4) + 1)
    assert_same_logits_after_patch(model, (30, 60))


def gemma3() -> Any:
    config = transformers.Gemma3TextConfig(
        **TINY, head_dim=16, layer_types=["sliding_attention", "full_attention"], sliding_window=8,
        rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                         "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6}})
    return transformers.Gemma3ForCausalLM(config)


def test_gemma3_two_layer_types() -> None:
    model = gemma3()
    assert_same_logits_after_patch(model, (24, 50))
    module = model.model.rotary_emb
    assert set(module.tables) == {"sliding_attention", "full_attention"}
    with pytest.raises(ropekit.ArgumentError, match="several layer types"):
        module(torch.zeros(1, 4, 16), torch.arange(4)[None])
    cos, sin = module(torch.zeros(1, 4, 16, dtype=torch.float16), torch.arange(4)[None], "full_attention")
    assert cos.dtype == torch.float16 and cos.shape == (1, 4, 16)
    assert float(sin[0, 3, 0]) == pytest.approx(np.sin(3 / 8), abs=1e-3)


def test_patch_refuses_a_table_the_model_does_not_serve() -> None:
    # Llama's default path ignores partial_rotary_factor, and so does ropekit (observed on the class): it patches
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**TINY, partial_rotary_factor=0.5))
    with pytest.warns(UserWarning, match="llama's rotary module does not apply it to plain RoPE"):
        rt.patch(model)
    assert isinstance(model.model.rotary_emb, rt.RotaryEmbedding)
    # a table of another width than the stock module's: nothing is swapped
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**TINY))
    yarn = {**TINY, "model_type": "llama", "rope_parameters": {
        "rope_type": "yarn", "factor": 2.0, "rope_theta": 10000.0, "partial_rotary_factor": 0.5}}
    with pytest.raises(ropekit.ArgumentError, match=f"serves {PAIRS} pairs"):
        rt.patch(model, yarn)
    assert not isinstance(model.model.rotary_emb, rt.RotaryEmbedding)
    with pytest.raises(ropekit.ArgumentError, match="no transformers rotary module"):
        rt.patch(torch.nn.Linear(2, 2))


# ---- accuracy -------------------------------------------------------------------------------

LLAMA31_8B: dict[str, Any] = {"hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 32,
              "max_position_embeddings": 131072, "rope_theta": 500000.0,
              "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                               "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}


def test_more_accurate_than_transformers_at_131072_positions() -> None:
    table = ropekit.load(LLAMA31_8B).table
    positions = np.arange(131072, dtype=np.float64)
    exact = np.cos(positions[:, None] * table.inv_freq[None, :])  # float64 reference, (131072, 64)
    config = transformers.LlamaConfig(**{k: v for k, v in LLAMA31_8B.items() if k != "rope_scaling"},
                                      rope_parameters={**LLAMA31_8B["rope_scaling"], "rope_theta": 500000.0})
    x = torch.zeros(1, dtype=torch.float32)
    position_ids = torch.arange(131072)[None]
    with torch.no_grad():
        stock = transformers.models.llama.modeling_llama.LlamaRotaryEmbedding(config)(x, position_ids)[0]
        ours = rt.RotaryEmbedding(LLAMA31_8B)(x, position_ids)[0]
    stock_error = float(np.abs(stock[0, :, :64].double().numpy() - exact).max())
    ours_error = float(np.abs(ours[0, :, :64].double().numpy() - exact).max())
    assert ours.dtype == torch.float32 and ours.shape == (1, 131072, 128)
    assert ours_error < 1e-7  # one float32 rounding of the exact value
    assert stock_error > 1e-3  # float32 angles
    assert torch.equal(ours[0, :, :64], ours[0, :, 64:])


def test_cos_sin_function() -> None:
    table = ropekit.load(LLAMA31_8B).table
    cos, sin = rt.cos_sin(table, 4096)
    expected_cos, expected_sin = numpy_cos_sin(table.inv_freq, 1.0, 4096)
    assert cos.shape == (4096, 128) and cos.dtype == torch.float32
    np.testing.assert_allclose(cos.numpy(), expected_cos, atol=5e-7)
    np.testing.assert_allclose(sin.numpy(), expected_sin, atol=5e-7)
    grid = torch.tensor([[0, 5], [7, 1 << 20]])
    cos, sin = rt.cos_sin(table, grid, dtype=torch.float64, layout="gptj")
    assert cos.shape == (2, 2, 128) and cos.dtype == torch.float64
    assert float(cos[1, 1, 2]) == pytest.approx(np.cos((1 << 20) * table.inv_freq[1]), abs=1e-12)
    assert torch.equal(cos[..., 0::2], cos[..., 1::2])
    yarn = ropekit.load({**TINY, "rope_scaling": LLAMA_SCHEMES["yarn"]}).table
    cos, sin = rt.cos_sin(yarn, range(3, 5))
    assert float(cos[0, 0]) == pytest.approx(np.cos(3.0) * yarn.attention_factor, abs=1e-7)
    with pytest.raises(ropekit.ArgumentError, match="positions"):
        rt.cos_sin(table, [-1, 2])
    with pytest.raises(ropekit.ArgumentTypeError, match="integer positions"):
        rt.cos_sin(table, torch.tensor([1.5]))
    with pytest.raises(ropekit.ArgumentTypeError, match="RopeTable"):
        rt.cos_sin("table", 4)  # type: ignore[arg-type]


# ---- the transformers bridge ----------------------------------------------------------------


@pytest.fixture
def ntk_alpha_checkpoint(tmp_path: Path) -> Path:
    pytest.importorskip("ropekit_ntk_alpha", reason="the example plugin is not installed: "
                        "pip install examples/ropekit-ntk-alpha")
    transformers.LlamaForCausalLM(transformers.LlamaConfig(**TINY)).save_pretrained(tmp_path)
    document = json.loads((tmp_path / "config.json").read_text())
    document["rope_parameters"] = {"rope_type": "ntk_alpha", "alpha": 8.0, "rope_theta": 10000.0}
    (tmp_path / "config.json").write_text(json.dumps(document))
    return tmp_path


@pytest.fixture
def bridge() -> Iterator[rt.TransformersBridge]:
    registered = rt.register_with_transformers()
    yield registered
    registered.remove()


def test_without_the_bridge_transformers_refuses(ntk_alpha_checkpoint: Path) -> None:
    with pytest.raises(KeyError, match="ntk_alpha"):
        transformers.AutoModelForCausalLM.from_pretrained(ntk_alpha_checkpoint)


def test_bridge_loads_generates_and_matches_ropekit(ntk_alpha_checkpoint: Path, bridge: rt.TransformersBridge) -> None:
    assert "ntk_alpha" in bridge.names
    assert not {"llama3", "yarn", "su", "mrope", "default"} & set(bridge.names)  # transformers serves those
    model = transformers.AutoModelForCausalLM.from_pretrained(ntk_alpha_checkpoint).eval()
    table = ropekit.load(ntk_alpha_checkpoint).table
    np.testing.assert_allclose(model.model.rotary_emb.inv_freq.numpy(), table.inv_freq, rtol=1e-7)
    assert model.model.rotary_emb.attention_scaling == 1.0
    prompt = torch.randint(3, 64, (1, 10))
    with torch.no_grad():
        generated = model.generate(prompt, max_new_tokens=6, do_sample=False)
    assert generated.shape == (1, 16)
    ids = torch.randint(3, 64, (1, 48))
    bridged = logits(model, ids)
    # the reference: the same weights with a plain rotary module whose table is ropekit's
    reference = transformers.LlamaForCausalLM.from_pretrained(
        ntk_alpha_checkpoint, config=transformers.LlamaConfig(**TINY)).eval()
    reference.model.rotary_emb.inv_freq.copy_(torch.tensor(table.inv_freq, dtype=torch.float32))
    torch.testing.assert_close(bridged, logits(reference, ids), rtol=0, atol=0)
    plain = transformers.LlamaForCausalLM.from_pretrained(
        ntk_alpha_checkpoint, config=transformers.LlamaConfig(**TINY)).eval()
    assert (bridged - logits(plain, ids)).abs().max() > 1e-3  # the scheme changes the forward
    rt.patch(model)
    torch.testing.assert_close(logits(model, ids), bridged, rtol=1e-5, atol=1e-5)


def test_bridge_validates_with_ropekit(bridge: rt.TransformersBridge) -> None:
    pytest.importorskip("ropekit_ntk_alpha", reason="the example plugin is not installed")
    from huggingface_hub.errors import StrictDataclassClassValidationError

    # transformers wraps a validator's ValueError in its own error; the cause is ropekit's, naming the JSON path
    with pytest.raises(StrictDataclassClassValidationError, match=r"rope_parameters\.alpha: missing") as missing:
        transformers.LlamaConfig(**TINY, rope_parameters={"rope_type": "ntk_alpha", "rope_theta": 10000.0})
    assert isinstance(missing.value.__cause__, ropekit.RopeConfigError)
    with pytest.raises(StrictDataclassClassValidationError, match=r"rope_parameters\.alpha") as small:
        transformers.LlamaConfig(**TINY, rope_parameters={"rope_type": "ntk_alpha", "alpha": 0.5})
    assert isinstance(small.value.__cause__, ropekit.RopeConfigError)


def test_bridge_refuses_other_transformers_internals(monkeypatch: pytest.MonkeyPatch) -> None:
    # loading a model may re-create transformers' lazy module: patch the one sys.modules holds now
    monkeypatch.setattr(importlib.import_module("transformers"), "__version__", "6.0.0")
    with pytest.raises(rt.TransformersBridgeError, match=r"transformers 6\.0\.0 differs.*major version"):
        rt.register_with_transformers()
    monkeypatch.undo()
    monkeypatch.delattr(importlib.import_module("transformers.modeling_rope_utils"), "ROPE_INIT_FUNCTIONS")
    with pytest.raises(rt.TransformersBridgeError, match="no ROPE_INIT_FUNCTIONS"):
        rt.register_with_transformers()


# ---- audit of a live model ------------------------------------------------------------------


def test_audit_module_transformers_match_and_wrong_tables() -> None:
    config = transformers.LlamaConfig(**TINY, rope_parameters=dict(LLAMA_SCHEMES["llama3"]))
    model = transformers.LlamaForCausalLM(config)
    declared = config.to_dict()
    report = rt.audit_module(model, declared)
    assert report["verdict"] == "match"
    assert report["modules"] == {"model.rotary_emb": "match"}
    table = ropekit.load(declared).table
    plain = ropekit.plain_inv_freq(500000.0, 16)
    assert not np.allclose(plain, table.inv_freq)
    model.model.rotary_emb.inv_freq.copy_(torch.tensor(plain, dtype=torch.float32))
    report = rt.audit_module(model, declared)
    assert report["verdict"] == "mismatch"
    assert report["modules"] == {"model.rotary_emb": "mismatch"}
    assert report["layers"]["full_attention"]["served_as"].startswith("plain RoPE, rope_theta 500000")

    yarn = transformers.Qwen2Config(**TINY, rope_parameters=dict(LLAMA_SCHEMES["yarn"]))
    model = transformers.Qwen2ForCausalLM(yarn)
    model.model.rotary_emb.attention_scaling = 1.0
    served_as = rt.audit_module(model, yarn.to_dict())["layers"]["full_attention"]["served_as"]
    assert served_as.startswith("the declared yarn frequencies with attention factor 1")


def test_audit_module_gemma3_names_each_layer_type() -> None:
    model = gemma3()
    declared = model.config.to_dict()
    report = rt.audit_module(model, declared)
    assert report["verdict"] == "match"
    assert {t["where"] for layer in report["layers"].values() for t in layer["tables"]} == {
        "model.rotary_emb.sliding_attention_inv_freq", "model.rotary_emb.full_attention_inv_freq"}
    module = model.model.rotary_emb
    module.full_attention_inv_freq.copy_(module.sliding_attention_inv_freq)
    report = rt.audit_module(model, declared)
    assert report["layers"]["sliding_attention"]["verdict"] == "match"
    assert report["layers"]["full_attention"]["served_as"] == "the sliding_attention table (default)"
    rt.patch(model)  # ropekit's own module is audited too
    assert rt.audit_module(model, declared)["verdict"] == "match"


class VllmRotaryEmbedding(torch.nn.Module):
    """vLLM's layout: one ``cos_sin_cache`` of ``[cos | sin]``, float32 angles, magnitude baked in."""

    def __init__(self, inv_freq: Any, factor: float, rows: int) -> None:
        super().__init__()
        freqs = torch.einsum("i,j -> ij", torch.arange(rows, dtype=torch.float32),
                             torch.tensor(inv_freq, dtype=torch.float32))
        self.register_buffer("cos_sin_cache", torch.cat((freqs.cos() * factor, freqs.sin() * factor), dim=-1),
                             persistent=False)


class ExecutorchRope(torch.nn.Module):
    """ExecuTorch's llama ``Rope``: ``freqs_cos``/``freqs_sin`` of one column per pair (precompute_freqs_cis)."""

    def __init__(self, inv_freq: Any, rows: int) -> None:
        super().__init__()
        freqs = torch.outer(torch.arange(rows), torch.tensor(inv_freq, dtype=torch.float32)).float()
        self.register_buffer("freqs_cos", torch.cos(freqs), persistent=False)
        self.register_buffer("freqs_sin", torch.sin(freqs), persistent=False)


class Layer(torch.nn.Module):
    def __init__(self, rope: torch.nn.Module) -> None:
        super().__init__()
        self.rotary_emb = rope


def test_audit_module_vllm_and_executorch_layouts() -> None:
    declared = {**TINY, "rope_scaling": LLAMA_SCHEMES["yarn"]}
    table = ropekit.load(declared).table
    model = torch.nn.Module()
    model.layers = torch.nn.ModuleList([Layer(VllmRotaryEmbedding(table.inv_freq, table.attention_factor, 4096)),
                                        Layer(ExecutorchRope(table.inv_freq, 2048))])
    report = rt.audit_module(model, declared)
    # ExecuTorch bakes no attention factor in: its magnitude is 1 where yarn declares 1.139
    assert report["modules"] == {"layers.0.rotary_emb": "match", "layers.1.rotary_emb": "mismatch"}
    assert "attention factor 1 " in report["layers"]["full_attention"]["served_as"]
    model.layers[0] = Layer(VllmRotaryEmbedding(ropekit.plain_inv_freq(10000.0, 16), 1.0, 4096))
    model.layers[1] = Layer(ExecutorchRope(ropekit.load({**TINY, "rope_scaling": LLAMA_SCHEMES["linear"]}).table.inv_freq,
                                           2048))
    report = rt.audit_module(model, {**TINY, "rope_scaling": LLAMA_SCHEMES["linear"]})
    assert report["modules"] == {"layers.0.rotary_emb": "mismatch", "layers.1.rotary_emb": "match"}
    report = rt.audit_module(model, declared)
    served = {t["where"]: t.get("served_as") for t in report["layers"]["full_attention"]["tables"]}
    assert served["layers.0.rotary_emb.cos_sin_cache"].startswith("plain RoPE, rope_theta 10000 (the yarn scaling dropped)")

