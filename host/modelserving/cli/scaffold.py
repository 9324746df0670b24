"""``modelserving plugin new``: a plugin project generated from a language's template set.

A language is a :class:`Language`: the folder of its guest SDK in a modelserving checkout, a
rule for the names it can use, variables read from the SDK (e.g. Go's exact version), and a
template set, the files under ``modelserving/cli/templates/<language>/`` (package data).
Template paths map to project paths with ``dot-`` at the start of a name becoming ``.`` and a
final ``.tmpl`` dropped; ``{{var}}`` in paths and contents is replaced by the variables of
:func:`variables`, and an unknown one is an error. Adding a language is adding a template set
and one entry to :data:`LANGUAGES`.

The SDK is found in the checkout this package runs from (``make setup`` installs it editable, so
``modelserving/`` is ``host/modelserving`` of the checkout), or given with ``--sdk DIR``. A Rust
project gets a copy of the SDK's sources (``vendor/modelserving-plugin``): Cargo hashes the
absolute path of a path dependency outside the project into the crate's metadata, which changes
the compiled code, so only a dependency inside the project builds the same bytes wherever the
project and the checkout are. A Go project points at the SDK by absolute path (``replace``):
Go builds with ``-trimpath`` do not depend on where the SDK is.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import modelserving
from modelserving.api.names import is_dns1123_label

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

TEMPLATES = "templates"
PLACEHOLDER = re.compile(r"\{\{([a-z_]+)\}\}")
NAME_RULE = (
    "a plugin name must be a DNS-1123 label: at most 63 lower-case letters, digits and '-', "
    "starting and ending with a letter or digit"
)


class ScaffoldError(Exception):
    """The project cannot be generated (bad name, target folder in use, SDK not found)."""


@dataclass(frozen=True)
class Language:
    """One ``--lang``: where its SDK is, which names it takes, and its template set."""

    name: str
    title: str
    sdk: str  # the SDK's folder, relative to a checkout
    sdk_marker: str  # a file the SDK's folder holds
    name_problem: Callable[[str], str | None]  # why a (DNS-1123) name cannot be used, or None
    sdk_problem: Callable[[Path], str | None] = lambda _sdk: None
    sdk_variables: Callable[[Path], dict[str, str]] = lambda _sdk: {}  # language-specific
    has_templates: bool = True  # False: announced, not implemented yet
    executables: tuple[str, ...] = ()  # project files made executable
    vendor: str | None = None  # where in the project a copy of the SDK goes, or None
    vendor_globs: tuple[str, ...] = ()  # the SDK's files that the copy holds


# Rust keywords (2021 edition, reserved ones included) and the crates a plugin's crate name
# would clash with (the standard ones and the SDK).
RUST_RESERVED = frozenset(
    [
        *("as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum"),
        *("extern", "false", "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod"),
        *("move", "mut", "pub", "ref", "return", "self", "static", "struct", "super", "trait"),
        *("true", "type", "unsafe", "use", "where", "while", "abstract", "become", "box", "do"),
        *("final", "macro", "override", "priv", "try", "typeof", "unsized", "virtual", "yield"),
        *("std", "core", "alloc", "test", "proc_macro", "modelserving_plugin"),
    ]
)


def rust_crate(name: str) -> str:
    return name.replace("-", "_")


def _rust_name_problem(name: str) -> str | None:
    crate = rust_crate(name)
    if crate[0].isdigit():
        return f"its Rust crate name {crate} would start with a digit"
    if crate in RUST_RESERVED:
        return f"its Rust crate name {crate} is a Rust keyword or the name of a crate it needs"
    return None


def _rust_sdk_problem(sdk: Path) -> str | None:
    try:
        manifest = (sdk / "Cargo.toml").read_text(encoding="utf-8")
    except OSError as exc:
        return f"cannot read {sdk / 'Cargo.toml'}: {exc.strerror or exc}"
    if not re.search(r'^name\s*=\s*"modelserving-plugin"', manifest, re.MULTILINE):
        return f"{sdk / 'Cargo.toml'} is not the crate modelserving-plugin"
    return None


GO_SDK_MODULE = "modelserving.dev/plugin"
_GO_MODULE = re.compile(r"^module\s+(\S+)\s*$", re.MULTILINE)
_GO_DIRECTIVE = re.compile(r"^go\s+(\S+)\s*$", re.MULTILINE)
_GO_VERSION = re.compile(r"^GO_VERSION=([0-9][0-9.]*)\s*$", re.MULTILINE)
_TINYGO_GO_VERSION = re.compile(r"^TINYGO_GO_VERSION=([0-9][0-9.]*)\s*$", re.MULTILINE)


def _go_sdk_variables(sdk: Path) -> dict[str, str]:
    """The SDK's go directive, the exact Go versions of ``plugins-src/build-go.sh`` (standard Go,
    and the one TinyGo builds with), and where ``plugins-src/install-tinygo.sh`` is."""

    def read(path: Path) -> str:
        try:
            return path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ScaffoldError(f"cannot read {path}: {exc.strerror or exc}") from None

    go_mod = read(sdk / "go.mod")
    module = _GO_MODULE.search(go_mod)
    directive = _GO_DIRECTIVE.search(go_mod)
    if module is None or module.group(1) != GO_SDK_MODULE or directive is None:
        raise ScaffoldError(f"{sdk / 'go.mod'} is not the module {GO_SDK_MODULE} (with a go line)")
    build = sdk.parent / "build-go.sh"
    script = read(build)
    version = _GO_VERSION.search(script)
    if version is None:
        raise ScaffoldError(f"{build} sets no GO_VERSION")
    tinygo_go = _TINYGO_GO_VERSION.search(script)
    if tinygo_go is None:
        raise ScaffoldError(f"{build} sets no TINYGO_GO_VERSION (a checkout without TinyGo)")
    return {
        "go_directive": directive.group(1),
        "go_version": version.group(1),
        "tinygo_go_version": tinygo_go.group(1),
        "tinygo_install_sh": shlex.quote(str(sdk.parent / "install-tinygo.sh")),
        "sdk_path_go": json.dumps(str(sdk)),  # a go.mod quoted string
    }


def _go_sdk_problem(sdk: Path) -> str | None:
    try:
        _go_sdk_variables(sdk)
    except ScaffoldError as exc:
        return str(exc)
    return None


LANGUAGES: dict[str, Language] = {
    "rust": Language(
        name="rust",
        title="Rust",
        sdk="plugins-src/sdk-rust",
        sdk_marker="Cargo.toml",
        name_problem=_rust_name_problem,
        sdk_problem=_rust_sdk_problem,
        executables=("build.sh",),
        vendor="vendor/modelserving-plugin",
        vendor_globs=("Cargo.toml", "src/**/*.rs"),
    ),
    "go": Language(
        name="go",
        title="Go",
        sdk="plugins-src/sdk-go",
        sdk_marker="go.mod",
        name_problem=lambda _name: None,  # a DNS-1123 label is a fine module path element
        sdk_problem=_go_sdk_problem,
        sdk_variables=_go_sdk_variables,
        executables=("build.sh",),
    ),
}


def checkout_root() -> Path:
    """The checkout this package runs from, when installed editable (``host/modelserving``)."""
    return Path(modelserving.__file__).resolve().parent.parent.parent


def check_name(name: str, language: Language) -> None:
    if not is_dns1123_label(name):
        raise ScaffoldError(f"{name!r}: {NAME_RULE}")
    problem = language.name_problem(name)
    if problem:
        raise ScaffoldError(f"{name!r} cannot be a {language.title} plugin's name: {problem}")


def find_sdk(language: Language, given: str | None = None) -> Path:
    """The SDK's folder: ``given`` (``--sdk``), else the one in this package's checkout."""
    if given is not None:
        sdk = Path(given).expanduser().resolve()
        if not (sdk / language.sdk_marker).is_file():
            raise ScaffoldError(
                f"--sdk {given}: {sdk} is not the {language.title} guest SDK "
                f"(it has no {language.sdk_marker})"
            )
    else:
        root = checkout_root()
        sdk = root / language.sdk
        if not (sdk / language.sdk_marker).is_file():
            if (root / "plugins-src").is_dir():
                raise ScaffoldError(
                    f"--lang {language.name} needs the {language.title} guest SDK "
                    f"({language.sdk}), which the checkout {root} does not have (yet)"
                )
            raise ScaffoldError(
                f"the {language.title} guest SDK ({language.sdk}) was not found: this "
                f"modelserving is installed in {Path(modelserving.__file__).resolve().parent}, "
                "not run from a source checkout (`make setup` installs one editable); give the "
                f"SDK's folder with --sdk DIR ({language.sdk} of a modelserving checkout)"
            )
    problem = language.sdk_problem(sdk)
    if problem:
        raise ScaffoldError(f"the {language.title} guest SDK at {sdk} is unusable: {problem}")
    return sdk


def modelserving_command() -> str:
    """How the generated project runs this CLI: the script next to this Python, else PATH's."""
    script = Path(sys.executable).parent / "modelserving"
    return str(script) if script.is_file() else "modelserving"


def variables(language: Language, name: str, sdk: Path, command: str) -> dict[str, str]:
    """The values of ``{{var}}`` in templates."""
    return {
        **language.sdk_variables(sdk),
        "name": name,
        "crate": rust_crate(name),
        "sdk_path": str(sdk),
        "sdk_path_sh": shlex.quote(str(sdk)),
        "sdk_docs": str(sdk.parent / "README.md"),
        "modelserving": command,
        "modelserving_sh": shlex.quote(command),
    }


def vendored(language: Language, sdk: Path) -> dict[str, bytes]:
    """The SDK's files copied into the project (project path: content); empty without ``vendor``."""
    if language.vendor is None:
        return {}
    files: dict[str, bytes] = {}
    for pattern in language.vendor_globs:
        for path in sorted(sdk.glob(pattern)):
            if path.is_file():
                rel = path.relative_to(sdk).as_posix()
                try:
                    files[f"{language.vendor}/{rel}"] = path.read_bytes()
                except OSError as exc:
                    raise ScaffoldError(f"cannot read {path}: {exc.strerror or exc}") from None
    return files


def _walk(
    folder: Traversable, prefix: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], str]]:
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name == "__pycache__":
            continue
        if entry.is_dir():
            yield from _walk(entry, (*prefix, entry.name))
        else:
            yield (*prefix, entry.name), entry.read_text(encoding="utf-8")


def _project_part(part: str) -> str:
    if part.startswith("dot-"):
        part = "." + part[len("dot-") :]
    return part.removesuffix(".tmpl")


def substitute(text: str, values: dict[str, str], where: str) -> str:
    def value(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in values:
            raise ScaffoldError(f"template {where}: unknown variable {{{{{key}}}}}")
        return values[key]

    return PLACEHOLDER.sub(value, text)


def render(language: Language, values: dict[str, str]) -> dict[str, str]:
    """The project's files (relative POSIX path: content) from the language's template set."""
    from importlib import resources  # here: ``plugin --help`` reads LANGUAGES, not templates

    folder = resources.files("modelserving.cli").joinpath(TEMPLATES, language.name)
    if not language.has_templates or not folder.is_dir():
        raise ScaffoldError(
            f"--lang {language.name}: this version of modelserving has no "
            f"{language.title} project template yet"
        )
    files: dict[str, str] = {}
    for parts, text in _walk(folder):
        where = "/".join((language.name, *parts))
        path = "/".join(substitute(_project_part(p), values, where) for p in parts)
        files[path] = substitute(text, values, where)
    return files


def check_target(target: Path) -> None:
    if target.exists() or target.is_symlink():
        if not target.is_dir():
            raise ScaffoldError(f"{target} exists and is not a directory")
        if any(target.iterdir()):
            raise ScaffoldError(
                f"{target} exists and is not empty; give another --dir, or remove it first"
            )


def scaffold(
    language: Language, name: str, target: Path, sdk: Path, command: str | None = None
) -> list[Path]:
    """Write the project into ``target`` (absent or empty); the files written, in order."""
    check_name(name, language)
    check_target(target)
    files = render(language, variables(language, name, sdk, command or modelserving_command()))
    copies = vendored(language, sdk)
    written = []
    for rel, content in [*((r, t.encode("utf-8")) for r, t in files.items()), *copies.items()]:
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        if rel in language.executables:
            path.chmod(0o755)
        written.append(path)
    return written
