"""Observe what a transformers model class's own forward applies as RoPE, and compare it with the
tables ropekit serves for the same config.

Nothing of the model's rope code is read or called by the probe. It builds a tiny random model of
the class (only what cannot affect RoPE is shrunk: vocabulary, MLP and expert widths, the number of
heads where the class takes ``head_dim`` on its own, the number of layers beyond the first eight),
feeds the same input vector at every position, so that every layer's query and key are the same
vector before rotation, and captures them where they enter attention (a function registered in
transformers' attention interface). From the captured states it recovers, per layer: whether the
layer attends at all, which channels rotate, how they pair (rotate-half or interleaved), each
pair's frequency and the magnitude factor; the magnitude is measured against a second pass in which
the rotary module's output is replaced by the identity rotation. The recovered rotation is checked
to reproduce the captured states, at near and far positions and on both sides of every sequence-length
switch the config declares.

Needs the ``reference`` extra (torch and the pinned transformers); the core never imports it.
"""

from __future__ import annotations

import contextlib
import copy
import math
import os
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from ..errors import ArgumentError, MissingDependencyError, RopekitError

__all__ = ["LayerObservation", "ProbeReport", "compare", "observe", "probe"]

_SHRINK = {"vocab_size": 32, "padded_vocab_size": 32, "intermediate_size": 16, "moe_intermediate_size": 16,
           "shared_expert_intermediate_size": 16, "ffn_hidden_size": 16, "q_lora_rank": 16, "kv_lora_rank": 16,
           "n_routed_experts": 2, "num_experts": 2, "num_local_experts": 2, "num_experts_per_tok": 1,
           "n_shared_experts": 1, "expert_ffn_hidden_size": 16, "zero_expert_num": 2}
"""Widths that cannot change a rotation, set small so a probe model fits anywhere."""
MAX_LAYERS = 8
FAR = 1 << 22
"""The farthest position probed where the table does not depend on the sequence length: float32
states resolve a pair's angle to about 1e-7 rad, so a frequency to ``1e-7 / position``."""
_FLOAT32_FLOOR = 5e-7
"""Angle resolution of float32 query states (radians): a frequency is known to this over the farthest position."""
PROBE_ATTENTION = "ropekit_probe"
RTOL = 2e-6


@attrs.frozen
class LayerObservation:
    """What one decoder layer's forward applied, as observed.

    ``kind``: ``rotates``, ``no_rotation`` (attends, nothing rotates) or ``no_attention`` (the
    layer never called attention). For a rotating layer: ``layout`` (``neox`` or ``gptj``),
    ``first_channel`` and ``rotary_dim`` (the rotated block), ``head_dim``, ``inv_freq`` (one per
    pair) and ``attention_factor`` (``None`` where it could not be measured). ``residual`` is how
    far the recovered rotation is from the captured states (relative), per regime probed.

    ``frame`` says whose channels ``layout`` pairs: ``input`` (the channels of the projection that
    produced the query, as the stored weights order them: what a native forward on those weights
    must pair) or ``output`` (the channels as they reach attention; a class that permutes the rotated
    block on the way, DeepSeek-V3.2's ``apply_rotary_pos_emb_interleave``, pairs ``(2j, 2j+1)`` of
    its input and writes them half-split). ``output`` is what the probe records when it cannot
    trace the query back to a projection (a norm in between, which permutes nothing).
    """

    index: int
    kind: str
    head_dim: int = 0
    layout: str = ""
    first_channel: int = 0
    rotary_dim: int = 0
    inv_freq: tuple[float, ...] = ()
    attention_factor: float | None = None
    residual: float = 0.0
    seq_len: int = 0
    frame: str = "output"

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {"index": self.index, "kind": self.kind, "seq_len": self.seq_len}
        if self.kind == "rotates":
            document.update(head_dim=self.head_dim, layout=self.layout, first_channel=self.first_channel,
                            rotary_dim=self.rotary_dim, inv_freq=list(self.inv_freq),
                            attention_factor=self.attention_factor, residual=self.residual)
            if self.frame != "output":
                document["frame"] = self.frame
        return document


@attrs.frozen
class ProbeReport:
    """Per layer and regime, what the class applies against what ropekit serves; ``verdict`` is
    ``match`` when every layer agrees, else ``differs`` (each layer says how)."""

    model_class: str
    transformers: str
    layers: tuple[dict[str, Any], ...]
    verdict: str

    def to_json(self) -> dict[str, Any]:
        return {"class": self.model_class, "transformers": self.transformers, "verdict": self.verdict,
                "layers": list(self.layers)}


def _imports() -> tuple[Any, Any]:
    try:
        import torch
        import transformers
    except ImportError as error:
        raise MissingDependencyError(
            f"ropekit probe runs the model's own code and needs torch and transformers ({error.name} is missing): "
            "pip install 'ropekit[reference]' (install the CPU build of torch first: pip install torch==2.13.0)"
        ) from None
    return torch, transformers


def _build(transformers: Any, torch: Any, raw: Mapping[str, Any], model_class: str | None, seed: int, *,
           shrink_heads: bool, top_k: int = 1, attention: str = PROBE_ATTENTION) -> tuple[Any, Any]:
    """The shrunk config and a float32 model of its class (``AutoModel``, else ``AutoModelForCausalLM``)."""
    shrunk = _shrunk(transformers, raw, shrink_heads=shrink_heads, top_k=top_k, attention=attention)
    torch.manual_seed(seed)
    with _quiet(transformers):
        if model_class is not None:
            model = getattr(transformers, model_class)(shrunk)
        else:
            try:
                model = transformers.AutoModel.from_config(shrunk)
            except ValueError:  # no base-model class registered: the causal-LM one, else the class built on it
                try:
                    model = transformers.AutoModelForCausalLM.from_config(shrunk)
                except ValueError:
                    model = _class_for(transformers, type(shrunk))(shrunk)
    return shrunk, model.float().eval()


def _class_for(transformers: Any, config_class: type) -> Any:
    """The model class of ``config_class``'s own modeling module (a sub-model's text decoder, say):
    the one declaring it as its ``config_class``, a base model before a head."""
    import importlib
    import inspect

    package = config_class.__module__.rsplit(".", 1)[0]
    found = []
    for name in ("modeling_" + package.rsplit(".", 1)[1],):
        with contextlib.suppress(ImportError):
            module = importlib.import_module(f"{package}.{name}")
            found += [member for _, member in inspect.getmembers(module, inspect.isclass)
                      if getattr(member, "config_class", None) is config_class and member.__module__ == module.__name__]
    if not found:
        raise ValueError(f"no model class of {package} is built on {config_class.__name__}")
    heads = ("ForCausalLM", "ForConditionalGeneration", "LMHeadModel")
    return sorted(found, key=lambda member: (member.__name__.endswith(heads), len(member.__name__)))[0]


def _capture(store: list[tuple[Any, Any, Any]]) -> Any:
    def attention(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, **kwargs: Any) -> Any:
        import torch

        store.append((module, query.detach().clone(), key.detach().clone()))
        batch, heads, length = query.shape[0], query.shape[1], query.shape[2]
        output = torch.zeros(batch, length, heads, value.shape[-1], dtype=value.dtype)
        return output, None

    return attention


def _text_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The language model's config: ``text_config`` when it names its model_type; a wrapper's
    text config (or a flat one, as transformers v4 saved Qwen2-VL) read as its default text model's
    (so a vision tower is not built: it does not take text positions)."""
    from ..config.classes import class_facts

    text = config.get("text_config")
    if isinstance(text, Mapping) and text.get("model_type"):
        return dict(text)
    outer = config.get("model_type")
    facts = class_facts(outer) if isinstance(outer, str) else None
    if facts is not None and facts.kind == "composite" and facts.text_type is not None:
        if isinstance(text, Mapping):
            return {**text, "model_type": facts.text_type}
        flat = {key: value for key, value in config.items() if not key.endswith("_config")}
        return {**flat, "model_type": facts.text_type}
    return dict(config)


def _built_text_config(transformers: Any, config: Mapping[str, Any]) -> dict[str, Any]:
    """The language model's config as the wrapper's own class builds it (its defaults for the text model,
    a renamed text model_type, a language model kept under ``thinker_config`` or ``vlm_config``), so
    the probe runs what the wrapper would; a config that is no wrapper, or a wrapper the pinned
    transformers cannot build from it, is read as :func:`_text_config` reads it."""
    from ..config.classes import class_facts

    current: Mapping[str, Any] = config
    for _ in range(3):  # a wrapper of a wrapper (Qwen2.5-Omni's thinker holds its own text_config)
        outer = current.get("model_type")
        facts = class_facts(outer) if isinstance(outer, str) else None
        if facts is None or facts.kind != "composite" or facts.text is None:
            break
        values = {key: copy.deepcopy(value) for key, value in current.items()
                  if key not in ("architectures", "auto_map", "torch_dtype", "model_type", "transformers_version")}
        try:
            with _quiet(transformers), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                inner = getattr(transformers.AutoConfig.for_model(outer, **values), facts.text)
        except Exception:
            break
        if inner is None or not getattr(inner, "model_type", None):
            break
        current = {**inner.to_dict(), "model_type": inner.model_type}
    return _text_config(current)


def _shrunk(transformers: Any, raw: Mapping[str, Any], *, shrink_heads: bool = True, top_k: int = 1,
            attention: str = PROBE_ATTENTION) -> Any:
    """The transformers config of ``raw`` with what cannot affect RoPE made small (``top_k`` experts per token)."""
    model_type = raw.get("model_type")
    if not isinstance(model_type, str):
        raise ArgumentError("config", f"the probe needs a model_type to choose the model class, got {model_type!r}")
    if model_type not in transformers.models.auto.configuration_auto.CONFIG_MAPPING_NAMES:
        raise ArgumentError("config", f"model_type {model_type!r} is not a class of transformers "
                            f"{transformers.__version__}: the probe runs transformers' own classes (remote-code "
                            "families are checked against numpy ports of their code: scripts/family_reference.py)")
    values = {key: copy.deepcopy(value) for key, value in raw.items()  # transformers edits rope dicts in place
              if key not in ("architectures", "auto_map", "torch_dtype", "model_type", "transformers_version")}
    full = transformers.AutoConfig.for_model(model_type, **values)
    for key, small in {**_SHRINK, "num_experts_per_tok": top_k}.items():
        current = _get(full, key, None)
        if isinstance(current, int) and not isinstance(current, bool) and current > small:
            setattr(full, key, small)
    for key in ("num_experts_per_tok", "n_group", "topk_group"):  # routing a trimmed config left unset
        if _has(full, key) and _get(full, key) is None:
            setattr(full, key, 1)
    for key in ("n_group", "topk_group", "num_expert_group"):  # one group of the two experts left
        current = _get(full, key)
        if isinstance(current, int) and not isinstance(current, bool) and current > 1:
            setattr(full, key, 1)
    if isinstance(_get(full, "first_k_dense_replace", None), int):
        full.first_k_dense_replace = MAX_LAYERS  # dense MLPs: routing cannot touch a rotation
    vocab = _get(full, "vocab_size", None)
    for key in ("pad_token_id", "bos_token_id", "eos_token_id"):
        value = _get(full, key, None)
        if isinstance(vocab, int) and (isinstance(value, list) or (isinstance(value, int) and value >= vocab)):
            setattr(full, key, 0)
    layers = _get(full, "num_hidden_layers", None)
    if isinstance(layers, int) and layers > MAX_LAYERS:
        full.num_hidden_layers = MAX_LAYERS
        for key in ("layer_types", "no_rope_layers"):
            listed = _get(full, key, None)
            if isinstance(listed, list) and len(listed) > MAX_LAYERS:
                setattr(full, key, listed[:MAX_LAYERS])
        shared = _get(full, "num_kv_shared_layers")
        if isinstance(shared, int) and shared > 0:  # layers reusing an earlier layer's keys: each computes its own
            full.num_kv_shared_layers = 0          # (rotated) query all the same; the trimmed stack keeps none
    head_dim = _get(full, "head_dim", None)
    heads = _get(full, "num_attention_heads", None)
    hidden = _get(full, "hidden_size", None)
    if not isinstance(head_dim, int) and isinstance(hidden, int) and isinstance(heads, int) and heads:
        head_dim = hidden // heads if hidden % heads == 0 else None
    heterogeneous = bool(_get(full, "is_heterogeneous", False))  # per-layer head widths: kept as declared
    # every tower's head count (an encoder-decoder's encoder_/decoder_num_attention_heads): shrunk together
    # where they are all the same, else the heads are kept as declared (each tower derives its own width)
    counts = {name: _get(full, name) for name in dir(full) if name.endswith("num_attention_heads")}
    uniform = len({value for value in counts.values() if isinstance(value, int)}) <= 1
    if shrink_heads and uniform and not heterogeneous and isinstance(head_dim, int) and isinstance(heads, int) \
            and heads > 2:
        # two heads of the same head_dim, in a residual stream of their width: hidden_size // heads is
        # head_dim again, so a class deriving it either way builds the same head
        full.num_attention_heads = 2
        full.hidden_size = 2 * head_dim
        for name in dir(full):
            value = _get(full, name)
            if isinstance(value, int) and not isinstance(value, bool) and name.endswith("num_attention_heads"):
                setattr(full, name, 2)
            elif isinstance(value, int) and not isinstance(value, bool) and name.endswith("num_key_value_heads"):
                setattr(full, name, 1)
    full._attn_implementation = attention
    return full


def _get(config: Any, key: str, default: Any = None) -> Any:
    """``config.key``, or ``default`` where it is absent or a per-layer attribute of a heterogeneous config
    (transformers refuses a global read of those; they are left as the class declares them)."""
    try:
        return getattr(config, key, default)
    except Exception:  # AmbiguousGlobalPerLayerAttributeError
        return default


def _has(config: Any, key: str) -> bool:
    try:
        getattr(config, key)
    except Exception:  # absent, or a per-layer attribute
        return False
    return True


@contextlib.contextmanager
def _identity_rotation(model: Any, torch: Any) -> Iterator[int]:
    """Replace every rotary module's output by the identity rotation (cos 1, sin 0; a complex 1):
    the states captured then are the ones before rotation. Yields how many modules were replaced."""
    patched = []
    for module in model.modules():
        if type(module).__name__.endswith("RotaryEmbedding"):
            original = module.forward

            def identity(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
                result = _original(*args, **kwargs)
                if isinstance(result, tuple):
                    cos, sin = result[0], result[1]
                    return (torch.ones_like(cos), torch.zeros_like(sin), *result[2:])
                return torch.ones_like(result)

            module.forward = identity
            patched.append((module, original))
    try:
        yield len(patched)
    finally:
        for module, original in patched:
            module.forward = original


@contextlib.contextmanager
def _projection_rows(model: Any, torch: Any) -> Iterator[dict[int, list[Any]]]:
    """Record, per module, the first row (batch 0, position 0) each linear layer outputs: the
    channels of the projections the queries are cut from, in the order the stored weights give them."""
    rows: dict[int, list[Any]] = {}
    hooks = []

    def record(module: Any, args: Any, output: Any) -> None:
        if isinstance(output, torch.Tensor) and output.ndim >= 2:
            rows.setdefault(id(module), []).append(output.detach().reshape(-1, output.shape[-1])[0].double().numpy())

    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            hooks.append(module.register_forward_hook(record))
    try:
        yield rows
    finally:
        for hook in hooks:
            hook.remove()


def _input_pairing(seen: LayerObservation, before: np.ndarray[Any, Any], attention: Any,
                   rows: Mapping[int, list[Any]]) -> LayerObservation:
    """``seen`` in the frame of the projection its query was cut from: each rotated channel's value
    before rotation (position 0) found, exactly and once, in one linear layer's output of the
    attention module. A block whose channels come from there in another order (interleaved pairs
    written half-split) is re-read as the pairs of its input; a block traced in order is marked
    ``input`` as it is; one not traced keeps the ``output`` frame."""
    if seen.kind != "rotates" or before is None or attention is None:
        return seen
    import torch

    block = before[0, seen.first_channel:seen.first_channel + seen.rotary_dim]
    if block.size < 2 or np.unique(block).size != block.size:
        return seen
    for linear in attention.modules():
        if not isinstance(linear, torch.nn.Linear):
            continue
        for row in rows.get(id(linear), ()):
            source = _traced(block, row)
            if source is None:
                continue
            start = int(source.min())
            relative = source - start
            if sorted(relative.tolist()) != list(range(seen.rotary_dim)):
                continue  # not one contiguous block of the projection
            half = seen.rotary_dim // 2
            if seen.layout == "neox":
                pairs = [(int(relative[i]), int(relative[i + half])) for i in range(half)]
            else:
                pairs = [(int(relative[2 * i]), int(relative[2 * i + 1])) for i in range(half)]
            for layout in ("neox", "gptj"):
                expected = [(first, second) for first, second in
                            ((i, i + half) if layout == "neox" else (2 * i, 2 * i + 1) for i in range(half))]
                if pairs == expected:
                    return attrs.evolve(seen, layout=layout, frame="input")
            return seen  # a pairing neither layout expresses in the input frame: reported as seen
    return seen


def _traced(block: np.ndarray[Any, Any], row: np.ndarray[Any, Any]) -> np.ndarray[Any, Any] | None:
    """Where each of ``block``'s values sits in ``row``, one channel each, all within one span of the
    block's width: equal, or equal up to one positive factor common to the whole block (LongCat scales
    its query's rope part after the projection; float32 rounds that product once). ``None`` when no
    such placement exists."""
    width = block.size
    order = np.argsort(-np.abs(block))
    anchor, second = int(order[0]), int(order[1])
    if block[second] == 0:
        return None
    with np.errstate(divide="ignore", invalid="ignore"):
        scales = block[anchor] / row  # block = scale * row, for the row channel the anchor came from
    candidates = np.flatnonzero(np.isfinite(scales) & (scales > 0))
    # a scale must also place the second-largest value: look it up among the row's sorted values
    ordered = np.sort(row)
    wanted = block[second] / scales[candidates]
    at = np.clip(np.searchsorted(ordered, wanted), 1, max(ordered.size - 1, 1))
    nearest = np.minimum(np.abs(ordered[at] - wanted), np.abs(ordered[at - 1] - wanted))
    for origin in candidates[nearest <= 3e-7 * np.abs(wanted)]:
        low = max(0, int(origin) - width + 1)
        span = row[low:int(origin) + width] * scales[origin]
        close = np.abs(span[None, :] - block[:, None]) <= 3e-7 * np.abs(block[:, None]) + 1e-30
        if np.all(close.sum(axis=1) == 1) and np.unique(close.argmax(axis=1)).size == width:
            placed: np.ndarray[Any, Any] = low + close.argmax(axis=1)
            return placed
    return None


def _positions(seq_len: int) -> list[int]:
    near = [0, 1, 2, 3, 5, 8]
    far = [1 << k for k in range(4, 40) if (1 << k) < seq_len - 1]
    return sorted({*near, *far, seq_len - 1})


@attrs.frozen
class _Feed:
    """How the probe feeds a model the same vector at every position: ``token`` (an input id, for a class
    that needs ids: a per-layer embedding, hash routing; else ``None``: an input embedding) and ``axes``
    (``3``: one position per mrope axis, all three the text position; ``0``: 1-D position ids)."""

    token: int | None = None
    axes: int = 0
    sdpa: bool = False
    """Capture at ``torch.nn.functional.scaled_dot_product_attention`` (a class whose attention is its own
    code, built with ``sdpa``) instead of transformers' attention interface."""


def _token(config: Any) -> int:
    """An ordinary token id of ``config``'s vocabulary: none of its declared special tokens (a padding row is zero)."""
    special: set[int] = set()
    for name in dir(config):
        if name.endswith(("_token_id", "_token_index", "_token_ids")):
            value = _get(config, name)
            if isinstance(value, int):
                special.add(value)
            elif isinstance(value, list):
                special |= {item for item in value if isinstance(item, int)}
    vocab = _get(config, "vocab_size")
    last = vocab if isinstance(vocab, int) and vocab > 4 else 32
    return next((token for token in range(3, last) if token not in special), last - 1)


def _feeds(config: Any) -> list[_Feed]:
    """The ways of feeding a model tried in turn: an input embedding first, then an input id; 1-D position ids
    first, then three equal mrope axes (a text decoder whose rotary module takes only 3-axis ids)."""
    token = _token(config)
    return [_Feed(), _Feed(token=token), _Feed(axes=3), _Feed(token=token, axes=3)]


def _run(model: Any, torch: Any, hidden: int, positions: Sequence[int], seed: int,
         feed: _Feed = _Feed()) -> list[tuple[Any, Any, Any]]:
    store: list[tuple[Any, Any, Any]] = []
    position_ids = torch.tensor([list(positions)], dtype=torch.long)
    if feed.axes:
        position_ids = position_ids.expand(feed.axes, 1, len(positions)).contiguous()
    if feed.token is not None:
        inputs: dict[str, Any] = {"input_ids": torch.full((1, len(positions)), feed.token, dtype=torch.long)}
    else:
        generator = torch.Generator().manual_seed(seed)
        vector = torch.randn(hidden, generator=generator, dtype=torch.float32)
        inputs = {"inputs_embeds": vector.expand(1, len(positions), hidden).contiguous()}
    with torch.no_grad(), _sdpa_capture(model, torch) if feed.sdpa else contextlib.nullcontext():
        model(**inputs, position_ids=position_ids, use_cache=False)
    return store


@contextlib.contextmanager
def _sdpa_capture(model: Any, torch: Any) -> Iterator[None]:
    """Capture the query and key every ``torch.nn.functional.scaled_dot_product_attention`` call receives,
    attributed to the innermost attention module running (forward hooks keep the stack); the call
    returns zeros, as the interface capture does."""
    running: list[Any] = []

    def enter(module: Any, args: Any) -> None:
        running.append(module)

    def leave(module: Any, args: Any, output: Any) -> None:  # returns None: the output is kept
        running.pop()

    handles = []
    for module in model.modules():
        if "Attention" in type(module).__name__:
            handles += [module.register_forward_pre_hook(enter), module.register_forward_hook(leave)]
    functional = torch.nn.functional
    original = functional.scaled_dot_product_attention

    def capture(query: Any, key: Any, value: Any, *args: Any, **kwargs: Any) -> Any:
        _CAPTURED.append((running[-1] if running else None, query.detach().clone(), key.detach().clone()))
        return torch.zeros(*query.shape[:-1], value.shape[-1], dtype=value.dtype)

    functional.scaled_dot_product_attention = capture
    try:
        yield
    finally:
        functional.scaled_dot_product_attention = original
        for handle in handles:
            handle.remove()


def _parts(model: Any) -> list[Any]:
    """The model, then its text decoder alone where it has one of its own (an encoder-decoder class whose
    encoder takes audio or needs its own inputs: the decoder runs on text positions without it)."""
    decoder = None
    with contextlib.suppress(Exception):
        decoder = model.get_decoder()
    return [model] if decoder is None or decoder is model or not callable(decoder) else [model, decoder]


def _built(transformers: Any, torch: Any, raw: Mapping[str, Any], model_class: str | None,
           seed: int) -> tuple[Any, Any, _Feed]:
    """The shrunk config, its model and the feed it runs with: heads shrunk where the class runs so, else as
    declared; each with the feeds of :func:`_feeds` in turn. Raises the error of the least altered attempt
    (heads as declared, an input embedding, 1-D positions) when none runs."""
    failures: list[Exception] = []
    # two experts per token next: a class whose routing breaks with one (a squeezed top-k axis); last, a class
    # whose attention is its own code, built with sdpa and captured at torch's scaled_dot_product_attention
    attempts = ((True, 1, PROBE_ATTENTION), (False, 1, PROBE_ATTENTION), (False, 2, PROBE_ATTENTION),
                (True, 1, "sdpa"), (False, 1, "sdpa"))
    for shrink_heads, top_k, attention in attempts:
        sdpa = attention == "sdpa"
        if sdpa and not any(isinstance(error, _NoCaptureError) or PROBE_ATTENTION in str(error) for error in failures):
            break  # the interface was not what failed
        try:
            shrunk, model = _build(transformers, torch, raw, model_class, seed, shrink_heads=shrink_heads,
                                   top_k=top_k, attention=attention)
        except Exception as error:
            failures.append(error)
            continue
        if top_k > 1 and _get(shrunk, "num_experts_per_tok") != top_k:
            continue  # no experts to route: the same model as before
        errors: list[Exception] = []
        for part in _parts(model):
            for feed in _feeds(shrunk):
                feed = attrs.evolve(feed, sdpa=sdpa)
                try:
                    _run(part, torch, int(shrunk.hidden_size), [0, 1, 2], seed, feed)
                    if not _CAPTURED and any("Attention" in type(module).__name__ for module in part.modules()):
                        raise _NoCaptureError(f"{type(part).__name__} never called transformers' attention interface "
                                         f"{'nor torch scaled_dot_product_attention ' if sdpa else ''}so the probe "
                                         "cannot observe what its attention rotates (its attention is its own code)")
                except Exception as error:
                    errors.append(error)
                    continue
                finally:
                    _CAPTURED.clear()
                return shrunk, part, feed
        failures.append(errors[0])
    # the least altered attempt's error, unless it only says the interface was bypassed: then the last one's
    telling = len(failures) > 1 and not isinstance(failures[1], _NoCaptureError) and \
        PROBE_ATTENTION not in str(failures[1])
    raise failures[1] if telling else failures[-1]


class _NoCaptureError(RopekitError):
    """A model ran without handing any query to the probe's capture."""


def observe(config: Mapping[str, Any], *, seq_lens: Sequence[int] = (), model_class: str | None = None,
            seed: int = 0) -> tuple[str, str, list[LayerObservation]]:
    """Build a tiny random model of the config's class and observe every layer's rotation at each
    of ``seq_lens`` (the largest position is ``seq_len - 1``; default: 4096 and the config's own
    ``max_position_embeddings`` if smaller). Returns ``(class name, transformers version, layers)``."""
    torch, transformers = _imports()
    raw = _built_text_config(transformers, config)
    _register(transformers)
    shrunk, model, feed = _built(transformers, torch, raw, model_class, seed)
    hidden = int(shrunk.hidden_size)
    chosen = list(seq_lens) or [FAR + 1]
    observations: list[LayerObservation] = []
    for wanted in chosen:
        seq_len = wanted
        positions = _positions(seq_len)
        _CAPTURED.clear()
        try:
            _run(model, torch, hidden, positions, seed, feed)
        except (IndexError, RuntimeError):  # a cache built for max_position_embeddings rows: probe within it
            seq_len = min(wanted, int(getattr(shrunk, "max_position_embeddings", 0) or 2048))
            positions = _positions(seq_len)
            _CAPTURED.clear()
            _run(model, torch, hidden, positions, seed, feed)
        rotated = list(_CAPTURED)
        _CAPTURED.clear()
        if not rotated and any("Attention" in type(module).__name__ for module in model.modules()):
            raise RopekitError(f"{type(model).__name__} never called transformers' attention interface, so the probe "
                               "cannot observe what its attention rotates (its attention is its own code)")
        with _identity_rotation(model, torch) as replaced, _projection_rows(model, torch) as rows:
            _run(model, torch, hidden, positions, seed, feed)
        plain = list(_CAPTURED) if replaced else []
        _CAPTURED.clear()
        observations += _recover(model, rotated, plain, positions, seq_len, rows)
    return type(model).__name__, transformers.__version__, observations


_CAPTURED: list[tuple[Any, Any, Any]] = []


def _register(transformers: Any) -> None:
    """Register the capture in transformers' attention interface, and the eager (always materialised)
    mask for it: a class that reads the 4-D mask itself (a sparse-attention indexer) gets one, as it
    would with eager attention (the capture itself ignores it)."""
    from transformers.masking_utils import eager_mask

    transformers.AttentionInterface.register(PROBE_ATTENTION, _capture(_CAPTURED))
    transformers.AttentionMaskInterface.register(PROBE_ATTENTION, eager_mask)


@contextlib.contextmanager
def _quiet(transformers: Any) -> Iterator[None]:
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    previous = os.environ.get("TRANSFORMERS_VERBOSITY")
    try:
        yield
    finally:
        transformers.logging.set_verbosity(verbosity)
        if previous is not None:
            os.environ["TRANSFORMERS_VERBOSITY"] = previous


def _layer_modules(model: Any, attending: Sequence[Any] = ()) -> list[Any]:
    """The decoder layers in order: the ModuleList holding the most of the modules that called
    attention (a vision or audio tower's longer list is not the decoder), else the longest."""
    import torch

    lists: list[list[Any]] = [list(module) for module in model.modules() if isinstance(module, torch.nn.ModuleList)]
    if not lists:
        return []
    wanted = {id(module) for module in attending}

    def holds(layers: list[Any]) -> int:
        return sum(1 for layer in layers for module in layer.modules() if id(module) in wanted)

    return max(lists, key=lambda layers: (holds(layers), len(layers)))


def _recover(model: Any, rotated: list[tuple[Any, Any, Any]], plain: list[tuple[Any, Any, Any]],
             positions: Sequence[int], seq_len: int,
             rows: Mapping[int, list[Any]] | None = None) -> list[LayerObservation]:
    layers = _layer_modules(model, [module for module, _, _ in rotated])
    owner = {}
    for index, layer in enumerate(layers):
        for module in layer.modules():
            owner[id(module)] = index
    by_layer: dict[int, tuple[Any, Any, Any, Any]] = {}
    attention_of: dict[int, Any] = {}
    for number, (module, query, key) in enumerate(rotated):
        index = owner.get(id(module), number)
        pre = plain[number] if number < len(plain) else None
        by_layer.setdefault(index, (query, key, pre[1] if pre else None, pre[2] if pre else None))
        attention_of.setdefault(index, module)
    observations = []
    for index in range(len(layers)):
        if index not in by_layer:
            observations.append(LayerObservation(index, "no_attention", seq_len=seq_len))
            continue
        query, key, query_before, key_before = by_layer[index]
        seen = _rotation(index, query[0, 0].double().numpy(),  # (positions, head_dim): head 0
                         query_before[0, 0].double().numpy() if query_before is not None else None, positions, seq_len)
        if seen.kind == "unrecognised" and key is not None and key.shape[-1] == query.shape[-1]:
            # a class that also scales queries by position (Ministral-3's llama_4_scaling_beta) rotates its
            # keys alone: the same rotation, without the query temperature
            by_key = _rotation(index, key[0, 0].double().numpy(),
                               key_before[0, 0].double().numpy() if key_before is not None else None, positions,
                               seq_len)
            if by_key.kind == "rotates":
                seen = by_key
        elif query_before is not None and rows:
            seen = _input_pairing(seen, query_before[0, 0].double().numpy(), attention_of.get(index), rows)
        observations.append(seen)
    return observations


def _rotation(index: int, states: np.ndarray[Any, Any], before: np.ndarray[Any, Any] | None,
              positions: Sequence[int], seq_len: int) -> LayerObservation:
    head_dim = states.shape[1]
    scale = np.max(np.abs(states)) + 1e-30
    if before is not None and not _unrotated(states, before):
        before = None  # the replacement did not make this class's rotation the identity (a packed sin/cos tensor)
    if before is not None:  # what rotation did to each position's own vector
        moving = np.max(np.abs(states - before), axis=0) > 1e-5 * scale
    else:
        moving = np.max(np.abs(states - states[0]), axis=0) > 1e-5 * scale
    channels = np.flatnonzero(moving)
    if channels.size == 0:
        return LayerObservation(index, "no_rotation", head_dim=head_dim, seq_len=seq_len)
    first, last = int(channels[0]), int(channels[-1])
    width = last - first + 1
    if width % 2:
        width += 1
    best: LayerObservation | None = None
    # the span of moving channels, else the rest of the head: proportional RoPE (Gemma-4, LFM-3) rotates
    # the first pairs of a rotate-half head and leaves the rest at frequency 0, two separate blocks
    spans = [(first, width)] + ([(first, head_dim - first)] if width < head_dim - first else [])
    for span_first, span_width in spans:
        for layout in ("neox", "gptj"):
            found = _fit(index, states, before, positions, span_first, span_width, layout, head_dim, seq_len)
            if found is not None and (best is None or found.residual < best.residual):
                best = found
        if best is not None:
            break
    if best is None:
        return LayerObservation(index, "unrecognised", head_dim=head_dim, first_channel=first, rotary_dim=width,
                                seq_len=seq_len)
    return best


def _unrotated(states: np.ndarray[Any, Any], before: np.ndarray[Any, Any]) -> bool:
    """Whether ``before`` is ``states`` without rotation: same shape, and at position 0 (where every
    rotation is the identity) each channel equal up to a positive factor (1, or the attention factor)."""
    if before.shape != states.shape:
        return False
    base = before[0]
    used = np.abs(base) > 1e-6 * (np.max(np.abs(base)) + 1e-30)
    return bool(used.any() and np.all(states[0][used] / base[used] > 0))


def _pairs(first: int, width: int, layout: str) -> list[tuple[int, int]]:
    half = width // 2
    if layout == "neox":
        return [(first + i, first + half + i) for i in range(half)]
    return [(first + 2 * i, first + 2 * i + 1) for i in range(half)]


def _fit(index: int, states: np.ndarray[Any, Any], before: np.ndarray[Any, Any] | None, positions: Sequence[int],
         first: int, width: int, layout: str, head_dim: int, seq_len: int) -> LayerObservation | None:
    if first + width > head_dim:
        return None
    pairs = _pairs(first, width, layout)
    complex_states = np.array([states[:, a] + 1j * states[:, b] for a, b in pairs]).T  # (positions, pairs)
    per_position = False
    if before is not None and before.shape == states.shape:
        # each position against its own unrotated vector: exact even where earlier layers (state-space,
        # convolution, linear attention) make the query differ from position to position. Trusted only
        # when position 0 is unrotated (a class whose rotary module returns one packed tensor is not
        # made the identity by the probe's replacement)
        origin_all = np.array([before[:, a] + 1j * before[:, b] for a, b in pairs]).T
        if np.all(np.abs(origin_all) > 1e-12 * np.max(np.abs(origin_all))):
            ratio = complex_states / origin_all
            lengths = np.abs(ratio)
            per_position = bool(np.max(np.abs(np.angle(ratio[0]))) < 1e-4
                                and np.max(np.abs(lengths - lengths[0])) <= 1e-4 * np.max(lengths))
            if per_position:
                origin = complex_states[0]
                ratio = ratio / lengths[0]
    if not per_position:
        origin = complex_states[0]
        if np.any(np.abs(origin) == 0):
            return None
        ratio = complex_states / origin
        if np.max(np.abs(np.abs(ratio) - 1.0)) > 1e-4:  # a rotation keeps each pair's length
            return None
    angles = np.angle(ratio)
    freqs = np.zeros(len(pairs))
    for column in range(len(pairs)):
        estimate = None
        for row, position in enumerate(positions):
            if position == 0:
                continue
            angle = angles[row, column]
            if estimate is None:
                estimate = angle / position
                continue
            turns = round((estimate * position - angle) / (2 * math.pi))
            refined = (angle + 2 * math.pi * turns) / position
            if abs(refined * position - estimate * position) < 1.0:
                estimate = refined
        freqs[column] = estimate or 0.0
    freqs[np.max(np.abs(angles), axis=0) < 1e-9] = 0.0  # a pair that never turns (proportional RoPE's rest): no
    # frequency, whatever sign its rounding noise has
    if np.any(freqs < 0):  # a pair turning the other way is not a rotation ropekit's layouts express
        return None
    turning = np.exp(1j * np.outer(np.asarray(positions, dtype=np.float64), freqs))
    factor: float | None = None
    if per_position:
        factor = float(np.median(lengths[0]))
        predicted = origin_all * lengths[0][None, :] * turning
        residual = float(np.max(np.abs(predicted - complex_states)) / np.max(np.abs(complex_states)))
    else:
        predicted = origin[None, :] * turning
        residual = float(np.max(np.abs(predicted - complex_states)) / np.max(np.abs(origin)))
        if before is not None and before.ndim == 2:
            rotated_before = np.array([before[0, a] + 1j * before[0, b] for a, b in pairs])
            nonzero = np.abs(rotated_before) > 1e-12
            if nonzero.any():
                factor = float(np.median(np.abs(origin[nonzero]) / np.abs(rotated_before[nonzero])))
    return LayerObservation(index, "rotates", head_dim=head_dim, layout=layout, first_channel=first,
                            rotary_dim=width, inv_freq=tuple(float(f) for f in freqs), attention_factor=factor,
                            residual=residual, seq_len=seq_len)


def compare(observations: Sequence[LayerObservation], config: Mapping[str, Any] | Any, *,
            strict: bool = True) -> tuple[list[dict[str, Any]], str]:
    """Each observation against the table ropekit serves for that layer (at the same seq_len):
    ``(rows, verdict)``. A refusal by ropekit is reported with its reason."""
    from ..errors import RopeConfigError
    from ..loader import load

    try:
        model = load(config, strict=strict)
    except RopeConfigError as error:
        rows = [{**seen.to_json(), "ropekit": "refused", "reason": str(error),
                 "verdict": "refused" if seen.kind != "rotates" else "differs"} for seen in observations]
        rotating = any(seen.kind == "rotates" for seen in observations)
        return rows, "differs" if rotating else "match"
    mla = _text_config(config).get("qk_rope_head_dim") is not None if isinstance(config, Mapping) else False
    rows = []
    for seen in observations:
        row = seen.to_json()
        if model.layer_types and seen.index >= len(model.layer_types):
            row["verdict"], row["reason"] = "differs", (f"the class runs layer {seen.index}; ropekit plans "
                                                        f"{len(model.layer_types)} layers")
            rows.append(row)
            continue
        table = (model.for_layer(seen.index) if model.layer_types or len(model.tables) <= 1
                 else model.tables.get("full_attention", next(iter(model.tables.values()))))
        if table is not None and table.seq_len_dependent and seen.seq_len:
            table = table.at(seen.seq_len)
        # a table narrower than the observed head is an MLA rope sub-head, which follows the unrotated one
        # (also where the config leaves qk_rope_head_dim to its class)
        sub_head = table is not None and seen.kind == "rotates" and 0 < table.head_dim < seen.head_dim
        row["verdict"], row["reason"] = _judge(seen, table, mla=mla or sub_head)
        rows.append(row)
    verdict = "match" if all(row["verdict"] == "match" for row in rows) else "differs"
    return rows, verdict


def _judge(seen: LayerObservation, table: Any, *, mla: bool = False) -> tuple[str, str]:
    """Whether ``seen`` is what ``table`` serves. For MLA (``qk_rope_head_dim``) the table is the
    rotated sub-head, which the class appends after the unrotated one: the block starts there."""
    if seen.kind != "rotates":
        return ("match", "") if table is None else ("differs", f"the code applies {seen.kind}; ropekit serves a table")
    if table is None:
        return "differs", "the code rotates; ropekit serves no table for this layer"
    served = np.asarray(table.inv_freq, dtype=np.float64)
    observed = np.asarray(seen.inv_freq)
    width = table.head_dim if table.head_dim // 2 == len(served) else table.rotary_dim  # proportional: whole head
    problems = []
    # MLA with rope_interleave: the class de-interleaves the rope sub-head ((2i, 2i+1) -> (i, i + d/2)) before
    # its rotate-half, so the probe captures neox in that permuted frame; ropekit serves the same rotation as
    # interleaved pairs of the projected channels (every query-key score is the same)
    # (an observation in the input frame pairs the projection's own channels: compared as it is)
    permuted = mla and seen.frame == "output" and table.layout == "gptj" and seen.layout == "neox"
    if seen.layout != table.layout and not permuted:
        problems.append(f"layout {seen.layout} (ropekit {table.layout})")
    first = seen.head_dim - seen.rotary_dim if mla else 0
    if seen.first_channel != first:
        problems.append(f"the rotated block starts at channel {seen.first_channel} (ropekit: {first})")
    if seen.rotary_dim != width:
        problems.append(f"rotary_dim {seen.rotary_dim} (ropekit {width})")
    elif observed.shape == served.shape:
        still = served == 0  # pairs a proportional table leaves unrotated: the code must not turn them either
        turning = np.flatnonzero(still & (np.abs(observed) > _FLOAT32_FLOOR / max(seen.seq_len - 1, 1)))
        if turning.size:
            problems.append(f"pairs {turning.tolist()[:4]} turn (first at {observed[turning[0]]:.9g} per position) "
                            "where ropekit's table leaves them unrotated")
        expected, measured = served[~still], observed[~still]
        rel = np.abs(measured - expected) / expected
        floor = np.maximum(RTOL, _FLOAT32_FLOOR / (max(seen.seq_len - 1, 1) * expected))
        if np.any(rel > floor):
            worst = int(np.argmax(rel / floor))
            problems.append(f"inv_freq differs by up to {float(rel.max()):.2e} relative (pair {worst}: "
                            f"{measured[worst]:.9g} against {expected[worst]:.9g})")
    if seen.attention_factor is not None and abs(seen.attention_factor - table.attention_factor) > 1e-5 * max(
            1.0, table.attention_factor):
        problems.append(f"attention factor {seen.attention_factor:.7g} (ropekit {table.attention_factor:.7g})")
    return ("differs", "; ".join(problems)) if problems else ("match", "")


def probe_lengths(config: Mapping[str, Any]) -> list[int]:
    """The sequence lengths to observe ``config`` at: both sides of every length at which ropekit's
    table switches (longrope, dynamic), and the far side as far as float32 resolves."""
    from ..loader import load

    switches: list[int] = []
    with contextlib.suppress(RopekitError), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        served = load(config)
        switches = sorted({table.switch_at for table in served.tables.values()
                           if table.seq_len_dependent and table.switch_at})
    return [*switches, FAR + 1]


def probe(config: Mapping[str, Any] | str | os.PathLike[str], *, model_class: str | None = None,
          seq_lens: Sequence[int] = ()) -> ProbeReport:
    """Observe the config's class and compare every layer with ropekit's table (see the module docs)."""
    from ..config.source import read_config

    mapping, _origin = read_config(config)
    lengths = list(seq_lens) or probe_lengths(mapping)
    name, version, observations = observe(mapping, seq_lens=lengths, model_class=model_class)
    rows, verdict = compare(observations, mapping)
    return ProbeReport(name, version, tuple(rows), verdict)
