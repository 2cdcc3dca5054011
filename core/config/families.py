"""What ropekit knows of model families beyond the rope block: defaults their code applies, pair
layouts, layers without RoPE, and every top-level key that bears on RoPE.

Sources are each family's own modeling code (transformers 5.24 for native families; the families'
remote code for ChatGLM, Qwen v1, MiniMax, Phi-3-small). A key listed here is either read by
:mod:`ropekit.config` or refused with the reason given; :func:`screen_keys` refuses any other key
that looks like RoPE (see :mod:`ropekit.config.lookalike`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any, Literal, NamedTuple

__all__ = [
    "ATTENTION_LAYER_TYPES",
    "CLASS_LOCAL_THETA",
    "CLASS_THETA",
    "NO_ROPE_LAYER_TYPES",
    "READ_KEYS",
    "REFUSED_KEYS",
    "REMOTE_FAMILIES",
    "Family",
    "family_for",
]

Layout = Literal["neox", "gptj"]


class Family(NamedTuple):
    """Facts of one family's code that a config does not state.

    ``partial_rotary_factor``: the fraction its code rotates when the config states none.
    ``layout``: how its code pairs channels (``gptj``: interleaved). ``no_rope``: it uses no RoPE
    at all (ALiBi, state-space). ``no_rope_layer_types``: layer types its code does not rotate.
    ``fixed_theta``: a base its code hard-codes (a theta key in the config is then refused).
    ``forced_partial_rotary_factor``: a fraction its code sets whatever the top level says.
    ``unserved``: what its code applies that ropekit's tables cannot express (the config is refused
    with it). ``rotates_all_without_window``: its ``no_rope_layer_types`` rotate after all when the
    config has no sliding window (EXAONE-4: ``if self.sliding_window is None or self.is_sliding``).
    ``rope_types``: the rope_types its code applies (``None``: any), ``code`` the code that says so;
    ``layer_configs``/``no_rope_if``: a per-layer list and the entry values meaning no RoPE there
    (from a :class:`~ropekit.ModelFamily` declaration).
    """

    partial_rotary_factor: float | None = None
    layout: Layout = "neox"
    no_rope: str = ""
    no_rope_layer_types: frozenset[str] = frozenset()
    fixed_theta: float | None = None
    forced_partial_rotary_factor: float | None = None
    unserved: str = ""
    rotates_all_without_window: bool = False
    rope_types: frozenset[str] | None = None
    refused_types: Mapping[str, str] = MappingProxyType({})
    schemes: Mapping[str, str] = MappingProxyType({})
    inert_keys: Mapping[str, str] = MappingProxyType({})
    code: str = ""
    layer_configs: str = ""
    no_rope_if: Mapping[str, Any] = MappingProxyType({})


_GPTJ = Family(layout="gptj", fixed_theta=10000.0)
_HALF = Family(partial_rotary_factor=0.5)
_QUARTER = Family(partial_rotary_factor=0.25)
_INTERLEAVED_HALF = Family(partial_rotary_factor=0.5, layout="gptj")
_INTERLEAVED = Family(layout="gptj")

FAMILIES: Mapping[str, Family] = {
    # interleaved pairs, base 10000 hard-coded (modeling_gptj.py / modeling_codegen.py)
    "gptj": _GPTJ,
    "codegen": _GPTJ,
    # RoFormer: sinusoidal tables over hidden_size // num_attention_heads, base 10000 in its code, applied to
    # interleaved pairs (modeling_roformer.py: create_weight, apply_rotary_position_embeddings)
    "roformer": _GPTJ,
    # GLM: half the head, interleaved (configuration_glm.py setdefault 0.5; modeling_glm.py rotate_half over 0::2, 1::2)
    "glm": _INTERLEAVED_HALF,
    "glm4": _INTERLEAVED_HALF,
    "glm4v": _INTERLEAVED,
    "glm4v_text": _INTERLEAVED,  # its rotary reads partial_rotary_factor from rope_parameters, default 1.0
    "chatglm": Family(partial_rotary_factor=0.5, layout="gptj"),  # THUDM remote code: kv_channels // 2, interleaved
    # GLM-4.5/4.6: half the head, standard rotate-half
    "glm4_moe": _HALF,
    "glm4v_moe": _HALF,
    "glm4v_moe_text": _HALF,
    "persimmon": _HALF,
    "fuyu": _HALF,
    "phi": _HALF,
    "nemotron": _HALF,
    "recurrent_gemma": _HALF,
    "bamba": Family(forced_partial_rotary_factor=0.5),  # configuration_bamba.py overwrites it
    "gpt_neox": _QUARTER,  # rotary_pct default 0.25
    "stablelm": _QUARTER,
    "qwen3_next": _QUARTER,
    "qwen3_5": _QUARTER,
    "qwen3_5_text": _QUARTER,
    "qwen3_5_moe": _QUARTER,
    "qwen3_5_moe_text": _QUARTER,
    # complex-number rotation of adjacent channels (view_as_complex): interleaved pairs
    "llama4": Family(layout="gptj"),
    "llama4_text": Family(layout="gptj"),
    "deepseek_v2": Family(layout="gptj"),
    "deepseek_v3": Family(layout="gptj"),  # rope_interleave defaults to true
    "kimi_k2": Family(layout="gptj"),
    # Baichuan-7B's code hard-codes base 10000 (the 13B checkpoints use ALiBi: config.remote decides)
    "baichuan": Family(fixed_theta=10000.0),
    # interleaved pairs (modeling_cohere.py rotate_half over x[..., ::2] / x[..., 1::2], cos/sin
    # repeat_interleave'd; observed by `ropekit probe`); Cohere-2's full_attention layers are NoPE
    "cohere": Family(layout="gptj"),
    "cohere2": Family(layout="gptj", no_rope_layer_types=frozenset({"full_attention"})),
    # Observed by `ropekit probe` over every class (scripts/probe_sweep.py, tests/data/probe/sweep.json):
    # interleaved pairs (rotate_half over x[..., 0::2] / x[..., 1::2])
    "ernie4_5": Family(layout="gptj"),
    "ernie4_5_moe": Family(layout="gptj"),
    "ernie4_5_vl_moe_text": Family(layout="gptj"),
    "glm_ocr_text": Family(layout="gptj"),
    "helium": Family(layout="gptj"),
    "blt_global_transformer": Family(layout="gptj"),
    "blt_patcher": Family(layout="gptj"),
    "openai_privacy_filter": Family(layout="gptj"),
    # modeling_hy_v4_vl.py: the MLA rope sub-head pairs (0::2, 1::2), cos/sin repeat_interleave'd (HY-V4 itself
    # pairs rotate-half)
    "hy_v4_vl_text": Family(layout="gptj"),
    # modeling_moonshine.py: rotate_half over 0::2 / 1::2, cos/sin repeat_interleave'd (its text decoder)
    "moonshine": Family(layout="gptj"),
    # ... full_attention layers that apply no rotation (only sliding layers rotate)
    "afmoe": Family(no_rope_layer_types=frozenset({"full_attention"})),
    # modeling_nanochat.py: rotate_half returns cat(x2, -x1), a rotation by -angle (the probe sees pairs turning
    # the other way); a table of angles applied by a standard forward would turn them back
    "nanochat": Family(unserved="its code rotates every pair the other way (rotate_half with flipped signs: a "
                                "rotation by -angle), which ropekit's tables (cos, sin of +angle) do not express"),
    # modeling_lara_mini.py: only "sliding_attention" layers are handed position_embeddings
    "lara_mini": Family(no_rope_layer_types=frozenset({"full_attention"})),
    # modeling_exaone4.py / _exaone_moe / _kolibri1: "global NoPE for hybrid attention model", so with
    # "sliding_window": null (EXAONE-4.0-1.2B) every layer rotates
    "exaone4": Family(no_rope_layer_types=frozenset({"full_attention"}), rotates_all_without_window=True),
    "exaone_moe": Family(no_rope_layer_types=frozenset({"full_attention"}), rotates_all_without_window=True),
    "kolibri1": Family(no_rope_layer_types=frozenset({"full_attention"}), rotates_all_without_window=True),
    "flint": Family(no_rope_layer_types=frozenset({"full_attention"})),
    "cohere2_moe": Family(layout="gptj", no_rope_layer_types=frozenset({"full_attention"})),
    # ... and no layer that rotates at all
    "inkling2_text": Family(no_rope_layer_types=frozenset({"hybrid", "hybrid_sliding"})),
    # no RoPE anywhere
    "bloom": Family(no_rope="Bloom uses ALiBi, not RoPE"),
    "mpt": Family(no_rope="MPT uses ALiBi or learned positions, not RoPE"),
    "jamba": Family(no_rope="Jamba's attention layers apply no rotary embedding"),
    "zamba": Family(no_rope="Zamba's attention layers apply no rotary embedding"),
    "nemotron_h": Family(no_rope="Nemotron-H's attention layers apply no rotary embedding"),
    "mamba": Family(no_rope="Mamba has no attention"),
    "mamba2": Family(no_rope="Mamba-2 has no attention"),
    "falcon_mamba": Family(no_rope="Falcon-Mamba has no attention"),
    "rwkv": Family(no_rope="RWKV has no attention"),
}

_DEFAULT = Family()

CHATGLM_V1 = Family(layout="neox")
"""ChatGLM-6B (v1) with ``position_encoding_2d`` false: ``RotaryEmbedding(hidden_size // num_attention_heads,
base=10000)`` over the whole head, ``rotate_half`` over its halves (THUDM/chatglm-6b ``modeling_chatglm.py``)."""

REMOTE_FAMILIES: Mapping[str, str] = {
    "chatglm": "ChatGLM2/3 and GLM-4 remote code (modeling_chatglm.py): rotary over half of kv_channels, "
               "interleaved pairs, base 10000 * rope_ratio",
    "qwen": "Qwen v1 remote code (modeling_qwen.py): rotary_pct of kv_channels, base rotary_emb_base",
    "phi3small": "Phi-3-small remote code (modeling_phi3_small.py): rope_embedding_base, rope_position_scale",
    "minimax_m1": "MiniMax-M1 remote code (modeling_minimax_m1.py): rotary_dim of head_dim, base rope_theta",
    "kimi_k2": "Kimi-K2 remote code, DeepSeek-V3's modeling code: interleaved pairs (rope_interleave)",
    "baichuan": "Baichuan-7B / Baichuan2-7B remote code (modeling_baichuan.py): rotate-half over the whole head, "
                "base 10000 hard-coded; the 13B checkpoints' code uses ALiBi (decided in ropekit.config.remote)",
}
"""Remote-code families (model_types transformers has no class for) whose RoPE ropekit has checked
against a numpy port of the family's own modeling code (``scripts/family_reference.py``). Any other
model_type transformers lacks is refused in strict mode (:mod:`ropekit.config.identify`)."""


class _ClassTheta(Mapping[str, float]):
    """Read-only ``model_type -> base`` for the classes whose default base is not 10000, derived
    from ``theta`` in ``transformers_classes.json`` (the base a default instance of the class
    carries; for nested per-layer-type defaults, the full-attention base), read on first use."""

    @functools.cached_property
    def _values(self) -> dict[str, float]:
        from .classes import class_facts, model_types

        found: dict[str, float] = {}
        for model_type in model_types():
            facts = class_facts(model_type)
            theta = facts.theta if facts is not None else None
            if isinstance(theta, Mapping):
                theta = theta.get("full_attention")
            if theta is not None and float(theta) != 10000.0:
                found[model_type] = float(theta)
        return found

    def __getitem__(self, key: str) -> float:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


CLASS_THETA: Mapping[str, float] = _ClassTheta()
"""The base a family's transformers config class uses when the config states none, for the classes
where it is not 10000 (transformers 5.24, derived by ``scripts/transformers_classes.py``, never typed).
transformers drops values equal to the class default when it saves a composite config, so published
Gemma-3 text_configs state no rope_theta at all."""

CLASS_LOCAL_THETA: Mapping[str, float] = {
    "gemma3_text": 1e4, "gemma3n_text": 1e4, "diffusion_gemma_text": 1e4, "embedding_gemma2_text": 1e4,
    "t5gemma2_text": 1e4, "t5gemma2_decoder": 1e4, "gemma4_text": 1e4, "gemma4_unified_text": 1e4, "dory": 1e4,
    "laguna": 1e4, "lfm3": 1e4, "mellum": 1e4, "mimo_v2_flash": 1e4, "neomme": 1e4,
}
"""The sliding layers' base by class default. For the Gemma family (gemma*), a flat config
gets two tables, as ``rope_local_base_freq`` gives: the global one, and the sliding one at this
base without the legacy scaling block (Gemma-3's config class applies it to full layers only)."""


def family_for(model_type: object) -> Family:
    """The family facts for ``model_type`` (defaults: full rotary, neox pairs, RoPE on every layer)."""
    return FAMILIES.get(model_type, _DEFAULT) if isinstance(model_type, str) else _DEFAULT


ATTENTION_LAYER_TYPES = frozenset({
    "full_attention", "sliding_attention", "chunked_attention", "window_attention", "indexed_attention",
    "compressed_sparse_attention", "heavily_compressed_attention", "hybrid", "hybrid_sliding",
    "reference_sliding_attention", "attention",
})
"""Layer types that attend with the layer type's rope table (transformers' names)."""

NO_ROPE_LAYER_TYPES = frozenset({"linear_attention", "conv", "mamba", "mlp", "moe", "recurrent"})
"""Layer types that apply no rotary embedding (linear attention, convolutions, state-space, MLP-only)."""

READ_KEYS = frozenset({
    # the rope block and its geometry
    "rope_scaling", "rope_parameters", "rope_theta", "partial_rotary_factor", "head_dim", "hidden_size",
    "num_attention_heads", "num_hidden_layers", "max_position_embeddings", "original_max_position_embeddings",
    "model_type", "text_config", "layer_types", "sliding_window_pattern", "_sliding_window_pattern",
    "rope_local_base_freq", "global_head_dim",
    "qk_rope_head_dim", "qk_nope_head_dim", "rope_interleave",
    # GPT-NeoX / Qwen v1 / GPT-J / CodeGen / MiniMax / ChatGLM / Phi-3-small names for the same facts
    "rotary_pct", "rotary_emb_base", "rotary_dim", "rotary", "n_embd", "n_head", "n_layer", "n_positions",
    "num_layers", "kv_channels", "rope_ratio", "original_rope", "seq_length", "use_dynamic_ntk", "use_logn_attn",
    "position_encoding_2d",
    "rope_embedding_base", "rope_position_scale", "rotary_value",
    # which layers rotate
    "no_rope_layers", "no_rope_layer_interval", "attn_type_list", "full_attention_interval", "full_attn_idxs",
    "attn_layer_indices", "alibi", "position_embedding_type", "use_mem_rope",
})
"""Top-level keys ropekit reads (in ``text_config`` too); any other RoPE-looking key is refused."""

REFUSED_KEYS: Mapping[str, str] = {
    "layer_rope_theta": "a per-layer theta list (Granite SWA, Muse) is not served by ropekit",
    "compress_rope_theta": "DeepSeek-V4's compressed-attention theta is not served by ropekit",
    "rope_scaling_layers": "scaling only some layers (Molmo2) is not served by ropekit",
    "rotary_emb_scale_base": "xPos decay (rotary_emb_scale_base) changes q/k magnitudes; not served by ropekit",
    "rotary_emb_fraction": "NomicBERT's rotary keys are not read by ropekit",
    "rotary_emb_interleaved": "NomicBERT's rotary keys are not read by ropekit",
    "rotary_scaling_factor": "NomicBERT's rotary keys are not read by ropekit",
    "rope_traditional": "MLX's pairing flag is not read by ropekit; state the layout of the checkpoint's own code",
    "rope_pct": "StableLM-epoch's rope_pct is not read by ropekit (transformers' stablelm says partial_rotary_factor)",
    "use_rope": "a switch for RoPE itself is not read by ropekit",
    "pos_emb": "Megatron's pos_emb is not read by ropekit",
}
"""Top-level keys that bear on RoPE and that ropekit does not serve: refused, with the reason."""


def layout_of(family: Family, interleave: Any) -> Layout:
    """The pair layout: an explicit ``rope_interleave`` wins over the family's."""
    if interleave is None:
        return family.layout
    return "gptj" if interleave else "neox"
