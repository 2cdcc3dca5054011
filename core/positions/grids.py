"""What every rule shares: runs of token types, one media block's positions, and the walk that
lays a row out (text advances by one per token, a media block by ``max(h, w)`` after merging).

This is transformers 5.24.0's ``get_rope_index`` loop, in numpy: tokens kept by the attention mask
are grouped into runs of one type; a text run of ``n`` tokens takes ``p .. p+n-1`` on all three
axes; an image or video run takes the next grid of its kind (grids are consumed in order across
the whole batch), placed at ``p`` with temporal offsets from the rule, and moves ``p`` on by
``max(h, w)`` (merged). Masked tokens get 0; a row's delta is ``max(position) + 1 - kept``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArgumentError

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["IMAGE", "MODALITIES", "VIDEO", "Block", "Media", "Run", "Timing", "assemble", "count_runs", "grid_blocks",
           "mismatch", "row_runs", "steps"]

IMAGE = 1
VIDEO = 2
MODALITIES: Mapping[int, tuple[str, str]] = {IMAGE: ("image", "image_grid_thw"), VIDEO: ("video", "video_grid_thw")}
"""Token type -> (name, the grid argument that serves it)."""

Timing = Callable[[int], "npt.NDArray[np.int64]"]
"""``t`` -> the temporal offsets of a block's ``t`` steps (before the start position is added)."""


def steps(count: int) -> npt.NDArray[np.int64]:
    """Temporal offsets ``0 .. count-1``: the rule's default, one position per temporal step."""
    return np.arange(count, dtype=np.int64)


@dataclass(frozen=True)
class Run:
    """Tokens ``start:end`` (of a row's kept tokens) share the token type ``kind``."""

    kind: int
    start: int
    end: int


@dataclass(frozen=True)
class Block:
    """One grid as its run of tokens is laid out: ``t`` steps of ``h x w`` merged patches."""

    label: str
    """Where it came from, for messages: ``image_grid_thw[0]``, ``video_grid_thw[1] frame 2``."""
    t: int
    h: int
    w: int
    detail: str
    """How ``t, h, w`` follow from the grid row, for messages."""
    timing: Timing = steps

    @property
    def tokens(self) -> int:
        """How many tokens the block's run must hold."""
        return self.t * self.h * self.w

    def positions(self, start: int) -> npt.NDArray[np.int64]:
        """``(3, tokens)`` positions: temporal, height, width, each offset by ``start``."""
        temporal = self.timing(self.t)
        return np.stack((
            np.repeat(temporal, self.h * self.w),
            np.tile(np.repeat(np.arange(self.h, dtype=np.int64), self.w), self.t),
            np.tile(np.arange(self.w, dtype=np.int64), self.t * self.h),
        )) + start


@dataclass(frozen=True)
class Media:
    """A call's grids, checked, and the runs of media tokens they must fill (what a rule reads)."""

    images: npt.NDArray[np.int64]
    videos: npt.NDArray[np.int64]
    second_per_grid_ts: Any
    """As given (``None`` when not); only the ``qwen2_5_vl`` rule reads it."""
    runs: Mapping[int, int]
    """Token type -> how many runs of it the batch holds."""
    source: str
    """Where the token types came from, for messages."""


def grid_blocks(
    grids: npt.NDArray[np.int64],
    kind: int,
    spatial_merge_size: int,
    temporal_merge_size: int = 1,
    timing: Callable[[int], Timing] | None = None,
) -> list[Block]:
    """One block per ``(t, h, w)`` row: ``t // temporal_merge_size`` steps of ``(h // m) x (w // m)``
    patches. ``h`` and ``w`` must be multiples of ``m`` and ``t`` of the temporal merge size (the
    vision tower merges whole groups, so a processor's grids always are). ``timing(i)``: row ``i``'s
    temporal offsets (default: one step each)."""
    _, argument = MODALITIES[kind]
    blocks = []
    for index, (t, h, w) in enumerate(grids.tolist()):
        label = f"{argument}[{index}]"
        if h % spatial_merge_size or w % spatial_merge_size:
            raise ArgumentError(argument, f"{label} is ({t}, {h}, {w}): h and w must be multiples of "
                                f"vision_config.spatial_merge_size {spatial_merge_size}")
        if t % temporal_merge_size:
            raise ArgumentError(argument, f"{label} is ({t}, {h}, {w}): t must be a multiple of "
                                f"vision_config.temporal_merge_size {temporal_merge_size}")
        merged = f"spatial_merge_size {spatial_merge_size}"
        if temporal_merge_size != 1:
            merged = f"temporal_merge_size {temporal_merge_size} and {merged}"
        blocks.append(Block(label, t // temporal_merge_size, h // spatial_merge_size, w // spatial_merge_size,
                            f"grid ({t}, {h}, {w}) merged by {merged}",
                            timing(index) if timing is not None else steps))
    return blocks


def row_runs(types: npt.NDArray[np.int64], kept: npt.NDArray[np.bool_]) -> list[list[Run]]:
    """Per row, the runs of one token type among the kept tokens."""
    rows = []
    for row_types, row_kept in zip(types, kept, strict=True):
        kinds = row_types[row_kept]
        edges = [0, *(np.flatnonzero(np.diff(kinds)) + 1).tolist(), int(kinds.shape[0])]
        rows.append([Run(int(kinds[start]), start, end) for start, end in itertools.pairwise(edges)])
    return rows


def count_runs(rows: Sequence[Sequence[Run]]) -> dict[int, int]:
    """How many image and video runs the whole batch holds."""
    counts = dict.fromkeys(MODALITIES, 0)
    for runs in rows:
        for run in runs:
            if run.kind in counts:
                counts[run.kind] += 1
    return counts


def mismatch(kind: int, given: str, runs: int, source: str, hint: str = "") -> ArgumentError:
    """The error for grids that do not match the runs of ``kind`` tokens in ``source``."""
    name, argument = MODALITIES[kind]
    return ArgumentError(argument, f"{given}, but {source} holds {runs} run(s) of {name} tokens (token type "
                         f"{kind}, attention-masked tokens left out); give one grid per run{hint}")


def assemble(
    rows: Sequence[Sequence[Run]],
    kept: npt.NDArray[np.bool_],
    blocks: Mapping[int, Sequence[Block]],
    source: str,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``(position_ids (3, batch, seq), deltas (batch, 1))`` for rows whose media runs take
    ``blocks`` in order. Every run's length must equal its block's token count."""
    counts = count_runs(rows)
    for kind, (name, _) in MODALITIES.items():
        given = len(blocks[kind])
        if given != counts[kind]:
            raise mismatch(kind, f"{given} {name} grid(s) given", counts[kind], source)
    batch, seq = kept.shape
    position_ids = np.zeros((3, batch, seq), dtype=np.int64)
    deltas = np.zeros((batch, 1), dtype=np.int64)
    taken = dict.fromkeys(MODALITIES, 0)
    for row, runs in enumerate(rows):
        pieces = []
        current = 0
        for run in runs:
            length = run.end - run.start
            if run.kind == 0:
                pieces.append(np.broadcast_to(np.arange(current, current + length, dtype=np.int64), (3, length)))
                current += length
                continue
            block = blocks[run.kind][taken[run.kind]]
            taken[run.kind] += 1
            if block.tokens != length:
                name, argument = MODALITIES[run.kind]
                raise ArgumentError(argument, f"{block.label}: {block.detail} makes {block.tokens} token(s), but the "
                                    f"run of {name} tokens it is matched with (row {row}, kept tokens "
                                    f"{run.start}..{run.end - 1} of {source}) holds {length}")
            pieces.append(block.positions(current))
            current += max(block.h, block.w)
        laid = np.concatenate(pieces, axis=1)
        position_ids[:, row, kept[row]] = laid
        deltas[row, 0] = int(laid.max()) + 1 - laid.shape[1]
    return position_ids, deltas
