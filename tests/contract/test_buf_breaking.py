"""`make lint` runs `buf breaking` against protos/baseline.binpb: the contract as released is kept,
and a breaking change to it is caught."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

PROTOS = Path(__file__).resolve().parents[2] / "protos"
BUF = Path(sys.executable).parent / "buf"


def breaking(protos: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BUF), "breaking", "--against", "baseline.binpb"], cwd=protos,
                          capture_output=True, text=True, timeout=120, check=False)


def test_the_contract_keeps_the_released_one() -> None:
    result = breaking(PROTOS)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_breaking_change_is_caught(tmp_path: Path) -> None:
    copy = tmp_path / "protos"
    shutil.copytree(PROTOS, copy)
    service = copy / "tapis" / "v1" / "game_service.proto"
    text = service.read_text(encoding="utf-8")
    assert "  uint64 sequence = 1;" in text
    service.write_text(text.replace("  uint64 sequence = 1;", "  uint64 sequence = 6;"),
                       encoding="utf-8")
    result = breaking(copy)
    assert result.returncode != 0
    assert "sequence" in result.stdout + result.stderr
