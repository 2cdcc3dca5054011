"""One function per subcommand: each loads what it needs on first use, prints through
:mod:`~ropekit.cli.output` and returns an exit status (``None`` is 0)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Any

from ..errors import ArgumentError, PluginError, RopeConfigError
from .output import EXIT_CHECKS_FAILED, encodable, finite_json, one_line, print_json, say

if TYPE_CHECKING:
    from ..artifacts.report import AuditReport


def _load(args: argparse.Namespace) -> Any:
    from ..loader import load

    model = load(args.config, strict=not args.lenient)
    return model.at(args.seq_len) if getattr(args, "seq_len", None) else model


def cmd_table(args: argparse.Namespace) -> None:
    model = _load(args)
    if args.json:
        print_json(model.to_json())
        return
    for name, table in model.tables.items():
        say(f"{name}: rope_type={table.rope_type} head_dim={table.head_dim} rotary_dim={table.rotary_dim} "
              f"layout={table.layout} attention_factor={table.attention_factor:.9g}"
              + (f" seq_len={table.seq_len}" if table.seq_len else "")
              + (f" mrope={table.mrope_composition}:{','.join(map(str, table.mrope_section or ()))}"
                 if table.mrope_composition else ""))
        if table.seq_len_dependent:
            say(f"  {_regime(table)}")
        for index, value in enumerate(table.inv_freq):
            say(f"  {index:4d}  {value:.17g}")
    _print_no_rope(model)


def _regime(table: Any) -> str:
    """Which of a seq-len-dependent table's regimes is shown, where it switches, and how to see another."""
    shown = (f"the table for seq_len {table.seq_len}" if table.seq_len is not None
             else f"the load-time table, which holds up to {table.switch_at} positions")
    return (f"depends on seq_len: {table.seq_len_rule}; switches at {table.switch_at}; this is {shown} "
            "(--seq-len N for the table of an N-position sequence)")


def _print_no_rope(model: Any) -> None:
    for name in model.listed_types:  # layer types whose layers use another type's table (gpt-oss)
        if name not in model.tables and name not in model.no_rope_types:
            owner = next((other for other, table in model.tables.items() if table is model[name]), "?")
            say(f"{name}: uses the {owner} table")
    for name in sorted(model.no_rope_types - set(model.tables)):
        say(f"{name}: no RoPE" + (f" ({model.no_rope_reason})" if model.no_rope_reason else ""))
    if model.no_rope_layers:
        say(f"layers without RoPE: {', '.join(map(str, model.no_rope_layers))}")


def cmd_gap(args: argparse.Namespace) -> None:
    from ..loader import load
    from ..tables.gap import ANGLE_THRESHOLD, gap_report

    report = gap_report(load(args.config, strict=not args.lenient), args.positions, seq_len=args.seq_len)
    if args.json:
        print_json(report)
        return
    for name, layer in report["layers"].items():
        if layer.get("no_rope"):
            say(f"{name}: no RoPE")
            continue
        ratio = layer["max_ratio"]
        say(f"{name}: rope_type={layer['rope_type']}  {layer['scaled_pairs']} of {layer['pairs']} pairs differ "
              f"from plain RoPE, max ratio {ratio:.6g}" if ratio is not None else f"{name}: no rotated pairs")
        if "seq_len" in layer:
            why = "--seq-len" if args.seq_len else "the largest position + 1"
            say(f"  the table of a {layer['seq_len']}-position sequence ({why}): {layer['seq_len_rule']}; "
                f"the load-time table holds up to {layer['switch_at']} positions")
        if layer["unrotated_pairs"]:
            say(f"  {layer['unrotated_pairs']} pairs are not rotated (inv_freq 0)")
        say(f"  {'position':>9}  {'max angle error (rad)':>22}  pairs over {ANGLE_THRESHOLD} rad")
        for position, row in layer["positions"].items():
            say(f"  {position:>9}  {row['max_angle_error']:>22.4f}  {row[f'pairs_over_{ANGLE_THRESHOLD}rad']:>5}")
    if report.get("no_rope_layers"):
        say(f"layers without RoPE: {', '.join(map(str, report['no_rope_layers']))}")


def cmd_inspect(args: argparse.Namespace) -> None:
    from ..host.registry import default_registry

    model = _load(args)
    if args.json:
        document = model.to_json()
        document["source"] = model.source
        document["layer_types"] = list(model.layer_types)
        print_json(document)
        return
    registry = default_registry()
    say(f"config: {model.source}")
    if model.layer_types:
        counts = {name: model.layer_types.count(name) for name in dict.fromkeys(model.layer_types)}
        say(f"layers: {len(model.layer_types)} ({', '.join(f'{n} x{c}' for n, c in counts.items())})")
    for name, table in model.tables.items():
        scheme = registry.scheme(table.rope_type)
        owner = registry.owner(table.rope_type)
        served_by = f"{owner.distribution} {owner.version}" if owner is not None else "?"
        say(f"\n[{name}] rope_type {table.rope_type}  ({served_by})")
        say(f"  {scheme.doc}")
        say(f"  head_dim {table.head_dim}, rotary_dim {table.rotary_dim}, {len(table.inv_freq)} pairs, "
              f"attention_factor {table.attention_factor:.9g}")
        for key, value in table.params.items():
            shown = f"[{len(value)} values]" if isinstance(value, tuple) else repr(value)
            say(f"  {key} = {shown}")
        if table.mrope_composition:
            say(f"  multimodal: {table.mrope_axes} position axes, composed as {table.mrope_composition}, "
                f"mrope_section {list(table.mrope_section or ())} (see docs/multimodal.md)")
        if table.seq_len_dependent:
            say(f"  {_regime(table)}")
        freq = table.inv_freq
        say(f"  layout {table.layout}; inv_freq: {freq[0]:.6g} ... {freq[-1]:.6g}  "
              f"(ropekit table {args.config} --json for all)")
    if set(model.listed_types) - set(model.tables) or model.no_rope_layers:
        say()
        _print_no_rope(model)


def cmd_list(args: argparse.Namespace) -> None:
    from ..host.registry import default_registry

    registry = default_registry()
    rows = []
    for status in registry.status():
        row = _status_row(status, "rope_type")
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
    families = []
    for status in registry.families.status():
        row = _status_row(status, "model_type")
        if not args.no_import and status.state in ("available", "loaded"):
            try:
                family = registry.families.family(status.rope_type)
            except PluginError as error:
                row.update(status="broken", problem=error.problem)
            else:
                assert family is not None
                row.update(status="loaded", doc=family.doc)
        families.append(row)
    if args.json:
        print_json({"schemes": rows, "families": families})
        return
    for row in rows:
        alias = f" (alias of {row['canonical']})" if row.get("canonical", row["rope_type"]) != row["rope_type"] else ""
        say(f"{row['rope_type']}{alias}  [{row['status']}]  {row['distribution']} {row['version']}  {row['module']}")
        if "problem" in row:
            say(f"    problem: {row['problem']}")
        if "doc" in row and not alias:
            say(f"    {row['doc']}")
            for key in registry.scheme(row["rope_type"]).keys:
                say(f"      {key.describe()}")
    if families:
        say("\nmodel families (plugins for model_types ropekit does not know):")
        for row in families:
            say(f"{row['model_type']}  [{row['status']}]  {row['distribution']} {row['version']}  {row['module']}")
            for extra in ("problem", "doc"):
                if extra in row:
                    say(f"    {'problem: ' if extra == 'problem' else ''}{row[extra]}")


def _status_row(status: Any, name: str) -> dict[str, Any]:
    row: dict[str, Any] = {name: status.rope_type, "distribution": status.distribution, "version": status.version,
                           "module": status.target, "status": status.state}
    if status.problem:
        row["problem"] = status.problem
    return row


def cmd_check_plugin(args: argparse.Namespace) -> int:
    from ..host.registry import default_registry
    from ..tools.conformance import run_checks

    registry = default_registry()
    if args.family:
        return _check_family(args, registry)
    claims = registry.claims().get(args.name)
    if not claims:
        registry.scheme(args.name, path="NAME")  # raises UnknownRopeTypeError with suggestions
        raise AssertionError("unreachable")  # pragma: no cover
    results = run_checks(args.name, registry=registry)
    passed = not any(result.failed for result in results)
    owner = claims[0]
    if args.json:
        print_json({"rope_type": args.name, "distribution": ", ".join(c.distribution for c in claims),
                     "version": owner.version, "passed": passed, "checks": [r.to_json() for r in results]})
    else:
        say(f"{args.name}  ({owner.distribution} {owner.version}, {owner.target})")
        labels = {"pass": "PASS", "fail": "FAIL", "not_run": "NOT RUN"}
        said = ""
        for result in results:
            say(f"  {labels[result.status]:<7}  {result.check}")
            if not result.passed and result.message != said:  # a reason shared by the next checks is said once
                say(f"           {result.message}")
                said = result.message
        not_run = sum(r.not_run for r in results)
        say(f"{sum(r.passed for r in results)} passed, {sum(r.failed for r in results)} failed"
              + (f", {not_run} not run" if not_run else ""))
    return 0 if passed else EXIT_CHECKS_FAILED


def _check_family(args: argparse.Namespace, registry: Any) -> int:
    from ..tools.conformance import check_family

    if not registry.families.claims().get(args.name):
        known = ", ".join(registry.families.names()) or "none"
        raise ArgumentError("name", f"no installed distribution registers model_type {args.name!r} in the "
                            f"'ropekit.families' entry-point group (registered: {known})")
    try:
        done, problem = check_family(args.name, registry=registry), ""
    except AssertionError as failure:
        done, problem = [], str(failure)
    owner = registry.families.owner(args.name)
    if args.json:
        print_json({"model_type": args.name, "distribution": owner.distribution if owner else None,
                    "passed": not problem, "checked": done, **({"problem": problem} if problem else {})})
    else:
        say(f"family {args.name}" + (f"  ({owner.distribution} {owner.version}, {owner.target})" if owner else ""))
        say(f"  FAIL  {problem}" if problem else f"  PASS  {', '.join(done)}")
    return EXIT_CHECKS_FAILED if problem else 0


def cmd_export(args: argparse.Namespace) -> None:
    from ..tools.export import export

    model = _load(args)
    manifest = export(model, args.out, positions=args.positions, dtype=args.dtype, layout=args.layout,
                      seq_lens=args.seq_lens)
    if args.json:
        print_json(manifest)
        return
    for name, layer in manifest["layers"].items():
        if layer.get("no_rope"):
            say(f"{name}: no RoPE")
            continue
        files = ", ".join(f"{kind} {spec['path']} {spec['shape']}" for kind, spec in layer["files"].items())
        say(f"{name}: rope_type {layer['rope_type']}, attention_factor {layer['attention_factor']:.9g}: {files}")
        for extra in layer.get("beyond", []):
            say(f"  seq_len {extra['seq_len']}: {extra['files']['inv_freq']['path']} ({layer['seq_len_rule']})")
    say(f"wrote {args.out}/manifest.json and manifest.txt")


def cmd_audit(args: argparse.Namespace) -> int:
    from ..artifacts.audit import audit_artifact
    from ..artifacts.read import read_for_audit

    if args.config is None:
        if not os.path.isdir(str(args.served)):
            return _gguf_self_check(args)
        _config_inside_served(args)
    model = _load(args)
    artifact = read_for_audit(model, args.served, n_ctx=args.n_ctx, dtype=args.dtype, sin=args.sin,
                              layout=args.layout)
    report = audit_artifact(model, artifact, layer_type=args.layer_type, positions=args.positions, rtol=args.rtol)
    from ..artifacts.repair import annotate

    report = annotate(model, report)  # decided from this very report when it is repair's (one audit, not two)
    if args.json:
        print_json(report.to_json())
    else:
        _print_audit(report)
    return 0 if report.verdict == "match" else EXIT_CHECKS_FAILED


def cmd_repair(args: argparse.Namespace) -> int:
    from ..artifacts.audit import audit_artifact
    from ..artifacts.files import checked_paths
    from ..artifacts.read import read_for_audit
    from ..artifacts.repair import repair

    if args.config is None:
        _config_inside_served(args)
    model = _load(args)
    checked_paths(str(args.served), str(args.out))  # refused before anything is read
    report = audit_artifact(model, read_for_audit(model, args.served, n_ctx=args.n_ctx))  # the command's one audit
    result = repair(model, args.served, args.out, n_ctx=args.n_ctx, report=report)
    if args.json:
        print_json(result.to_json())
    elif result.verdict == "repaired":
        say(f"repaired: {result.reason}")
        for change in result.changes:
            say(f"  {change.get('what')}: {change.get('change', 'recomputed from the declared table')}"
                + (f" (max change {change['max_change']:.3g})" if "max_change" in change else ""))
    elif result.verdict == "unchanged":
        say(f"unchanged: {args.served} {result.reason}; nothing written")
    else:
        say(f"not repairable: {result.reason}; nothing written")
    return EXIT_CHECKS_FAILED if result.verdict == "not_repairable" else 0


def _config_inside_served(args: argparse.Namespace) -> None:
    """CONFIG not given: the model's ``config.json`` inside the ``--served`` folder becomes ``args.config``
    (an engine's own config there, ``genai_config.json`` or a Genie config, is not the model's)."""
    from ..tools.model_configs import model_config_in

    served = str(args.served)
    if not os.path.isdir(served):
        raise RopeConfigError("CONFIG", f"missing: give the model's config.json (without it, only a --served folder "
                              f"holding the model's config.json can be {args.command}ed; {served} is not a folder)")
    found, why = model_config_in(served)
    if found is None:
        raise RopeConfigError("CONFIG", f"missing, and the --served folder {served} {why}: give the model's "
                              "config.json (a JSON object with model_type or architectures)")
    args.config = found


def _gguf_self_check(args: argparse.Namespace) -> int:
    from ..artifacts.read import read_artifact

    if not str(args.served).lower().endswith(".gguf"):
        raise RopeConfigError("CONFIG", "missing: give the model's config.json (only a .gguf can be checked alone)")
    artifact = read_artifact(args.served, n_ctx=args.n_ctx)
    verdict = "red_flags" if artifact.flags else "no_red_flags"
    document = {"verdict": verdict, "artifact": {"path": artifact.path, "kind": artifact.kind,
                                                 "engine": artifact.engine},
                "flags": list(artifact.flags), "engine_rules": list(artifact.rules),
                "note": "checked against itself only; give CONFIG to audit the table against the declaration"}
    if args.json:
        print_json(document)
    else:
        say(f"{artifact.path}: {'RED FLAGS' if artifact.flags else 'no red flags'} (checked against itself only; "
              "give CONFIG for a full audit)")
        for flag in (*artifact.flags, *artifact.rules):
            say(f"  {flag}")
    return EXIT_CHECKS_FAILED if artifact.flags else 0


def _print_audit(report: AuditReport) -> None:
    artifact = report.artifact
    say(f"{artifact.path} ({artifact.kind}{', ' + artifact.producer if artifact.producer else ''}): "
          f"{report.verdict.upper().replace('_', ' ')}")
    if report.verdict == "no_table":
        say(f"  {report.request}")
    per_layer = artifact.layers or ()
    wrong = [entry for entry in per_layer if entry.verdict == "mismatch"]
    if per_layer:
        say(f"  layers: {len(per_layer) - len(wrong)} of {len(per_layer)} wired as declared")
    for entry in wrong:
        named = f"layer {entry.index}"
        if entry.reason.startswith(named + " "):  # the reason's sentence names the layer: the index once, not twice
            say(f"  MISMATCH ({entry.layer_type}) {entry.reason}")
        else:
            say(f"  MISMATCH {named} ({entry.layer_type}): {entry.reason.removeprefix(named + ':').strip()}")
    for name, layer in report.layers.items():
        if layer.tables is None and layer.verdict == "mismatch" and layer.served_as:  # no table: the file's own value
            say(f"[{name}] MISMATCH: {layer.served_as}")
        for table in layer.tables or ():
            regime = f" [{table.regime}]" if table.regime else ""
            say(f"[{name}]{regime} declared rope_type {table.declared['rope_type']} ({table.declared['pairs']} pairs); "
                  f"served {table.kind} {table.dtype} from {table.where}")
            if table.verdict == "match":
                say("  MATCH: the served table is the declared one")
                if table.attention_factor_unverified is not None:
                    say(f"  note: {table.attention_factor_unverified}")
                continue
            say("  MISMATCH: the served table is not what the config declares")
            say(f"  it matches: {table.served_as}")
            apart = table.difference
            if apart:
                say(f"  {apart['differing_pairs']} of {apart['pairs']} pairs differ from the declared table, "
                      f"by up to {apart['max_ratio']:.6g}x")
                for position, row in apart["positions"].items():
                    say(f"  position {position:>7}: max angle error {row['max_angle_error']:.4f} rad, "
                          f"{row['pairs_over_0.1rad']} pairs over 0.1 rad")
    for note in (*report.engine_rules, *report.flags):
        say(f"  note: {note}")
    if report.repairable is not None:
        verb = "can repair it" if report.repairable else "cannot repair it"
        say(f"  ropekit repair {verb}: {report.repairable_reason}")


def cmd_scan(args: argparse.Namespace) -> int:
    from ..tools.scan import scan, summarize

    supports = args.supports
    rows = []
    progress = sys.stderr.isatty() and not args.json
    for row in scan(args.paths, supports=supports, audit=args.audit, jobs=args.jobs, strict=not args.lenient):
        rows.append(row)
        for warning in row.warnings:  # the model named in each: a scan reads many
            line = encodable(f"ropekit: warning: {one_line(f'{row.path}: {warning}')}", sys.stderr)
            print(f"{chr(13) if progress else ''}{line}", file=sys.stderr)
        if args.json:
            say(json.dumps(finite_json(row.to_json()), allow_nan=False))
        if progress and len(rows) % 50 == 0:
            print(f"\rropekit scan: {len(rows)} models...", end="", file=sys.stderr, flush=True)
    if progress and len(rows) >= 50:
        print("\r" + " " * 40 + "\r", end="", file=sys.stderr, flush=True)
    summary = summarize(rows)
    if args.json:
        say(json.dumps({"summary": summary}))
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

    audited = any(row.audit is not None for row in rows)
    headings = ("STATUS", "MODEL_TYPE", "LAYERS", *(("REPAIRABLE",) if audited else ()))
    table = [(row.status, row.model_type or "-", types(row), *((_repairable(row),) if audited else ()))
             for row in rows]
    widths = [max([len(heading)] + [len(line[i]) for line in table]) for i, heading in enumerate(headings)]
    say("  ".join(f"{heading:<{width}}" for heading, width in zip(headings, widths, strict=True)) + "  PATH")
    for row, line in zip(rows, table, strict=True):
        say("  ".join(f"{cell:<{width}}" for cell, width in zip(line, widths, strict=True)) + f"  {row.path}")
        if row.reason:
            say(f"{'':<{widths[0]}}  {row.reason}")
    counts = ", ".join(f"{count} {status}" for status, count in summary["status"].items())
    kinds = ", ".join(f"{name} {count}" for name, count in summary["rope_types"].items())
    say(f"{summary['models']} models: {counts or 'none found'}" + (f"; rope_types: {kinds}" if kinds else ""))


def _repairable(row: Any) -> str:
    """``ropekit scan --audit``'s REPAIRABLE cell: ``yes``/``no`` when every mismatching artifact of
    the row is / none is repairable by ``ropekit repair``, ``K of N`` when some are, ``-`` when none
    mismatches."""
    found = [result["repairable"] for result in (row.audit or {}).values()
             if isinstance(result, dict) and "repairable" in result]
    if not found:
        return "-"
    if all(found):
        return "yes"
    return "no" if not any(found) else f"{sum(map(bool, found))} of {len(found)}"


def cmd_plot(args: argparse.Namespace) -> None:
    from ..tools.plot import plot

    model = _load(args)
    plot(model, args.output)
    say(f"wrote {args.output}")
    for name, table in model.tables.items():
        if table.seq_len_dependent:
            say(f"{name}: {_regime(table)}")


def cmd_probe(args: argparse.Namespace) -> int:
    from ..engines.probe import probe

    report = probe(args.config, model_class=args.model_class, seq_lens=args.seq_lens)
    if args.json:
        print_json(report.to_json())
    else:
        say(f"{report.model_class} (transformers {report.transformers}): {report.verdict}")
        for row in report.layers:
            what = row["kind"]
            if what == "rotates":
                factor = row["attention_factor"]
                what = (f"rotates {row['rotary_dim']} of {row['head_dim']} channels from {row['first_channel']}, "
                        f"{row['layout']}, attention factor {'?' if factor is None else f'{factor:.6g}'}")
            say(f"  layer {row['index']:>2} (seq_len {row['seq_len']}): {what}: {row['verdict']}"
                + (f" ({row['reason']})" if row.get("reason") else ""))
    return 0 if report.verdict == "match" else EXIT_CHECKS_FAILED
