"""Kubernetes' own `rgt up` flags (rgt.platforms.options): which cluster, namespace and
claim."""

from __future__ import annotations

from rgt.platforms.options import Option

PANEL = "Kubernetes (--profile kubernetes; your kubeconfig, as kubectl reads it)"

UP = (
    Option("context", str, "kubeconfig context (default: kubectl's current context).", PANEL),
    Option("namespace", str, "Namespace (default: the context's, else default).", PANEL),
    Option("kubeconfig", str, "kubeconfig file (default: $KUBECONFIG, else ~/.kube/config).",
           PANEL),
    Option("storage_class", str, "StorageClass of the PVC rgt creates (default: the cluster's "
                                 "default class).", PANEL),
    Option("claim", str, "Use this existing PVC instead of creating one (`down` keeps it).",
           PANEL),
    Option("mount_path", str, "Where every pod mounts the PVC.", PANEL,
           default_shown="/checkpoints"),
    Option("access_mode", str, "ReadWriteOnce or ReadWriteMany (several nodes at once).", PANEL,
           default_shown="ReadWriteOnce"),
)
