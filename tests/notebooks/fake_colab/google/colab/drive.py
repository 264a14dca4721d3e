"""A stand-in for `google.colab.drive` whose Google Drive is a local directory (tests only).

The signatures and messages follow colabtools' google/colab/drive.py (commit 3c07d77):
`mount(mountpoint, force_remount=False, timeout_ms=120000, readonly=False)` mounts the user's
Drive so that `<mountpoint>/MyDrive` is its root, refuses a mountpoint with a space, a symlink
or files in it, and raises NotImplementedError outside Colab; `flush_and_unmount(timeout_ms)`
pushes every outstanding change, quits the Drive daemon (the mountpoint is left empty) and
prints 'Drive not mounted, so nothing to flush and unmount.' when nothing is mounted.

"Google's side" is FAKE_DRIVE_CLOUD (a directory: what another machine's Drive sync folder
shows). The mount is a local cache the process writes into; a syncer thread in the kernel
(the real one is the `drive` daemon on the same VM: it dies with the runtime) uploads it
lazily, the way NB1 describes:

- a new name appears in the cloud at once, as a 0-byte file (metadata is fast);
- its content arrives only once the file has stayed unchanged FAKE_DRIVE_SYNC_DELAY_S seconds;
- a deleted or renamed-away name disappears from the cloud at once.

So a runtime killed after "saved ckpt-N, deleted ckpt-(N-1)" but before the upload leaves
Drive with a 0-byte ckpt-N and no ckpt-(N-1). Where the real service may differ: its upload
time grows with the file size and the network, it may order or batch operations differently,
and a remount may serve files from a cache that outlived the daemon.
"""

import contextlib
import os
import shutil
import threading
import time

__all__ = ["flush_and_unmount", "mount"]

_state = {"mountpoint": None, "syncer": None}


class _Syncer(threading.Thread):
    def __init__(self, view, cloud, delay):
        super().__init__(name="fake-drive-sync", daemon=True)
        self.view, self.cloud, self.delay = view, cloud, delay
        self.uploaded = {}  # rel -> (size, mtime_ns) of what the cloud holds
        self.changed_at = {}  # rel -> (signature, first seen with it)
        self.stop = threading.Event()
        self.lock = threading.Lock()

    def _walk(self, root):
        files, dirs = {}, set()
        for here, subdirs, names in os.walk(root):
            rel_here = os.path.relpath(here, root)
            for d in subdirs:
                dirs.add(os.path.normpath(os.path.join(rel_here, d)))
            for n in names:
                rel = os.path.normpath(os.path.join(rel_here, n))
                try:
                    st = os.lstat(os.path.join(here, n))
                except FileNotFoundError:
                    continue
                files[rel] = (st.st_size, st.st_mtime_ns)
        return files, dirs

    def _upload(self, rel, sig):
        src, dst = os.path.join(self.view, rel), os.path.join(self.cloud, rel)
        tmp = os.path.join(os.path.dirname(dst), ".fake-drive-upload-" + os.path.basename(dst))
        try:
            shutil.copyfile(src, tmp)
            os.replace(tmp, dst)
            self.uploaded[rel] = sig
        except FileNotFoundError:
            pass

    def pass_once(self, force=False):
        with self.lock:
            files, dirs = self._walk(self.view)
            cloud_files, cloud_dirs = self._walk(self.cloud)
            now = time.monotonic()
            for d in sorted(dirs):
                os.makedirs(os.path.join(self.cloud, d), exist_ok=True)
            for rel in cloud_files:
                if rel not in files and not os.path.basename(rel).startswith(".fake-drive"):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(os.path.join(self.cloud, rel))
                    self.uploaded.pop(rel, None)
            for d in sorted(cloud_dirs - dirs, reverse=True):
                shutil.rmtree(os.path.join(self.cloud, d), ignore_errors=True)
            for rel, sig in files.items():
                if self.uploaded.get(rel) == sig:
                    continue
                dst = os.path.join(self.cloud, rel)
                if not os.path.exists(dst):
                    os.makedirs(os.path.dirname(dst), exist_ok=True)
                    open(dst, "wb").close()  # the name lands first, empty (NB1)
                seen = self.changed_at.get(rel)
                if seen is None or seen[0] != sig:
                    self.changed_at[rel] = (sig, now)
                    seen = self.changed_at[rel]
                if force or now - seen[1] >= self.delay:
                    self._upload(rel, sig)

    def run(self):
        while not self.stop.wait(0.05):
            try:
                self.pass_once()
            except OSError:
                continue


def _cloud():
    cloud = os.environ.get("FAKE_DRIVE_CLOUD")
    if not cloud:
        raise NotImplementedError(
            "Mounting drive is unsupported in this environment. Use PyDrive2 instead.")
    return cloud


def mount(mountpoint, force_remount=False, timeout_ms=120000, readonly=False):
    """Mount your Google Drive at the specified mountpoint path."""
    cloud = _cloud()
    if " " in mountpoint:
        raise ValueError("Mountpoint must not contain a space.")
    mountpoint = os.path.expanduser(mountpoint)
    root = os.path.join(mountpoint, "MyDrive")
    if _state["mountpoint"] == mountpoint and not force_remount:
        print(f"Drive already mounted at {mountpoint}; to attempt to forcibly remount, "
              f'call drive.mount("{mountpoint}", force_remount=True).')
        return
    if _state["mountpoint"] is not None:
        _unmount(flush=False)
    if os.path.islink(mountpoint):
        raise ValueError("Mountpoint must not be a symlink")
    if os.path.isdir(mountpoint) and os.listdir(mountpoint):
        raise ValueError("Mountpoint must not already contain files")
    if not os.path.isdir(mountpoint) and os.path.exists(mountpoint):
        raise ValueError("Mountpoint must either be a directory or not exist")
    os.makedirs(cloud, exist_ok=True)
    shutil.copytree(cloud, root, symlinks=True, dirs_exist_ok=True)
    syncer = _Syncer(root, cloud, float(os.environ.get("FAKE_DRIVE_SYNC_DELAY_S", "2")))
    syncer.uploaded.update(syncer._walk(root)[0])  # what was copied in is already there
    syncer.start()
    _state.update(mountpoint=mountpoint, syncer=syncer)
    print(f"Mounted at {mountpoint}")


def _unmount(flush):
    syncer = _state["syncer"]
    syncer.stop.set()
    syncer.join()
    if flush:
        syncer.pass_once(force=True)
    shutil.rmtree(os.path.join(_state["mountpoint"], "MyDrive"), ignore_errors=True)
    _state.update(mountpoint=None, syncer=None)


def flush_and_unmount(timeout_ms=24 * 60 * 60 * 1000):
    """Unmount Google Drive and flush any outstanding writes to it."""
    if _state["mountpoint"] is None:
        print("Drive not mounted, so nothing to flush and unmount.")
        return
    _unmount(flush=True)
