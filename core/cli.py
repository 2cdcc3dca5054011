"""The ``ropekit`` command line (also ``python -m ropekit``).

Exit status: 0 success; 1 ``check-plugin`` found failing checks or ``audit`` a mismatch; 2 invalid input (bad config,
unknown rope_type, bad arguments), with one line on stderr naming the key or type; 3 an installed
plugin is at fault (the line names its distribution). No traceback is printed for either.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from .errors import ArgumentError, MissingDependencyError, PluginError, RopeConfigError, RopekitError

__all__ = ["main"]

EXIT_CHECKS_FAILED = 1
EXIT_INPUT = 2
EXIT_PLUGIN = 3

_FLAGS = {"served": "--served", "sin": "--sin", "layer_type": "--layer-type", "layout": "--layout",
          "positions": "--positions", "seq_len": "--seq-len", "dtype": "--dtype", "directory": "--out",
          "rtol": "--rtol", "n_ctx": "--n-ctx", "paths": "PATH", "supports": "--supports",
          "path": "--output", "config": "CONFIG"}
"""Library argument names, as the command line spells them."""


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
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_INPUT, f"{self.prog}: error: {message} (see --help)\n")


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


_OUT: list[Any] = []
"""The real standard output while a command runs: plugin code (imported or called) sees stderr as
its stdout, so nothing a plugin prints can corrupt the output tools parse."""


def _say(*parts: Any) -> None:
    print(*parts, file=_OUT[-1] if _OUT else sys.stdout)


def _print_json(document: Any) -> None:
    text = json.dumps(document, indent=2, allow_nan=False)  # fails whole before anything is written
    stream = _OUT[-1] if _OUT else sys.stdout
    stream.write(text + "\n")


def _load(args: argparse.Namespace) -> Any:
    from .loader import load

    model = load(args.config, strict=not args.lenient)
    return model.at(args.seq_len) if getattr(args, "seq_len", None) else model


def _cmd_table(args: argparse.Namespace) -> None:
    model = _load(args)
    if args.json:
        _print_json(model.to_json())
        return
    for name, table in model.tables.items():
        _say(f"{name}: rope_type={table.rope_type} head_dim={table.head_dim} rotary_dim={table.rotary_dim} "
              f"layout={table.layout} attention_factor={table.attention_factor:.9g}"
              + (f" seq_len={table.seq_len}" if table.seq_len else ""))
        for index, value in enumerate(table.inv_freq):
            _say(f"  {index:4d}  {value:.17g}")
    _print_no_rope(model)


def _print_no_rope(model: Any) -> None:
    for name in sorted(model.no_rope_types - set(model.tables)):
        _say(f"{name}: no RoPE" + (f" ({model.no_rope_reason})" if model.no_rope_reason else ""))
    if model.no_rope_layers:
        _say(f"layers without RoPE: {', '.join(map(str, model.no_rope_layers))}")


def _cmd_gap(args: argparse.Namespace) -> None:
    from .gap import ANGLE_THRESHOLD, gap_report

    report = gap_report(_load(args), args.positions)
    if args.json:
        _print_json(report)
        return
    for name, layer in report["layers"].items():
        if layer.get("no_rope"):
            _say(f"{name}: no RoPE")
            continue
        ratio = layer["max_ratio"]
        _say(f"{name}: rope_type={layer['rope_type']}  {layer['scaled_pairs']} of {layer['pairs']} pairs differ "
              f"from plain RoPE, max ratio {ratio:.6g}" if ratio is not None else f"{name}: no rotated pairs")
        if layer["unrotated_pairs"]:
            _say(f"  {layer['unrotated_pairs']} pairs are not rotated (inv_freq 0)")
        _say(f"  {'position':>9}  {'max angle error (rad)':>22}  pairs over {ANGLE_THRESHOLD} rad")
        for position, row in layer["positions"].items():
            _say(f"  {position:>9}  {row['max_angle_error']:>22.4f}  {row[f'pairs_over_{ANGLE_THRESHOLD}rad']:>5}")
    if report.get("no_rope_layers"):
        _say(f"layers without RoPE: {', '.join(map(str, report['no_rope_layers']))}")


def _cmd_inspect(args: argparse.Namespace) -> None:
    from .registry import default_registry

    model = _load(args)
    if args.json:
        document = model.to_json()
        document["source"] = model.source
        document["layer_types"] = list(model.layer_types)
        _print_json(document)
        return
    registry = default_registry()
    _say(f"config: {model.source}")
    if model.layer_types:
        counts = {name: model.layer_types.count(name) for name in dict.fromkeys(model.layer_types)}
        _say(f"layers: {len(model.layer_types)} ({', '.join(f'{n} x{c}' for n, c in counts.items())})")
    for name, table in model.tables.items():
        scheme = registry.scheme(table.rope_type)
        owner = registry.owner(table.rope_type)
        served_by = f"{owner.distribution} {owner.version}" if owner is not None else "?"
        _say(f"\n[{name}] rope_type {table.rope_type}  ({served_by})")
        _say(f"  {scheme.doc}")
        _say(f"  head_dim {table.head_dim}, rotary_dim {table.rotary_dim}, {len(table.inv_freq)} pairs, "
              f"attention_factor {table.attention_factor:.9g}")
        for key, value in table.params.items():
            shown = f"[{len(value)} values]" if isinstance(value, tuple) else repr(value)
            _say(f"  {key} = {shown}")
        if table.mrope_section:
            _say(f"  mrope_section = {list(table.mrope_section)} (interleaved: {table.mrope_interleaved})")
        if table.seq_len_dependent:
            _say(f"  depends on seq_len: {table.seq_len_rule}")
        freq = table.inv_freq
        _say(f"  layout {table.layout}; inv_freq: {freq[0]:.6g} ... {freq[-1]:.6g}  "
              f"(ropekit table {args.config} --json for all)")
    if model.no_rope_types - set(model.tables) or model.no_rope_layers:
        _say()
        _print_no_rope(model)


def _cmd_list(args: argparse.Namespace) -> None:
    from .registry import default_registry

    registry = default_registry()
    rows = []
    for status in registry.status():
        row: dict[str, Any] = {
            "rope_type": status.rope_type,
            "distribution": status.distribution,
            "version": status.version,
            "module": status.target,
            "status": status.state,
        }
        if status.problem:
            row["problem"] = status.problem
        if not args.no_import and status.state in ("available", "loaded"):
            try:
                scheme = registry.scheme(status.rope_type)
            except PluginError as error:
                row.update(status="broken", problem=error.problem)
            else:
                row.update(status="loaded", canonical=scheme.name, doc=scheme.doc,
                           keys=[key.to_json() for key in scheme.keys],
                           seq_len_dependent=scheme.seq_len_dependent)
        rows.append(row)
    if args.json:
        _print_json({"schemes": rows})
        return
    for row in rows:
        alias = f" (alias of {row['canonical']})" if row.get("canonical", row["rope_type"]) != row["rope_type"] else ""
        _say(f"{row['rope_type']}{alias}  [{row['status']}]  {row['distribution']} {row['version']}  {row['module']}")
        if "problem" in row:
            _say(f"    problem: {row['problem']}")
        if "doc" in row and not alias:
            _say(f"    {row['doc']}")
            for key in registry.scheme(row["rope_type"]).keys:
                _say(f"      {key.describe()}")


def _cmd_check_plugin(args: argparse.Namespace) -> int:
    from .registry import default_registry
    from .testing import run_checks

    registry = default_registry()
    claims = registry.claims().get(args.name)
    if not claims:
        registry.scheme(args.name, path="NAME")  # raises UnknownRopeTypeError with suggestions
        raise AssertionError("unreachable")  # pragma: no cover
    results = run_checks(args.name, registry=registry)
    passed = not any(result.failed for result in results)
    owner = claims[0]
    if args.json:
        _print_json({"rope_type": args.name, "distribution": ", ".join(c.distribution for c in claims),
                     "version": owner.version, "passed": passed, "checks": [r.to_json() for r in results]})
    else:
        _say(f"{args.name}  ({owner.distribution} {owner.version}, {owner.target})")
        labels = {"pass": "PASS", "fail": "FAIL", "not_run": "NOT RUN"}
        for result in results:
            _say(f"  {labels[result.status]:<7}  {result.check}")
            if not result.passed:
                _say(f"           {result.message}")
        not_run = sum(r.not_run for r in results)
        _say(f"{sum(r.passed for r in results)} passed, {sum(r.failed for r in results)} failed"
              + (f", {not_run} not run" if not_run else ""))
    return 0 if passed else EXIT_CHECKS_FAILED


def _cmd_export(args: argparse.Namespace) -> None:
    from .export import export

    model = _load(args)
    manifest = export(model, args.out, positions=args.positions, dtype=args.dtype, layout=args.layout,
                      seq_lens=args.seq_lens)
    if args.json:
        _print_json(manifest)
        return
    for name, layer in manifest["layers"].items():
        if layer.get("no_rope"):
            _say(f"{name}: no RoPE")
            continue
        files = ", ".join(f"{kind} {spec['path']} {spec['shape']}" for kind, spec in layer["files"].items())
        _say(f"{name}: rope_type {layer['rope_type']}, attention_factor {layer['attention_factor']:.9g}: {files}")
        for extra in layer.get("beyond", []):
            _say(f"  seq_len {extra['seq_len']}: {extra['files']['inv_freq']['path']} ({layer['seq_len_rule']})")
    _say(f"wrote {args.out}/manifest.json and manifest.txt")


def _cmd_audit(args: argparse.Namespace) -> int:
    from .audit import audit_artifact
    from .served import read_artifact

    if args.config is None:
        return _gguf_self_check(args)
    model = _load(args)
    widths = {t.rotary_dim for t in model.tables.values()}
    width = widths.pop() if len(widths) == 1 else None
    artifact = read_artifact(args.served, dtype=args.dtype, width=width, sin=args.sin, layout=args.layout,
                             n_ctx=args.n_ctx)
    report = audit_artifact(model, artifact, layer_type=args.layer_type, positions=args.positions, rtol=args.rtol)
    if args.json:
        _print_json(report)
    else:
        _print_audit(report)
    return 0 if report["verdict"] == "match" else EXIT_CHECKS_FAILED


def _gguf_self_check(args: argparse.Namespace) -> int:
    from .served import read_artifact

    if not str(args.served).lower().endswith(".gguf"):
        raise RopeConfigError("CONFIG", "missing: give the model's config.json (only a .gguf can be checked alone)")
    artifact = read_artifact(args.served, n_ctx=args.n_ctx)
    verdict = "red_flags" if artifact.flags else "no_red_flags"
    document = {"verdict": verdict, "artifact": {"path": artifact.path, "kind": artifact.kind,
                                                 "engine": artifact.engine},
                "flags": list(artifact.flags), "engine_rules": list(artifact.rules),
                "note": "checked against itself only; give CONFIG to audit the table against the declaration"}
    if args.json:
        _print_json(document)
    else:
        _say(f"{artifact.path}: {'RED FLAGS' if artifact.flags else 'no red flags'} (checked against itself only; "
              "give CONFIG for a full audit)")
        for flag in (*artifact.flags, *artifact.rules):
            _say(f"  {flag}")
    return EXIT_CHECKS_FAILED if artifact.flags else 0


def _print_audit(report: dict[str, Any]) -> None:
    artifact = report["artifact"]
    _say(f"{artifact['path']} ({artifact['kind']}{', ' + artifact['producer'] if artifact['producer'] else ''}): "
          f"{report['verdict'].upper().replace('_', ' ')}")
    if report["verdict"] == "no_table":
        _say(f"  {report['request']}")
    for name, layer in report["layers"].items():
        for table in layer.get("tables", []):
            regime = f" [{table['regime']}]" if table.get("regime") else ""
            declared = table["declared"]
            _say(f"[{name}]{regime} declared rope_type {declared['rope_type']} ({declared['pairs']} pairs); "
                  f"served {table['kind']} {table['dtype']} from {table['where']}")
            if table["verdict"] == "match":
                _say("  MATCH: the served table is the declared one")
                if "attention_factor_unverified" in table:
                    _say(f"  note: {table['attention_factor_unverified']}")
                continue
            _say("  MISMATCH: the served table is not what the config declares")
            _say(f"  it matches: {table['served_as']}")
            if "differing_pairs" in table:
                _say(f"  {table['differing_pairs']} of {table['pairs']} pairs differ from the declared table, "
                      f"by up to {table['max_ratio']:.6g}x")
                for position, row in table["positions"].items():
                    _say(f"  position {position:>7}: max angle error {row['max_angle_error']:.4f} rad, "
                          f"{row['pairs_over_0.1rad']} pairs over 0.1 rad")
    for note in (*report.get("engine_rules", []), *report.get("flags", [])):
        _say(f"  note: {note}")


def _cmd_scan(args: argparse.Namespace) -> int:
    from .scan import scan, summarize

    supports = args.supports
    rows = []
    progress = sys.stderr.isatty() and not args.json
    for row in scan(args.paths, supports=supports, audit=args.audit, jobs=args.jobs, strict=not args.lenient):
        rows.append(row)
        if args.json:
            _say(json.dumps(row.to_json(), allow_nan=False))
        if progress and len(rows) % 50 == 0:
            print(f"\rropekit scan: {len(rows)} models...", end="", file=sys.stderr, flush=True)
    if progress and len(rows) >= 50:
        print("\r" + " " * 40 + "\r", end="", file=sys.stderr, flush=True)
    summary = summarize(rows)
    if args.json:
        _say(json.dumps({"summary": summary}))
    else:
        _print_scan(rows, summary)
    return 0 if all(row.status == "ok" for row in rows) else EXIT_CHECKS_FAILED


def _print_scan(rows: list[Any], summary: dict[str, Any]) -> None:
    def types(row: Any) -> str:
        parts = []
        for name, layer in row.layers.items():
            if name == "no_rope_layers":
                parts.append(f"{len(layer)} NoPE layers")
            elif isinstance(layer, dict):
                parts.append(f"{name}={layer.get('rope_type', 'no RoPE')}")
        return ", ".join(parts) or "-"

    table = [(row.status, row.model_type or "-", types(row), row.path, row.reason) for row in rows]
    widths = [max([len(heading)] + [len(line[i]) for line in table]) for i, heading in
              enumerate(("STATUS", "MODEL_TYPE", "LAYERS"))]
    _say(f"{'STATUS':<{widths[0]}}  {'MODEL_TYPE':<{widths[1]}}  {'LAYERS':<{widths[2]}}  PATH")
    for status, model_type, layers, path, reason in table:
        _say(f"{status:<{widths[0]}}  {model_type:<{widths[1]}}  {layers:<{widths[2]}}  {path}")
        if reason:
            _say(f"{'':<{widths[0]}}  {reason}")
    counts = ", ".join(f"{count} {status}" for status, count in summary["status"].items())
    kinds = ", ".join(f"{name} {count}" for name, count in summary["rope_types"].items())
    _say(f"{summary['models']} models: {counts or 'none found'}" + (f"; rope_types: {kinds}" if kinds else ""))


def _supports(text: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    if not names:
        raise argparse.ArgumentTypeError(f"expected comma-separated rope_types, got {text!r}")
    return names


def _cmd_plot(args: argparse.Namespace) -> None:
    from .plot import plot

    plot(_load(args), args.output)
    _say(f"wrote {args.output}")


_COMMANDS = ("table", "gap", "inspect", "audit", "plot", "export", "scan", "list", "check-plugin")


class _Unused:
    """Stands in for the subcommands a run does not use: their arguments are not built (a cold
    ``ropekit table`` should not pay for ``audit``'s), only their one-line help."""

    def add_argument(self, *args: Any, **kwargs: Any) -> None:
        return None

    def set_defaults(self, **kwargs: Any) -> None:
        return None


def _build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    words = list(sys.argv[1:] if argv is None else argv)
    chosen = next((word for word in words if not word.startswith("-")), None)
    build_all = chosen not in _COMMANDS
    parser = _Parser(
        prog="ropekit",
        description="The RoPE tables a model's config.json declares, from the plugin registered for its rope_type.",
        epilog="Exit status: 0 ok; 1 check-plugin found failures or audit a mismatch; 2 invalid input (one line "
        "naming the key or rope_type); 3 an installed plugin is at fault (one line naming its distribution).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    real = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    class _Commands:
        def add_parser(self, name: str, **kwargs: Any) -> Any:
            if build_all or name == chosen:
                return real.add_parser(name, **kwargs)
            return _Unused()  # each parser costs gettext look-ups on disk: build only the one used

    commands = _Commands()

    def config_command(
        name: str, help_text: str, handler: Callable[[argparse.Namespace], int | None]
    ) -> Any:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.add_argument("config", metavar="CONFIG", help="a config.json, or a model directory holding one")
        sub.add_argument("--json", action="store_true", help="machine-readable output")
        sub.add_argument("--lenient", action="store_true", help="warn about unknown keys instead of failing")
        sub.set_defaults(handler=handler)
        return sub

    table = config_command("table", "Print each layer type's inv_freq and attention factor.", _cmd_table)
    table.add_argument("--seq-len", type=_positive, metavar="N",
                       help="the table for a sequence of N positions (matters for dynamic and longrope)")
    gap = config_command("gap", "Compare each layer type's table with plain RoPE of the same theta and dims.", _cmd_gap)
    gap.add_argument("--positions", type=_positions, default=(128, 1024, 2048, 8192, 32768, 131072), metavar="P,...",
                     help="positions at which to report the angle error (default: %(default)s)")
    gap.add_argument("--seq-len", type=_positive, metavar="N", help="compare the table for N positions")
    config_command("inspect", "Describe what the config declares and which plugin serves it.", _cmd_inspect)
    auditor = commands.add_parser(
        "audit", help="Check the table an engine artifact or a forward serves against the one the config declares.",
        description="Check the table an engine artifact or a forward serves against the one the config declares. "
        "ARTIFACT: an ONNX model or pack directory (onnxruntime-genai), a .gguf (llama.cpp: the table is rebuilt by "
        "its run-time rules), or a dumped inv_freq / cos cache (.npy, raw .f64/.f32/.f16). Exit 0 match, 1 mismatch "
        "or no table, 2 invalid input.",
    )
    auditor.add_argument("config", metavar="CONFIG", nargs="?",
                         help="the model's config.json or directory (optional for a .gguf: then it is checked "
                         "against itself for red flags)")
    auditor.add_argument("--served", required=True, metavar="ARTIFACT",
                         help="ONNX model/pack, .gguf, or .npy/.f64/.f32/.f16 table or cos cache")
    auditor.add_argument("--json", action="store_true", help="machine-readable output")
    auditor.add_argument("--lenient", action="store_true", help="warn about unknown keys instead of failing")
    auditor.set_defaults(handler=_cmd_audit)
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
    plotter = config_command("plot", "Draw each layer type's wavelengths against plain RoPE (needs matplotlib).",
                             _cmd_plot)
    plotter.add_argument("-o", "--output", required=True, metavar="FILE.png", help="image to write")
    plotter.add_argument("--seq-len", type=_positive, metavar="N", help="plot the table for N positions")
    exporter = config_command(
        "export", "Write the tables for a native forward: manifest.json, raw little-endian tables, .npy.", _cmd_export
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
        ".gguf files) and report, one row per model, what it declares per layer type, the plugin that serves it, and "
        "a status: ok, refused, unregistered, unsupported (with --supports), mismatch (with --audit), plugin_error. "
        "A bad model never stops the scan; nothing is written. Exit 0 all ok, 1 some model is not, 2 bad arguments.",
    )
    scanner.add_argument("paths", nargs="+", metavar="PATH", help="folders to walk, or config.json/.gguf files")
    scanner.add_argument("--supports", type=_supports, metavar="TYPE,...",
                         help="the rope_types a forward serves (aliases understood: su is longrope, mrope is default);"
                         " models declaring any other are 'unsupported'")
    scanner.add_argument("--audit", action="store_true",
                         help="also audit the ONNX packs and GGUFs found beside each config (needs ropekit[onnx,gguf])")
    scanner.add_argument("--jobs", type=_positive, default=1, metavar="N", help="audits run N at a time")
    scanner.add_argument("--json", action="store_true", help="JSON Lines: one object per model, then a summary")
    scanner.add_argument("--lenient", action="store_true", help="warn about unknown keys instead of refusing")
    scanner.set_defaults(handler=_cmd_scan)

    listing = commands.add_parser("list", help="List installed rope_types with distribution, version and status.",
                                  description="List installed rope_types with distribution, version and status.")
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    listing.add_argument("--no-import", action="store_true",
                         help="read entry-point metadata only; do not import plugins (no keys shown)")
    listing.set_defaults(handler=_cmd_list)

    check = commands.add_parser(
        "check-plugin",
        help="Run the plugin conformance suite on one rope_type.",
        description="Run the plugin conformance suite (ropekit.testing) on one installed rope_type. "
        "Exit 0 if every check passes, 1 if any fails.",
    )
    check.add_argument("name", metavar="NAME", help="the rope_type (entry-point name) to check")
    check.add_argument("--json", action="store_true", help="machine-readable output")
    check.set_defaults(handler=_cmd_check_plugin)
    return parser


def _version() -> str:
    from . import __version__

    return __version__


def _show_warning(
    message: Warning | str, category: type[Warning], filename: str, lineno: int, file: Any = None, line: Any = None
) -> None:
    print(f"ropekit: warning: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status."""
    args = _build_parser(argv).parse_args(argv)
    _OUT.append(sys.stdout)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(sys.stderr):
            warnings.simplefilter("default")  # the CLI reports warnings; it never turns them into errors
            warnings.showwarning = _show_warning  # one line per warning, no source excerpt
            status = args.handler(args)
    except RopeConfigError as error:
        print(f"ropekit: error: {error}", file=sys.stderr)
        return EXIT_INPUT
    except ArgumentError as error:
        print(f"ropekit: error: {_FLAGS.get(error.argument, error.argument)}: {error.problem}", file=sys.stderr)
        return EXIT_INPUT
    except PluginError as error:
        print(f"ropekit: plugin error: {error}", file=sys.stderr)
        return EXIT_PLUGIN
    except MissingDependencyError as error:
        print(f"ropekit: error: {error}", file=sys.stderr)
        return EXIT_INPUT
    except RopekitError as error:  # pragma: no cover - every subclass is handled above
        print(f"ropekit: error: {error}", file=sys.stderr)
        return EXIT_INPUT
    except BrokenPipeError:
        return 0
    finally:
        _OUT.pop()
    return int(status or 0)
