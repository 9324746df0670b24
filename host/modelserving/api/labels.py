"""Label, annotation and environment names shared with Kthena, plus our own additions.

Used by workload generation, the patch policy and the controller.
"""

from __future__ import annotations

GROUP = "workload.serving.volcano.sh"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "ModelServing"
PLURAL = "modelservings"

LABEL_PREFIX = "modelserving.volcano.sh/"
NAME_LABEL = LABEL_PREFIX + "name"
GROUP_NAME_LABEL = LABEL_PREFIX + "group-name"
ROLE_LABEL = LABEL_PREFIX + "role"
ROLE_ID_LABEL = LABEL_PREFIX + "role-id"
ENTRY_LABEL = LABEL_PREFIX + "entry"
REVISION_LABEL = LABEL_PREFIX + "revision"
ROLE_TEMPLATE_HASH_LABEL = LABEL_PREFIX + "role-template-hash"

# Our addition: which plugins changed a Pod (name, runtime, module digest), as JSON.
PLUGINS_APPLIED_ANNOTATION = LABEL_PREFIX + "plugins-applied"

GROUP_SIZE_ENV = "GROUP_SIZE"
ENTRY_ADDRESS_ENV = "ENTRY_ADDRESS"
WORKER_INDEX_ENV = "WORKER_INDEX"

VOLCANO_SCHEDULER = "volcano"
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
VOLCANO_TASK_ANNOTATION = "volcano.sh/task-spec"
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
PODGROUP_API_VERSION = "scheduling.volcano.sh/v1beta1"
