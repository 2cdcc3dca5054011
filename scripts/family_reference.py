"""Faithful float64 ports of remote-code families' own RoPE inverse-frequency tables.

Each function reads a raw ``config.json`` dict the way the family's *own* modeling code reads it
(not the way transformers' native port, if any, reads it) and returns a :class:`FamilyTable`.
The source lines each port follows are quoted in its docstring; where the family code is ambiguous
or was not read, the docstring says so. Everything is computed in float64; the family code computes
in float32, so parity is to be judged at relative 2e-6.

``main()`` writes ``tests/data/configs/families/reference.json``::

    {family_file: {"inv_freq": [...], "rotary_dim": n, "layout": "neox" | "gptj",
                   "attention_factor": x, "notes": "..."}}

``rotary_dim`` is the number of head dimensions that are rotated (``2 * len(inv_freq)``); ``layout``
says how those dimensions are paired: ``neox`` = (i, i + rotary_dim/2) (rotate_half), ``gptj`` =
(2i, 2i + 1) (rotate_every_two / interleaved). Sequence-length dependent entries (Qwen v1 dynamic NTK)
are written once per sequence length under the key ``"<file>@seq_len=<n>"``.

Run: ``python scripts/family_reference.py`` (numpy only).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
FAMILIES = ROOT / "tests" / "data" / "configs" / "families"


@dataclass(frozen=True)
class FamilyTable:
    """One family's table: what the family's own code multiplies positions by."""

    inv_freq: np.ndarray
    rotary_dim: int
    layout: str
    attention_factor: float
    notes: str

    def to_json(self) -> dict[str, Any]:
        return {
            "inv_freq": [float(x) for x in self.inv_freq],
            "rotary_dim": self.rotary_dim,
            "layout": self.layout,
            "attention_factor": self.attention_factor,
            "notes": self.notes,
        }


def _plain(base: float, dim: int) -> np.ndarray:
    """``1 / base ** (arange(0, dim, 2) / dim)`` in float64 (the shared kernel of every family below)."""
    exponents = np.arange(0, dim, 2, dtype=np.float64) / float(dim)
    return 1.0 / np.power(float(base), exponents)


def bailing_v1(config: Mapping[str, Any]) -> FamilyTable:
    """Ling v1 remote code (inclusionAI/Ling@5ccaeae0 models/modeling_bailing_moe.py): ``self.head_dim =
    config.head_dim or self.hidden_size // self.num_heads`` (L485), ``BailingMoeRotaryEmbedding(self.head_dim,
    base=self.rope_theta)`` (L501-505) with ``inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2).float()
    / self.dim))`` (L127), ``cat((freqs, freqs))`` and ``rotate_half`` over halves (L140-142, L289-293);
    ``rope_scaling`` ``type`` linear / dynamic as Llama's (L508-523; yarn is DeepSeek-V2's, not ported here)."""
    dim = int(config.get("head_dim") or int(config["hidden_size"]) // int(config["num_attention_heads"]))
    return _llama_style(config, None, dim, float(config.get("rope_theta", 10000.0)), "Ling v1", ("linear", "dynamic"))


def bailing_v1_yarn(config: Mapping[str, Any]) -> FamilyTable:
    """Ling v1's YaRN (inclusionAI/Ling@5ccaeae0 models/modeling_bailing_moe.py L231-285, DeepSeek-V2's
    ``DeepseekV2YarnRotaryEmbedding``): constructor defaults ``original_max_position_embeddings=4096, beta_fast=32,
    beta_slow=1, mscale=1, mscale_all_dim=0`` (L240-244), each replaced by the block's key when stated (L524-535);
    ``yarn_find_correction_range`` with floor / ceil clamped to ``[0, dim - 1]`` (L210-213), ``inv_freq_mask = 1.0 -
    yarn_linear_ramp_mask(low, high, dim // 2)``, ``inv_freq = freq_inter * (1 - inv_freq_mask) + freq_extra *
    inv_freq_mask``; cos/sin x ``yarn_get_mscale(factor, mscale) / yarn_get_mscale(factor, mscale_all_dim)`` with
    ``yarn_get_mscale(s, m) = 1.0 if s <= 1 else 0.1 * m * math.log(s) + 1.0`` (L216-219, L278-284)."""
    dim = int(config.get("head_dim") or int(config["hidden_size"]) // int(config["num_attention_heads"]))
    base, block = float(config.get("rope_theta", 10000.0)), config["rope_scaling"]
    factor, original = float(block["factor"]), int(block.get("original_max_position_embeddings", 4096))
    beta_fast, beta_slow = float(block.get("beta_fast", 32)), float(block.get("beta_slow", 1))
    mscale, mscale_all_dim = float(block.get("mscale", 1)), float(block.get("mscale_all_dim", 0))

    def correction_dim(rotations: float) -> float:
        return (dim * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = max(math.floor(correction_dim(beta_fast)), 0), min(math.ceil(correction_dim(beta_slow)), dim - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0.0, 1.0)
    mask = 1.0 - ramp
    extra = _plain(base, dim)
    inv_freq = extra / factor * (1 - mask) + extra * mask

    def get_mscale(scale: float, weight: float) -> float:
        return 1.0 if scale <= 1 else 0.1 * weight * math.log(scale) + 1.0

    attention = get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim)
    return FamilyTable(inv_freq, dim, "neox", attention, f"Ling v1 yarn: original {original}, x {attention:.6g}")


def pangu_embedded(config: Mapping[str, Any]) -> FamilyTable:
    """openPangu-Embedded remote code (IDLEOAK/openpangu-lightweight-methods@26a4a87d modeling_openpangu_dense.py, a
    copy of the hub file): transformers' rope functions over ``getattr(config, "head_dim", None) or hidden_size //
    num_attention_heads``, ``inv_freq = 1 / rope_theta ** (arange(0, dim, 2) / dim)``, rotate-half."""
    dim = int(config.get("head_dim") or int(config["hidden_size"]) // int(config["num_attention_heads"]))
    return _llama_style(config, None, dim, float(config.get("rope_theta", 16000000.0)), "openPangu-Embedded", ())


def molmo(config: Mapping[str, Any]) -> FamilyTable:
    """Molmo remote code (modeling_molmo.py): ``MolmoForCausalLM.__init__`` builds its model config with
    ``rope_impl="llama"`` (L2025) and ``rope_theta=config.rope_theta`` (L2044); ``RotaryEmbedding``: ``dim =
    d_model // n_heads``, ``inv_freq = 1.0 / (rope_theta ** (arange(0, dim, 2) / dim))`` (L123), the ``llama``
    branch rotate-half (L126-149)."""
    dim = int(config["hidden_size"]) // int(config["num_attention_heads"])
    return _llama_style(config, None, dim, float(config["rope_theta"]), "Molmo (rope_impl llama)", ())


def phi4mm(config: Mapping[str, Any], seq_len: int | None = None) -> FamilyTable:
    """Phi-4-multimodal remote code (modeling_phi4mm.py, ``Phi4MMLongRoPEScaledRotaryEmbedding``, Phi-3's):
    ``rotary_ndims = int(head_dim * config.partial_rotary_factor)``; ``if seq_len >
    original_max_position_embeddings: long_factor else short_factor``; ``inv_freq = 1.0 / (ext_factors *
    base ** (arange(0, dim, 2) / dim))``; cos/sin x ``sqrt(1 + log(max / original) / log(original))``; the
    first ``rotary_ndims`` channels, rotate-half."""
    head = int(config["hidden_size"]) // int(config["num_attention_heads"])
    return _phi3_longrope(config, seq_len, int(head * float(config["partial_rotary_factor"])), "Phi-4-mm longrope")


def qwen2_flat(config: Mapping[str, Any], family: str) -> FamilyTable:
    """A remote family whose config is a ``Qwen2Config`` (dots.ocr's ``DotsOCRConfig(Qwen2Config)``) and whose language
    model is transformers' Qwen2: rotate-half over ``head_dim`` (``hidden_size // num_attention_heads`` unless stated)
    at ``rope_theta``."""
    dim = int(config.get("head_dim") or int(config["hidden_size"]) // int(config["num_attention_heads"]))
    return _llama_style(config, None, dim, float(config.get("rope_theta", 10000.0)), family, ())


# --------------------------------------------------------------------------------------------------
# ChatGLM2 / ChatGLM3 / GLM-4 (THUDM remote code, modeling_chatglm.py)
# --------------------------------------------------------------------------------------------------


def chatglm(config: Mapping[str, Any], *, position_interpolation: bool = False) -> FamilyTable:
    """ChatGLM2/3 and GLM-4 remote code.

    THUDM modeling_chatglm.py, ``ChatGLMModel.__init__`` (read in a copy of THUDM/chatglm3-6b and in
    several GLM-4 derived copies)::

        rotary_dim = config.hidden_size // config.num_attention_heads if config.kv_channels is None \
            else config.kv_channels
        self.rotary_pos_emb = RotaryEmbedding(rotary_dim // 2, rope_ratio=config.rope_ratio,
                                              original_impl=config.original_rope, ...)

    ``RotaryEmbedding.forward_impl`` (ChatGLM3-6B-32k/128k, GLM-4 revisions)::

        base = base * self.rope_ratio                       # base defaults to 10000
        theta = 1.0 / (base ** (torch.arange(0, n_elem, 2, dtype=torch.float) / n_elem))

    with ``n_elem = rotary_dim // 2`` (so half the head is rotated and the denominator is the rotated
    width, not the head width). ``apply_rotary_pos_emb`` pairs adjacent elements::

        xshaped = x.reshape(sq, -1, np, rot_dim // 2, 2)    # (x[2i], x[2i+1]) -> gptj layout
        return torch.cat((x_out2, x_pass), dim=-1)          # rotated part first, rest passes

    ``original_rope`` is stored (``self.original_impl``) but never read by ``forward_impl``.

    ``position_interpolation=True`` ports the *ChatGLM2-6B-32k* revision instead, whose
    ``forward_impl`` keeps base 10000 and divides positions::

        seq_idx = torch.arange(seq_len, dtype=dtype, device=device) / self.rope_ratio

    which is the same as dividing theta by ``rope_ratio``. The config key is the same (``rope_ratio``);
    only the remote code revision tells the two semantics apart.
    """
    kv_channels = config.get("kv_channels")
    head_rot = config["hidden_size"] // config["num_attention_heads"] if kv_channels is None else int(kv_channels)
    n_elem = head_rot // 2
    rope_ratio = float(config.get("rope_ratio", 1))  # ChatGLMConfig default: rope_ratio=1
    if position_interpolation:
        inv_freq = _plain(10000.0, n_elem) / rope_ratio
        how = f"positions / rope_ratio ({rope_ratio:g}), base 10000 (ChatGLM2-6B-32k revision)"
    else:
        inv_freq = _plain(10000.0 * rope_ratio, n_elem)
        how = f"base = 10000 * rope_ratio = {10000.0 * rope_ratio:g}"
    notes = (
        f"THUDM remote code: rotates the first {n_elem} of {head_rot} head dims (kv_channels // 2), "
        f"exponents over {n_elem}; {how}; interleaved pairs. The rope cache is built for "
        "config.seq_length positions and cast to the checkpoint dtype (bf16/fp16) before use."
    )
    return FamilyTable(inv_freq, n_elem, "gptj", 1.0, notes)


# --------------------------------------------------------------------------------------------------
# MiniMax-Text-01 / MiniMax-M1 (remote code)
# --------------------------------------------------------------------------------------------------


def minimax(config: Mapping[str, Any]) -> FamilyTable:
    """MiniMax-M1 remote code (modeling_minimax_m1.py; MiniMax-Text-01 is the same architecture).

    ``MiniMaxM1Attention.__init__``::

        self.head_dim = getattr(config, 'head_dim', self.hidden_size // self.num_heads)
        self.rotary_dim = getattr(config, 'rotary_dim', self.head_dim)
        self.rotary_emb = MiniMaxM1RotaryEmbedding(self.rotary_dim, ..., base=self.rope_theta)

    ``MiniMaxM1RotaryEmbedding.__init__`` (copied from Mistral)::

        inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, dtype=torch.int64).float() / self.dim))

    ``apply_rotary_pos_emb`` rotates ``q[..., :rot_dim]`` with rotate_half (neox) and passes the rest.
    Only layers with ``attn_type_list[i] == 1`` are softmax attention with RoPE; ``0`` is lightning
    (linear) attention without any positional rotation.
    """
    head_dim = int(config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"])
    rotary_dim = int(config.get("rotary_dim", head_dim))
    inv_freq = _plain(float(config["rope_theta"]), rotary_dim)
    types: list[int] | None = config.get("attn_type_list")
    if types is None:
        where = "no attn_type_list: every layer is softmax attention"
    else:
        rope_layers = [i for i, t in enumerate(types) if t == 1]
        where = f"{len(rope_layers)} of {len(types)} layers (attn_type_list == 1) carry RoPE: {rope_layers}"
    notes = (
        f"MiniMax remote code: rotary_dim {rotary_dim} of head_dim {head_dim}, exponents over rotary_dim, "
        f"base rope_theta; neox pairing on the first rotary_dim dims. {where}. transformers' native "
        "`minimax` port ignores rotary_dim (full-head RoPE), so it disagrees with this table."
    )
    return FamilyTable(inv_freq, rotary_dim, "neox", 1.0, notes)


# --------------------------------------------------------------------------------------------------
# Qwen (v1) remote code (modeling_qwen.py)
# --------------------------------------------------------------------------------------------------


def qwen_ntk_alpha(seq_len: int, seq_length: int) -> float:
    """Qwen v1 ``QWenModel.get_ntk_alpha`` (older revisions inline the same three lines)::

    context_value = math.log(true_seq_len / self.seq_length, 2) + 1
    ntk_alpha = 2 ** math.ceil(context_value) - 1
    ntk_alpha = max(ntk_alpha, 1)
    """
    context_value = math.log(seq_len / seq_length, 2) + 1
    ntk_alpha = 2 ** math.ceil(context_value) - 1
    return float(max(ntk_alpha, 1))


def qwen_logn(position: int, seq_length: int) -> float:
    """Qwen v1 query scale at 0-based ``position`` (``QWenAttention.__init__``)::

    logn_list = [math.log(i, self.seq_length) if i > self.seq_length else 1 for i in range(1, 32768)]

    indexed by key position (``logn_tensor[:, seq_start:seq_end]``), i.e. ``i = position + 1``.
    The buffer stops at 32767 positions.
    """
    i = position + 1
    return math.log(i, seq_length) if i > seq_length else 1.0


def qwen(config: Mapping[str, Any], seq_len: int | None = None) -> FamilyTable:
    """Qwen v1 remote code (Qwen/Qwen-7B, -14B, -VL ...; modeling_qwen.py).

    ``QWenModel.__init__``::

        if config.rotary_pct == 1.0:
            self.rotary_ndims = None
        else:
            assert config.rotary_pct < 1
            self.rotary_ndims = int(config.kv_channels * config.rotary_pct)
        dim = self.rotary_ndims if self.rotary_ndims is not None else config.kv_channels
        self.rotary_emb = RotaryEmbedding(dim, base=config.rotary_emb_base)

    ``RotaryEmbedding.update_rotary_pos_emb_cache``::

        base = self.base * ntk_alpha ** (self.dim / (self.dim - 2))
        self.inv_freq = 1.0 / (base ** (torch.arange(0, self.dim, 2, ...).float() / self.dim))
        emb = torch.cat((freqs, freqs), dim=-1)             # rotate_half pairing (neox)

    ``ntk_alpha`` is 1 in training or when ``use_dynamic_ntk`` is false; otherwise it is computed from
    the prefill length (``kv_seq_len`` when there is no past; per sample from the attention mask in
    newer revisions) and reused, cached, for every decode step after it. ``seq_len`` here is that
    prefill length; ``None`` means alpha = 1.
    """
    kv_channels = int(config["kv_channels"])
    rotary_pct = float(config.get("rotary_pct", 1.0))
    dim = kv_channels if rotary_pct == 1.0 else int(kv_channels * rotary_pct)
    seq_length = int(config["seq_length"])
    alpha = 1.0
    if seq_len is not None and config.get("use_dynamic_ntk", False):
        alpha = qwen_ntk_alpha(seq_len, seq_length)
    base = float(config["rotary_emb_base"]) * alpha ** (dim / (dim - 2))
    inv_freq = _plain(base, dim)
    logn = ""
    if config.get("use_logn_attn", False):
        logn = (
            f" use_logn_attn: queries at 0-based position p are multiplied by log(p+1)/log({seq_length}) "
            f"when p+1 > {seq_length} (not a cos/sin scale; positions past 32766 are out of the buffer)."
        )
    at = "no sequence length (alpha 1)" if seq_len is None else f"prefill length {seq_len}"
    notes = (
        f"Qwen v1 remote code at {at}: ntk_alpha {alpha:g}, base = rotary_emb_base * alpha**(dim/(dim-2)) "
        f"= {base!r}; dim {dim} (kv_channels {kv_channels} * rotary_pct {rotary_pct:g}); neox pairing; "
        f"alpha = max(2**ceil(log2(L/seq_length)+1)-1, 1) for seq_length {seq_length}.{logn}"
    )
    return FamilyTable(inv_freq, dim, "neox", 1.0, notes)


# --------------------------------------------------------------------------------------------------
# GPT-J / CodeGen (transformers' port of the mesh-transformer-jax layout)
# --------------------------------------------------------------------------------------------------


def gptj(config: Mapping[str, Any]) -> FamilyTable:
    """GPT-J and CodeGen (transformers modeling_gptj.py / modeling_codegen.py, identical code).

    ``create_sinusoidal_positions``::

        inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, dtype=torch.int64) / dim))

    ``GPTJRotaryEmbedding.__init__``: ``self.pos_embd_dim = config.rotary_dim or config.hidden_size``.
    ``GPTJAttention.forward`` rotates ``query[..., : self.rotary_dim]`` with ``rotate_every_two``
    (``x[..., ::2]`` / ``x[..., 1::2]`` -> gptj/interleaved pairing). The base 10000 is hard-coded:
    no config key sets it. A null ``rotary_dim`` makes transformers build a table of ``hidden_size``
    dims and rotate the whole head, which only broadcasts when n_head == 1: refuse it, do not guess.
    """
    rotary_dim = config.get("rotary_dim")
    if rotary_dim is None:
        raise ValueError("rotary_dim is null: transformers' GPT-J/CodeGen would use hidden_size (ambiguous)")
    dim = int(rotary_dim)
    head_dim = int(config["n_embd"]) // int(config["n_head"])
    notes = (
        f"GPT-J/CodeGen: rotary_dim {dim} of head_dim {head_dim} (n_embd / n_head), base 10000 hard-coded, "
        "rotate_every_two (interleaved) on the first rotary_dim dims."
    )
    return FamilyTable(_plain(10000.0, dim), dim, "gptj", 1.0, notes)


# --------------------------------------------------------------------------------------------------
# Phi-3-small (remote code, positional_embedding.py)
# --------------------------------------------------------------------------------------------------


def phi3_small(config: Mapping[str, Any], seq_len: int | None = None) -> FamilyTable:
    """Phi-3-small remote code (microsoft/Phi-3-small-*; positional_embedding.py).

    ``RotaryEmbedding.from_config``::

        dim_model=config.hidden_size // config.num_attention_heads,
        max_seq_len=config.max_position_embeddings,
        base=config.rope_embedding_base,
        position_scale=config.rope_position_scale,
        (longrope_config from config.rope_scaling when not None)

    Plain path: ``inv_freq = 1.0 / (base ** (torch.arange(0, dim_model, 2).float() / self.dim_model))``
    and ``t = torch.arange(seq_len) * self.position_scale`` -> effective inv_freq = position_scale * inv_freq.

    LongRoPE path (``rope_scaling`` set): ``position_scale`` is *not* applied; ``seq_len >
    original_max_position_embeddings`` picks ``long_factors`` and ``mscale = long_mscale if long_mscale > 0
    else sqrt(1 + log(max_position_embeddings / original) / log(original))``, else ``short_factors`` and
    ``short_mscale if short_mscale > 0 else 1.0``; ``inv_freq = 1 / (factors * base ** (arange / dim))``;
    cos and sin are multiplied by mscale.
    """
    dim = int(config["hidden_size"]) // int(config["num_attention_heads"])
    base = float(config["rope_embedding_base"])
    scaling = config.get("rope_scaling")
    if scaling is None:
        scale = float(config.get("rope_position_scale", 1.0))
        notes = (
            f"Phi-3-small remote code: head_dim {dim}, base rope_embedding_base {base:g}, positions multiplied "
            f"by rope_position_scale {scale:g} (folded into inv_freq here); neox pairing, full head."
        )
        return FamilyTable(_plain(base, dim) * scale, dim, "neox", 1.0, notes)
    original = int(scaling["original_max_position_embeddings"])
    use_long = seq_len is not None and seq_len > original
    factors = np.asarray(scaling["long_factor" if use_long else "short_factor"], dtype=np.float64)
    if use_long:
        explicit = float(scaling.get("long_mscale", -1))
        ratio = float(config["max_position_embeddings"]) / original
        computed = 1.0 if ratio <= 1.0 else math.sqrt(1 + math.log(ratio) / math.log(original))
        mscale = explicit if explicit > 0 else computed
    else:
        explicit = float(scaling.get("short_mscale", -1))
        mscale = explicit if explicit > 0 else 1.0
    notes = (
        f"Phi-3-small longrope ({'long' if use_long else 'short'} factors at seq_len {seq_len}); "
        "rope_position_scale is ignored on this path."
    )
    return FamilyTable(1.0 / (factors * np.power(base, np.arange(0, dim, 2) / dim)), dim, "neox", mscale, notes)


# --------------------------------------------------------------------------------------------------
# Remote-code families served by built-in declarations (plugins/families/)
# --------------------------------------------------------------------------------------------------


def _llama_style(config: Mapping[str, Any], seq_len: int | None, dim: int, base: float, family: str,
                 types: tuple[str, ...]) -> FamilyTable:
    """The Llama-4.40-era rotary most remote families copy: ``inv_freq = 1 / base ** (arange(0, dim, 2)
    / dim)``, ``cat(freqs, freqs)`` with ``rotate_half`` (neox pairs) over ``dim``; ``rope_scaling``
    ``{"type", "factor"}``: ``linear`` divides positions by factor (folded into inv_freq here);
    ``dynamic`` at ``seq_len > max_position_embeddings`` grows the base to
    ``base * (factor * seq_len / max_pos - (factor - 1)) ** (dim / (dim - 2))``."""
    scaling = config.get("rope_scaling")
    kind = scaling.get("type", scaling.get("rope_type")) if isinstance(scaling, Mapping) else None
    if kind is not None and kind not in types:
        raise ValueError(f"{family}'s code raises for rope_scaling type {kind!r}")
    inv_freq = _plain(base, dim)
    notes = f"{family}: rotate-half over {dim} dims, base {base:g}"
    if kind == "linear":
        inv_freq = inv_freq / float(scaling["factor"])
        notes += f", positions / {scaling['factor']}"
    elif kind == "dynamic":
        factor, longest = float(scaling["factor"]), int(config["max_position_embeddings"])
        if seq_len is not None and seq_len > longest:
            grown = base * ((factor * seq_len / longest) - (factor - 1)) ** (dim / (dim - 2))
            inv_freq = _plain(grown, dim)
            notes += f", dynamic NTK at seq_len {seq_len}: base {grown:.6g}"
        else:
            notes += f", dynamic NTK inactive at seq_len {seq_len} (<= {longest})"
    return FamilyTable(inv_freq, dim, "neox", 1.0, notes)


def internlm2(config: Mapping[str, Any], seq_len: int | None = None) -> FamilyTable:
    """InternLM2 / InternLM2.5 remote code (InternLM/xtuner@98c193e3 ``_lite/modelings/internlm2/``).

    ``modeling_internlm2.py``: ``self.head_dim = self.hidden_size // self.num_heads`` (L238);
    ``InternLM2RotaryEmbedding(..., base=self.rope_theta)`` with ``inv_freq = 1.0 / (self.base **
    (torch.arange(0, self.dim, 2, dtype=torch.int64).float() / self.dim))`` (L108); ``_init_rope``:
    ``"linear"`` -> ``position_ids.float() / self.scaling_factor`` (L133-135), ``"dynamic"`` ->
    ``seq_len = torch.max(position_ids) + 1; if seq_len > self.max_position_embeddings: base = self.base
    * ((self.scaling_factor * seq_len / self.max_position_embeddings) - (self.scaling_factor - 1)) **
    (self.dim / (self.dim - 2))`` (L144-152), anything else ``raise ValueError`` (L285). ``rotate_half``
    over halves (L158-162). ``configuration_internlm2.py``: ``rope_theta=10000`` (L114).
    """
    dim = int(config["hidden_size"]) // int(config["num_attention_heads"])
    return _llama_style(config, seq_len, dim, float(config.get("rope_theta", 10000)), "InternLM2",
                        ("linear", "dynamic"))


def mimo(config: Mapping[str, Any]) -> FamilyTable:
    """MiMo remote code (XiaomiMiMo/MiMo@43be2d82 ``configuration_mimo.py``, ``modeling_mimo.py``):
    ``class MiMoConfig(Qwen2Config)`` and ``from transformers.models.qwen2.modeling_qwen2 import
    Qwen2Attention, ...``: transformers' Qwen2 rotary over ``head_dim`` (``getattr(config, "head_dim",
    None) or hidden_size // num_attention_heads``), rotate-half, base ``rope_theta``; its MTP layers
    are Qwen2 attention layers with the same rotary."""
    dim = int(config.get("head_dim") or int(config["hidden_size"]) // int(config["num_attention_heads"]))
    return _llama_style(config, None, dim, float(config["rope_theta"]), "MiMo (transformers' Qwen2 code)", ())


def phi3_v(config: Mapping[str, Any], seq_len: int | None = None) -> FamilyTable:
    """Phi-3-vision remote code (modeling_phi3_v.py; copy Aritra02091998/Phi-3-vision-128k-instruct-...@16e16b08).

    ``Phi3SuScaledRotaryEmbedding``: ``self.original_max_position_embeddings =
    config.original_max_position_embeddings`` (top level); ``forward``: ``seq_len = torch.max(position_ids)
    + 1``, ``if seq_len > self.original_max_position_embeddings: ext_factors = long_factor else
    short_factor``, ``inv_freq = 1.0 / (ext_factors * self.base ** (arange(0, dim, 2) / dim))``; ``scale
    = max_position_embeddings / original``, ``scaling_factor = 1.0 if scale <= 1.0 else sqrt(1 +
    log(scale) / log(original))``, ``cos = emb.cos() * scaling_factor`` (sin too). ``head_dim =
    hidden_size // num_attention_heads``, rotate-half.
    """
    dim = int(config["hidden_size"]) // int(config["num_attention_heads"])
    return _phi3_longrope(config, seq_len, dim, "Phi-3-vision su")


def _phi3_longrope(config: Mapping[str, Any], seq_len: int | None, dim: int, label: str) -> FamilyTable:
    """Phi-3's su/longrope rotary over ``dim`` channels, as its remote-code copies compute it (see ``phi3_v``)."""
    scaling, original = config["rope_scaling"], int(config["original_max_position_embeddings"])
    long = seq_len is not None and seq_len > original
    ext = np.asarray(scaling["long_factor" if long else "short_factor"], dtype=np.float64)
    scale = float(config["max_position_embeddings"]) / original
    factor = 1.0 if scale <= 1.0 else math.sqrt(1 + math.log(scale) / math.log(original))
    chosen = "long" if long else "short"
    notes = f"{label} over {dim} dims: {chosen} factors at seq_len {seq_len}, cos/sin x {factor:.6g}"
    return FamilyTable(_plain(float(config["rope_theta"]), dim) / ext, dim, "neox", factor, notes)


def phi_msft(config: Mapping[str, Any]) -> FamilyTable:
    """phi-1.5/phi-2 MixFormer remote code (modeling_phi.py; corpus copies 57501100238, 9655640326).

    ``MHA.__init__``: ``self.rotary_emb_dim = rotary_dim if rotary_dim is not None else getattr(config,
    "rotary_dim", 0)``, ``RotaryEmbedding(self.rotary_emb_dim, **rotary_kwargs)`` (no base passed:
    ``base: int = 10000``); ``_compute_inv_freq``: ``1.0 / (self.base ** (torch.arange(0, self.dim, 2) /
    self.dim))``; ``_apply_rotary_emb_qkv``: ``q_rot = qkv[..., :rotary_dim]``, ``q1, q2 =
    q_rot.chunk(2, dim=-1)``, ``[q1 * c - q2 * s, q1 * s + q2 * c]`` (halves: neox).
    """
    dim = int(config.get("rotary_dim", 32))
    return FamilyTable(_plain(10000.0, dim), dim, "neox", 1.0,
                       f"phi-msft: the first {dim} of {int(config['n_embd']) // int(config['n_head'])} channels, "
                       "halves paired, base 10000 (the module's default)")


def minicpm(config: Mapping[str, Any]) -> FamilyTable:
    """MiniCPM-2B remote code (HwwwwwwwH/MiniCPM-V-2@84ce9b02 modeling_minicpm.py), which MiniCPM-V-2
    builds from its top-level keys (``MiniCPMVConfig(MiniCPMConfig)``): ``self.head_dim =
    self.hidden_size // self.num_heads`` (L369), ``MiniCPMRotaryEmbedding(self.head_dim, ...,
    base=self.rope_theta)`` with ``inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2).float() /
    self.dim))`` (L142-150), rotate-half (L252); ``rope_scaling`` linear / dynamic as Llama's."""
    dim = int(config["hidden_size"]) // int(config["num_attention_heads"])
    return _llama_style(config, None, dim, float(config.get("rope_theta", 10000.0)), "MiniCPM", ("linear", "dynamic"))


def internlm(config: Mapping[str, Any], seq_len: int | None = None) -> FamilyTable:
    """InternLM v1 remote code (InternLM/InternLM@09a2b5ba tools/transformers/internlm_model/modeling_internlm.py):
    ``_init_rope``: no ``rope_scaling`` -> ``InternLMRotaryEmbedding(self.head_dim, ..., base=self.config.rope_theta)``;
    ``"dynamic"`` -> ``InternLMDynamicNTKScalingRotaryEmbedding``; else ``raise ValueError``. Dynamic: ``if seq_len >
    self.max_position_embeddings: base = self.base * ((self.scaling_factor * seq_len / self.max_position_embeddings)
    - (self.scaling_factor - 1)) ** (self.dim / (self.dim - 2))``; ``head_dim = hidden_size // num_heads``."""
    dim = int(config["hidden_size"]) // int(config["num_attention_heads"])
    rotary = config.get("rotary")
    if isinstance(rotary, Mapping):  # the 2023 code (@095ebff): rotary["type"] origin | dynamic, rotary["base"]
        scaling = {"type": "dynamic", "factor": rotary.get("scaling_factor", 1.0)} if rotary["type"] == "dynamic" \
            else None
        config = {**config, "rope_scaling": scaling}
        return _llama_style(config, seq_len, dim, float(rotary["base"]), "InternLM (2023 rotary)", ("dynamic",))
    return _llama_style(config, seq_len, dim, float(config.get("rope_theta", 10000)), "InternLM", ("dynamic",))


def deepseek_moe(config: Mapping[str, Any], seq_len: int | None = None) -> FamilyTable:
    """DeepSeek-MoE v1 remote code (modeling_deepseek.py, "Copied from transformers.models.llama" 4.36; corpus copy
    20182941881): ``DeepseekRotaryEmbedding(self.head_dim, max_position_embeddings=..., base=self.rope_theta)``,
    ``inv_freq = 1.0 / (self.base ** (arange(0, self.dim, 2).float() / self.dim))``, ``cat((freqs, freqs))`` and
    ``rotate_half``; linear: ``t = t / self.scaling_factor``; dynamic: the Llama base growth past
    ``max_position_embeddings``. ``head_dim = hidden_size // num_heads``."""
    dim = int(config["hidden_size"]) // int(config["num_attention_heads"])
    return _llama_style(config, seq_len, dim, float(config.get("rope_theta", 10000)), "DeepSeek-MoE",
                        ("linear", "dynamic"))


def llama_plain(config: Mapping[str, Any], family: str) -> FamilyTable:
    """Llama's unscaled rotary over ``hidden_size // num_attention_heads`` at ``rope_theta``: what every port of
    Orion's and Solar's code read applies (their scaling code was not read, so ropekit refuses a rope_scaling)."""
    dim = int(config.get("head_dim") or int(config["hidden_size"]) // int(config["num_attention_heads"]))
    return _llama_style(config, None, dim, float(config.get("rope_theta", 10000)), family, ())


def _llama3(inv_freq: np.ndarray, block: Mapping[str, Any]) -> np.ndarray:
    """transformers 4.44.2's ``_compute_llama3_parameters`` (which DeciLM vendors as
    ``transformers_4_44_2__modeling_rope_utils``), in float64."""
    factor, low, high = float(block["factor"]), float(block["low_freq_factor"]), float(block["high_freq_factor"])
    original = float(block["original_max_position_embeddings"])
    wavelen = 2 * math.pi / inv_freq
    low_wavelen, high_wavelen = original / low, original / high
    scaled = np.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (original / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
    return np.where(medium, smoothed, scaled)


def decilm(config: Mapping[str, Any]) -> FamilyTable:
    """DeciLM remote code (modeling_decilm.py; copy DeltaVector1/Chat-Prompters@d8a2e792): Llama's rotary over
    ``hidden_size // num_attention_heads`` at ``rope_theta``, scaled by the vendored transformers 4.44.2
    ``ROPE_INIT_FUNCTIONS[rope_type]`` (llama3 for Nemotron-Super/Ultra), in every layer whose
    ``block_configs[i].attention`` is neither ``no_op`` nor ``replace_with_linear``."""
    dim = int(config["hidden_size"]) // int(config["num_attention_heads"])
    inv_freq = _plain(float(config["rope_theta"]), dim)
    block = config.get("rope_scaling")
    kind = (block or {}).get("rope_type", (block or {}).get("type"))
    if kind == "llama3":
        inv_freq = _llama3(inv_freq, block)
    elif kind is not None:
        raise ValueError(f"port of DeciLM's {kind!r} not written")
    skipped = [i for i, entry in enumerate(config["block_configs"])
               if entry["attention"].get("no_op") or entry["attention"].get("replace_with_linear")]
    return FamilyTable(inv_freq, dim, "neox", 1.0, f"DeciLM: {kind or 'default'} over {dim} dims; layers without "
                       f"attention (no RoPE): {skipped}")


def minicpm4(config: Mapping[str, Any]) -> FamilyTable:
    """MiniCPM4 remote code (wxthu/nas_tuner@929b4ec0 modeling_minicpm.py, ``MiniCPMLongRoPE``, L649-675): the cache
    is built at ``max_position_embeddings`` (L625) and rebuilt only longer (L640); ``if seq_len >
    self.original_max_position_embeddings: ext_factors = long_factor else short_factor``; ``freqs = outer(t, 1.0 /
    ext_factors) * inv_freq``; ``scale = max_position_embeddings / original``, ``scaling_factor = sqrt(1 +
    log(scale) / log(original))``; ``cos_cached = emb.cos() * scaling_factor`` (sin too). So the long factors serve
    every length once ``max_position_embeddings > original``."""
    dim = int(config["hidden_size"]) // int(config["num_attention_heads"])
    block = config["rope_scaling"]
    original, longest = int(block["original_max_position_embeddings"]), int(config["max_position_embeddings"])
    ext = np.asarray(block["long_factor" if longest > original else "short_factor"], dtype=np.float64)
    factor = math.sqrt(1 + math.log(longest / original) / math.log(original))
    return FamilyTable(_plain(float(config.get("rope_theta", 10000.0)), dim) / ext, dim, "neox", factor,
                       f"MiniCPM4 longrope: {'long' if longest > original else 'short'} factors at every length")


# --------------------------------------------------------------------------------------------------


def _load(name: str) -> dict[str, Any]:
    with (FAMILIES / name).open(encoding="utf-8") as handle:
        data: dict[str, Any] = json.load(handle)
    return data


def build() -> dict[str, dict[str, Any]]:
    """Every entry of reference.json, computed from the trimmed configs beside it."""
    out: dict[str, dict[str, Any]] = {}
    out["chatglm3-6b.json"] = chatglm(_load("chatglm3-6b.json")).to_json()
    out["glm-4-9b-chat.json"] = chatglm(_load("glm-4-9b-chat.json")).to_json()
    out["minimax-m1.json"] = minimax(_load("minimax-m1.json")).to_json()
    qwen_cfg = _load("qwen-7b.json")
    out["qwen-7b.json"] = qwen(qwen_cfg).to_json()
    seq_length = int(qwen_cfg["seq_length"])
    for seq_len in (seq_length, seq_length + 1, 2 * seq_length, 2 * seq_length + 1, 4 * seq_length):
        out[f"qwen-7b.json@seq_len={seq_len}"] = qwen(qwen_cfg, seq_len).to_json()
    out["gpt-j-6b.json"] = gptj(_load("gpt-j-6b.json")).to_json()
    out["phi-3-small-8k-instruct.json"] = phi3_small(_load("phi-3-small-8k-instruct.json")).to_json()
    internlm2_cfg = _load("internlm2_5-7b-chat.json")
    out["internlm2_5-7b-chat.json"] = internlm2(internlm2_cfg).to_json()
    longest = int(internlm2_cfg["max_position_embeddings"])
    for seq_len in (longest, longest + 1, 2 * longest, 3 * longest):
        out[f"internlm2_5-7b-chat.json@seq_len={seq_len}"] = internlm2(internlm2_cfg, seq_len).to_json()
    out["mimo-7b-base.json"] = mimo(_load("mimo-7b-base.json")).to_json()
    phi3v_cfg = _load("phi-3-vision-128k-instruct.json")
    out["phi-3-vision-128k-instruct.json"] = phi3_v(phi3v_cfg).to_json()
    original = int(phi3v_cfg["original_max_position_embeddings"])
    for seq_len in (original, original + 1, 32 * original):
        out[f"phi-3-vision-128k-instruct.json@seq_len={seq_len}"] = phi3_v(phi3v_cfg, seq_len).to_json()
    out["phixtral-4x2_8.json"] = phi_msft(_load("phixtral-4x2_8.json")).to_json()
    out["minicpm-v-2.json"] = minicpm(_load("minicpm-v-2.json")).to_json()
    out["deepseek-moe-16b-base.json"] = deepseek_moe(_load("deepseek-moe-16b-base.json")).to_json()
    out["minicpm4-8b.json"] = minicpm4(_load("minicpm4-8b.json")).to_json()
    minicpm_128k = _load("minicpm-2b-128k.json")
    out["minicpm-2b-128k.json"] = minicpm(minicpm_128k).to_json()
    longest = int(minicpm_128k["max_position_embeddings"])
    for seq_len in (longest + 1, 2 * longest):
        out[f"minicpm-2b-128k.json@seq_len={seq_len}"] = _llama_style(
            minicpm_128k, seq_len, int(minicpm_128k["hidden_size"]) // int(minicpm_128k["num_attention_heads"]),
            float(minicpm_128k["rope_theta"]), "MiniCPM", ("linear", "dynamic")).to_json()
    internlm_20b = _load("internlm-20b.json")
    out["internlm-20b.json"] = internlm(internlm_20b).to_json()
    out["internlm-20b.json@seq_len=8192"] = internlm(internlm_20b, 8192).to_json()
    out["orion-14b.json"] = llama_plain(_load("orion-14b.json"), "Orion (ports)").to_json()
    out["phi-3.5-vision-instruct.json"] = phi3_v(_load("phi-3.5-vision-instruct.json")).to_json()
    for name in ("llama-3_3-nemotron-super-49b-v1.json", "llama-3_1-nemotron-ultra-253b-v1.json"):
        out[name] = decilm(_load(name)).to_json()
    out["ling-lite-chat.json"] = bailing_v1(_load("ling-lite-chat.json")).to_json()
    out["ling-plus-chat.json"] = bailing_v1(_load("ling-plus-chat.json")).to_json()
    out["openpangu-embedded-7b.json"] = pangu_embedded(_load("openpangu-embedded-7b.json")).to_json()
    out["molmo-7b-d-0924.json"] = molmo(_load("molmo-7b-d-0924.json")).to_json()
    out["dots-ocr.json"] = qwen2_flat(_load("dots-ocr.json"), "dots.ocr (Qwen2)").to_json()
    # Unlimited-OCR's language_config: use_mla false, so DeepseekV2's remote code runs LlamaAttention (base 10000 by
    # default, the whole head), its qk_* keys unread
    out["unlimited-ocr.json"] = llama_plain(_load("unlimited-ocr.json")["language_config"],
                                            "Unlimited-OCR (use_mla false: Llama's attention)").to_json()
    phi4mm_cfg = _load("phi-4-multimodal-instruct.json")
    out["phi-4-multimodal-instruct.json"] = phi4mm(phi4mm_cfg).to_json()
    original = int(phi4mm_cfg["original_max_position_embeddings"])
    for seq_len in (original, original + 1):
        out[f"phi-4-multimodal-instruct.json@seq_len={seq_len}"] = phi4mm(phi4mm_cfg, seq_len).to_json()
    return out


def main() -> None:
    result = build()
    target = FAMILIES / "reference.json"
    target.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {target} ({len(result)} entries)")


if __name__ == "__main__":
    main()
