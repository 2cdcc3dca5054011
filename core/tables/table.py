"""The tables ``ropekit.load`` returns: one :class:`RopeTable` per layer type, in a :class:`ModelRope`."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

import attrs
import numpy as np

from ..contract.scheme import Geometry
from ..errors import ArgumentError, ArgumentTypeError, LayerIndexError, LayerLookupError
from .cache import CosSinArray, tag
from .small import small_cos_sin  # the decode-step path, taken before any check it does not need

if TYPE_CHECKING:
    import numpy.typing as npt

    from ..host.loaded import LoadedScheme
    from .plan import Plan
    from .rotary import CacheLayout, Layout
    from .rows import RopeRows

__all__ = ["MAX_ROWS", "MAX_SEQ_LEN", "ModelRope", "RopeTable", "SeqLenRule"]

MAX_SEQ_LEN = 1 << 40
"""The longest sequence :meth:`RopeTable.at` accepts."""

MAX_ROWS = 1 << 26
"""The most positions :meth:`RopeTable.rows` holds (64 Mi rows: 32 GiB for a 128-wide float32 head)."""


_MROPE: list[Any] = []


def _mrope() -> Any:
    """:func:`ropekit.tables.mrope.mrope_cos_sin`, imported on the first multimodal call (an import
    statement per call costs a decode step a microsecond or two)."""
    if not _MROPE:
        from .mrope import mrope_cos_sin

        _MROPE.append(mrope_cos_sin)
    return _MROPE[0]


class SeqLenRule(NamedTuple):
    """How a seq-len-dependent table changes: the rule in words, and the length up to which the
    load-time table holds (a forward crossing it must rebuild its cos/sin cache)."""

    text: str
    switch_at: int


@attrs.frozen(eq=False)
class RopeTable:
    """The RoPE a forward must use for one layer type.

    ``inv_freq`` is read-only float64 in transformers' order; the forward multiplies cos and sin by
    ``attention_factor``. ``params`` are the scheme's own parameters, validated and defaulted;
    ``geometry`` is what the builder was given (head_dim, theta, partial_rotary_factor,
    max_position_embeddings). For a seq-len-dependent scheme (``rule`` is set) this is the table
    at load time (no sequence length); :meth:`at` gives the table for a sequence of ``seq_len``
    positions.

    Two widths: :attr:`rotary_dim` is the number of channels the forward's cos/sin cover
    (``2 * len(inv_freq)``); :attr:`rotated_dim` the number whose frequency is non-zero. They differ
    only for schemes that cover the whole head with zeros past the rotated part (``proportional``).

    ``layout`` is how the model's own code pairs channels: ``neox`` (rotate-half, most models) or
    ``gptj`` (interleaved: GPT-J, CodeGen, GLM, Llama-4, DeepSeek ``rope_interleave``); it is the
    default of :meth:`cos_sin` and ``ropekit export``.

    A multimodal table (``mrope_composition`` set: Qwen2-VL, Qwen3-VL, GLM-4V, ERNIE-4.5-VL...)
    takes several position axes: ``mrope_section`` sizes the sections and ``mrope_composition``
    (see :mod:`ropekit.tables.mrope`) is how the model's code assigns each cos/sin column an axis.
    """

    layer_type: str
    rope_type: str
    params: Mapping[str, Any]
    geometry: Geometry
    inv_freq: npt.NDArray[np.float64]
    attention_factor: float
    seq_len: int | None = None
    rule: SeqLenRule | None = None
    mrope_section: tuple[int, ...] | None = None
    mrope_interleaved: bool = False
    mrope_composition: str | None = None
    layout: Layout = "neox"
    landmarks: Mapping[str, float] = attrs.field(factory=dict, repr=False)
    _scheme: LoadedScheme | None = attrs.field(default=None, repr=False, alias="scheme")
    _cache: dict[str, Any] = attrs.field(factory=dict, repr=False, init=False)

    @property
    def scheme(self) -> LoadedScheme | None:
        """The loaded scheme that built this table (``None``: a table made by hand)."""
        return self._scheme

    @property
    def head_dim(self) -> int:
        """The attention head's width."""
        return self.geometry.head_dim

    @property
    def rotary_dim(self) -> int:
        """Channels the forward's cos/sin cover: ``2 * len(inv_freq)``."""
        return 2 * len(self.inv_freq)

    @property
    def rotated_dim(self) -> int:
        """Channels that actually rotate (``int(head_dim * partial_rotary_factor)``)."""
        return self.geometry.rotary_dim

    @property
    def mrope_axes(self) -> int:
        """How many position axes :meth:`cos_sin` takes (1 for a text table)."""
        if self.mrope_composition is None:
            return 1
        from .mrope import axes_of

        return axes_of(self.mrope_composition, self.mrope_section or ())

    @property
    def seq_len_dependent(self) -> bool:
        """Whether the table depends on the sequence length (dynamic, longrope)."""
        return self.rule is not None

    @property
    def seq_len_rule(self) -> str:
        """The seq-len rule in words (empty when the table does not depend on it)."""
        return self.rule.text if self.rule is not None else ""

    @property
    def switch_at(self) -> int | None:
        """The length up to which the load-time table holds (``None``: independent of seq_len)."""
        return self.rule.switch_at if self.rule is not None else None

    def at(self, seq_len: int) -> RopeTable:
        """The table for a sequence of ``seq_len`` positions (``max(position_ids) + 1``).

        Equal to ``self`` for schemes that do not depend on the sequence length.
        """
        if isinstance(seq_len, bool) or not isinstance(seq_len, (int, np.integer)):
            raise ArgumentTypeError("seq_len", f"expected an integer in [1, 2**40], got {seq_len!r}")
        if not 1 <= seq_len <= MAX_SEQ_LEN:
            raise ArgumentError("seq_len", f"expected an integer in [1, 2**40], got {seq_len!r}")
        if self.rule is None or self._scheme is None:
            return self
        frequencies = self._scheme.build(self.params, self.geometry, int(seq_len))
        return attrs.evolve(
            self,
            inv_freq=frequencies.inv_freq,
            attention_factor=frequencies.attention_factor,
            seq_len=int(seq_len),
        )

    def with_params(self, **changes: Any) -> RopeTable:
        """This table rebuilt with some of the scheme's parameters changed (``truncate=False``,
        ``beta_fast=32.0``): what a forward that misread them serves. Values are validated like
        config values."""
        if self._scheme is None:
            raise ArgumentError("params", "this table was not built by a scheme")
        scheme = self._scheme.scheme
        params = dict(self.params)
        for name, value in changes.items():
            key = scheme.key(name)
            if key is None:
                raise ArgumentError(name, f"rope_type {self.rope_type!r} has no parameter {name!r}")
            params[name] = None if value is None else key.validate(value, name, self.geometry.pairs)
        frozen = MappingProxyType(params)
        frequencies = self._scheme.build(frozen, self.geometry, self.seq_len)
        return attrs.evolve(self, params=frozen, inv_freq=frequencies.inv_freq,
                            attention_factor=frequencies.attention_factor)

    def cos_sin(
        self,
        positions: Any,
        *,
        dtype: npt.DTypeLike = np.float32,
        layout: CacheLayout | None = None,
        out: tuple[npt.NDArray[Any], npt.NDArray[Any]] | None = None,
        threads: int | None = None,
    ) -> tuple[CosSinArray, CosSinArray]:
        """``(cos, sin)`` at ``positions`` (a count ``N``, a ``range`` or integers), multiplied by
        ``attention_factor``, angles reduced in float64 (see :mod:`ropekit.tables.rotary`).

        Both are :class:`~ropekit.CosSinArray`: they carry their ``layout``, ``attention_factor``
        and ``positions``, and :func:`ropekit.apply_rotary` applies them in their own layout (an
        explicit contradicting one raises). With ``out=``, the returned arrays are views of plain
        buffers, which stay plain arrays (their layout is then the caller's to state), or the buffers
        themselves when they are ``CosSinArray`` (an earlier result). :meth:`apply` is the path that
        leaves nothing to the caller.

        ``layout``: ``neox`` (rotate-half) or ``gptj`` (interleaved), shape ``(N, rotary_dim)``, or
        ``half`` (one column per pair, ``(N, rotary_dim / 2)``); default: the table's own
        :attr:`layout`. ``threads``: at most how many threads share a long run, none with fewer than
        2048 positions (8192 tokens of 3-axis positions); the default, ``None``, allows as many as
        the cores the process may run on (as torch's CPU ops do); ``1`` stays on the calling thread.
        The result is bit-identical either way: each value depends only on its position. What
        depends only on the table (checked frequencies, offset tables) is computed once per table and reused, so
        a one-position decode step costs tens of microseconds, and the table keeps the finished
        rows of positions asked for again (a prefill chunk every request repeats), within
        :func:`ropekit.set_row_budget`'s bound (32 MiB across every table by default; see
        :mod:`ropekit.tables.kept`): such a call copies its rows. For a seq-len-dependent scheme,
        take :meth:`at` first.

        A multimodal table (:attr:`mrope_axes` > 1) also takes one row of positions per axis,
        shape ``(axes, seq)`` or ``(axes, batch, seq)``, giving ``(seq, width)`` or
        ``(batch, seq, width)``: the columns the model's code composes from each axis (see
        :mod:`ropekit.tables.mrope`); 1-D positions mean the same position on every axis, as
        transformers broadcasts text positions. Several rows on a text table raise
        :class:`~ropekit.ArgumentError`.
        """
        chosen = self.layout if layout is None else layout
        if type(positions) is np.ndarray and self.mrope_composition is not None:
            small = self._mrope_step(positions, dtype, chosen, out, threads)
            if small is not None:
                return tag(small, chosen, self.attention_factor, positions, self.rope_type, self.layer_type)
        return tag(self._cos_sin(positions, dtype, chosen, out, threads), chosen, self.attention_factor, positions,
                   self.rope_type, self.layer_type)

    def _mrope_step(
        self, positions: npt.NDArray[Any], dtype: npt.DTypeLike, chosen: str,
        out: tuple[npt.NDArray[Any], npt.NDArray[Any]] | None, threads: int | None,
    ) -> tuple[npt.NDArray[Any], npt.NDArray[Any]] | None:
        """A batch's 3-axis decode step straight to the multimodal small path (what the general call
        reaches through three frames and a keyword call), once a call in this layout has set it up."""
        fast = self._cache.get(chosen)  # (map, plans, small path): kept by the first multimodal call
        if fast is None or positions.dtype != _INT64 or positions.ndim not in (2, 3) or (
                threads is not None and not (type(threads) is int and threads > 0)):
            return None
        mapping, plans, module = fast
        if positions.shape[0] != mapping.axes:
            return None
        found: tuple[npt.NDArray[Any], npt.NDArray[Any]] | None = module.small_runs(mapping, positions, dtype, out,
                                                                                       plans)
        return found

    def _cos_sin(
        self, positions: Any, dtype: npt.DTypeLike, chosen: CacheLayout,
        out: tuple[npt.NDArray[Any], npt.NDArray[Any]] | None, threads: int | None,
    ) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
        if self.mrope_composition is None and (threads is None or (type(threads) is int and threads > 0)):
            small = small_cos_sin(self._plan(), positions, _F32 if dtype is np.float32 else _out_dtype(dtype),
                                  chosen, out)
            if small is not None:
                return small
        if self.mrope_composition is not None:
            mapping, plans = self.mrope_map(chosen), self._mrope_plans()
            served: tuple[npt.NDArray[Any], npt.NDArray[Any]] = _mrope()(
                self.inv_freq, self.attention_factor, mapping, positions, dtype=dtype, out=out,
                threads=threads, plans=plans)
            if chosen not in self._cache:
                from . import mrope

                self._cache[chosen] = (mapping, plans, mrope)
            return served
        if not isinstance(positions, (int, np.integer, range)) and _rank(positions) > 1:
            raise ArgumentError("positions", f"shape {np.shape(positions)}: several rows of positions are multimodal "
                                f"(mrope) positions, but this {self.rope_type!r} table of layer type "
                                f"{self.layer_type!r} has no mrope sections; give 1-D positions")
        from .rotary import cos_sin

        return cos_sin(self._plan(), self.attention_factor, positions, dtype=dtype, layout=chosen, out=out,
                       threads=threads)

    def apply(
        self, q: npt.NDArray[Any], k: npt.NDArray[Any], positions: Any, *, seq_len: int | None = None,
    ) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
        """``q`` and ``k`` (``(..., seq, head_dim)``) rotated at ``positions`` (``seq`` of them, or
        ``(axes, seq)`` for a multimodal table) as the model's code rotates them: this table's
        layout and attention factor, cos/sin in ``q``'s float dtype (float32 for others).

        The documented path: nothing about the cache is left to the caller. A seq-len-dependent
        table (dynamic, longrope) not yet taken :meth:`at` a length is taken at ``seq_len``,
        default ``max(positions) + 1`` (transformers' rule); one taken at a length refuses
        positions past it, and an explicit ``seq_len`` that differs from its length.
        """
        table = self._for_positions(positions, seq_len)
        dtype = q.dtype if isinstance(q, np.ndarray) and q.dtype.kind == "f" else np.float32
        rows = int(np.shape(q)[-2]) if np.ndim(q) >= 2 else -1
        count = positions if isinstance(positions, (int, np.integer)) else None
        if count is None and table.mrope_composition is None and len(np.shape(positions)) == 1:
            count = len(positions)
        if count is not None and count != rows:
            raise ArgumentError("positions", f"{count} positions for q of shape {np.shape(q)}: give one position "
                                "per row of q (its second-to-last axis)")
        from .rotary import apply_rotary

        cos, sin = table.cos_sin(positions, dtype=dtype)
        if cos.ndim != 2:
            raise ArgumentError("positions", f"positions of shape {np.shape(positions)} give a batch of caches "
                                f"{cos.shape}; apply one sequence at a time, positions (axes, seq)")
        return apply_rotary(q, k, cos, sin, pairing=table.layout if cos.layout == "half" else None)

    def _for_positions(self, positions: Any, seq_len: int | None) -> RopeTable:
        """The table that holds for ``positions``: this one, or :meth:`at` the length they imply."""
        if seq_len is not None and (isinstance(seq_len, bool) or not isinstance(seq_len, (int, np.integer))):
            raise ArgumentTypeError("seq_len", f"expected an integer in [1, 2**40] or None, got {seq_len!r}")
        if self.rule is None:
            return self
        if isinstance(positions, (int, np.integer)) and not isinstance(positions, bool):
            longest = int(positions)
        elif isinstance(positions, range):
            longest = max(positions[0], positions[-1]) + 1 if len(positions) else 0
        else:
            try:
                array = np.asarray(positions)
                longest = int(array.max()) + 1 if array.size else 0
            except (TypeError, ValueError) as error:
                raise ArgumentTypeError("positions", f"expected integer positions: {error}") from None
        if self.seq_len is not None:
            if seq_len is not None and seq_len != self.seq_len:
                raise ArgumentError("seq_len", f"{seq_len}: this {self.rope_type!r} table was taken at seq_len "
                                    f"{self.seq_len}; apply from the load-time table to choose another")
            if longest > self.seq_len:
                raise ArgumentError("positions", f"position {longest - 1} lies past this table's seq_len "
                                    f"{self.seq_len} ({self.seq_len_rule}); take table.at({longest}) or apply "
                                    "from the load-time table")
            return self
        wanted = longest if seq_len is None else int(seq_len)
        if wanted < longest:
            raise ArgumentError("seq_len", f"{seq_len} is shorter than the positions (up to {longest - 1}); "
                                "seq_len is max(position) + 1 or more")
        return self.at(max(wanted, 1))

    def rows(
        self, count: int, *, dtype: npt.DTypeLike = np.float32, layout: CacheLayout | None = None,
    ) -> RopeRows:
        """The finished cos/sin rows of positions ``0 .. count - 1`` (:class:`~ropekit.RopeRows`), for
        an engine that serves those positions for the life of a load: each later call copies or
        gathers its rows (``rows.cos_sin(positions, out=...)``) instead of computing them. The values
        are ``cos_sin(range(count))``'s, bit for bit; the memory is ``2 * count * width * itemsize`` bytes.

        A seq-len-dependent table covers the lengths its table holds for (up to :attr:`switch_at`,
        or the ``seq_len`` it was taken :meth:`at`); more rows raise :class:`~ropekit.ArgumentError`,
        since they would hold another table. Multimodal (3-axis) positions are not rows: use
        :meth:`cos_sin`.
        """
        if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or not 0 < count <= MAX_ROWS:
            raise ArgumentError("count", f"expected a number of positions in [1, {MAX_ROWS}], got {count!r}")
        if self.mrope_composition is not None:
            raise ArgumentError("count", f"the {self.layer_type!r} table composes 3-axis positions; rows hold 1-D "
                                "positions only: call cos_sin with the positions")
        if self.switch_at is not None:
            holds = max(self.switch_at, self.seq_len or 0)
            if count > holds:
                raise ArgumentError("count", f"{count} rows: this {self.rope_type!r} table holds for sequences of up "
                                    f"to {holds} positions ({self.seq_len_rule}); take table.at(seq_len).rows(...) "
                                    "for longer ones")
        from .rows import RopeRows

        chosen = self.layout if layout is None else layout
        cos, sin = (np.asarray(part) for part in self.cos_sin(range(int(count)), dtype=dtype, layout=chosen))
        cos.flags.writeable = False
        sin.flags.writeable = False
        return RopeRows(cos, sin, chosen, self.attention_factor, self.rope_type, self.layer_type)

    def mrope_map(self, layout: str) -> Any:
        """Which axis and frequency feed each cos/sin column in ``layout`` (a 3-axis table; cached)."""
        key = f"mrope_map_{layout}"
        found = self._cache.get(key)
        if found is None:
            from .mrope import MropeMap
            from .rotary import LAYOUTS

            if layout not in LAYOUTS:
                raise ArgumentError("layout", f"unknown layout {layout!r}; valid: {', '.join(LAYOUTS)}")
            assert self.mrope_composition is not None
            found = self._cache[key] = MropeMap(self.mrope_composition, self.mrope_section or (),
                                                len(self.inv_freq), layout)
        return found

    def _mrope_plans(self) -> dict[Any, Any]:
        plans = self._cache.get("mrope_plans")
        if plans is None:
            plans = self._cache["mrope_plans"] = {"full": self._plan()}
        return plans

    def _plan(self) -> Plan:
        plan = self._cache.get("plan")
        if plan is None:
            from .plan import Plan

            plan = Plan(self.inv_freq, self.attention_factor)
            if self.mrope_composition is not None:
                plan.kept = None  # 3-axis positions compose their own rows; 1-D ones are computed alike
            self._cache["plan"] = plan  # a race builds it twice, harmlessly
        return plan

    @property
    def query_scaling(self) -> Mapping[str, float] | None:
        """The per-position query temperature the model's attention applies beside this table
        (Ministral-3 / Mistral-4 ``llama_4_scaling_beta``): ``{"beta", "original_max_position_embeddings"}``,
        or ``None``. The rotation is this table's; :meth:`query_scale` gives the factor."""
        beta = self.params.get("llama_4_scaling_beta")
        original = self.params.get("original_max_position_embeddings")
        if beta is None or not original:
            return None
        return MappingProxyType({"beta": float(beta), "original_max_position_embeddings": float(original)})

    def query_scale(self, positions: Any) -> npt.NDArray[np.float64]:
        """``1 + beta * log(1 + floor(position / original_max_position_embeddings))`` per position:
        what the attention multiplies queries by after rotating them (ones when the model has no
        query scaling). float64; transformers rounds it to the query's dtype."""
        where = np.arange(positions) if isinstance(positions, (int, np.integer)) else np.asarray(positions)
        if not np.issubdtype(where.dtype, np.integer) and where.size:
            raise ArgumentTypeError("positions", f"expected integer positions, got dtype {where.dtype}")
        scaling = self.query_scaling
        if scaling is None:
            return np.ones(where.shape, dtype=np.float64)
        steps = np.floor(where.astype(np.float64) / scaling["original_max_position_embeddings"])
        result: npt.NDArray[np.float64] = 1.0 + scaling["beta"] * np.log1p(steps)
        return result

    def json_params(self) -> dict[str, Any]:
        """The parameters the table was built with, as JSON: the geometry's ``rope_theta`` and
        ``partial_rotary_factor``, then the scheme's own (tuples as lists)."""
        merged = {"rope_theta": self.geometry.theta, "partial_rotary_factor": self.geometry.partial_rotary_factor,
                  **self.params}
        return {name: list(value) if isinstance(value, tuple) else value for name, value in merged.items()}

    def to_json(self, *, inv_freq: bool = True) -> dict[str, Any]:
        """The one JSON form of a table (``ropekit table --json``; ``export`` and ``audit`` build on it).

        ``inv_freq=False`` leaves the frequencies out (for documents that store them elsewhere).
        """
        record: dict[str, Any] = {"rope_type": self.rope_type}
        if inv_freq:
            record["inv_freq"] = self.inv_freq.tolist()
        record.update(
            attention_factor=self.attention_factor,
            rotary_dim=self.rotary_dim,
            head_dim=self.head_dim,
            params=self.json_params(),
        )
        if self.seq_len is not None:
            record["seq_len"] = self.seq_len
        if self.rule is not None:
            record["seq_len_rule"] = self.rule.text
            record["switch_at"] = self.rule.switch_at
        if self.query_scaling is not None:
            rule = "q *= 1 + beta * log(1 + floor(position / original_max_position_embeddings))"
            record["query_scaling"] = {**self.query_scaling, "rule": rule}
        if self.mrope_composition is not None:
            record["mrope_section"] = list(self.mrope_section or ())
            record["mrope_interleaved"] = self.mrope_interleaved
            record["mrope_composition"] = self.mrope_composition
        record["layout"] = self.layout
        return record


_F32 = np.dtype(np.float32)
_INT64 = np.dtype(np.int64)


def _out_dtype(dtype: Any) -> np.dtype[Any]:
    from .rotary import out_dtype as checked

    return checked(dtype)


def _rank(positions: Any) -> int:
    """How many dimensions ``positions`` has (0 when numpy cannot tell)."""
    try:
        return int(np.ndim(positions))
    except (TypeError, ValueError):
        return 0


@attrs.frozen
class ModelRope:
    """Every layer type's table for one model, and which layers apply no RoPE.

    ``layer_types`` has one entry per layer, named as transformers names them (empty when the
    config does not say). A flat config has a single table (``full_attention``) that every
    attention layer uses. ``no_rope_types`` are layer types that apply no RoPE (linear attention,
    convolutions, a null per-type block, Cohere-2's full layers, or every type when the model has
    none: ``no_rope_reason`` says why); ``no_rope_layers`` are layer indices without RoPE whatever
    their type (Llama-4 and SmolLM3 ``no_rope_layers``).
    """

    tables: Mapping[str, RopeTable]
    layer_types: tuple[str, ...] = ()
    source: str = "<mapping>"
    no_rope_types: frozenset[str] = frozenset()
    no_rope_layers: tuple[int, ...] = ()
    no_rope_reason: str = ""

    @property
    def listed_types(self) -> tuple[str, ...]:
        """Every layer type the model has, in the order the config lists them (then any type with a
        table or without RoPE that no listed layer uses): the keys ``model[...]``, ``table --json``
        and ``gap --json`` answer for."""
        return tuple(dict.fromkeys((*self.layer_types, *self.tables, *sorted(self.no_rope_types))))

    def __getitem__(self, layer_type: str) -> RopeTable | None:
        """The table layers of ``layer_type`` use (``None``: that type applies no RoPE), for every
        type in :attr:`listed_types`. Layers of one type may share a table with another type (gpt-oss's
        sliding and full layers); per-index NoPE layers are :meth:`for_layer`'s to tell.

        A type the config does not list raises :class:`~ropekit.LayerLookupError`.
        """
        found = self.tables.get(layer_type) if isinstance(layer_type, str) else None
        if found is not None:
            return found
        if layer_type in self.no_rope_types:
            return None
        if isinstance(layer_type, str) and layer_type in self.layer_types:
            return self._table_of(layer_type, self.layer_types.index(layer_type))
        raise LayerLookupError("layer_type", f"{layer_type!r} is not a layer type of this model; it has "
                               f"{', '.join(map(repr, self.listed_types)) or 'none'}")

    def _layer_plan(self) -> str:
        """The layer types and what each uses, for a refusal: ``full_attention (default), sliding_attention
        (default, another table), linear_attention (no RoPE), layers 3, 7 without RoPE``."""
        parts: list[str] = []
        seen: dict[int, str] = {}
        for name in self.listed_types:
            table = self.tables.get(name)
            if table is None and name not in self.no_rope_types and self.tables:
                table = next(iter(self.tables.values())) if len(self.tables) == 1 else None
            if table is None:
                parts.append(f"{name} (no RoPE)")
                continue
            first = seen.setdefault(id(table), name)
            parts.append(f"{name} ({table.rope_type}, theta {table.geometry.theta:g}"
                         f"{'' if first == name else f', the {first} table'})")
        if self.no_rope_layers:
            parts.append(f"layers {', '.join(map(str, self.no_rope_layers[:8]))}"
                         f"{' ...' if len(self.no_rope_layers) > 8 else ''} without RoPE")
        return ", ".join(parts)

    @property
    def table(self) -> RopeTable:
        """The one table, for a model whose every layer uses it.

        Raises :class:`~ropekit.LayerLookupError` naming :meth:`for_layer` and the layer types when
        layers use more than one table (Gemma-3's sliding layers use another base) or some layers
        apply no RoPE (SmolLM3, Llama-4, hybrid models): one table would be wrong for some layer.
        """
        if not self.tables:
            why = self.no_rope_reason or "no layer type rotates"
            raise LayerLookupError("table", f"the model applies no RoPE: {why}")
        distinct = {id(table) for table in self.tables.values()}
        listed = set(self.layer_types) if self.layer_types else set(self.no_rope_types)
        if len(distinct) > 1 or self.no_rope_layers or listed & self.no_rope_types:
            raise LayerLookupError("table", f"this model has no single table: its layers are {self._layer_plan()}; "
                                   "use model.for_layer(index) for a layer, or model[layer_type] for a layer type")
        return next(iter(self.tables.values()))

    def rotating_table(self, layer_type: str | None = None) -> RopeTable:
        """The table that rotates: with ``layer_type``, the table layers of that type use (as
        ``model[layer_type]``), refusing a type without RoPE; without, the one table every layer that
        applies RoPE uses, whatever layers apply none (what one rotary module serves for the whole
        model, as transformers builds it for SmolLM3 or Qwen3-Next), refusing a model whose rotating
        layers use more than one. Refusals are :class:`~ropekit.LayerLookupError`."""
        if layer_type is not None:
            found = self[layer_type]
            if found is None:
                raise LayerLookupError("layer_type", f"layers of type {layer_type!r} apply no RoPE; its layers are "
                                       f"{self._layer_plan()}")
            return found
        distinct = {id(table): table for table in self.tables.values()}
        if len(distinct) != 1:
            raise LayerLookupError("table", f"no one table serves every rotating layer: its layers are "
                                   f"{self._layer_plan() or 'without RoPE'}; use model.for_layer(index) or "
                                   "model[layer_type]")
        return next(iter(distinct.values()))

    def for_layer(self, index: int) -> RopeTable | None:
        """The table layer ``index`` uses, or ``None`` when that layer applies no RoPE.

        ``index`` counts the model's layers as its own code numbers them (``0 .. len(layer_types) - 1``
        when the config lists them); anything else raises :class:`~ropekit.LayerLookupError`
        (:class:`~ropekit.ArgumentTypeError` for a non-integer)."""
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            raise ArgumentTypeError("index", f"expected a layer index (an integer), got {index!r}")
        count = len(self.layer_types)
        if count and not 0 <= index < count:
            raise LayerIndexError("index", f"layer {index} out of range: the model has {count} layers "
                                   f"(0..{count - 1})")
        if index < 0:
            raise LayerIndexError("index", f"layer {index}: expected a layer index of 0 or more")
        if index in self.no_rope_layers:
            return None
        return self._table_of(self.layer_types[index] if count else None, int(index))

    def _table_of(self, layer_type: str | None, index: int) -> RopeTable | None:
        """The table of a layer of ``layer_type`` (``None``: the config lists no types)."""
        if layer_type is not None:
            if layer_type in self.no_rope_types:
                return None
            if layer_type in self.tables:
                return self.tables[layer_type]
        if len(self.tables) == 1:
            return next(iter(self.tables.values()))
        if not self.tables:
            return None
        raise LayerLookupError("index", "the config declares per-layer-type rope parameters but no layer_types, "
                               f"so layer {index}'s type is unknown; its layer types are {self._layer_plan()}")

    def at(self, seq_len: int) -> ModelRope:
        """Every table at ``seq_len`` (see :meth:`RopeTable.at`)."""
        return attrs.evolve(self, tables={name: t.at(seq_len) for name, t in self.tables.items()})

    def to_json(self) -> dict[str, Any]:
        """The ``ropekit table --json`` document: one entry per layer type the model has
        (:attr:`listed_types`; types sharing a table each show it), a layer type without RoPE is
        ``{"no_rope": true}``; per-index NoPE layers are listed as ``no_rope_layers``."""
        layers: dict[str, Any] = {}
        for name in self.listed_types:
            table = self[name]
            layers[name] = table.to_json() if table is not None else {"no_rope": True}
        document: dict[str, Any] = {"layers": layers}
        if self.no_rope_layers:
            document["no_rope_layers"] = list(self.no_rope_layers)
        if self.no_rope_reason:
            document["no_rope_reason"] = self.no_rope_reason
        return document
