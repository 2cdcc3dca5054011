"""The RoPE tables an ExecuTorch program (``.pte``) serves, read with the stdlib and numpy only.

ExecuTorch lifts a model's rope buffers (``freqs_cos``/``freqs_sin`` in its Llama example) into the
program as constant tensors. This module walks the few tables of ExecuTorch's flatbuffer schema
(``program.fbs``, file identifier ``ET12``, executorch 1.5.1; field slots are the declaration order,
which ExecuTorch only ever appends to) that hold constants, and, for programs exported with
``external_constants``, the ``.ptd`` data file (``flat_tensor.fbs``, identifier ``FT01``). No
executorch install is needed; the file is memory-mapped, so a program of gigabytes is not read in.

Inline constants carry no names, so the tables are found by value: a pair ``(C, S)`` of constant
float tensors of the same 2-D shape ``[positions, columns]`` (leading 1-dims dropped) with
``S[0] == 0``, ``C[0] == a`` for one ``a > 0`` in every column (an attention factor baked in when
not 1), ``S`` not all zero, and ``C**2 + S**2 == a**2`` everywhere (which also pairs each cos with its
own sin when a program holds several tables). A table whose halves are equal is Hugging Face's
duplicated-halves layout (``use_hf_rope``: rotate-half, ``neox``); otherwise it is ExecuTorch's
default ``[positions, pairs]`` (``half``). Tables referenced by several layers are read once.

What cannot be read comes back with no table and the reason (``engine["refused"]``): tables in a
``.ptd`` that is not beside the program, tables inside a delegate blob that swallowed the whole
graph, tables a static-attention export takes as inputs. A file that is not an ExecuTorch program,
or is truncated, raises :class:`~ropekit.ArgumentError` naming the path.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from ....errors import ArgumentError
from ...served import MAX_ARRAY_BYTES, ServedArtifact, ServedTable, check_regular_file

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["DUMP_ADVICE", "EXECUTORCH_NOTE", "read_pte"]

DUMP_ADVICE = (
    "Audit the model it was exported from: ropekit.torch.audit_module(model, CONFIG) on the eager module, or "
    "np.save its freqs_cos/freqs_sin buffers (model.state_dict() or the ExportedProgram's constants) and run "
    "ropekit audit CONFIG --served freqs_cos.npy --sin freqs_sin.npy --layout half (they are [positions, pairs]: "
    "one column per pair)"
)
"""How to audit what a program does not let ropekit read."""
EXECUTORCH_NOTE = "an ExecuTorch program (.pte) whose rope tables ropekit cannot read"
"""The start of every refusal :func:`read_pte` gives (the reason and :data:`DUMP_ADVICE` follow)."""

# program.fbs field slots (declaration order; a union takes two slots: its type, then its value)
_PROGRAM_PLANS, _PROGRAM_CONSTANT_BUFFER, _PROGRAM_SEGMENTS, _PROGRAM_CONSTANT_SEGMENT = 1, 2, 4, 5
_PLAN_NAME, _PLAN_VALUES, _PLAN_INPUTS, _PLAN_DELEGATES = 0, 2, 3, 7
_EVALUE_TYPE, _EVALUE_VALUE, _KERNEL_TYPE_TENSOR = 0, 1, 5
(_TENSOR_SCALAR_TYPE, _TENSOR_STORAGE_OFFSET, _TENSOR_SIZES, _TENSOR_DIM_ORDER, _TENSOR_DATA_BUFFER,
 _TENSOR_ALLOCATION, _TENSOR_EXTRA) = 0, 1, 2, 3, 5, 6, 9
_EXTRA_NAME, _EXTRA_LOCATION, _LOCATION_EXTERNAL = 1, 2, 1
_SCALAR_TYPES = {5: "float16", 6: "float32", 7: "float64", 15: "bfloat16"}  # the float ScalarTypes
_ITEM_SIZE = {"float16": 2, "float32": 4, "float64": 8, "bfloat16": 2}
_MAX_COLUMNS = 1 << 16
_MAX_DIMS = 16  # ExecuTorch's kTensorDimensionLimit
_MAX_CONSTANTS = 1 << 16
_MAX_SIDES = 256
"""The most distinct constants read whole as one side of a rope table (each cos is tried against each sin)."""
"""The most distinct 2-D float constants a program may hold (a 70B Llama has about 600)."""


class _CorruptError(Exception):
    """A read outside the file or a value the schema does not allow (reported with the path)."""


class _Bytes:
    """Bounds-checked little-endian reads from a memory-mapped file, and the budget of vector entries every walk
    of it may visit: a flatbuffer's tables may be referenced from anywhere, so a file can alias one vector of
    ``n`` tables ``n`` times (``n**2`` visits from ``n`` words); an honest program is walked at most twice."""

    def __init__(self, data: mmap.mmap) -> None:
        self.data, self.size = data, len(data)
        self.budget = 2 * self.size + 4096

    def unpack(self, fmt: str, offset: int) -> Any:
        width = struct.calcsize("<" + fmt)
        if offset < 0 or offset + width > self.size:
            raise _CorruptError(f"a read at byte {offset} runs past the end ({self.size} bytes)")
        return struct.unpack_from("<" + fmt, self.data, offset)[0]

    def span(self, start: int, length: int) -> bytes:
        if start < 0 or length < 0 or start + length > self.size:
            raise _CorruptError(f"{length} bytes at byte {start} run past the end ({self.size} bytes)")
        return self.data[start:start + length]

    def charge(self, count: int, at: int) -> None:
        self.budget -= count
        if self.budget < 0:
            raise _CorruptError(f"the vector at byte {at} takes the entries visited past {2 * self.size + 4096} "
                                f"(twice the file's {self.size} bytes): its tables are referenced over and over")


class _Vector(Sequence[int]):
    """A vector's entries, each read when asked for: a count taken from the file allocates nothing."""

    __slots__ = ("buf", "fmt", "item", "length", "start")

    def __init__(self, buf: _Bytes, start: int, length: int, fmt: str) -> None:
        self.buf, self.start, self.length, self.fmt = buf, start, length, fmt
        self.item = struct.calcsize("<" + fmt)

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: Any) -> Any:
        if not isinstance(index, int) or not 0 <= index < self.length:
            raise IndexError(index)
        return int(self.buf.unpack(self.fmt, self.start + self.item * index))

    def __iter__(self) -> Iterator[int]:
        return (self[index] for index in range(self.length))


class _Tables(Sequence["_Table"]):
    """A vector of tables, each found when asked for."""

    __slots__ = ("offsets",)

    def __init__(self, offsets: _Vector) -> None:
        self.offsets = offsets

    def __len__(self) -> int:
        return len(self.offsets)

    def __getitem__(self, index: Any) -> Any:
        at = self.offsets.start + 4 * index
        return _Table(self.offsets.buf, at + self.offsets[index])

    def __iter__(self) -> Iterator[_Table]:
        return (self[index] for index in range(len(self)))


class _Table:
    """One flatbuffer table: its fields by slot, through its vtable."""

    __slots__ = ("buf", "pos")

    def __init__(self, buf: _Bytes, pos: int) -> None:
        self.buf, self.pos = buf, pos

    def _field(self, slot: int) -> int:
        vtable = self.pos - int(self.buf.unpack("i", self.pos))
        length = int(self.buf.unpack("H", vtable))
        entry = 4 + 2 * slot
        return 0 if entry + 2 > length else int(self.buf.unpack("H", vtable + entry))

    def scalar(self, slot: int, fmt: str, default: int = 0) -> int:
        offset = self._field(slot)
        return default if not offset else int(self.buf.unpack(fmt, self.pos + offset))

    def _indirect(self, slot: int) -> int | None:
        offset = self._field(slot)
        if not offset:
            return None
        at = self.pos + offset
        return at + int(self.buf.unpack("I", at))

    def table(self, slot: int) -> _Table | None:
        at = self._indirect(slot)
        return None if at is None else _Table(self.buf, at)

    def _vector(self, slot: int, item: int, *, visited: bool = True) -> tuple[int, int] | None:
        at = self._indirect(slot)
        if at is None:
            return None
        count = int(self.buf.unpack("I", at))
        if at + 4 + count * item > self.buf.size:
            raise _CorruptError(f"a vector of {count} entries at byte {at} runs past the end ({self.buf.size} bytes)")
        if visited:
            self.buf.charge(count, at)
        return at + 4, count

    def tables(self, slot: int) -> _Tables:
        found = self._vector(slot, 4)
        return _Tables(_Vector(self.buf, *(found or (0, 0)), "I"))

    def vector(self, slot: int, fmt: str) -> _Vector:
        """The numbers of a scalar vector, read one at a time."""
        found = self._vector(slot, struct.calcsize("<" + fmt))
        return _Vector(self.buf, *(found or (0, 0)), fmt)

    def numbers(self, slot: int, fmt: str, limit: int = _MAX_DIMS) -> tuple[int, ...]:
        """A short vector (a tensor's sizes or dim order: ExecuTorch allows 16 dims) read whole."""
        found = self._vector(slot, struct.calcsize("<" + fmt))
        if found is None:
            return ()
        start, count = found
        if count > limit:
            raise _CorruptError(f"a tensor of {count} dims at byte {start - 4} (ExecuTorch allows {limit})")
        return tuple(int(value) for value in struct.unpack_from(f"<{count}{fmt}", self.buf.data, start))

    def bytes_at(self, slot: int) -> tuple[int, int] | None:
        """``(start, length)`` of a ``[ubyte]`` vector."""
        return self._vector(slot, 1, visited=False)  # its bytes are not visited one by one

    def string(self, slot: int) -> str | None:
        found = self._vector(slot, 1)
        if found is None:
            return None
        try:
            return self.buf.span(*found).decode()
        except UnicodeDecodeError as error:
            raise _CorruptError(f"a name that is not UTF-8 at byte {found[0]}") from error


@attrs.frozen
class _Constant:
    """One constant float tensor of the program: where its bytes are, once found."""

    key: str
    """``constant N`` (the program's buffer index) or the fully qualified name of an external constant."""
    dtype: str
    shape: tuple[int, int]
    external: bool
    start: int = -1
    """Byte offset in the program (inline constants)."""


@attrs.frozen(eq=False)
class _Candidate:
    """A constant read whole: one side (``kind``: ``cos`` or ``sin``) of a rope table, perhaps."""

    constant: _Constant
    kind: str
    values: npt.NDArray[np.float64]
    source: str
    """The file its bytes were read from (the program, or a ``.ptd``)."""


def _open(path: str) -> tuple[Any, mmap.mmap]:
    info = check_regular_file(path, "served")
    if info.st_size == 0:
        raise ArgumentError("served", f"{path}: empty file; not an ExecuTorch program or data file")
    try:
        handle = open(path, "rb")  # noqa: SIM115 (closed with the map by the caller)
    except OSError as error:
        raise ArgumentError("served", f"{path}: cannot read: {error.strerror or error}") from None
    try:
        return handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as error:
        handle.close()
        raise ArgumentError("served", f"{path}: cannot map: {error}") from None


class _Program:
    """A ``.pte`` opened for reading its constants."""

    def __init__(self, path: str, buf: _Bytes) -> None:
        self.path, self.buf = path, buf
        if buf.size < 8 or buf.span(4, 2) != b"ET":
            raise ArgumentError("served", f"{path}: not an ExecuTorch program (file identifier "
                                f"{buf.span(4, 4) if buf.size >= 8 else b''!r}; a .pte has ET12)")
        self.identifier = buf.span(4, 4).decode("ascii", "replace")
        self.segment_base = 0
        if buf.size >= 32 and buf.span(8, 4) == b"eh00":  # extended header: length, program size, segment base
            self.segment_base = int(buf.unpack("Q", 24))
            data_size = int(buf.unpack("Q", 32)) if int(buf.unpack("I", 12)) >= 32 else 0
            if self.segment_base + data_size > buf.size:
                raise _CorruptError(f"its segments end at byte {self.segment_base + data_size}, past the end "
                               f"({buf.size} bytes): truncated")
        self.root = _Table(buf, int(buf.unpack("I", 0)))
        self.plans = self.root.tables(_PROGRAM_PLANS)

    def delegates(self) -> set[str]:
        """The delegates' backend ids (the first 16 distinct, for the report)."""
        found: set[str] = set()
        for plan in self.plans:
            for delegate in plan.tables(_PLAN_DELEGATES):
                if len(found) < 16:
                    found.add((delegate.string(0) or "?")[:128])
        return found

    def constants(self) -> Iterator[_Constant]:
        """Every distinct constant float tensor that is 2-D with at least 2 rows once 1-dims are dropped."""
        inline = self.root.tables(_PROGRAM_CONSTANT_BUFFER)
        segment = self.root.table(_PROGRAM_CONSTANT_SEGMENT)
        offsets = segment.vector(1, "Q") if segment is not None else _Vector(self.buf, 0, 0, "Q")
        segment_start = segment_end = 0
        if offsets:
            assert segment is not None
            segments = self.root.tables(_PROGRAM_SEGMENTS)
            index = segment.scalar(0, "I")
            if index >= len(segments):
                raise _CorruptError(f"the constant segment is segment {index} of {len(segments)}")
            segment_start = self.segment_base + segments[index].scalar(0, "Q")
            segment_end = segment_start + segments[index].scalar(1, "Q")
        seen: set[str] = set()
        for plan in self.plans:
            for value in plan.tables(_PLAN_VALUES):
                if value.scalar(_EVALUE_TYPE, "B") != _KERNEL_TYPE_TENSOR:
                    continue
                tensor = value.table(_EVALUE_VALUE)
                if tensor is None:
                    continue
                dtype = _SCALAR_TYPES.get(tensor.scalar(_TENSOR_SCALAR_TYPE, "b"))
                index = tensor.scalar(_TENSOR_DATA_BUFFER, "I")
                extra = tensor.table(_TENSOR_EXTRA)
                external = extra is not None and extra.scalar(_EXTRA_LOCATION, "b") == _LOCATION_EXTERNAL
                if dtype is None or tensor.table(_TENSOR_ALLOCATION) is not None or (index == 0 and not external):
                    continue  # not a float constant: memory-planned, an input, or another dtype
                name = extra.string(_EXTRA_NAME) if extra is not None else None
                key = name if external and name else f"constant {index}"
                if key in seen:
                    continue  # one table referenced by every layer
                seen.add(key)
                if len(seen) > _MAX_CONSTANTS:
                    raise _CorruptError(f"more than {_MAX_CONSTANTS} constant tensors (at {key})")
                shape = _table_shape(tensor.numbers(_TENSOR_SIZES, "i"), tensor.numbers(_TENSOR_DIM_ORDER, "B"))
                if shape is None:
                    continue
                if external:
                    yield _Constant(key, dtype, shape, True)
                    continue
                skip = tensor.scalar(_TENSOR_STORAGE_OFFSET, "i") * _ITEM_SIZE[dtype]
                if skip < 0:
                    raise _CorruptError(f"constant {index} starts {skip} bytes before its storage")
                nbytes = shape[0] * shape[1] * _ITEM_SIZE[dtype]
                if offsets:
                    if index >= len(offsets):
                        raise _CorruptError(f"constant {index} has no offset (the segment lists {len(offsets)})")
                    start = segment_start + offsets[index] + skip
                    if start + nbytes > min(segment_end, self.buf.size):
                        raise _CorruptError(f"constant {index} ({nbytes} bytes) runs past the end of its segment or of "
                                       "the file: truncated")
                else:
                    if index >= len(inline):
                        raise _CorruptError(f"constant {index} is missing from the constant buffer "
                                            f"({len(inline)} entries)")
                    storage = inline[index].bytes_at(0)
                    if storage is None or storage[1] < skip + nbytes:
                        raise _CorruptError(f"constant {index}'s buffer is shorter than its {nbytes} bytes")
                    start = storage[0] + skip
                yield _Constant(key, dtype, shape, False, start)

    def float_inputs(self) -> list[tuple[int, ...]]:
        """The shapes of the float tensors the program takes as inputs (the first 16 distinct, for the report)."""
        shapes: list[tuple[int, ...]] = []
        for plan in self.plans:
            values = plan.tables(_PLAN_VALUES)
            for index in plan.vector(_PLAN_INPUTS, "i"):
                if not 0 <= index < len(values) or values[index].scalar(_EVALUE_TYPE, "B") != _KERNEL_TYPE_TENSOR:
                    continue
                tensor = values[index].table(_EVALUE_VALUE)
                if tensor is not None and tensor.scalar(_TENSOR_SCALAR_TYPE, "b") in _SCALAR_TYPES:
                    shape = tensor.numbers(_TENSOR_SIZES, "i")
                    if shape not in shapes and len(shapes) < 16:
                        shapes.append(shape)
        return shapes


def _table_shape(sizes: Sequence[int], dim_order: Sequence[int]) -> tuple[int, int] | None:
    """``[rows, columns]`` of a contiguous tensor that is 2-D once its 1-dims are dropped, else ``None``."""
    if any(size < 0 for size in sizes) or (dim_order and list(dim_order) != list(range(len(sizes)))):
        return None
    kept = [size for size in sizes if size != 1]
    if len(kept) != 2 or kept[0] < 2 or not 1 <= kept[1] <= _MAX_COLUMNS:
        return None
    if kept[0] * kept[1] * 8 > MAX_ARRAY_BYTES:
        return None
    return kept[0], kept[1]


def _decode(raw: bytes, dtype: str, shape: tuple[int, ...]) -> npt.NDArray[np.float64]:
    if dtype == "bfloat16":
        widened = np.frombuffer(raw, "<u2").astype(np.uint32)
        del raw
        widened <<= 16
        return widened.view(np.float32).astype(np.float64).reshape(shape)
    return np.frombuffer(raw, np.dtype(dtype).newbyteorder("<")).astype(np.float64).reshape(shape)


class _Data:
    """The named tensors of the ``.ptd`` files found for a program: ``key -> (file, start, length)``."""

    def __init__(self) -> None:
        self.entries: dict[str, tuple[str, int, int]] = {}
        self.files: list[str] = []
        self.skipped: list[str] = []
        self.size = 0
        """The bytes of the files read."""

    def add(self, path: str) -> None:
        handle, data = _open(path)
        try:
            buf = _Bytes(data)
            try:
                self._index(path, buf)
            except (_CorruptError, struct.error) as error:
                raise ArgumentError("served", f"{path}: corrupt or truncated ExecuTorch data file (.ptd): "
                                    f"{error}") from None
        finally:
            data.close()
            handle.close()
        self.files.append(path)
        self.size += buf.size

    def _index(self, path: str, buf: _Bytes) -> None:
        if buf.size < 40 or buf.span(4, 4) != b"FT01" or buf.span(8, 4) != b"FH01":
            raise ArgumentError("served", f"{path}: not an ExecuTorch data file (a .ptd starts with the "
                                "identifiers FT01 and FH01)")
        base = int(buf.unpack("Q", 32))
        root = _Table(buf, int(buf.unpack("I", 0)))
        segments = root.tables(1)
        for entry in root.tables(2):
            key, index = entry.string(0), entry.scalar(1, "I")
            if key is None or index >= len(segments):
                raise _CorruptError(f"named data {key!r} points at segment {index} of {len(segments)}")
            offset, size = segments[index].scalar(0, "Q"), segments[index].scalar(1, "Q")
            if base + offset + size > buf.size:
                raise _CorruptError(f"{key}'s {size} bytes run past the end ({buf.size} bytes): truncated")
            if key not in self.entries and len(self.entries) >= _MAX_CONSTANTS:
                raise _CorruptError(f"more than {_MAX_CONSTANTS} named tensors (at {key})")
            self.entries.setdefault(key, (path, base + offset, size))

    def read(self, key: str, nbytes: int) -> bytes:
        path, start, size = self.entries[key]
        if size < nbytes:
            raise ArgumentError("served", f"{path}: {key} holds {size} bytes; the program needs {nbytes}")
        handle, data = _open(path)
        try:
            if start + nbytes > len(data):
                raise ArgumentError("served", f"{path}: {key} runs past the end ({len(data)} bytes): changed "
                                    "while read")
            return data[start:start + nbytes]
        finally:
            data.close()
            handle.close()


def _data_files(path: str, given: Sequence[str]) -> tuple[list[str], list[str]]:
    """The ``.ptd`` files to read (given, or the same stem beside the program) and the other ``.ptd``
    files in its folder (read only if those lack a key)."""
    if given:
        return list(given), []
    folder = os.path.dirname(path) or "."  # as given: the audit names it relative when the program is
    stem = os.path.splitext(os.path.basename(path))[0]
    try:
        names = sorted(name for name in os.listdir(folder) if name.lower().endswith(".ptd"))
    except OSError:
        names = []
    first = [os.path.join(folder, name) for name in names if os.path.splitext(name)[0] == stem]
    rest = [os.path.join(folder, name) for name in names if os.path.splitext(name)[0] != stem]
    return first, rest


def read_pte(path: str, *, data: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
             ) -> ServedArtifact:
    """The rope tables of the ExecuTorch program at ``path``: one ``cache`` table per distinct
    cos/sin pair (cos in ``values``, its ``sin``; ``layout`` ``half`` for ExecuTorch's
    ``[positions, pairs]``, ``neox`` for the duplicated-halves ``use_hf_rope`` table; ``dtype`` as
    stored; angles formed in float32, as ExecuTorch computes them).

    ``data``: the ``.ptd`` file(s) holding the program's external constants. By default, when the
    program has external constants, ``<stem>.ptd`` beside it is read, then the other ``.ptd`` files
    in its folder (ExecuTorch writes ``_default_external_constant.ptd``) until every key is found.

    ``engine`` holds the schema identifier, the delegates' backend ids, the data files read and the
    tensors each table came from. No table found: no table, and ``engine["refused"]`` says why and
    how to dump the buffers instead. A foreign, truncated or corrupt file raises
    :class:`~ropekit.ArgumentError` naming it.
    """
    given = [os.fspath(item) for item in ([data] if isinstance(data, (str, os.PathLike)) else data or ())]
    handle, mapped = _open(path)
    try:
        try:
            program = _Program(path, _Bytes(mapped))
            delegates = program.delegates()
            constants = list(program.constants())
            inputs = program.float_inputs()
            candidates, missing, external_files = _candidates(path, program, constants, given)
        except (_CorruptError, struct.error) as error:
            raise ArgumentError("served", f"{path}: corrupt or truncated ExecuTorch program: {error}") from None
    finally:
        mapped.close()
        handle.close()
    engine: dict[str, Any] = {"schema": program.identifier, "delegates": sorted(set(delegates))}
    if external_files:
        engine["data_files"] = external_files
    tables, sources = _pair(path, candidates)
    if tables:
        engine["tables"] = sources
        return ServedArtifact(path, "executorch", tuple(tables), producer="ExecuTorch", engine=engine)
    engine["refused"] = f"{EXECUTORCH_NOTE}: {_why_none(path, missing, delegates, inputs, external_files)}. " \
                        f"{DUMP_ADVICE}"
    return ServedArtifact(path, "executorch", (), producer="ExecuTorch", engine=engine)


def _candidates(
    path: str, program: _Program, constants: list[_Constant], given: list[str]
) -> tuple[list[_Candidate], list[str], list[str]]:
    """The constants that can be one side of a rope table (row 0 all one positive value, or all
    zero), read whole only when a partner of the same shape exists; the external keys no ``.ptd``
    held; the ``.ptd`` files read."""
    external = [constant for constant in constants if constant.external]
    store = _Data()
    missing: list[str] = []
    if external:
        first, rest = _data_files(path, given)
        for file in first:
            store.add(file)
        for file in rest:
            if all(constant.key in store.entries for constant in external):
                break
            try:
                store.add(file)
            except ArgumentError:
                store.skipped.append(file)
        missing = [constant.key for constant in external if constant.key not in store.entries]

    # Each constant's row 0 is read, then the candidates whole: distinct tensors hold distinct bytes, so neither
    # adds up past the files' size (tensors aliasing one region are read once; shifted views of one are refused).
    size = program.buf.size + store.size
    budget = {"row 0": size, "whole": size}
    decoded: dict[tuple[str, int, int, str], npt.NDArray[np.float64] | None] = {}  # None: not finite

    def raw(constant: _Constant, nbytes: int, what: str) -> bytes:
        budget[what] -= nbytes
        if budget[what] < 0:
            raise _CorruptError(f"its constants' {what} reads pass the {size} bytes of the files at {constant.key} "
                                f"({nbytes} bytes): tensors overlapping in storage")
        if constant.external:
            return store.read(constant.key, nbytes)
        return program.buf.span(constant.start, nbytes)

    def whole(constant: _Constant) -> npt.NDArray[np.float64] | None:
        nbytes = constant.shape[0] * constant.shape[1] * _ITEM_SIZE[constant.dtype]
        where = store.entries[constant.key][:2] if constant.external else (path, constant.start)
        region = (where[0], where[1], nbytes, constant.dtype)
        if region not in decoded:
            if len(decoded) == _MAX_SIDES:
                raise _CorruptError(f"more than {_MAX_SIDES} constants look like one side of a rope table (at "
                                    f"{constant.key})")
            values = _decode(raw(constant, nbytes, "whole"), constant.dtype, constant.shape)
            decoded[region] = values if np.all(np.isfinite(values)) else None
        return decoded[region]

    rows0: dict[str, str] = {}
    for constant in constants:
        if constant.external and constant.key in missing:
            continue
        width = constant.shape[1]
        first_row = _decode(raw(constant, width * _ITEM_SIZE[constant.dtype], "row 0"), constant.dtype, (width,))
        tol = _tolerance(constant.dtype)
        if not np.all(np.isfinite(first_row)):
            continue
        if np.all(np.abs(first_row) <= tol):
            rows0[constant.key] = "sin"
        elif np.ptp(first_row) <= tol * max(1.0, float(first_row[0])) and first_row[0] > tol:
            rows0[constant.key] = "cos"
    kinds = {(constant.shape, rows0[constant.key]) for constant in constants if constant.key in rows0}
    found = []
    for constant in constants:
        kind = rows0.get(constant.key)
        if kind is None or (constant.shape, "sin" if kind == "cos" else "cos") not in kinds:
            continue
        values = whole(constant)
        if values is not None:
            source = store.entries[constant.key][0] if constant.external else path
            found.append(_Candidate(constant, kind, values, source))
    return found, missing, store.files


def _tolerance(dtype: str) -> float:
    return 1e-5 if dtype in ("float32", "float64") else 1e-2


def _pair(path: str, candidates: list[_Candidate]) -> tuple[list[ServedTable], list[dict[str, Any]]]:
    """Each cos with the sin that completes it (``C**2 + S**2 == a**2``), identical pairs once."""
    coses = [c for c in candidates if c.kind == "cos"]
    live: dict[int, bool] = {}  # by array: tensors sharing storage share one
    for candidate in candidates:
        if candidate.kind == "sin" and id(candidate.values) not in live:
            live[id(candidate.values)] = bool(np.any(np.abs(candidate.values[1:]) > 0))
    sins = [c for c in candidates if c.kind == "sin" and live[id(c.values)]]
    tables: list[ServedTable] = []
    sources: list[dict[str, Any]] = []
    used: set[str] = set()
    for cos in coses:
        magnitude = float(cos.values[0, 0])
        for sin in sins:
            if sin.constant.key in used or sin.values.shape != cos.values.shape:
                continue
            known = next((i for i, table in enumerate(tables)
                          if table.values is cos.values and table.sin is sin.values), None)
            if known is not None:  # tensors sharing the storage of a table already paired: decoded once, judged once
                used.add(sin.constant.key)
                sources[known]["aliases"].append([cos.constant.key, sin.constant.key])
                break
            tol = max(_tolerance(cos.constant.dtype), _tolerance(sin.constant.dtype)) * 4 * max(magnitude ** 2, 1.0)
            if float(np.max(np.abs(cos.values ** 2 + sin.values ** 2 - magnitude ** 2))) > tol:
                continue
            used.add(sin.constant.key)
            same = next((i for i, table in enumerate(tables) if table.values.shape == cos.values.shape
                         and table.sin is not None and np.array_equal(table.values, cos.values)
                         and np.array_equal(table.sin, sin.values)), None)
            if same is not None:  # the same table under other names (external constants: one per module)
                sources[same]["aliases"].append([cos.constant.key, sin.constant.key])
                break
            layout = _layout(cos.values, sin.values)
            rows, columns = cos.values.shape
            where = (f"{path}: constant tensors {_label(cos)} (cos) and {_label(sin)} (sin), [{rows}, {columns}] "
                     f"{cos.constant.dtype}, "
                     + ("duplicated halves (rotate-half)" if layout == "neox" else "one column per pair"))
            tables.append(ServedTable(where, "cache", cos.values, cos.constant.dtype, sin=sin.values, layout=layout,
                                      angles="float32"))
            sources.append({"cos": cos.constant.key, "sin": sin.constant.key, "shape": [rows, columns],
                            "dtype": cos.constant.dtype, "layout": layout, "attention_factor": magnitude,
                            "aliases": []})
            break
    return tables, sources


def _label(candidate: _Candidate) -> str:
    """``#12`` for an unnamed constant (its buffer index), the name and file for an external one."""
    key = candidate.constant.key
    if candidate.constant.external:
        return f"{key} in {os.path.basename(candidate.source)}"
    return "#" + key.removeprefix("constant ")


def _layout(cos: npt.NDArray[np.float64], sin: npt.NDArray[np.float64]) -> str:
    """``neox`` for a table whose two halves are equal (``cat(freqs, freqs)``), else ``half``."""
    columns = cos.shape[1]
    if columns % 2 or columns < 2:
        return "half"
    half = columns // 2
    duplicated = np.array_equal(cos[:, :half], cos[:, half:]) and np.array_equal(sin[:, :half], sin[:, half:])
    return "neox" if duplicated else "half"


def _why_none(path: str, missing: list[str], delegates: set[str], inputs: list[tuple[int, ...]],
              files: list[str]) -> str:
    if missing:
        stem = os.path.splitext(os.path.basename(path))[0]
        read = f".ptd files read: {', '.join(os.path.basename(file) for file in files)}" if files else \
            "no .ptd file there"
        ropeish = sorted(missing, key=lambda key: not any(word in key.lower() for word in ("freqs", "rope", "cos")))
        shown = ", ".join(ropeish[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
        return (f"its constants are stored outside the program (external constants) and the .ptd data file that "
                f"holds them is not beside it ({stem}.ptd, or the _default_external_constant.ptd ExecuTorch writes, "
                f"in the same folder; {read}); missing keys: {shown}. Put the .ptd it was exported with beside it")
    reasons = ["no constant cos/sin pair among its constants (a cos table's row 0 all one value, its sin's all 0)"]
    if delegates:
        reasons.append(f"its delegates ({', '.join(sorted(set(delegates)))}) are opaque blobs that can hold the "
                       "tables (a backend that takes the whole graph hides them)")
    tables = [shape for shape in inputs if len([size for size in shape if size != 1]) == 2]
    if tables:
        reasons.append(f"it takes 2-D float inputs {', '.join(str(list(shape)) for shape in tables)}: a "
                       "static-attention export passes freqs_cos/freqs_sin in at run time")
    reasons.append("an export_llm run without a checkpoint leaves the tables uninitialised")
    return "; ".join(reasons)
