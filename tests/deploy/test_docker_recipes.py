"""The Docker commands in README.md and the Dockerfile name the image, volume and service that
deploy/docker-compose.yml creates, and the README's way to edit config.yaml in the volume works.

There is no Docker engine on the test machines: names are compared with what Compose derives from the file
(a volume without ``name:`` is called ``<project>_<key>``, the project being the file's ``name:`` or its
folder's name), and the config.yaml recipe runs against a stand-in ``docker`` that runs the container's
command here, on a folder standing for the volume.
"""

from __future__ import annotations

import re
import stat
import subprocess
import sys
from pathlib import Path

import yaml

from config.home import ensure_home
from config.loader import example_config_text
from tests.deploy.dockerfile import REPO
from tests.deploy.readme import README, commands, commands_in, section, shell_blocks
from tests.deploy.test_compose import COMPOSE, GATEWAY

CLUSTER = COMPOSE.parent / "docker-compose.cluster.yml"

DATA = "/data"
"""Where the image keeps its state (the volume's mount point)."""

IMAGE_PROGRAMS = frozenset({"switchboard", "python", "sh", "cat", "cp", "ls", "rm", "mv"})
"""What a command run inside the image may call: the venv's entry points and the slim base's shell and coreutils."""

COMPOSE_VALUE_OPTIONS = frozenset({"--entrypoint", "-e", "--env", "-u", "--user", "-w", "--workdir", "-v", "--volume",
                                   "--name", "--index", "-l", "--label", "-p", "--publish"})  # fmt: skip
NAMES_NOTHING_OF_OURS = frozenset({"buildx", "pull", "version", "info"})
"""docker commands that name no container, volume or image of ours."""
RUN_VALUE_OPTIONS = frozenset({"-v", "--volume", "--name", "--env-file", "-e", "--env", "--entrypoint", "-u", "--user",
                               "-w", "--workdir", "-p", "--publish", "--network"})  # fmt: skip


def compose_file() -> dict:
    return yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))


def project_name(document: dict) -> str:
    """Compose's project name: the file's ``name:``, else its folder's name, lower-cased."""
    return document.get("name") or re.sub(r"[^a-z0-9_-]", "", COMPOSE.parent.name.lower())


def data_volume(document: dict) -> str:
    """The name Docker gives the volume the gateway mounts at /data."""
    service = document["services"][GATEWAY]
    (key,) = [v.split(":")[0] for v in service["volumes"] if v.split(":")[1] == DATA]
    declared = document["volumes"][key] or {}
    return declared.get("name") or f"{project_name(document)}_{key}"


def image(name: str) -> str:
    return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"


def dockerfile_commands() -> list[list[str]]:
    """The docker commands in the Dockerfile's comments (inline `code` where a line has some)."""
    lines = []
    for raw in (REPO / "Dockerfile").read_text(encoding="utf-8").splitlines():
        if raw.startswith("#"):
            text = raw.lstrip("#").strip()
            lines.extend(re.findall(r"`([^`]+)`", text) or [text])
    return commands_in("docker", lines)


def split_options(words: list[str], takes_value: frozenset[str]) -> tuple[dict[str, list[str]], list[str]]:
    """Options (each with its values) and the positional words, for a docker command's own words."""
    options: dict[str, list[str]] = {}
    rest = list(words)
    while rest and rest[0].startswith("-"):
        option = rest.pop(0)
        options.setdefault(option, []).append(rest.pop(0) if option in takes_value else "")
    return options, rest


def problems_with(words: list[str], document: dict) -> list[str]:
    """What in one ``docker ...`` command disagrees with the compose file."""
    service, shown = document["services"][GATEWAY], " ".join(words)
    subcommand, args = words[1], words[2:]
    if subcommand == "compose":
        options, rest = split_options(args, frozenset({"-f", "--file", "-p", "--project-name", "--profile"}))
        files = options.get("-f", []) + options.get("--file", [])
        if any((REPO / f).resolve() not in (COMPOSE, CLUSTER) for f in files):
            return [f"{shown}: not deploy/docker-compose.yml (or docker-compose.cluster.yml)"]
        if files and (REPO / files[0]).resolve() == CLUSTER:  # the replicas' file: its own services
            document = yaml.safe_load(CLUSTER.read_text(encoding="utf-8"))
        if not rest:
            return [f"{shown}: no compose command"]
        if ("-p" in options or "--project-name" in options) and rest[0] != "down":
            return [f"{shown}: another project name means other volumes (only to take an old project down)"]
        _, positional = split_options(rest[1:], COMPOSE_VALUE_OPTIONS)
        named = [p.split(":")[0] for p in positional if ":" in p] if rest[0] == "cp" else positional[:1]
        if named and not files:
            return [f"{shown}: names a service without -f deploy/docker-compose.yml (run from the repository root)"]
        profiles = {p for s in document["services"].values() for p in s.get("profiles", [])}
        found = [f"{shown}: no profile {p!r} in the compose file" for p in options.get("--profile", []) if p not in profiles]
        return found + [f"{shown}: no service {name!r} in the compose file" for name in named
                        if name not in document["services"]]  # fmt: skip
    if subcommand == "run":
        options, positional = split_options(args, RUN_VALUE_OPTIONS)
        found = []
        volumes = options.get("-v", []) + options.get("--volume", [])
        found += [f"{shown}: volume {v.split(':')[0]!r}, compose creates {data_volume(document)!r}"
                  for v in volumes if v.split(":")[1] == DATA and v.split(":")[0] != data_volume(document)]  # fmt: skip
        if not positional or image(positional[0]) != image(service["image"]):
            found.append(f"{shown}: image {positional[:1]}, compose builds {service['image']!r}")
        return found
    if subcommand == "build":
        options, positional = split_options(args, frozenset({"-t", "--tag", "-f", "--file"}))
        tags = options.get("-t", []) + options.get("--tag", [])
        return [f"{shown}: tag {tag!r}, compose uses {service['image']!r}" for tag in tags
                if image(tag) != image(service["image"])]  # fmt: skip
    if subcommand == "volume":
        _, names = split_options(args[1:], frozenset())
        return [f"{shown}: volume {name!r}, compose creates {data_volume(document)!r}" for name in names
                if name != data_volume(document)]  # fmt: skip
    if subcommand in NAMES_NOTHING_OF_OURS:
        return []
    return [f"{shown}: `docker {subcommand}` names no compose service; use `docker compose ... {subcommand}`"]


def test_every_docker_command_shown_names_what_compose_creates() -> None:
    document = compose_file()
    shown = commands(README.read_text(encoding="utf-8"), "docker") + dockerfile_commands()
    assert len(shown) >= 5, "the README and Dockerfile commands were not found"
    assert [problem for words in shown for problem in problems_with(words, document)] == []


def test_the_compose_names_do_not_depend_on_the_folder_it_sits_in() -> None:
    document = compose_file()
    assert document.get("name"), "a project name of its own, not the folder's ('deploy')"
    assert data_volume(document) == "switchboard-data"


STAND_IN_DOCKER = """#!{python}
# Enough of `docker compose -f FILE run [--rm] [-T] [--entrypoint PROGRAM] SERVICE ...` to run the container's
# command here, with /data mapped to a folder; other compose commands are only written to the log.
import os, sys
data, log, switchboard = {data!r}, {log!r}, {switchboard!r}
words = sys.argv[1:]
assert words[:3] == ["compose", "-f", "deploy/docker-compose.yml"], words
with open(log, "a") as handle:
    handle.write(" ".join(words[3:]) + "\\n")
if words[3] != "run":
    sys.exit(0)
rest, entrypoint = words[4:], None
while rest[0].startswith("-"):
    option = rest.pop(0)
    if option == "--entrypoint":
        entrypoint = rest.pop(0)
    elif option not in ("--rm", "-T"):
        sys.exit("stand-in docker: unknown option " + option)
command = [arg.replace("/data/", data + "/") for arg in rest[1:]]  # rest[0] is the service
program = entrypoint or switchboard
assert os.path.basename(program) in {programs!r}, program + " is not in the image"
os.execvpe(program, [program, *command], {{**os.environ, "SWITCHBOARD_HOME": data}})
"""

EDITOR = "#!/bin/sh\nsed -i 's/^  format: text$/  format: json/' \"$1\"\n"
"""An operator's edit: the log format becomes json."""


def edit_recipe() -> str:
    found = [b for b in shell_blocks(section("Running with Docker")) if f"{DATA}/config.yaml" in b]
    assert len(found) == 1, "the Docker section shows one block that edits /data/config.yaml"
    return found[0]


def test_the_readme_edits_config_yaml_in_the_volume_with_what_the_image_has(tmp_path: Path) -> None:
    volume = tmp_path / "volume"
    ensure_home(volume, config_template=example_config_text())  # what the first start leaves in /data
    config = volume / "config.yaml"
    log, tools = tmp_path / "docker.log", tmp_path / "bin"
    tools.mkdir()
    switchboard = Path(sys.prefix) / "bin" / "switchboard"
    (tools / "docker").write_text(STAND_IN_DOCKER.format(python=sys.executable, data=str(volume), log=str(log),
                                                         switchboard=str(switchboard), programs=sorted(IMAGE_PROGRAMS)),
                                  encoding="utf-8")  # fmt: skip
    (tools / "editor").write_text(EDITOR, encoding="utf-8")
    for tool in tools.iterdir():
        tool.chmod(0o755)
    env = {"PATH": f"{tools}:/usr/bin:/bin", "EDITOR": str(tools / "editor"), "TMPDIR": str(tmp_path),
           "TELEGRAM_BOT_TOKEN": "123456:docker-recipe-token", "ANTHROPIC_API_KEY": "sk-ant-docker-recipe"}  # fmt: skip

    done = subprocess.run(["sh", "-e", "-c", edit_recipe()], cwd=REPO, env=env, capture_output=True, text=True,
                          check=False)  # fmt: skip

    assert done.returncode == 0, done.stdout + done.stderr
    assert "\n  format: json\n" in config.read_text(encoding="utf-8"), "the edit reached the volume"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600, "config.yaml stays private"
    assert "(json, level" in done.stdout, "`switchboard check` read the edited file"
    steps = log.read_text(encoding="utf-8").splitlines()
    assert steps[-1].split()[:2] == ["restart", "switchboard"], "the gateway reads config.yaml at start"
    assert [p for p in tmp_path.iterdir() if p.name.startswith("tmp")] == [], "the local copy is removed"
    assert {step.split()[0] for step in steps} == {"run", "restart"}

