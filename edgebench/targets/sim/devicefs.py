"""The simulated device's file system as the adb sync service sees it: a folder taken as ``/``.

Contract (what ``adbd``'s sync service relies on):

* A device path is resolved the way the device would resolve it: ``..`` stops at the root and a
  symbolic link is followed *inside* the root (an absolute target starts again at the root, so a
  link to ``/etc/shadow`` names ``ROOT/etc/shadow``, never the host's file); more than 40 links
  is ELOOP.
* The resolved path is then opened one component at a time from a descriptor of the root with
  ``O_NOFOLLOW``: a link swapped in after resolution (by a device command running at the same
  time) makes the operation fail with ELOOP instead of leaving the root.
* A push replaces: an existing file or link at the destination is unlinked and a new file is
  created with ``O_CREAT|O_EXCL|O_NOFOLLOW`` (as adbd does), so a push never writes through a
  link or into a file shared with another tree (the board's hard-link clones).
* With ``shell_uid`` set (a board run as root), pushes and pulls get the permissions of Android's
  shell user: a push needs a folder that uid ``shell_uid`` may write (``/data/local/tmp``, not
  ``/system``), created files and folders belong to it, a pull needs a file it may read.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from pathlib import Path
from typing import BinaryIO

MAX_LINKS = 40   # Linux's limit on symbolic links followed in one lookup (path_resolution(7))
_DIR_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _err(code: int, path: str) -> OSError:
    return OSError(code, os.strerror(code), path)


class DeviceFS:
    """File operations on device paths, confined to ``root``."""

    def __init__(self, root: str | os.PathLike, shell_uid: int | None = None) -> None:
        self.root = Path(root)
        self.shell_uid = shell_uid

    # --- resolution ---------------------------------------------------------------------------
    def canon(self, device_path: str, *, follow_last: bool = True) -> list[str]:
        """The components of DEVICE_PATH after resolving ``..`` and links inside the root (a
        trailing ``/`` resolves the last link too, as the kernel does)."""
        follow_last = follow_last or device_path.endswith("/")
        todo = [p for p in device_path.split("/") if p not in ("", ".")]
        out: list[str] = []
        links = 0
        while todo:
            part = todo.pop(0)
            if part == "..":
                if out:
                    out.pop()
                continue
            cand = out + [part]
            try:
                st = os.lstat(os.path.join(self.root, *cand))
            except OSError:
                out = cand          # does not exist (yet): later parts are taken as written
                continue
            if stat.S_ISLNK(st.st_mode) and (todo or follow_last):
                links += 1
                if links > MAX_LINKS:
                    raise _err(errno.ELOOP, device_path)
                target = os.readlink(os.path.join(self.root, *cand))
                if target.startswith("/"):
                    out = []
                todo = [p for p in target.split("/") if p not in ("", ".")] + todo
                continue
            out = cand
        return out

    def host_path(self, device_path: str) -> str:
        """The host path a device path resolves to (always inside the root)."""
        return os.path.join(self.root, *self.canon(device_path))

    def _walk(self, comps: list[str], *, make: bool = False, daemon: bool = False) -> int:
        """A descriptor (O_PATH) of the folder COMPS, opened without following any link;
        with ``make`` missing folders are created (the push's fixed_push_mkdir), owned by the
        shell user unless ``daemon`` (the simulator's own files)."""
        fd = os.open(self.root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for c in comps:
                try:
                    nfd = os.open(c, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not make:
                        raise
                    if not daemon:
                        self._check_write(fd, c)
                    os.mkdir(c, 0o755 if daemon else 0o775, dir_fd=fd)
                    if self.shell_uid is not None and not daemon:
                        os.chown(c, self.shell_uid, self.shell_uid, dir_fd=fd, follow_symlinks=False)
                    nfd = os.open(c, _DIR_FLAGS, dir_fd=fd)
                except OSError as e:
                    if e.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise _err(errno.ELOOP if e.errno == errno.ELOOP else errno.ENOTDIR, c) from None
                    raise
                os.close(fd)
                fd = nfd
            return fd
        except BaseException:
            os.close(fd)
            raise

    # --- permissions (shell user) -------------------------------------------------------------------
    def _may(self, st: os.stat_result, bit: int) -> bool:
        """Whether the shell user has permission BIT (4 read, 2 write) on ST."""
        if self.shell_uid is None:
            return True
        if st.st_uid == self.shell_uid:
            return bool(st.st_mode & (bit << 6))
        if st.st_gid == self.shell_uid:
            return bool(st.st_mode & (bit << 3))
        return bool(st.st_mode & bit)

    def _check_write(self, dir_fd: int, name: str) -> None:
        if not self._may(os.fstat(dir_fd), 2):
            raise _err(errno.EACCES, name)

    # --- operations -----------------------------------------------------------------------------
    def lstat(self, device_path: str) -> os.stat_result:
        """adbd's STAT (v1): lstat of the path, links inside it followed within the root."""
        comps = self.canon(device_path, follow_last=False)
        if not comps:
            return os.stat(self.root)
        fd = self._walk(comps[:-1])
        try:
            st = os.stat(comps[-1], dir_fd=fd, follow_symlinks=False)
        finally:
            os.close(fd)
        if device_path.endswith("/") and not stat.S_ISDIR(st.st_mode):
            raise _err(errno.ENOTDIR, device_path)     # "file/" is not a folder (adb asks this of links)
        return st

    def listdir(self, device_path: str) -> list[tuple[str, os.stat_result]]:
        """(name, lstat) of every entry of a folder."""
        comps = self.canon(device_path)
        pfd = self._walk(comps)
        try:
            dfd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=pfd)
        finally:
            os.close(pfd)
        try:
            out = []
            for name in sorted(os.listdir(dfd)):
                try:
                    out.append((name, os.stat(name, dir_fd=dfd, follow_symlinks=False)))
                except OSError:
                    continue
            return out
        finally:
            os.close(dfd)

    def open_read(self, device_path: str) -> BinaryIO:
        """A regular file opened for reading (adbd's RECV)."""
        comps = self.canon(device_path)
        if not comps:
            raise _err(errno.EISDIR, device_path)
        pfd = self._walk(comps[:-1])
        try:
            fd = os.open(comps[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=pfd)
        finally:
            os.close(pfd)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or not self._may(st, 4):
            os.close(fd)
            raise _err(errno.EACCES if stat.S_ISREG(st.st_mode) else errno.EINVAL, device_path)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")

    def create(self, device_path: str, *, daemon: bool = False) -> tuple[BinaryIO, int, str]:
        """A new empty file at DEVICE_PATH replacing any file or link there (adbd's SEND).

        Returns (file, parent folder descriptor, name); the caller closes the descriptor,
        and on failure calls ``discard``. ``daemon``: the simulator's own file (no shell-user
        permission check, owned by the daemon)."""
        comps = self.canon(device_path, follow_last=False)
        if not comps or device_path.endswith("/"):
            raise _err(errno.EISDIR, device_path)
        pfd = self._walk(comps[:-1], make=True, daemon=daemon)
        name = comps[-1]
        try:
            try:
                st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            if st is not None and stat.S_ISDIR(st.st_mode):
                raise _err(errno.EISDIR, device_path)
            if not daemon:
                self._check_write(pfd, name)
            if st is not None:
                os.unlink(name, dir_fd=pfd)
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                         dir_fd=pfd)
            if self.shell_uid is not None and not daemon:
                os.fchown(fd, self.shell_uid, self.shell_uid)
            return os.fdopen(fd, "wb"), pfd, name
        except BaseException:
            os.close(pfd)
            raise

    def put(self, device_path: str, data: str | bytes, mode: int = 0o644) -> None:
        """The simulator writes one of its own files (props, /proc, /sys, battery values):
        written to a new temporary file in the same folder, then renamed over the old one, so
        readers never see a half-written value and a link a device command left there is
        replaced, never written through."""
        comps = self.canon(device_path, follow_last=False)
        if not comps:
            raise _err(errno.EISDIR, device_path)
        pfd = self._walk(comps[:-1], make=True, daemon=True)
        tmp = f".{comps[-1]}.{os.getpid()}.{threading.get_ident()}.tmp"
        try:
            try:
                os.unlink(tmp, dir_fd=pfd)
            except FileNotFoundError:
                pass
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                         dir_fd=pfd)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data.encode() if isinstance(data, str) else data)
                os.fchmod(fh.fileno(), mode)
            os.rename(tmp, comps[-1], src_dir_fd=pfd, dst_dir_fd=pfd)
        except BaseException:
            self.discard(pfd, tmp)
            raise
        finally:
            os.close(pfd)

    def exists(self, device_path: str) -> bool:
        try:
            self.lstat(device_path)
            return True
        except OSError:
            return False

    def makedirs(self, device_path: str, *, owner: int | None = None, mode: int = 0o755) -> None:
        """Folders of the simulator's layout (``owner``: chown the last one, e.g. /data/local/tmp)."""
        comps = self.canon(device_path, follow_last=False)
        os.close(self._walk(comps, make=True, daemon=True))
        if comps:
            pfd = self._walk(comps[:-1])
            try:
                fd = os.open(comps[-1], os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=pfd)
                try:
                    os.fchmod(fd, mode)
                    if owner is not None:
                        os.fchown(fd, owner, owner)
                finally:
                    os.close(fd)
            finally:
                os.close(pfd)

    def special(self, device_path: str, *, link: str | None = None, chardev: tuple[int, int] | None = None) -> None:
        """The simulator makes a symbolic link (``link`` = its target, read inside the root) or a
        character device node (``chardev`` = (major, minor), mode 0666; needs root)."""
        comps = self.canon(device_path, follow_last=False)
        pfd = self._walk(comps[:-1], make=True, daemon=True)
        try:
            try:
                os.unlink(comps[-1], dir_fd=pfd)
            except FileNotFoundError:
                pass
            if link is not None:
                os.symlink(link, comps[-1], dir_fd=pfd)
            elif chardev is not None:
                os.mknod(comps[-1], stat.S_IFCHR | 0o666, os.makedev(*chardev), dir_fd=pfd)
                os.chmod(comps[-1], 0o666, dir_fd=pfd)   # mknod's mode is masked by the umask
        finally:
            os.close(pfd)

    def remove(self, device_path: str) -> None:
        """The simulator removes one of its files or links (not a folder); absent is fine."""
        comps = self.canon(device_path, follow_last=False)
        pfd = self._walk(comps[:-1])
        try:
            os.unlink(comps[-1], dir_fd=pfd)
        except FileNotFoundError:
            pass
        finally:
            os.close(pfd)

    def read_text(self, device_path: str) -> str:
        with self.open_read(device_path) as fh:
            return fh.read().decode("utf-8", "replace")

    @staticmethod
    def discard(pfd: int, name: str) -> None:
        try:
            os.unlink(name, dir_fd=pfd)
        except OSError:
            pass
