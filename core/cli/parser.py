"""The argument parser: subcommands, their flags and help, and the value checks flags share. Only
the subcommand a run uses is built (cold start is measured by ``benchmarks/cold_start.py``)."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NoReturn

from .commands import (
    cmd_audit,
    cmd_check_plugin,
    cmd_export,
    cmd_gap,
    cmd_inspect,
    cmd_list,
    cmd_plot,
    cmd_probe,
    cmd_repair,
    cmd_scan,
    cmd_table,
)
from .output import EXIT_INPUT, print_error_json

__all__ = ["COMMANDS", "build_parser", "usage_key"]

_LENIENT = "warn about unknown keys instead of refusing them, and read an unknown model_type as Llama-style (a guess)"


class _Formatter(argparse.HelpFormatter):
    """argparse's formatter, as wide as the terminal the way ``shutil.get_terminal_size`` measures
    it, without importing shutil: argparse builds a formatter for every argument it adds, and
    shutil brings bz2, lzma and zlib, about 1.7 ms of a cold ``ropekit table``."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position, _columns() - 2 if width is None else width)


def _columns() -> int:
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns if columns > 0 else 80


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, json_errors: bool = False, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)
        self.json_errors = json_errors  # --json is on the command line: a usage error is also JSON on stdout

    def error(self, message: str) -> NoReturn:
        if self.json_errors:
            print_error_json(f"{self.prog}: {message}", usage_key(message), EXIT_INPUT)
        self.exit(EXIT_INPUT, f"{self.prog}: error: {message} (see --help)\n")


def usage_key(message: str) -> str | None:
    """The flag or argument an argparse usage error names (``--seq-len``, ``CONFIG``, ``COMMAND``), or ``None``."""
    head, _, rest = message.partition(": ")
    if not rest:
        return None
    if head.startswith("argument "):  # "argument -o/--output: expected one argument"
        names = head.removeprefix("argument ").split("/")
        return next((name for name in names if name.startswith("--")), names[0])
    if head in ("the following arguments are required", "unrecognized arguments", "ambiguous option"):
        return rest.replace(",", " ").split()[0].split("=")[0]
    return None


def _positions(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or any(value < 0 for value in values):
        raise argparse.ArgumentTypeError(f"expected non-negative positions, got {text!r}")
    return values


def _rtol(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value < 1:  # NaN fails this too
        raise argparse.ArgumentTypeError(f"expected a relative tolerance in (0, 1), got {text!r}")
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _supports(text: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    if not names:
        raise argparse.ArgumentTypeError(f"expected comma-separated rope_types, got {text!r}")
    return names


COMMANDS = ("table", "gap", "inspect", "audit", "repair", "plot", "export", "scan", "list", "check-plugin", "probe")


class _Unused:
    """Stands in for the subcommands a run does not use: their arguments are not built (a cold
    ``ropekit table`` should not pay for ``audit``'s), only their one-line help."""

    def add_argument(self, *args: Any, **kwargs: Any) -> None:
        return None

    def set_defaults(self, **kwargs: Any) -> None:
        return None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser for ``argv`` (default: ``sys.argv[1:]``): every subcommand's arguments when no
    known subcommand is named, else only that one's."""
    with _untranslated():
        return _build(argv)


@contextlib.contextmanager
def _untranslated() -> Iterator[None]:
    """argparse's own strings as written while the parser is built. argparse asks gettext for a
    translation of each one ("options", "show this help message and exit"...), and gettext searches
    the disk for a catalogue on every call (about 0.3 ms each, 2 ms of a cold ``ropekit table``
    with the ``locale`` import it brings); ropekit's help is English, so argparse's stays English
    too. The lookups in ``parse_args`` (its error messages) are untouched."""
    with _SWAP:  # one build at a time: overlapping builds would restore each other's stand-in
        translate = getattr(argparse, "_", None)
        if not callable(translate) or translate is str:  # an argparse without the alias, or a nested build
            yield
            return
        argparse._ = str  # type: ignore[attr-defined]
        try:
            yield
        finally:
            argparse._ = translate  # type: ignore[attr-defined]


_SWAP = threading.RLock()


def _build(argv: Sequence[str] | None) -> argparse.ArgumentParser:
    words = list(sys.argv[1:] if argv is None else argv)
    chosen = next((word for word in words if not word.startswith("-")), None)
    build_all = chosen not in COMMANDS
    json_errors = "--json" in words
    parser = _Parser(
        prog="ropekit",
        json_errors=json_errors,
        description="The RoPE tables a model's config.json declares, from the plugin registered for its rope_type.",
        epilog="Exit status: 0 ok; 1 check-plugin found failures or audit a mismatch; 2 invalid input (one line "
        "naming the key or rope_type); 3 an installed plugin is at fault (one line naming its distribution).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    real = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    class _Commands:
        def add_parser(self, name: str, **kwargs: Any) -> Any:
            if build_all or name == chosen:
                return real.add_parser(name, json_errors=json_errors, **kwargs)
            return _Unused()  # each parser costs gettext look-ups on disk: build only the one used

    commands = _Commands()

    def config_command(
        name: str, help_text: str, handler: Callable[[argparse.Namespace], int | None], config_help: str = ""
    ) -> Any:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        if config_help:
            sub.add_argument("config", metavar="CONFIG", nargs="?", help=config_help)
        else:
            sub.add_argument("config", metavar="CONFIG", help="a config.json, or a model directory holding one")
        sub.add_argument("--json", action="store_true", help="machine-readable output")
        sub.add_argument("--lenient", action="store_true", help=_LENIENT)
        sub.set_defaults(handler=handler)
        return sub

    table = config_command("table", "Print each layer type's inv_freq and attention factor.", cmd_table)
    table.add_argument("--seq-len", type=_positive, metavar="N",
                       help="the table for a sequence of N positions (matters for dynamic and longrope)")
    gap = config_command("gap", "Compare each layer type's table with plain RoPE of the same theta and dims.", cmd_gap)
    gap.add_argument("--positions", type=_positions, default=(128, 1024, 2048, 8192, 32768, 131072), metavar="P,...",
                     help="positions at which to report the angle error (default: %(default)s)")
    gap.add_argument("--seq-len", type=_positive, metavar="N", help="compare the table for N positions")
    config_command("inspect", "Describe what the config declares and which plugin serves it.", cmd_inspect)
    auditor = commands.add_parser(
        "audit", help="Check the table an engine artifact or a forward serves against the one the config declares.",
        description="Check the table an engine artifact or a forward serves against the one the config declares. "
        "ARTIFACT: an ONNX model or pack directory (onnxruntime-genai, or a graph that keeps its rotary: it is run "
        "with onnxruntime), a .gguf (llama.cpp: the table is rebuilt by its run-time rules), an ExecuTorch .pte (its "
        "rope constants, and a .ptd beside it), an OpenVINO IR (its folder or openvino_model.xml, the .bin beside "
        "it: its rope constants; longrope's switch is run with OpenVINO), a Qualcomm Genie bundle (its folder or "
        "genie_config.json: the table Genie builds from its keys), or a dumped inv_freq / cos cache (.npy, raw "
        ".f64/.f32/.f16). Exit 0 "
        "match, 1 mismatch or no table, 2 invalid input.",
    )
    auditor.add_argument("config", metavar="CONFIG", nargs="?",
                         help="the model's config.json or directory (default: the config.json inside a --served "
                         "folder, never an engine's own genai_config.json or genie_config.json; a .gguf without "
                         "CONFIG is checked against itself for red flags)")
    auditor.add_argument("--served", required=True, metavar="ARTIFACT",
                         help="ONNX model/pack, .gguf, .pte, OpenVINO IR (folder or .xml), Genie bundle (folder or "
                         "genie_config.json), or .npy/.f64/.f32/.f16 table or cos cache")
    auditor.add_argument("--json", action="store_true", help="machine-readable output")
    auditor.add_argument("--lenient", action="store_true", help=_LENIENT)
    auditor.set_defaults(handler=cmd_audit)
    auditor.add_argument("--sin", metavar="FILE", help="the served sin cache, with a 2-D --served cos cache")
    auditor.add_argument("--dtype", choices=("float64", "float32", "float16"),
                         help="dtype of raw files without a .f64/.f32/.f16 suffix")
    auditor.add_argument("--layer-type", metavar="LT", help="which layer type's table was served (default: by width)")
    auditor.add_argument("--layout", choices=("neox", "gptj", "half"), default="neox",
                         help="columns of a dumped cos/sin cache: neox (rotate-half), gptj (interleaved) or half "
                         "(one column per pair, as onnxruntime-genai and vLLM store) (default: %(default)s)")
    auditor.add_argument("--n-ctx", type=_positive, metavar="N",
                         help="for a .gguf: the context llama.cpp allocates (it picks longrope's factors by it; "
                         "default: the file's context_length, llama.cpp's choice for n_ctx 0)")
    auditor.add_argument("--positions", type=_positions, default=(128, 1024, 2048, 8192, 32768, 131072),
                         metavar="P,...", help="positions at which to report the angle error")
    auditor.add_argument("--rtol", type=_rtol, metavar="R",
                         help="relative tolerance for inv_freq tables (default: 1e-5, or 2e-3 for float16); caches use "
                         "a per-element tolerance from their dtype and positions")
    auditor.add_argument("--seq-len", type=_positive, metavar="N", help="the served sequence length, if it matters")
    repairer = config_command(
        "repair", "Write a corrected copy of an ONNX pack, a GGUF, an OpenVINO IR (its rope constants in a copy of the "
        ".bin) or a Genie genie_config.json that serves the declared table (the original is never touched). Exit 0 "
        "repaired or already right, 1 not repairable in its format (named), 2 invalid input.",
        cmd_repair, config_help="the model's config.json or directory (default: the config.json inside a --served "
        "folder, never an engine's own genai_config.json or genie_config.json)")
    repairer.add_argument("--served", required=True, metavar="ARTIFACT",
                          help="the onnxruntime-genai pack (directory or model.onnx), .gguf, OpenVINO IR (folder: "
                          "--out a folder; X.xml: --out Y.xml, weights to Y.bin) or Genie bundle (folder or "
                          "genie_config.json) to repair")
    repairer.add_argument("--out", required=True, metavar="NEW",
                          help="where to write the corrected copy: a new path, not inside ARTIFACT (never overwritten)")
    repairer.add_argument("--n-ctx", type=_positive, metavar="N",
                          help="for a .gguf: the context llama.cpp will allocate (default: the file's context_length)")
    plotter = config_command("plot", "Draw each layer type's wavelengths against plain RoPE (needs matplotlib).",
                             cmd_plot)
    plotter.add_argument("-o", "--output", required=True, metavar="FILE.png", help="image to write")
    plotter.add_argument("--seq-len", type=_positive, metavar="N", help="plot the table for N positions")
    exporter = config_command(
        "export", "Write the tables for a native forward: manifest.json, raw little-endian tables, .npy.", cmd_export
    )
    exporter.add_argument("--out", required=True, metavar="DIR", help="directory to write (created if needed)")
    exporter.add_argument("--positions", type=_positive, metavar="N",
                          help="also write cos/sin caches for positions 0..N-1")
    exporter.add_argument("--dtype", choices=("float32", "float16", "float64"), default="float32",
                          help="dtype of the cos/sin caches (default: %(default)s)")
    exporter.add_argument("--layout", choices=("neox", "gptj", "half"),
                          help="cos/sin layout: neox (rotate-half), gptj (interleaved), or half (one column per pair, "
                          "half the bytes) (default: the layout the model's family uses, neox for most)")
    exporter.add_argument("--seq-len", dest="seq_lens", type=_positive, action="append", default=[], metavar="N",
                          help="for seq-len-dependent schemes, also write the table at N (repeatable)")

    scanner = commands.add_parser(
        "scan", help="Scan folders of models: what each declares, and which a forward would mis-serve.",
        description="Walk PATHs for models (folders with config.json, Hugging Face hub-cache snapshots, ONNX packs, "
        ".gguf files; with --audit, the OpenVINO IRs and Genie configs beside a config.json too) and report, one "
        "row per model, what it declares per layer type, the plugin that serves it, and "
        "a status: ok, refused, unknown_model (ropekit does not know its code), unregistered, unsupported (with "
        "--supports), mismatch (with --audit), plugin_error. "
        "A bad model never stops the scan; nothing is written. Exit 0 all ok, 1 some model is not, 2 bad arguments.",
    )
    scanner.add_argument("paths", nargs="+", metavar="PATH", help="folders to walk, or config.json/.gguf files")
    scanner.add_argument("--supports", type=_supports, metavar="TYPE,...",
                         help="the rope_types a forward serves (aliases understood: su is longrope, mrope is default);"
                         " models declaring any other are 'unsupported'")
    scanner.add_argument("--audit", action="store_true",
                         help="also audit the ONNX packs, GGUFs, OpenVINO IRs and Genie configs found beside each "
                         "config (needs ropekit[onnx,gguf])")
    scanner.add_argument("--jobs", type=_positive, default=1, metavar="N", help="audits run N at a time")
    scanner.add_argument("--json", action="store_true", help="JSON Lines: one object per model, then a summary")
    scanner.add_argument("--lenient", action="store_true", help=_LENIENT)
    scanner.set_defaults(handler=cmd_scan)

    listing = commands.add_parser("list", help="List installed rope_types with distribution, version and status.",
                                  description="List installed rope_types with distribution, version and status.")
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    listing.add_argument("--no-import", action="store_true",
                         help="read entry-point metadata only; do not import plugins (no keys shown)")
    listing.set_defaults(handler=cmd_list)

    check = commands.add_parser(
        "check-plugin",
        help="Run the plugin conformance suite on one rope_type.",
        description="Run the plugin conformance suite (ropekit.testing) on one installed rope_type, or with "
        "--family on one model-family plugin. Exit 0 if every check passes, 1 if any fails.",
    )
    check.add_argument("name", metavar="NAME", help="the rope_type (entry-point name) to check")
    check.add_argument("--family", action="store_true",
                       help="NAME is a model_type: check the family plugin registered for it (group ropekit.families)")
    check.add_argument("--json", action="store_true", help="machine-readable output")
    check.set_defaults(handler=cmd_check_plugin)

    prober = commands.add_parser(
        "probe", help="Run the model class's own code and check that ropekit serves what it applies (needs "
        "ropekit[reference]).",
        description="Build a tiny random model of the config's transformers class, observe what each layer's "
        "forward applies as RoPE (which channels rotate, their pairing, each frequency, the magnitude), at near "
        "and far positions on both sides of every seq-len switch, and compare it with ropekit's table. Needs "
        "torch and transformers (ropekit[reference]). Exit 0 every layer matches, 1 one differs, 2 invalid input "
        "or the extra is missing.",
    )
    prober.add_argument("config", metavar="CONFIG", help="a config.json, or a model directory holding one")
    prober.add_argument("--class", dest="model_class", metavar="NAME",
                        help="the transformers model class to build (default: AutoModel for the config's model_type)")
    prober.add_argument("--seq-len", dest="seq_lens", type=_positive, action="append", default=[], metavar="N",
                        help="probe at sequence length N (repeatable; default: both sides of every switch, and far)")
    prober.add_argument("--json", action="store_true", help="machine-readable output")
    prober.set_defaults(handler=cmd_probe)
    return parser


def _version() -> str:
    from .._version import __version__

    return __version__
