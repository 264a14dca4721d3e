"""Cloud buckets in a task file's `file_mounts`, copied or mounted on the box with the tool
the box has, in SkyPilot's meaning (docs.skypilot.co, reference/storage and "File mounts"):

    /dst: s3://bucket/path                 COPY: the object or prefix copied to /dst before
    /dst: {source: URL, mode: COPY}        setup, so the job reads a local copy
    /dst: {source: URL}  (mode MOUNT,      MOUNT: the bucket mounted at /dst; the job's
          or MOUNT_CACHED)                 writes go to the bucket
    /dst: {name: NAME, store: s3|gcs|      the bucket NAME, copied or mounted as above
          nebius}
    /dst: nebius://bucket/path             as S3, through the AWS CLI's `nebius` profile and
                                           its endpoint_url (SkyPilot's own way to Nebius)

What rgt does differently, and says so in the run's notes: it creates no bucket (SkyPilot
creates NAME when it is missing, so here the copy or the mount fails by name instead) and
deletes none (`persistent: false`); a bucket with no `store` is taken as S3; the box uses its
own cloud credentials, or the keys the task names in `secrets`. Schemes with no tool rgt
knows on a stock image (r2, oci, cos, azure stores …) are refused by name before anything
runs.

The lines run on the box in the job's setup, before the user's own; each one tries the tools
in order and, when the box has none, fails naming what to install, so a missing tool is the
job's first error line rather than an empty directory the training reads.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from rgt.errors import UserError

# scheme → (COPY tools, MOUNT tools, what to install), each tool a shell template over
# {url} {dst} {bucket} {prefix}; the first the box has is used.
_S3_COPY = ("aws", "aws s3 cp --only-show-errors {url} {dst} 2>/dev/null "
                   "|| aws s3 sync --only-show-errors {url} {dst}")
_S5_COPY = ("s5cmd", "s5cmd cp {url} {dst} 2>/dev/null || s5cmd cp {url_glob} {dst}/")
_GS_COPY = ("gcloud", "gcloud storage cp -r {url} {dst}")
_GSUTIL_COPY = ("gsutil", "gsutil -m cp -r {url} {dst}")
_CURL_COPY = ("curl", "curl -fsSL -o {dst} {url}")
_WGET_COPY = ("wget", "wget -q -O {dst} {url}")
_MOUNT_S3 = ("mount-s3", "mount-s3 --allow-delete --allow-overwrite {prefix_flag_s3}{bucket} {dst}")
_S3FS = ("s3fs", "s3fs {bucket}{prefix_colon} {dst}")
_GCSFUSE = ("gcsfuse", "gcsfuse --implicit-dirs {prefix_flag_gcs}{bucket} {dst}")
# Nebius Object Storage speaks S3: SkyPilot reaches it with the AWS CLI's `nebius` profile
# (sky/adaptors/nebius.py NEBIUS_PROFILE_NAME), whose endpoint_url names the region's storage
_NEBIUS = "--profile nebius"
_NEBIUS_ENDPOINT = '"$(aws configure get endpoint_url --profile nebius)"'
_NEBIUS_COPY = ("aws", f"aws {_NEBIUS} s3 cp --only-show-errors {{s3_url}} {{dst}} 2>/dev/null "
                       f"|| aws {_NEBIUS} s3 sync --only-show-errors {{s3_url}} {{dst}}")
_NEBIUS_MOUNT = ("mount-s3", f"mount-s3 {_NEBIUS} --endpoint-url {_NEBIUS_ENDPOINT} "
                             "--allow-delete --allow-overwrite {prefix_flag_s3}{bucket} {dst}")
_NEBIUS_S3FS = ("s3fs", f"s3fs {{bucket}}{{prefix_colon}} {{dst}} -o profile=nebius "
                        f"-o url={_NEBIUS_ENDPOINT}")

TOOLS: dict[str, tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...], str, str]] = {
    "s3": ((_S3_COPY, _S5_COPY), (_MOUNT_S3, _S3FS),
           "the AWS CLI (pip install awscli) or s5cmd",
           "mountpoint-s3 (mount-s3) or s3fs, and /dev/fuse in the box"),
    "gs": ((_GS_COPY, _GSUTIL_COPY), (_GCSFUSE,),
           "the gcloud CLI (gcloud storage) or gsutil",
           "gcsfuse, and /dev/fuse in the box"),
    "nebius": ((_NEBIUS_COPY,), (_NEBIUS_MOUNT, _NEBIUS_S3FS),
               "the AWS CLI (pip install awscli) with a `nebius` profile (endpoint_url set)",
               "mountpoint-s3 (mount-s3) or s3fs, the AWS CLI's `nebius` profile, and "
               "/dev/fuse in the box"),
    "https": ((_CURL_COPY, _WGET_COPY), (), "curl or wget", ""),
    "http": ((_CURL_COPY, _WGET_COPY), (), "curl or wget", ""),
}
STORES = {"s3": "s3", "gcs": "gs", "nebius": "nebius"}
_URL = re.compile(r"^([a-z][a-z0-9+.-]*)://([^/]*)/?(.*)$")
MOUNT_MODES = {"MOUNT", "MOUNT_CACHED"}
CREDENTIALS = ("bucket copies and mounts use the box's own cloud credentials (an instance "
               "role, ~/.aws or gcloud auth there; for Nebius, ~/.aws's `nebius` profile); to "
               "send this machine's keys, name them in `secrets` (AWS_ACCESS_KEY_ID, "
               "AWS_SECRET_ACCESS_KEY)")


def is_bucket(source: str) -> bool:
    return bool(_URL.match(source))


def bucket_url(given: dict[str, Any], field: str, notes: list[str]) -> str:
    """The URL of a `{name: NAME, store: …}` mount, which names a bucket but no source."""
    name = given.get("name")
    if not name:
        raise UserError(f"{field} leaves the bucket's `name` empty: fill in a bucket you own, "
                        "or give a `source:` URL")
    if "$" in str(name):
        raise UserError(f"{field} names its bucket by a variable with no value here ({name}): "
                        "set it in `envs`, or export it before rgt runs")
    store = given.get("store")
    if store is not None and "$" in str(store):
        raise UserError(f"{field} names its store by a variable with no value here ({store}): "
                        "set it in `envs`, or export it before rgt runs")
    if store is None:
        notes.append(f"{field}: bucket {name} is taken as s3://{name} (SkyPilot picks the "
                     "store of the cloud it runs on; add `store: gcs` for Google's)")
        store = "s3"
    scheme = STORES.get(str(store).lower())
    if scheme is None:
        raise UserError(f"{field}: store {store!r} is not one rgt reaches on a box (s3, gcs "
                        "or nebius); copy or mount it in `setup` with the store's own tool")
    return f"{scheme}://{name}"


def setup_line(dst_word: str, dst: str, url: str, mode: str, field: str,
               notes: list[str]) -> str:
    """One setup line that copies or mounts `url` at the box path `dst_word` (a shell word)."""
    match = _URL.match(url)
    if match is None:
        raise UserError(f"{field}: {url} is not a bucket URL")
    scheme, bucket, prefix = match[1], match[2], match[3].rstrip("/")
    if scheme not in TOOLS:
        raise UserError(f"{field}: {scheme}:// is not copied or mounted by rgt (it knows s3://, "
                        "gs://, nebius://, https://); fetch it in `setup` with the storage's own "
                        "CLI (credentials as `secrets`)")
    copy_tools, mount_tools, copy_needs, mount_needs = TOOLS[scheme]
    mounting = mode in MOUNT_MODES
    if mounting and not mount_tools:
        raise UserError(f"{field}: {url} cannot be mounted (mode {mode}); use mode: COPY")
    if mode == "MOUNT_CACHED":
        notes.append(f"{field}: MOUNT_CACHED is mounted without SkyPilot's local write cache "
                     "(writes go to the bucket as the job makes them)")
    words = {"url": shlex.quote(url), "dst": dst_word, "bucket": shlex.quote(bucket),
             "s3_url": shlex.quote(f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}"),
             "url_glob": shlex.quote(url.rstrip("/") + "/*"),
             "prefix_flag_s3": f"--prefix {shlex.quote(prefix + '/')} " if prefix else "",
             "prefix_flag_gcs": f"--only-dir {shlex.quote(prefix)} " if prefix else "",
             "prefix_colon": shlex.quote(":/" + prefix) if prefix else ""}
    tools = mount_tools if mounting else copy_tools
    needs = mount_needs if mounting else copy_needs
    verb = "mount" if mounting else "copy"
    missing = shlex.quote(f"[rgt] {field}: to {verb} {url} this box needs {needs}; install it "
                          "in the image or at the top of `setup`")
    failed = shlex.quote(f"[rgt] {field}: could not {verb} {url} to {dst} (the lines above "
                         "say why; rgt creates no bucket)")
    branches = " el".join(f"if command -v {tool} >/dev/null 2>&1; then "
                          f"{template.format(**words)};" for tool, template in tools)
    make = f"mkdir -p {dst_word}" if mounting else f"mkdir -p \"$(dirname {dst_word})\""
    return (f"{make} && {{ {branches} else echo {missing} >&2; false; fi; }} "
            f"|| {{ echo {failed} >&2; exit 1; }}")
