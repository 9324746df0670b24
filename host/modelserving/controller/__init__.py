"""The controller: the only kopf code (reconcile, status, events). Lands with the controller issue."""
