"""``ropekit probe``: what a transformers class's own forward applies, observed on a tiny random
model, against what ropekit serves for the same config."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch", reason="the probe runs the model's code: pip install 'ropekit[reference]'")
pytest.importorskip("transformers", reason="the probe runs the model's code: pip install 'ropekit[reference]'")

import ropekit
from ropekit.engines.probe import compare, observe, probe

from ..support import CONFIGS, SEED_CONFIG

FAMILIES = CONFIGS / "families"


def test_llama3_is_observed_exactly_as_ropekit_serves_it() -> None:
    report = probe(SEED_CONFIG)
    assert report.model_class == "LlamaModel" and report.verdict == "match"
    served = ropekit.load(SEED_CONFIG).table
    assert len(report.layers) == 8  # the first eight of sixteen layers are built
    for row in report.layers:
        assert (row["kind"], row["layout"], row["first_channel"], row["rotary_dim"]) == ("rotates", "neox", 0, 64)
        np.testing.assert_allclose(row["inv_freq"], served.inv_freq, rtol=2e-6)
        assert row["attention_factor"] == pytest.approx(1.0, abs=1e-6)


def test_the_probe_sees_what_a_wrong_table_would_get_wrong() -> None:
    """The same observation judged against a config with another base: the comparison must fail."""
    config = json.loads(SEED_CONFIG.read_text())
    _, _, observations = observe(config)
    assert config == json.loads(SEED_CONFIG.read_text())  # the probe never edits the caller's config
    rows, verdict = compare(observations, {**config, "rope_theta": 10000.0})
    assert verdict == "differs" and all("inv_freq differs" in row["reason"] for row in rows)
    rows, verdict = compare(observations, {**config, "rope_scaling": None})
    assert verdict == "differs"  # the seed's defect: plain RoPE where the code applies llama3


@pytest.mark.parametrize(("name", "expect"), [
    ("gpt-j-6b.json", {"layout": "gptj", "rotary_dim": 64, "seq_len": 2048}),  # its cache holds n_positions rows
    ("phi-2.json", {"layout": "neox", "rotary_dim": 32}),  # partial rotary 0.4 of 80
    ("deepseek-v2.json", {"layout": "gptj", "rotary_dim": 64, "first_channel": 128}),  # MLA: the rope part last
])
def test_family_configs_match_their_class(name: str, expect: dict[str, Any]) -> None:
    report = probe(FAMILIES / name)
    assert report.verdict == "match", report.layers[0]
    first = report.layers[0]
    assert {key: first[key] for key in expect} == expect


def test_layers_without_rope_are_observed_as_such() -> None:
    report = probe(FAMILIES / "smollm3-3b.json")
    kinds = [row["kind"] for row in report.layers]
    assert kinds[3] == kinds[7] == "no_rotation" and kinds.count("rotates") == 6
    assert report.verdict == "match"


def test_both_sides_of_a_longrope_switch_are_probed(tmp_path: Path) -> None:
    config = {"model_type": "phi3", "hidden_size": 256, "num_attention_heads": 4, "num_hidden_layers": 1,
              "max_position_embeddings": 16384, "original_max_position_embeddings": 4096,
              "rope_scaling": {"type": "longrope", "short_factor": [1.0] * 32,
                               "long_factor": [1.0 + i / 8 for i in range(32)]}}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    report = probe(path)
    lengths = sorted({row["seq_len"] for row in report.layers})
    assert lengths[0] == 4096 and lengths[-1] > 4096 and report.verdict == "match"
    short, long = (next(row for row in report.layers if row["seq_len"] == n) for n in (lengths[0], lengths[-1]))
    assert long["inv_freq"][-1] < short["inv_freq"][-1]  # the long factors divide the low frequencies


def test_cohere_rotates_interleaved_pairs() -> None:
    """Found by the probe: Cohere's code pairs adjacent channels; ropekit said rotate-half."""
    config = {"model_type": "cohere", "hidden_size": 256, "num_attention_heads": 4, "num_hidden_layers": 2}
    assert ropekit.load(config).table.layout == "gptj"
    _, _, observations = observe(config)
    assert {seen.layout for seen in observations} == {"gptj"}
    assert compare(observations, config)[1] == "match"


def test_the_command_line(tmp_path: Path) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "ropekit", "probe", *args], capture_output=True, text=True,
                              check=False, timeout=300)

    matched = run(str(SEED_CONFIG), "--json")
    assert matched.returncode == 0 and json.loads(matched.stdout)["verdict"] == "match"
    remote = run(str(CONFIGS / "published" / "glm-4-9b-chat.json"))
    assert remote.returncode == 2 and "not a class of transformers" in remote.stderr and not remote.stdout
    missing = subprocess.run(
        [sys.executable, "-c", "import sys; sys.modules['torch'] = None; from ropekit.cli import main; "
         f"sys.exit(main(['probe', {str(SEED_CONFIG)!r}]))"], capture_output=True, text=True, check=False)
    assert missing.returncode == 2 and "pip install 'ropekit[reference]'" in missing.stderr


# --- a pair is named by the channels of the projection it mixes (issue #31) -----------------------------


def test_a_rotation_that_permutes_its_output_is_paired_by_its_input_channels() -> None:
    """DeepSeek-V3.2's attention rotates pairs (2j, 2j+1) of the rope sub-head its projection writes and
    writes them half-split (``apply_rotary_pos_emb_interleave``). Read at the output, that is rotate-half;
    traced back to the projection it is interleaved, which is what a forward on the stored weights needs."""
    _, _, seen = observe({"model_type": "deepseek_v32"}, seq_lens=[4096])
    rotating = [layer for layer in seen if layer.kind == "rotates"]
    assert rotating and all((layer.frame, layer.layout) == ("input", "gptj") for layer in rotating)
    assert {(layer.first_channel, layer.rotary_dim, layer.head_dim) for layer in rotating} == {(128, 64, 192)}
    rows, verdict = compare(seen, {"model_type": "deepseek_v32", "qk_rope_head_dim": 64})
    assert verdict == "match", rows  # ropekit serves interleaved pairs of the sub-head
    assert ropekit.load({"model_type": "deepseek_v32", "qk_rope_head_dim": 64}).table.layout == "gptj"
    # the same observation against a table that pairs rotate-half is named as the layout it gets wrong
    rows, verdict = compare(seen, {"model_type": "deepseek_v3", "qk_rope_head_dim": 64, "rope_interleave": False})
    assert verdict == "differs" and all("layout gptj (ropekit neox)" in row["reason"] for row in rows)


def test_a_rotation_traced_through_a_scale_keeps_its_input_pairs() -> None:
    """LongCat-Flash multiplies its query's rope part by a constant after the projection, then interleaves."""
    _, _, seen = observe({"model_type": "longcat_flash"}, seq_lens=[4096])
    assert {(layer.frame, layer.layout) for layer in seen if layer.kind == "rotates"} == {("input", "gptj")}
    assert compare(seen, {"model_type": "longcat_flash", "qk_rope_head_dim": 64})[1] == "match"


def test_a_rotated_block_at_the_end_of_the_head_is_seen_there() -> None:
    """Mistral-4's rope sub-head follows its 64 unrotated channels: ropekit serves that sub-head as the
    table's head (a table over the whole head would put the rotated block at channel 0)."""
    _, _, seen = observe({"model_type": "mistral4"}, seq_lens=[4096])
    rotating = [layer for layer in seen if layer.kind == "rotates"]
    assert {(layer.first_channel, layer.rotary_dim, layer.head_dim) for layer in rotating} == {(64, 64, 128)}
    table = ropekit.load({"model_type": "mistral4", "qk_rope_head_dim": 64}).table
    assert (table.head_dim, table.rotary_dim) == (64, 64)
    assert compare(seen, {"model_type": "mistral4", "qk_rope_head_dim": 64})[1] == "match"


def test_roformer_rotates_with_the_table_ropekit_serves() -> None:
    """RoFormer's attention is its own code (no attention interface, so the probe cannot capture it):
    its own sinusoidal table and its own ``apply_rotary_position_embeddings`` rotate a random query and
    key here, and ropekit's float32 cos/sin (gptj layout) with ``apply_rotary`` give the same states."""
    import torch
    from transformers import RoFormerConfig
    from transformers.models.roformer import modeling_roformer

    published = json.loads((CONFIGS / "published" / "roformer-chinese-base-junnyu-2021-03.json").read_text())
    config = RoFormerConfig(**{**published, "num_hidden_layers": 1, "vocab_size": 32})
    positions = [0, 1, 5, 77, config.max_position_embeddings - 1]
    embedding: Any = modeling_roformer.RoFormerSinusoidalPositionalEmbedding(
        config.max_position_embeddings, config.hidden_size // config.num_attention_heads)  # as RoFormerEncoder builds it
    table = embedding.create_weight()[positions][None, None]  # [1, 1, positions, head]
    attention: Any = modeling_roformer.RoFormerSelfAttention
    generator = np.random.default_rng(0)
    head = config.hidden_size // config.num_attention_heads
    q, k = (generator.standard_normal((1, 1, len(positions), head)).astype(np.float32) for _ in range(2))
    theirs = attention.apply_rotary_position_embeddings(table, torch.from_numpy(q), torch.from_numpy(k))
    served = ropekit.load(published).table
    cos, sin = served.cos_sin(positions, layout="gptj")
    ours = ropekit.apply_rotary(q, k, cos, sin, layout="gptj")
    for mine, reference in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(mine, reference.numpy(), rtol=0, atol=2e-5)
