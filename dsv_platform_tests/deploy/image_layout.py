"""deploy/Dockerfile carried out on a folder, without docker: the image's file layout, for tests of what runs inside it.

:func:`parse` reads the Dockerfile's instructions (continuation lines joined, comments dropped). :func:`build`
lays them out under ``root`` as the image would: ``ARG`` (with build args), ``WORKDIR``, ``ENV``, ``COPY`` from the
repository as the build context (.dockerignore applied) and ``RUN python <script>`` of the scripts the image runs
(deploy/bake_pin.py, deploy/add_executor.py) for real. ``pip install ... .`` is the package copied from the work
dir into ``site-packages`` as setuptools installs it (its dependencies are the test's own interpreter, installed
from the same locks); other RUN lines (apt-get, mkdir) change nothing a test reads. No ``.git`` is copied, as in the image.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "deploy" / "Dockerfile"


@dataclass
class Image:
    root: Path
    env: dict[str, str] = field(default_factory=dict)
    runs: list[str] = field(default_factory=list)  # every RUN line, in order, after ARG substitution

    @property
    def site_packages(self) -> Path:
        return self.root / "site-packages"

    def path(self, image_path: str) -> Path:
        """Where an absolute path of the image lies under ``root``."""
        return self.root / image_path.lstrip("/")


def parse(text: str) -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` of each instruction, in order."""
    out: list[tuple[str, str]] = []
    pending = ""
    for line in text.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        whole = (pending + line).strip()
        pending = ""
        name, _, args = whole.partition(" ")
        out.append((name.upper(), args.strip()))
    return out


def _ignored(rel: str, patterns: list[str]) -> bool:
    base = rel.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(base, p.removeprefix("**/")) or rel.startswith(p + "/") for p in patterns)


def _copy(src: Path, dest: Path, patterns: list[str], into_dir: bool) -> None:
    rel = src.relative_to(REPO).as_posix()
    if _ignored(rel, patterns):
        return
    if src.is_dir():
        for child in sorted(src.iterdir()):
            _copy(child, dest / child.name, patterns, into_dir=False)
        return
    target = dest / src.name if into_dir else dest
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src, target)


def build(root: Path, build_args: dict[str, str] | None = None, dockerfile: Path = DOCKERFILE) -> Image:
    """The image's layout under ``root`` (see the module docstring); a RUN script that fails fails the build (CalledProcessError)."""
    image = Image(root)
    args: dict[str, str] = {}
    given = dict(build_args or {})
    patterns = [p.strip() for p in (REPO / ".dockerignore").read_text().splitlines() if p.strip() and not p.startswith("#")]
    workdir = "/"

    def sub(text: str) -> str:
        return re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), image.env.get(m.group(1), m.group(0))), text)

    def local(p: str) -> str:
        return str(image.path(p if p.startswith("/") else str(PurePosixPath(workdir) / p)))

    for name, raw in parse(dockerfile.read_text()):
        if name == "ARG":
            key, _, default = raw.partition("=")
            args[key] = given.get(key, default)
        elif name == "WORKDIR":
            workdir = str(PurePosixPath(workdir) / sub(raw))
        elif name == "ENV":
            for item in shlex.split(sub(raw)):
                key, _, value = item.partition("=")
                image.env[key] = value
        elif name == "COPY":
            *sources, dest = shlex.split(sub(raw))
            into_dir = dest.endswith("/") or len(sources) > 1
            for source in sources:
                _copy(REPO / source, Path(local(dest)), patterns, into_dir=into_dir and not (REPO / source).is_dir())
        elif name == "RUN":
            command = sub(raw)
            image.runs.append(command)
            for part in command.split("&&"):
                words = shlex.split(part)
                if words[:1] == ["python"]:
                    mapped = [local(w) if w.startswith("/") or (Path(local(w)).exists()) else w for w in words[1:]]
                    subprocess.run([sys.executable, *mapped], check=True, capture_output=True, text=True, cwd=local("."))
                elif words[:2] == ["pip", "install"] and words[-1] == ".":
                    shutil.copytree(Path(local("dsv_platform")), image.site_packages / "dsv_platform", dirs_exist_ok=True)
    return image


def run_inside(image: Image, code: str, *, extra_env: dict[str, str] | None = None, timeout: int = 180) -> subprocess.CompletedProcess[str]:
    """``python -c code`` as the image runs it: its package, its ENV (paths under ``root``), none of this shell's DSV_* variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSV_", "DAGSTER_", "PYTHONPATH"))}
    for key, value in image.env.items():
        env[key] = str(image.path(value)) if value.startswith("/") else value
    env |= {"PYTHONPATH": str(image.site_packages)} | dict(extra_env or {})
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=image.root, capture_output=True, text=True, timeout=timeout)
