"""What the built-ins that write a ServingGroup's files share (``hccl-ranktable``,
``entry-address-file``): their config's mount path, ConfigMap suffix and container, the rules of
a file name and of an IP as they read one, and the ConfigMap a ServingGroup hook returns.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pydantic import field_validator

from modelserving.api.names import is_dns1123_label
from modelserving.plugins.base import PluginConfig
from modelserving.plugins.podedit import PodEdit

_IP = re.compile(r"[0-9a-fA-F.:]{2,45}", re.ASCII)
_FILE_NAME = re.compile(r"[-._a-zA-Z0-9]{1,253}", re.ASCII)


def is_ip(text: str) -> bool:
    """Whether ``text`` is taken as an IP: 2 to 45 of ``0-9 a-f A-F . :`` (IPv4 or IPv6, as
    Kubernetes writes them; not checked further)."""
    return _IP.fullmatch(text) is not None


def file_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a ConfigMap key shown as a file (None when it can)."""
    if not _FILE_NAME.fullmatch(name) or name in (".", ".."):
        return f"'{name}' is not a file name (letters, digits, '-', '_' and '.')"
    return None


def mount_path_problem(path: str) -> str | None:
    """Why ``path`` cannot be where a volume is mounted (None when it can)."""
    if not path.startswith("/") or "\0" in path or ":" in path:
        return f"'{path}' is not an absolute path without ':'"
    return None


class GroupFileConfig(PluginConfig):
    """What both file-writing built-ins share: where the ConfigMap goes and what it is named."""

    mount_path: str
    config_map_suffix: str
    container: str | None = None

    @field_validator("mount_path")
    @classmethod
    def _mount_path(cls, path: str) -> str:
        problem = mount_path_problem(path)
        if problem is not None:
            raise ValueError(problem)
        return path

    @field_validator("config_map_suffix")
    @classmethod
    def _suffix(cls, suffix: str) -> str:
        if len(suffix) > 40 or not is_dns1123_label(suffix):
            raise ValueError(
                f"'{suffix}' is not a name suffix (at most 40 lower-case letters, digits and '-')"
            )
        return suffix


def config_map(name: str, data: dict[str, str]) -> dict[str, Any]:
    """An owned ConfigMap as a ServingGroup hook returns it."""
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


class GroupFilePlugin:
    """A plugin instance that writes one ConfigMap per ServingGroup and mounts files of it:
    ``mount`` is its OnPodCreate part, ``owned`` the object its ServingGroup hook returns."""

    def __init__(self, name: str, config: GroupFileConfig) -> None:
        self.name = name
        self.config = config

    def config_map_name(self, serving_group: str) -> str:
        return f"{serving_group}-{self.config.config_map_suffix}"

    def mount(self, edit: PodEdit, serving_group: str, files: Sequence[tuple[str, str]]) -> int:
        """Mount the ServingGroup's ConfigMap, ``files`` (key, file) of it, in the configured
        container; that container's index."""
        config = self.config
        container = edit.container(config.container)
        name = self.config_map_name(serving_group)
        edit.add_config_map_files(
            container, config.config_map_suffix, name, files, config.mount_path
        )
        return container

    def owned(self, serving_group: str, data: dict[str, str]) -> list[dict[str, Any]]:
        """The ServingGroup hook's answer: its ConfigMap holding ``data``."""
        return [config_map(self.config_map_name(serving_group), data)]
