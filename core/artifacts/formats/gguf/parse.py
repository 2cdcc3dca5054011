"""A bounded reader of a GGUF's header, key-value section and tensor infos: ropekit's own, not the ``gguf``
package's ``GGUFReader``.

Why not ``GGUFReader``: it materialises every key's value, every array element by element, trusting each
count it reads, so a 114-byte file whose ``tokenizer.ggml.scores`` claims 2**64 - 1 items makes it loop past
the end of the file with memory growing until the process is killed; nothing it offers bounds that. This reader
never trusts a count: every count, length, dimension and offset is checked against the bytes left in the file
(and a sane limit) before it is used, so memory stays within a small multiple of the file's size (the file is
memory-mapped, read-only) and time within one pass over the key-value and tensor-info sections.

It reads only what the audit needs: ``general.architecture``, ``general.alignment``, every ``{arch}.*`` key, and
the rope tensors named in ``wanted``; every other key is skipped (a string array is walked, one length at a time,
each checked), every other tensor's info only checked (its type, dims and bytes inside the data section), not kept.
The checks are llama.cpp's ``gguf_init_from_file`` where it has one (duplicate keys and tensor names, at most 4
dims, a power-of-two alignment, data inside the file). The values come back as ``GGUFReader``'s ``contents()``
gives them (Python ints, floats, bools, strings and lists of them), so the rest of the reader is unchanged; a file
that passes here is one ``GGUFReader`` reads within the file (the repair copies it with the ``gguf`` package).
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Collection
from typing import Any, Literal

import numpy as np

__all__ = ["MAX_ARRAY_ITEMS", "MAX_KEYS", "MAX_TENSORS", "GgufFormatError", "GgufHeader", "read_header"]

MAX_KEYS = 1 << 16
"""The most key-value pairs read (real files hold about 40)."""
MAX_TENSORS = 1 << 20
"""The most tensors a file may declare (a 405B model holds about 1,100)."""
MAX_ARRAY_ITEMS = 1 << 16
"""The longest array materialised for a key the audit reads (``{arch}.*`` arrays hold one item per layer, at most
llama.cpp's 512); a skipped array may be as long as the file has bytes for."""
MAX_NAME = 1 << 16
"""The longest key or tensor name (GGUF's spec: 65535 bytes)."""
MAX_DEPTH = 4
"""The deepest array of arrays walked."""
_MIN_KV = 8 + 4 + 1  # an empty key name, the value type, the smallest value
_MIN_TENSOR_INFO = 8 + 4 + 4 + 8  # an empty name, n_dims 0, the type, the offset

_SCALARS: dict[int, tuple[str, str]] = {
    0: ("B", "uint8"), 1: ("b", "int8"), 2: ("H", "uint16"), 3: ("h", "int16"), 4: ("I", "uint32"), 5: ("i", "int32"),
    6: ("f", "float32"), 7: ("?", "bool"), 10: ("Q", "uint64"), 11: ("q", "int64"), 12: ("d", "float64"),
}
_STRING, _ARRAY = 8, 9
_FLOAT_TENSORS = {0: "float32", 1: "float16", 28: "float64", 30: "bfloat16"}
"""ggml types a rope tensor may be read in (F32, F16, F64, BF16)."""


class GgufFormatError(ValueError):
    """The file is not a GGUF llama.cpp would load: ``where`` the key, tensor or byte offset, ``problem`` what
    is wrong and what would be valid."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where, self.problem = where, problem


class GgufHeader:
    """What :func:`read_header` found: the ``fields`` the audit reads, the ``tensors`` asked for (float64
    arrays in numpy order), every tensor's ``names``, the ``version`` and the ``byte_order`` (``<`` or ``>``)."""

    def __init__(self, fields: dict[str, Any], tensors: dict[str, Any], names: list[str], version: int,
                 byte_order: str) -> None:
        self.fields, self.tensors, self.names, self.version, self.byte_order = fields, tensors, names, version, \
            byte_order


def read_header(path: str, wanted: Collection[str], quant_sizes: dict[int, tuple[int, int]]) -> GgufHeader:
    """The GGUF at ``path``: its audit keys and the tensors named in ``wanted`` (``quant_sizes``: ggml type ->
    (block size, bytes per block), the ``gguf`` package's ``GGML_QUANT_SIZES``). Raises
    :class:`GgufFormatError` naming the key, tensor or offset at fault."""
    size = os.path.getsize(path)
    if size < 24:
        raise GgufFormatError("header", f"the file has {size} bytes; a GGUF header alone is 24")
    with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
        return _Parser(data, size, wanted, quant_sizes).parse()


class _Parser:
    def __init__(self, data: mmap.mmap, size: int, wanted: Collection[str],
                 quant_sizes: dict[int, tuple[int, int]]) -> None:
        self.data, self.size, self.wanted, self.quant_sizes = data, size, frozenset(wanted), quant_sizes
        self.pos = 0
        self.order: Literal["<", ">"] = "<"

    # -- primitives, each checked against the bytes left --------------------------------------------------
    def need(self, count: int, what: str) -> None:
        if count < 0 or count > self.size - self.pos:
            raise GgufFormatError(what, f"needs {count} bytes at offset {self.pos}, the file has "
                                  f"{self.size - self.pos} left (truncated, or a count or length that lies)")

    def unpack(self, code: str, what: str) -> Any:
        width = struct.calcsize(code)
        self.need(width, what)
        value = struct.unpack_from(self.order + code, self.data, self.pos)[0]
        self.pos += width
        return value

    def string_bytes(self, what: str, limit: int | None = None) -> bytes:
        length = self.unpack("Q", what)
        if limit is not None and length > limit:
            raise GgufFormatError(what, f"a length of {length} bytes; at most {limit} are valid here")
        self.need(length, what)
        raw = self.data[self.pos:self.pos + length]
        self.pos += length
        return raw

    def text(self, what: str, limit: int | None = None) -> str:
        raw = self.string_bytes(what, limit)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise GgufFormatError(what, f"not UTF-8 (byte {error.start} of {len(raw)}); GGUF strings are UTF-8") \
                from None

    def skip_string(self, what: str) -> None:
        length = self.unpack("Q", what)
        self.need(length, what)
        self.pos += length

    # -- the sections ----------------------------------------------------------------------------------------
    def parse(self) -> GgufHeader:
        if self.data[:4] != b"GGUF":
            raise GgufFormatError("header", f"magic {bytes(self.data[:4])!r}, not b'GGUF'")
        self.pos = 4
        version = self.unpack("I", "header version")
        if version & 0xFFFF == 0:  # written on a big-endian machine (as the gguf package decides)
            self.order = ">"
            version = struct.unpack(">I", struct.pack("<I", version))[0]
        if version not in (2, 3):
            raise GgufFormatError("header version", f"{version}; llama.cpp reads GGUF versions 2 and 3")
        n_tensors = self.unpack("Q", "header tensor_count")
        n_kv = self.unpack("Q", "header kv_count")
        self.bound(n_kv, MAX_KEYS, _MIN_KV, "header kv_count")
        fields = self.keys(n_kv)
        alignment = fields.get("general.alignment", 32)
        if not isinstance(alignment, int) or isinstance(alignment, bool) or alignment <= 0 or alignment & (
                alignment - 1):
            raise GgufFormatError("general.alignment", f"{alignment!r}; a non-zero power of two is valid")
        self.bound(n_tensors, MAX_TENSORS, _MIN_TENSOR_INFO, "header tensor_count")
        infos, names = self.tensor_infos(n_tensors)
        start = -(-self.pos // alignment) * alignment
        tensors = {}
        for name, (shape, kind, offset, nbytes) in infos.items():
            if offset % alignment:
                raise GgufFormatError(f"tensor {name!r}", f"offset {offset} is not a multiple of the alignment "
                                      f"{alignment}")
            if start + offset + nbytes > self.size:
                raise GgufFormatError(f"tensor {name!r}", f"{nbytes} bytes at offset {offset} of the data section "
                                      f"(byte {start + offset}) run past the end of the file ({self.size} bytes)")
            if name in self.wanted:
                tensors[name] = self.tensor(name, shape, kind, start + offset)
        return GgufHeader(fields, tensors, names, version, self.order)

    def bound(self, count: int, limit: int, smallest: int, what: str) -> None:
        if count > limit or count * smallest > self.size - self.pos:
            raise GgufFormatError(what, f"{count}; the file has room for at most {(self.size - self.pos) // smallest} "
                                  f"(and ropekit reads at most {limit})")

    def keys(self, count: int) -> dict[str, Any]:
        """Every key's value the audit reads (``general.architecture``, ``general.alignment``, ``{arch}.*``);
        the others skipped. Keys are found first, values read after (``general.architecture`` may come last)."""
        found: dict[str, tuple[int, int]] = {}
        for index in range(count):
            what = f"key #{index}"
            name = self.text(f"{what} name", MAX_NAME)
            if name in found:
                raise GgufFormatError(f"key {name!r}", "appears twice; llama.cpp refuses duplicate keys")
            kind = self.unpack("I", f"key {name!r} type")
            if name in ("general.architecture", "general.alignment") or "." in name:
                found[name] = (kind, self.pos)
            self.skip(kind, f"key {name!r}", 0)
        values: dict[str, Any] = {}
        arch = None
        if "general.architecture" in found:
            arch = self.value_at("general.architecture", *found["general.architecture"])
            if not isinstance(arch, str):
                raise GgufFormatError("general.architecture", f"{arch!r}; a string naming the architecture is valid")
        for name, (kind, where) in found.items():
            if name in ("general.architecture", "general.alignment") or (arch and name.startswith(f"{arch}.")):
                values[name] = arch if name == "general.architecture" else self.value_at(name, kind, where)
        return values

    def value_at(self, name: str, kind: int, where: int) -> Any:
        self.pos, back = where, self.pos
        try:
            return self.value(kind, f"key {name!r}", 0)
        finally:
            self.pos = back

    def skip(self, kind: int, what: str, depth: int) -> None:
        if kind in _SCALARS:
            width = struct.calcsize(_SCALARS[kind][0])
            self.need(width, what)
            self.pos += width
        elif kind == _STRING:
            self.skip_string(what)
        elif kind == _ARRAY:
            item, count = self.array_head(what, depth)
            if item in _SCALARS:
                width = struct.calcsize(_SCALARS[item][0])
                self.need(count * width, what)
                self.pos += count * width
            else:
                for _ in range(count):
                    self.skip(item, what, depth + 1)
        else:
            raise GgufFormatError(what, f"value type {kind}; GGUF's types are 0 to 12")

    def array_head(self, what: str, depth: int) -> tuple[int, int]:
        if depth >= MAX_DEPTH:
            raise GgufFormatError(what, f"arrays nested deeper than {MAX_DEPTH} levels")
        item = self.unpack("I", f"{what} item type")
        count = self.unpack("Q", f"{what} item count")
        smallest = struct.calcsize(_SCALARS[item][0]) if item in _SCALARS else 8 if item == _STRING else 12
        if item not in _SCALARS and item not in (_STRING, _ARRAY):
            raise GgufFormatError(what, f"array item type {item}; GGUF's types are 0 to 12")
        if count * smallest > self.size - self.pos:
            raise GgufFormatError(what, f"an array of {count} items of type {item}: at least {count * smallest} "
                                  f"bytes, the file has {self.size - self.pos} left (a count that lies)")
        return item, count

    def value(self, kind: int, what: str, depth: int) -> Any:
        if kind in _SCALARS:
            value = self.unpack(_SCALARS[kind][0], what)
            return bool(value) if kind == 7 else value
        if kind == _STRING:
            return self.text(what)
        if kind == _ARRAY:
            item, count = self.array_head(what, depth)
            if count > MAX_ARRAY_ITEMS:
                raise GgufFormatError(what, f"an array of {count} items; ropekit reads at most {MAX_ARRAY_ITEMS} for "
                                      "a model key (llama.cpp's per-layer arrays hold at most 512)")
            if item in _SCALARS:
                code, dtype = _SCALARS[item]
                width = struct.calcsize(code)
                array = np.frombuffer(self.data, dtype=np.dtype(dtype).newbyteorder(self.order), count=count,
                                      offset=self.pos)
                self.pos += count * width
                return array.tolist()
            return [self.value(item, what, depth + 1) for _ in range(count)]
        raise GgufFormatError(what, f"value type {kind}; GGUF's types are 0 to 12")

    def tensor_infos(self, count: int) -> tuple[dict[str, tuple[tuple[int, ...], int, int, int]], list[str]]:
        """Every tensor's info checked; those in ``wanted`` kept (shape, type, offset, bytes)."""
        kept: dict[str, tuple[tuple[int, ...], int, int, int]] = {}
        names: list[str] = []
        seen: set[str] = set()
        for index in range(count):
            name = self.text(f"tensor #{index} name", MAX_NAME)
            what = f"tensor {name!r}"
            if name in seen:
                raise GgufFormatError(what, "appears twice; llama.cpp refuses duplicate tensor names")
            seen.add(name)
            n_dims = self.unpack("I", f"{what} n_dims")
            if n_dims > 4:
                raise GgufFormatError(what, f"{n_dims} dimensions; ggml tensors have 1 to 4")
            dims = tuple(self.unpack("Q", f"{what} dims") for _ in range(n_dims))
            kind = self.unpack("I", f"{what} type")
            offset = self.unpack("Q", f"{what} offset")
            if kind not in self.quant_sizes:
                raise GgufFormatError(what, f"ggml type {kind}, not one the gguf package knows")
            block, block_bytes = self.quant_sizes[kind]
            elements = 1
            for dim in dims:
                elements *= dim
            if dims and dims[0] % block:
                raise GgufFormatError(what, f"dims {list(dims)}: the first is not a multiple of ggml type "
                                      f"{kind}'s block of {block} elements")
            nbytes = elements // block * block_bytes
            if nbytes > self.size:
                raise GgufFormatError(what, f"dims {list(dims)} of ggml type {kind}: {nbytes} bytes, more than the "
                                      f"whole file ({self.size} bytes)")
            if name in self.wanted:
                kept[name] = (dims, kind, offset, nbytes)
            if len(names) < 4096:
                names.append(name)
        return kept, names

    def tensor(self, name: str, dims: tuple[int, ...], kind: int, start: int) -> Any:
        if kind not in _FLOAT_TENSORS:
            raise GgufFormatError(f"tensor {name!r}", f"ggml type {kind}; a rope tensor is F32, F16, BF16 or F64 "
                                  "(llama.cpp reads it as floats)")
        count = 1
        for dim in dims:
            count *= dim
        dtype = _FLOAT_TENSORS[kind]
        shape = tuple(reversed(dims))
        if dtype == "bfloat16":
            raw = np.frombuffer(self.data, dtype=np.dtype("uint16").newbyteorder(self.order), count=count, offset=start)
            values = (raw.astype(np.uint32) << 16).view(np.float32)
        else:
            values = np.frombuffer(self.data, dtype=np.dtype(dtype).newbyteorder(self.order), count=count,
                                   offset=start)
        return values.astype(np.float64).reshape(shape)
