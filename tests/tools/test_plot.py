"""``ropekit plot`` writes a real image per config; without matplotlib it says what to install."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import ropekit
from ropekit.cli import main
from ropekit.tools.plot import plot

from ..support import SEED_CONFIG


def test_plot_writes_a_png_with_the_band_edges(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    target = tmp_path / "llama.png"
    assert main(["plot", str(SEED_CONFIG), "-o", str(target)]) == 0
    data = target.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    assert ropekit.load(SEED_CONFIG).table.landmarks == {"original / low_freq_factor": 8192.0,
                                                     "original / high_freq_factor": 2048.0}


def test_plot_without_matplotlib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert main(["plot", str(SEED_CONFIG), "-o", str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err
    assert "pip install 'ropekit[plot]'" in err and err.count("\n") == 1


def test_config_text_is_never_markup_and_the_output_path_is_checked(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="plot needs the plot extra")
    config = {"head_dim": 16, "rope_parameters": {"$\\frac{1}{0}$": {"rope_type": "default"},
                                                  "x^{2}_$": {"rope_type": "linear", "factor": 2.0}},
              "num_hidden_layers": 2, "layer_types": ["$\\frac{1}{0}$", "x^{2}_$"]}
    model = ropekit.load(config)
    plot(model, tmp_path / "ok.png")
    assert (tmp_path / "ok.png").stat().st_size > 1000
    with pytest.raises(ropekit.ArgumentError, match="does not exist"):
        plot(model, tmp_path / "missing" / "x.png")
    with pytest.raises(ropekit.ArgumentError, match="unknown image type 'xyz'"):
        plot(model, tmp_path / "x.xyz")
