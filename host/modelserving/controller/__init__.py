"""The controller: the only kopf code (reconcile, status, events); lands with its issue."""
