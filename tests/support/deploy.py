"""The deploy/ directory as the tests read it: the image's final stage, the manifests, and the
dev tools that lint them."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
DOCKERFILE = DEPLOY / "Dockerfile"
MANIFESTS = [DEPLOY / "compose.yaml", *sorted((DEPLOY / "k8s").glob("*.yaml"))]
BIN = Path(sys.executable).parent


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the final stage, continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    lines = [line.strip() for line in text.splitlines()]
    parsed = [tuple(line.split(None, 1)) for line in lines if line and not line.startswith("#")]
    stages = [i for i, (word, *_) in enumerate(parsed) if word == "FROM"]
    return [(word, rest) for word, rest in parsed[stages[-1]:]]


def exec_form(arguments: str) -> list[str]:
    command = json.loads(arguments)
    assert isinstance(command, list), "use the exec form (a JSON list): signals reach the server"
    return [str(part) for part in command]


def image_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for word, rest in instructions():
        if word == "ENV":
            for name, value in re.findall(r"(\w+)=(\S+)", rest):
                env[name] = value
    return env


def tool(name: str) -> str:
    """The path of a dev dependency's command (installed by ``make setup``)."""
    found = shutil.which(name) or (str(BIN / name) if (BIN / name).exists() else None)
    assert found is not None, f"{name} is missing: it is a dev dependency (make setup)"
    return found
