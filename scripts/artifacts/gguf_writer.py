"""Producer: ``gguf.GGUFWriter`` directly, for metadata-only GGUFs (the Llama-3.2-1B seed case without
``rope_freqs``, a Qwen2 file carrying every yarn key, GPT-NeoX's keys): every ``gguf-writer`` case of ``cases.py``.
Requirements and conventions: ``common.py``.

Run from the repository root: ``python scripts/artifacts/gguf_writer.py [--only NAME ...]``.
"""

from __future__ import annotations

import importlib.metadata
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
from cases import Case
from common import build
from gguf_measure import measure


def write_seed_gguf(case: Case, dest: Path) -> list[str]:
    """Llama-3.2-1B metadata exactly as convert_hf_to_gguf.py writes it for llama3, minus ``rope_freqs.weight``."""
    import gguf

    c = case.config
    w = gguf.GGUFWriter(dest / "model.gguf", "llama")
    w.add_name("Llama 3.2 1B Instruct (metadata only)")
    w.add_context_length(c["max_position_embeddings"])
    w.add_embedding_length(c["hidden_size"])
    w.add_block_count(c["num_hidden_layers"])
    w.add_feed_forward_length(c["intermediate_size"])
    w.add_head_count(c["num_attention_heads"])
    w.add_head_count_kv(c["num_key_value_heads"])
    w.add_rope_freq_base(c["rope_theta"])
    w.add_layer_norm_rms_eps(c["rms_norm_eps"])
    w.add_key_length(c["head_dim"])
    w.add_value_length(c["head_dim"])
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_vocab_size(c["vocab_size"])
    w.add_rope_dimension_count(c["head_dim"])
    # llama3 writes no rope.scaling.* keys: the scaling lives only in rope_freqs.weight, left out on purpose here.
    w.add_tensor("output_norm.weight", np.ones(c["hidden_size"], dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return ["gguf.GGUFWriter(arch='llama') -- see write_seed_gguf()"]


def write_yarn_keys_gguf(case: Case, dest: Path) -> list[str]:
    """A qwen2 GGUF carrying every rope/yarn key llama.cpp knows (qwen2's loader reads only some of them)."""
    import gguf

    c = case.config
    rs = c["rope_scaling"]
    w = gguf.GGUFWriter(dest / "model.gguf", "qwen2")
    w.add_name("Qwen2.5-7B-Instruct yarn (metadata only)")
    w.add_context_length(c["max_position_embeddings"])
    w.add_embedding_length(c["hidden_size"])
    w.add_block_count(c["num_hidden_layers"])
    w.add_feed_forward_length(c["intermediate_size"])
    w.add_head_count(c["num_attention_heads"])
    w.add_head_count_kv(c["num_key_value_heads"])
    w.add_rope_freq_base(c["rope_theta"])
    w.add_layer_norm_rms_eps(c["rms_norm_eps"])
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_rope_dimension_count(c["hidden_size"] // c["num_attention_heads"])
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    w.add_rope_scaling_factor(rs["factor"])
    w.add_rope_scaling_orig_ctx_len(rs["original_max_position_embeddings"])
    w.add_rope_scaling_yarn_ext_factor(1.0)
    w.add_rope_scaling_yarn_attn_factor(rs["attention_factor"])
    w.add_rope_scaling_yarn_beta_fast(rs["beta_fast"])
    w.add_rope_scaling_yarn_beta_slow(rs["beta_slow"])
    w.add_tensor("output_norm.weight", np.ones(c["hidden_size"], dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return ["gguf.GGUFWriter(arch='qwen2') -- see write_yarn_keys_gguf()"]


def write_gptneox_gguf(case: Case, dest: Path) -> list[str]:
    """GPT-NeoX metadata exactly as ``GPTNeoXModel.set_gguf_parameters`` writes it: no rope.freq_base, no scaling."""
    import gguf

    c = case.config
    w = gguf.GGUFWriter(dest / "model.gguf", "gptneox")
    w.add_name("tiny GPT-NeoX, rotary_emb_base 50000 (metadata only)")
    w.add_context_length(c["max_position_embeddings"])
    w.add_embedding_length(c["hidden_size"])
    w.add_block_count(c["num_hidden_layers"])
    w.add_feed_forward_length(c["intermediate_size"])
    w.add_rope_dimension_count(int(c["rotary_pct"] * (c["hidden_size"] // c["num_attention_heads"])))
    w.add_head_count(c["num_attention_heads"])
    w.add_parallel_residual(c["use_parallel_residual"])
    w.add_layer_norm_eps(c["layer_norm_eps"])
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tensor("output_norm.weight", np.ones(c["hidden_size"], dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return ["gguf.GGUFWriter(arch='gptneox') -- see write_gptneox_gguf()"]


WRITERS: dict[str, Callable[[Case, Path], list[str]]] = {
    "gguf_seed_llama32_no_rope_freqs": write_seed_gguf,
    "gguf_qwen2_yarn_keys": write_yarn_keys_gguf,
    "gguf_gptneox_keys": write_gptneox_gguf,
}


def make(case: Case, sp_model: Path, work: Path, dest: Path, lcpp: Path | None) -> tuple[list[str], str]:
    """The case's file written key by key."""
    return WRITERS[case.name](case, dest), f"gguf {importlib.metadata.version('gguf')} GGUFWriter"


def main(argv: list[str] | None = None) -> int:
    return build("gguf-writer", make, measure, argv, description=__doc__.split("\n")[0])


if __name__ == "__main__":
    sys.exit(main())
