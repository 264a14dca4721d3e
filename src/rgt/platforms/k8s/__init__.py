"""The parts of the Kubernetes platform (`platform.py` here), each small enough to read.

    kubeconfig  the user's kubeconfig, read as kubectl reads it: KUBECONFIG merging, contexts,
                clusters, users (token, token file, client certificates, exec plugins)
    api         the REST client (httpx): typed errors, RBAC checks, logs, the pod proxy
    manifests   the Job / Indexed Job / PVC / door pod / headless Service rgt submits
    diagnose    pod phases, conditions and events → a run's state, with K8S1-K8S6
    group       multi-node jobs: the Indexed Job's group fields, its headless Service, each
                pod's contract values, a group's state, the engines audit reports
    door        the Transport to the PVC: a short-lived pod rgt talks to through the API
                server's pod proxy (rgt.onbox.door runs in it)

Nothing here needs the `kubernetes` package: rgt speaks the documented REST API with httpx.
"""
