"""Project context: the instruction files found in the configured working directory.

Only one kind of file is loaded per session; the first kind found wins:

1. ``.switchboard.md`` or ``SWITCHBOARD.md``, looked for in the working directory
   and each parent up to the git root (YAML front matter is stripped);
2. ``AGENTS.md`` (working directory only);
3. ``CLAUDE.md`` (working directory only);
4. ``.cursorrules`` plus ``.cursor/rules/*.mdc`` (working directory only).

Every file is scanned for prompt injection and capped in size
(:mod:`agent.injection`) before it is rendered into the prompt, where the section is
framed as data, not instructions (:mod:`agent.data_framing`)::

    files = discover_context_files(Path("~/code/atlas").expanduser())
    section = render_project_context(files)   # "" when nothing was found

The same module builds the skills index: one line per ``SKILL.md`` found under the
skills folder, so the model knows which saved procedures exist.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import structlog
import yaml

from agent.data_framing import frame_project_files
from agent.injection import DEFAULT_MAX_CHARS, CheckedText, check_file_text, scan_text

log = structlog.get_logger("agent.context_files")

SWITCHBOARD_NAMES: Final = (".switchboard.md", "SWITCHBOARD.md")
AGENTS_NAMES: Final = ("AGENTS.md", "agents.md")
CLAUDE_NAMES: Final = ("CLAUDE.md", "claude.md")
CURSORRULES_NAME: Final = ".cursorrules"
CURSOR_RULES_DIR: Final = Path(".cursor") / "rules"

_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n.*?\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)


def strip_front_matter(text: str) -> str:
    """``text`` without a leading YAML front-matter block (``---`` ... ``---``)."""
    return _FRONT_MATTER.sub("", text.lstrip("\ufeff"), count=1)


def find_git_root(start: Path) -> Path | None:
    """The nearest directory at or above ``start`` holding ``.git`` (a directory or a file)."""
    for directory in (start, *start.parents):
        if (directory / ".git").exists():
            return directory
    return None


def _read_text(path: Path, boundary: Path | None) -> str | None:
    """The file's text, or None when it is missing, unreadable, blank or links outside ``boundary``.

    A repository could symlink AGENTS.md to a secret elsewhere on the machine; such
    a file is refused so its content never reaches the model.
    """
    if not path.is_file():
        return None
    if boundary is not None and not path.resolve().is_relative_to(boundary):
        log.warning("agent.context_files.outside_project", path=str(path), target=str(path.resolve()))
        return None
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        log.warning("agent.context_files.unreadable", path=str(path), error=str(exc))
        return None
    return text if text.strip() else None


def _first_existing(directory: Path, names: Sequence[str], boundary: Path) -> tuple[str, str] | None:
    for name in names:
        if (text := _read_text(directory / name, boundary)) is not None:
            return name, text
    return None


Loader = Callable[[Path, Path], list[tuple[str, str]]]
"""``(workdir, boundary) -> [(label, text), ...]``; empty when this kind is absent."""


def _load_switchboard_md(workdir: Path, boundary: Path) -> list[tuple[str, str]]:
    # Without a git root the boundary is the working directory, so only it is searched.
    for directory in (workdir, *workdir.parents):
        found = _first_existing(directory, SWITCHBOARD_NAMES, boundary)
        if found is not None and (body := strip_front_matter(found[1])).strip():
            return [(found[0], body)]
        if directory == boundary:
            break
    return []


def _load_single(names: Sequence[str]) -> Loader:
    def load(workdir: Path, boundary: Path) -> list[tuple[str, str]]:
        found = _first_existing(workdir, names, boundary)
        return [] if found is None else [found]

    return load


def _load_cursor_rules(workdir: Path, boundary: Path) -> list[tuple[str, str]]:
    files: list[tuple[str, str]] = []
    if (found := _first_existing(workdir, (CURSORRULES_NAME,), boundary)) is not None:
        files.append(found)
    rules_dir = workdir / CURSOR_RULES_DIR
    if rules_dir.is_dir():
        for path in sorted(rules_dir.glob("*.mdc")):
            text = _read_text(path, boundary)
            if text is not None and (body := strip_front_matter(text)).strip():
                files.append(((CURSOR_RULES_DIR / path.name).as_posix(), body))
    return files


LOADERS: Final[tuple[Loader, ...]] = (
    _load_switchboard_md,
    _load_single(AGENTS_NAMES),
    _load_single(CLAUDE_NAMES),
    _load_cursor_rules,
)
"""The discovery steps in priority order; the first that finds anything wins."""


def discover_context_files(workdir: Path | None, *, max_chars: int = DEFAULT_MAX_CHARS) -> list[CheckedText]:
    """The project's context files, scanned and capped; ``[]`` when there are none.

    A file that fails the injection scan still wins its priority slot: its text is
    the one-line BLOCKED marker, so a lower-priority file is not loaded instead.
    Files (or symlink targets) outside the repository are ignored.
    """
    if workdir is None:
        return []
    directory = workdir.expanduser().resolve()
    if not directory.is_dir():
        log.warning("agent.context_files.no_workdir", workdir=str(directory))
        return []
    boundary = find_git_root(directory) or directory
    for loader in LOADERS:
        if found := loader(directory, boundary):
            return [_check(label, text, max_chars) for label, text in found]
    return []


def _check(label: str, text: str, max_chars: int) -> CheckedText:
    checked = check_file_text(text.strip(), label, max_chars=max_chars)
    if checked.blocked:
        log.warning("agent.context_files.blocked", file=label, findings=",".join(checked.findings))
    elif checked.truncated:
        log.warning("agent.context_files.truncated", file=label, chars=checked.original_chars, limit=max_chars)
    else:
        log.debug("agent.context_files.loaded", file=label, chars=checked.original_chars)
    return checked


def render_project_context(files: Sequence[CheckedText]) -> str:
    """The prompt section for ``files``: one ``## name`` block per file, framed as data
    (:func:`agent.data_framing.frame_project_files`)."""
    return frame_project_files("\n\n".join(f"## {checked.label}\n\n{checked.text.strip()}" for checked in files))


# --- Skills index -------------------------------------------------------------------------------

SKILL_FILE: Final = "SKILL.md"
SKILL_DESCRIPTION_MAX: Final = 240


@dataclass(frozen=True, slots=True)
class SkillSummary:
    """One line of the skills index: where a skill lives and what it is for."""

    name: str
    description: str
    category: str = ""
    findings: tuple[str, ...] = ()
    """Injection-scan findings; a skill with findings is left out of the index."""


def _front_matter_fields(text: str) -> dict[str, Any]:
    match = _FRONT_MATTER.match(text.lstrip("\ufeff"))
    if match is None:
        return {}
    try:
        data = yaml.safe_load(match.group(0).strip().strip("-"))
    except yaml.YAMLError:
        return {}
    return data if isinstance(data, dict) else {}


def _first_body_line(text: str) -> str:
    for line in strip_front_matter(text).splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            return line.strip()
    return ""


def _summarize_skill(path: Path, skills_dir: Path) -> SkillSummary | None:
    text = _read_text(path, None)  # the skills folder is the operator's own: links may point anywhere
    if text is None:
        return None
    fields = _front_matter_fields(text)
    name = str(fields.get("name") or path.parent.name).strip()
    description = " ".join(str(fields.get("description") or _first_body_line(text)).split())
    if len(description) > SKILL_DESCRIPTION_MAX:
        description = description[: SKILL_DESCRIPTION_MAX - 1].rstrip() + "…"
    relative = path.parent.relative_to(skills_dir)
    category = relative.parts[0] if len(relative.parts) > 1 else ""
    findings = scan_text(f"{category}\n{name}\n{description}")
    if findings:
        log.warning("agent.skills.blocked", skill=name, findings=",".join(findings))
    return SkillSummary(name, description, category, findings)


def discover_skills(skills_dir: Path | None) -> list[SkillSummary]:
    """Skills under ``skills_dir`` (``<category>/<name>/SKILL.md`` or ``<name>/SKILL.md``).

    Folders whose name starts with a dot (archives, caches) are skipped. Sorted by
    category, then name, so the index is the same on every build.
    """
    if skills_dir is None or not skills_dir.is_dir():
        return []
    paths = [*skills_dir.glob(f"*/{SKILL_FILE}"), *skills_dir.glob(f"*/*/{SKILL_FILE}")]
    visible = [p for p in paths if not any(part.startswith(".") for part in p.relative_to(skills_dir).parts[:-1])]
    skills = [s for p in visible if (s := _summarize_skill(p, skills_dir)) is not None]
    return sorted(skills, key=lambda s: (s.category, s.name))


def render_skills_index(skills: Sequence[SkillSummary], *, open_tool: str | None = None) -> str:
    """The skills section of the prompt; ``""`` when no skill is listed.

    ``open_tool`` names the tool that loads a skill's full text, when there is one.
    """
    listed = [s for s in skills if not s.findings]
    if not listed:
        return ""
    how = f" If one clearly fits the request, load it with {open_tool} and follow it." if open_tool else ""
    lines = [
        "# Skills",
        "",
        f"Saved procedures for recurring kinds of task.{how}",
        "",
        "<skills>",
    ]
    category = None
    for skill in listed:
        if skill.category != category:
            category = skill.category
            if category:
                lines.append(f"{category}:")
        lines.append(f"- {skill.name}: {skill.description}" if skill.description else f"- {skill.name}")
    lines.append("</skills>")
    return "\n".join(lines)
