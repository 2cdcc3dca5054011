"""Producer: onnxruntime-genai's model builder (``python -m onnxruntime_genai.models.builder``) -> ``model.onnx``
(+ ``.data``) and ``genai_config.json``, for every ``ort-genai`` case of ``cases.py``; measures the baked caches
against transformers' tables. Requirements and conventions: ``common.py``.

Run from the repository root: ``python scripts/artifacts/onnx_builder.py [--only NAME ...] [--keep-work DIR]``.
"""

from __future__ import annotations

import importlib.metadata
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
from cases import Case
from common import (
    build,
    build_checkpoint,
    compare,
    estimate_inv_freq,
    hf_reference,
    plain_inv_freq,
    run,
    table_err,
    verdict,
)


def produce_onnx(case: Case, ckpt: Path, work: Path, dest: Path) -> list[str]:
    pack = work / "packs" / case.name
    shutil.rmtree(pack, ignore_errors=True)
    cmd = [
        sys.executable,
        "-m",
        "onnxruntime_genai.models.builder",
        "-i",
        str(ckpt),
        "-o",
        str(pack),
        *case.args,
        "-c",
        str(work / "ort_cache"),
    ]
    run(cmd, cwd=work)
    for name in ("model.onnx", "model.onnx.data", "genai_config.json"):
        if (pack / name).exists():
            shutil.copy(pack / name, dest / name)
    if case.keep_checkpoint:  # the weights the pack was built from, for logit comparisons with transformers
        (dest / "checkpoint").mkdir(exist_ok=True)
        for name in ("config.json", "model.safetensors"):
            shutil.copy(ckpt / name, dest / "checkpoint" / name)
    return ["python", "-m", "onnxruntime_genai.models.builder", "-i", "HF_DIR", "-o", "PACK", *case.args]


def onnx_caches(path: Path) -> list[dict[str, Any]]:
    """Every cos/sin cache in the model: top-level initializers and Constants inside subgraphs (If branches)."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path), load_external_data=False)
    external = {
        t.name
        for t in onnx.external_data_helper._get_all_tensors(model)
        if t.data_location == onnx.TensorProto.EXTERNAL
    }
    onnx.load_external_data_for_model(model, str(path.parent))
    consumers: dict[str, set[str]] = {}
    found: list[dict[str, Any]] = []

    def walk(graph: onnx.GraphProto, where: str) -> None:
        for init in graph.initializer:
            if "cos_cache" in init.name or "sin_cache" in init.name:
                found.append(
                    {
                        "name": init.name,
                        "where": f"{where} initializer",
                        "array": numpy_helper.to_array(init),
                        "external_data": init.name in external,
                    }
                )
        for node in graph.node:
            for inp in node.input:
                consumers.setdefault(inp, set()).add(f"{node.op_type} {node.name!r}")
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    walk(attr.g, f"{where} > {node.op_type} {node.name!r} .{attr.name}")
            if node.op_type == "Constant" and any("cache" in o for o in node.output):
                for attr in node.attribute:
                    if attr.name == "value":
                        found.append(
                            {
                                "name": node.output[0],
                                "where": f"{where} Constant {node.name!r}",
                                "array": numpy_helper.to_array(attr.t),
                                "external_data": attr.t.name in external and bool(attr.t.name),
                            }
                        )

    walk(model.graph, "main graph")
    if_outputs = {o: f"If {n.name!r}" for n in model.graph.node if n.op_type == "If" for o in n.output}
    for item in found:
        item["consumers"] = sorted(consumers.get(item["name"], set()))
        item["graph_output_of"] = if_outputs.get(item["name"].replace("_large", "").replace("_small", ""))
    return found


def float32_angle_err(cos: np.ndarray, sin: np.ndarray, inv: np.ndarray, attn: float) -> float:
    """Max deviation from a table built the builder's way: float32 inv_freq, float32 positions and products."""
    inv32 = inv.astype(np.float32)
    ang = np.outer(np.arange(cos.shape[0], dtype=np.float32), inv32).astype(np.float32)
    ref_c = (np.cos(ang).astype(np.float32) * np.float32(attn)).astype(cos.dtype)
    ref_s = (np.sin(ang).astype(np.float32) * np.float32(attn)).astype(cos.dtype)
    return float(max(np.abs(cos.astype(np.float64) - ref_c).max(), np.abs(sin.astype(np.float64) - ref_s).max()))


def onnx_tables(case: Case, by_name: dict[str, np.ndarray]) -> dict[str, tuple[np.ndarray, np.ndarray, str]]:
    """cos/sin pairs by key; DML's concatenated longrope cache is split into its short and long rows."""
    cfg = case.config
    out: dict[str, tuple[np.ndarray, np.ndarray, str]] = {}
    for key in sorted({n.replace("cos_", "").replace("sin_", "") for n in by_name}):
        cos, sin = by_name[f"cos_{key}"], by_name[f"sin_{key}"]
        orig = cfg.get("original_max_position_embeddings")
        longrope = cfg.get("rope_scaling", {}).get("type") == "longrope"
        if key == "cache" and longrope and orig and cos.shape[0] == orig + cfg["max_position_embeddings"]:
            out["cache[:orig] (short rows)"] = (cos[:orig], sin[:orig], "small")
            out["cache[orig:] (long rows)"] = (cos[orig:], sin[orig:], "large")
        else:
            out[key] = (cos, sin, key)
    return out


def measure_onnx(case: Case, dest: Path) -> dict[str, Any]:
    caches = onnx_caches(dest / "model.onnx")
    cfg = case.config
    layout = [
        {
            "name": c["name"],
            "where": c["where"],
            "shape": list(c["array"].shape),
            "dtype": str(c["array"].dtype),
            "external_data": c["external_data"],
            "consumers": c["consumers"],
            "selected_by": c["graph_output_of"] if c["where"] != "main graph initializer" else None,
        }
        for c in caches
    ]
    results: dict[str, Any] = {}
    for key, (cos, sin, kind) in onnx_tables(case, {c["name"]: c["array"] for c in caches}).items():
        served, attn_served = estimate_inv_freq(cos, sin)
        rows = cos.shape[0]
        layer_type = None
        base = cfg["rope_theta"]
        seq_len: int | None = rows
        if kind.endswith("_global"):
            layer_type = "full_attention"
        elif kind.endswith("_local"):
            layer_type, base = "sliding_attention", cfg["rope_local_base_freq"]
        if kind.endswith("small"):
            seq_len = cfg["original_max_position_embeddings"]
        elif kind.endswith("large"):
            seq_len = cfg["max_position_embeddings"] + 1
        inv_decl, attn_decl, rope_type = hf_reference(dest, seq_len=seq_len, layer_type=layer_type)
        plain = plain_inv_freq(base, 2 * len(served))
        tol = 2e-3 if cos.dtype == np.float16 else 1e-4
        cmp_decl, cmp_plain = compare(served, inv_decl, tol), compare(served, plain, tol)
        matched = inv_decl if not cmp_decl["pairs_off"] else plain if not cmp_plain["pairs_off"] else None
        matched_attn = attn_decl if not cmp_decl["pairs_off"] else attn_served
        results[key] = {
            "rows": rows,
            "declared_rope_type": rope_type,
            "hf_seq_len_for_reference": seq_len,
            "attention_factor_served": round(attn_served, 6),
            "attention_factor_declared": round(attn_decl, 6),
            "vs_declared": cmp_decl,
            "vs_plain": {k: cmp_plain[k] for k in ("max_rel_err", "pairs_off")},
            "max_abs_table_err_vs_declared_float64": table_err(
                cos.astype(np.float64), sin.astype(np.float64), inv_decl, attn_decl
            ),
            "max_abs_err_vs_float32_angles_of_matched_table": (
                None if matched is None else float32_angle_err(cos, sin, matched, matched_attn)
            ),
            "served": verdict(cmp_decl, cmp_plain, attn_served, attn_decl),
        }
    genai = json.loads((dest / "genai_config.json").read_text())
    rope_in_genai = [k for k in json.dumps(genai).split('"') if "rope" in k.lower()]
    return {"layout": layout, "tables": results, "genai_config_rope_keys": rope_in_genai}


def make(case: Case, sp_model: Path, work: Path, dest: Path, lcpp: Path | None) -> tuple[list[str], str]:
    """The builder run on the case's checkpoint."""
    ckpt = build_checkpoint(case, sp_model, work)
    return produce_onnx(case, ckpt, work, dest), f"onnxruntime-genai {importlib.metadata.version('onnxruntime-genai')}"


def main(argv: list[str] | None = None) -> int:
    return build("ort-genai", make, measure_onnx, argv, description=__doc__.split("\n")[0])


if __name__ == "__main__":
    sys.exit(main())
