"""Kthena's deterministic names.

ServingGroup ``<ms>-<i>``, role id ``<role>-<j>``, Pod ``<group>-<roleId>-<k>``.

Pure; used by Pod and Service generation and by the controller to find what exists.
"""

from __future__ import annotations


def group_name(ms_name: str, index: int) -> str:
    return f"{ms_name}-{index}"


def role_id(role: str, index: int) -> str:
    return f"{role}-{index}"


def pod_name(group: str, role_id_: str, pod_index: int) -> str:
    """Entry Pods have index 0, workers 1..workerReplicas; e.g. ``vllm-sample-0-prefill-1-1``."""
    return f"{group}-{role_id_}-{pod_index}"
