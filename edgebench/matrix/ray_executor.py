"""``matrix run --executor ray``: every cell is a Ray task, every device a Ray resource of capacity 1.

A cell asks for the resources of what it runs on, so one device runs one cell at a time however many
machines share the cluster:

* ``adb:SERIAL`` -> ``edgebench-adb:SERIAL`` (a phone or board, local or on a remote adb server);
* ``host``, ``tf`` and CPU training cells -> ``edgebench-host`` (one such cell per node at a time);
* GPU training cells -> one of Ray's own ``GPU`` resources.

Without ``--address`` edgebench starts a private one-node cluster on 127.0.0.1 (usage statistics off,
no dashboard, token authentication with a token held in the environment, never written under
``~/.ray``; its session files in a temporary folder removed at the end) and offers that node's attached
adb devices, its host and its GPUs. With ``--address auto`` or ``ray://HOST:PORT`` the cluster's nodes
offer what they were started with (``ray start --resources='{"edgebench-adb:SERIAL": 1}'``); a cell
whose resource no node offers is *skipped* with that reason instead of waiting for ever.

Tasks carry JSON (the matrix's axes and settings, the cell) and return JSON (the cell's document and
where and when it ran); the driver stores each document as its task ends, through the same
``save_or_keep`` as local runs, so workers never need the store. A cell whose worker dies (killed,
out of memory, its node lost) is rerun by Ray up to ``retries`` times; when every try was lost it is
a failed cell saying so, and ``--resume`` reruns it. Model paths must exist on every node (a shared
folder), and workers must import the same edgebench (``pip install 'edgebench[ray]'`` on each node).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Callable

from edgebench.core.errors import BadInput, EdgebenchError, InfraError
from edgebench.core.result_file import to_jsonable
from edgebench.matrix.run import Cell, MatrixSpec, failure_doc, run_cell
from edgebench.rows import Document
from edgebench.targets.adb.client import list_states
from edgebench.targets.loop import interrupt_name

INSTALL = "pip install 'edgebench[ray]'"
HOST_RESOURCE = "edgebench-host"
DEVICE_PREFIX = "edgebench-adb:"
DEFAULT_RETRIES = 3
# The local cluster's shared-memory object store: cells pass kilobytes of JSON, and Ray's default
# (30 % of RAM) would reserve gigabytes of /dev/shm for nothing. 78 MB is Ray's minimum.
OBJECT_STORE_BYTES = 100 * 1024 ** 2
# What one cell asks of a node's CPUs besides its device (Ray's default for a task).
CELL_CPUS = 1.0


def device_resource(serial: str) -> str:
    return f"{DEVICE_PREFIX}{serial}"


def cell_resources(cell: Cell) -> tuple[dict[str, float], str | None]:
    """(the Ray resources a cell holds while it runs, or why it cannot be placed)."""
    p = cell.params
    if cell.kind == "train":
        return ({"GPU": 1.0} if p["device"] == "gpu" else {HOST_RESOURCE: 1.0}), None
    target = str(p["target"])
    if target == "adb:all":
        return {}, ("adb:all names every device of one adb server; with --executor ray list the devices as "
                    "adb:SERIAL (each one is a resource of the cluster)")
    if target.startswith("adb:"):
        return {device_resource(target[4:]): 1.0}, None
    return {HOST_RESOURCE: 1.0}, None


def _ray() -> Any:
    try:
        import ray  # the [ray] extra: ~80 MB installed, loaded only by --executor ray
    except ImportError:
        raise BadInput(f"--executor ray: the Ray package is not installed here; {INSTALL}") from None
    return ray


def _reload_auth_settings() -> None:
    """Make an already imported Ray see the RAY_AUTH_* variables set since: Ray caches its config
    and the token in C++ singletons on first use, and Ray's own ``ray.init`` refreshes them the same
    way when it turns token auth on (``ray._private.authentication.authentication_token_setup``)."""
    try:
        from ray._raylet import AuthenticationTokenLoader, Config  # the [ray] extra's internals (2.5x+)
    except ImportError:
        return        # a Ray without token authentication: nothing cached
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def _cell_task(payload: str) -> str:
    """A Ray worker's side: one cell from its JSON, its outcome back as JSON."""
    job = json.loads(payload)
    spec = MatrixSpec(**{**job["spec"], "given": tuple(job["spec"]["given"])})
    cell = Cell(**job["cell"])
    started = time.time()
    doc, status, reason = run_cell(spec, cell, trust_model=bool(job["trust_model"]))
    return json.dumps(to_jsonable({"doc": doc.to_dict(), "status": status, "reason": reason,
                                   "worker": {"node": socket.gethostname(), "pid": os.getpid(),
                                              "started": started, "ended": time.time()}}))


@dataclass(frozen=True)
class RayOptions:
    """How to reach (or start) the cluster."""
    address: str | None = None      # None: a private local cluster; "auto" or "ray://HOST:PORT": an existing one
    retries: int = DEFAULT_RETRIES  # reruns of a cell whose worker was lost
    num_cpus: int | None = None     # the local cluster's CPUs (None: Ray counts them)
    temp_dir: str | None = None     # the local cluster's session folder (None: a fresh one, removed after)

    def validate(self) -> "RayOptions":
        if self.address is not None and not (self.address == "auto" or self.address.startswith("ray://")
                                             or ":" in self.address):
            raise BadInput(f"--address {self.address!r}: use auto, ray://HOST:PORT (Ray Client) or HOST:PORT "
                           "of a cluster's head node")
        if self.retries < 0:
            raise BadInput(f"retries must be >= 0, got {self.retries}")
        return self


class RayExecutor:
    """``run_matrix``'s ``executor`` for Ray (``edgebench.matrix.run.CellExecutor``); a context
    manager: entering starts or joins the cluster, leaving disconnects (and stops a private one)."""

    name = "ray"

    def __init__(self, options: RayOptions | None = None) -> None:
        self.options = (options or RayOptions()).validate()
        self.ray: Any = None
        self.offered: dict[str, float] = {}
        self._env: dict[str, str | None] = {}
        self._tmp: str | None = None

    # --- the cluster ------------------------------------------------------------------------
    def __enter__(self) -> "RayExecutor":
        # Ray reads its RAY_* settings when it is first imported: set them before
        self._setenv("RAY_USAGE_STATS_ENABLED", "0")      # Ray would report usage to its makers
        if self.options.address is None and not (os.environ.get("RAY_AUTH_MODE") or os.environ.get("RAY_AUTH_TOKEN")):
            # a private cluster: token auth on, with the token in the environment (the workers inherit
            # it), so no other local user can submit work to its ports; Ray would otherwise write a
            # token to ~/.ray/auth_token
            self._setenv("RAY_AUTH_MODE", "token")
            self._setenv("RAY_AUTH_TOKEN", secrets.token_hex(32))
        try:
            ray = self.ray = _ray()
        except BadInput:
            self._restore()
            raise
        _reload_auth_settings()
        if self.options.address is None:
            self._start_local(ray)
        else:
            try:
                ray.init(address=self.options.address, log_to_driver=False)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                self._restore()
                raise InfraError(f"--address {self.options.address}: cannot join the Ray cluster "
                                 f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}); start it with "
                                 "`ray start --head` or leave --address out for a local one") from None
        self.offered = {k: float(v) for k, v in ray.cluster_resources().items()}
        return self

    def _start_local(self, ray: Any) -> None:
        resources = {HOST_RESOURCE: 1.0}
        try:
            resources.update({device_resource(s): 1.0 for s, state in list_states() if state == "device"})
        except EdgebenchError:
            pass        # no adb here: adb cells are skipped by the matrix's own probe, with its reason
        temp = self.options.temp_dir or tempfile.mkdtemp(prefix="ebray")   # short: Ray's unix sockets live in it (107 bytes max)
        self._tmp = None if self.options.temp_dir else temp
        try:
            ray.init(address="local", num_cpus=self.options.num_cpus, resources=resources,
                     include_dashboard=False, _node_ip_address="127.0.0.1", _temp_dir=temp,
                     object_store_memory=OBJECT_STORE_BYTES, log_to_driver=False, configure_logging=False)
        except Exception as exc:  # noqa: BLE001 -- Ray raises plain exceptions for a failed start
            self._cleanup()
            raise InfraError(f"--executor ray: the local Ray cluster did not start ({type(exc).__name__}: "
                             f"{str(exc).splitlines()[0] if str(exc) else ''}); its logs are under {temp}") from None

    def _setenv(self, key: str, value: str) -> None:
        self._env.setdefault(key, os.environ.get(key))
        os.environ[key] = value

    def _restore(self) -> None:
        for k, v in self._env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        self._env = {}

    def _cleanup(self) -> None:
        self._restore()
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __exit__(self, *exc: Any) -> None:
        if self.ray is not None and self.ray.is_initialized():
            self.ray.shutdown()
        self._cleanup()

    # --- the cells --------------------------------------------------------------------------
    def skip_reason(self, cell: Cell) -> str | None:
        need, why = cell_resources(cell)
        if why:
            return why
        missing = [r for r, n in need.items() if self.offered.get(r, 0.0) < n]
        if not missing:
            return None
        where = self.options.address or "the local cluster"
        if missing[0] == "GPU":
            return f"no node of the Ray cluster ({where}) has a GPU"
        return (f"no node of the Ray cluster ({where}) offers resource {missing[0]}; start the node that "
                f"reaches it with ray start --resources='{{\"{missing[0]}\": 1}}'")

    def run(self, spec: MatrixSpec, cells: list[Cell], finish: Callable[..., None], trust_model: bool) -> str | None:
        ray = self.ray
        task = ray.remote(_cell_task)
        body = {"path": spec.path, "kind": spec.kind, "axes": spec.axes, "settings": spec.settings,
                "given": list(spec.given)}
        pending: dict[Any, Cell] = {}
        for cell in cells:
            need, _ = cell_resources(cell)
            gpus = need.pop("GPU", 0.0)
            payload = json.dumps(to_jsonable({"spec": body, "trust_model": trust_model,
                                              "cell": {"kind": cell.kind, "index": cell.index,
                                                       "params": cell.params, "key": cell.key}}))
            ref = task.options(name=f"cell {cell.index}", num_cpus=CELL_CPUS, num_gpus=gpus, resources=need,
                               max_retries=self.options.retries).remote(payload)
            pending[ref] = cell
        try:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    cell = pending.pop(ref)
                    doc, status, reason, facts = self._outcome(ref, cell)
                    finish(cell, doc, status, reason, **facts)
        except KeyboardInterrupt as exc:      # Ctrl-C, or the CLI's SIGTERM/SIGHUP (targets.loop.Stop)
            name = interrupt_name(exc)
            for ref, cell in pending.items():
                ray.cancel(ref, force=True)
                finish(cell, None, "interrupted", f"interrupted ({name}) while on the Ray cluster; not stored, "
                                                  "--resume reruns it")
            return name
        return None

    def _outcome(self, ref: Any, cell: Cell) -> tuple[Document, str, str | None, dict[str, Any]]:
        ray = self.ray
        try:
            out = json.loads(ray.get(ref))
        except ray.exceptions.RayTaskError as exc:     # not an EdgebenchError: a bug in the cell's code
            cause = exc.cause if getattr(exc, "cause", None) is not None else exc
            err = InfraError(f"cell {cell.key} raised {type(cause).__name__} on its Ray worker: "
                             f"{str(cause).splitlines()[0] if str(cause) else ''}")
            return failure_doc(cell, err), "failed", str(err), {}
        except ray.exceptions.RayError as exc:        # the worker or its node was lost on every try
            err = InfraError(f"cell {cell.key}: its Ray worker was lost on all {self.options.retries + 1} tries "
                             f"({type(exc).__name__}); nothing was stored for it; rerun with --resume")
            return failure_doc(cell, err), "failed", str(err), {}
        return Document.from_dict(out["doc"]), out["status"], out["reason"], {"worker": out["worker"]}
