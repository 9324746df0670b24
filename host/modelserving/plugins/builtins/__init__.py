"""The built-in plugins shipped with modelserving, one module each."""

from modelserving.plugins.base import Builtin
from modelserving.plugins.builtins import (
    accelerator,
    demo_pod_tweaks,
    entry_address_file,
    hccl_ranktable,
    inference_engine,
    lws_standard_labels,
    rdma_network,
    ready_reporter,
)

BUILTINS: tuple[Builtin, ...] = (
    demo_pod_tweaks.BUILTIN,
    lws_standard_labels.BUILTIN,
    ready_reporter.BUILTIN,
    inference_engine.BUILTIN,
    rdma_network.BUILTIN,
    accelerator.BUILTIN,
    hccl_ranktable.BUILTIN,
    entry_address_file.BUILTIN,
)

__all__ = ["BUILTINS"]
