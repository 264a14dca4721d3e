"""The fake cluster's names: each pod's /etc/hosts, standing in for the kubelet's hosts file and
the cluster DNS at once.

A real pod gets a hosts file from the kubelet (localhost, and its own IP under its hostname —
`<hostname>.<subdomain>.<namespace>.svc.cluster.local <hostname>` when the pod names a
subdomain) and asks the cluster DNS for everything else. For a headless Service (clusterIP:
None), the DNS answers `<hostname>.<service>` (through the pod's search path) and the full name
with the IP of each pod the Service selects whose spec names that hostname and `subdomain:
<service>` — once the pod is Ready, or as soon as it has an IP with
publishNotReadyAddresses (kubernetes.io/docs/concepts/services-networking/dns-pod-service/
"A/AAAA records", "Pod's hostname and subdomain fields"). Pods that ended, or are being
deleted, leave the Service's endpoints and so the DNS.

Here the fake's pods all live on this machine's loopback (127.x.y.z each, kube_cluster), so a
hosts file bind-mounted over /etc/hosts in the pod's mount namespace carries both parts; it is
rewritten in place (the bind mount pins the inode) whenever the records change, a few ticks
after a pod starts or ends, as DNS lags too. glibc reads /etc/hosts on every lookup.
"""

from __future__ import annotations

from pathlib import Path

CLUSTER_DOMAIN = "cluster.local"


def _selects(selector: dict, pod: dict) -> bool:
    have = (pod.get("metadata") or {}).get("labels") or {}
    return bool(selector) and all(have.get(k) == v for k, v in selector.items())


def _ready(pod: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def records(api, ns: str) -> list[tuple[str, list[str]]]:
    """(IP, names) of every pod a headless Service of NS publishes."""
    out = []
    for svc in api.list("services", ns):
        spec, name = svc.get("spec") or {}, svc["metadata"]["name"]
        if spec.get("clusterIP") != "None":
            continue
        for pod in api.list("pods", ns):
            pspec, status = pod["spec"], pod.get("status") or {}
            host, ip = pspec.get("hostname"), status.get("podIP")
            if pspec.get("subdomain") != name or not host or not ip or \
                    not _selects(spec.get("selector") or {}, pod) or \
                    pod["metadata"].get("deletionTimestamp") or \
                    status.get("phase") in ("Succeeded", "Failed"):
                continue
            if _ready(pod) or spec.get("publishNotReadyAddresses"):
                out.append((ip, [f"{host}.{name}", f"{host}.{name}.{ns}.svc.{CLUSTER_DOMAIN}"]))
    return sorted(out)


def hostname(pod: dict) -> str:
    """The pod's hostname: spec.hostname (an Indexed Job's pods: `<job>-<index>`), else its
    name, cut to 63 characters as the kubelet does."""
    return (pod["spec"].get("hostname") or pod["metadata"]["name"])[:63]


def hosts_text(pod: dict, found: list[tuple[str, list[str]]]) -> str:
    meta, spec = pod["metadata"], pod["spec"]
    host, ip = hostname(pod), pod["status"]["podIP"]
    own = f"{host}.{spec['subdomain']}.{meta['namespace']}.svc.{CLUSTER_DOMAIN}\t{host}" \
        if spec.get("subdomain") else host
    lines = ["# Kubernetes-managed hosts file (the fake's: it stands in for the cluster DNS).",
             "127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback",
             f"{ip}\t{own}", "# cluster DNS: headless Services' pods"]
    lines += [f"{addr}\t{' '.join(names)}" for addr, names in found]
    return "\n".join(lines) + "\n"


def write_in_place(path: Path, text: str) -> None:
    """Rewrite the file the pod's /etc/hosts is bound to without replacing its inode; written
    before the cut, so a reader never finds it empty."""
    data = text.encode()
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return
    with open(path, "r+b") as out:
        out.write(data)
        out.truncate(len(data))


class Names:
    """The hosts files of the cluster's running pods, kept current by the control loop."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.written: dict[str, str] = {}  # pod uid → the text its file holds

    def path(self, pod: dict) -> Path:
        return self.root / "hosts" / pod["metadata"]["uid"]

    def write(self, api, pod: dict) -> Path:
        """The pod's file as it starts (its own line, and the records known now)."""
        text = hosts_text(pod, records(api, pod["metadata"]["namespace"]))
        path = self.path(pod)
        write_in_place(path, text)
        self.written[pod["metadata"]["uid"]] = text
        return path

    def refresh(self, api, running: set[str]) -> None:
        """Every running pod's file, rewritten where its records changed."""
        by_ns: dict[str, list[tuple[str, list[str]]]] = {}
        for pod in api.list("pods"):
            uid = pod["metadata"]["uid"]
            if uid not in running or uid not in self.written:
                continue
            ns = pod["metadata"]["namespace"]
            if ns not in by_ns:
                by_ns[ns] = records(api, ns)
            text = hosts_text(pod, by_ns[ns])
            if text != self.written[uid]:
                write_in_place(self.path(pod), text)
                self.written[uid] = text
        for uid in set(self.written) - running:
            del self.written[uid]
