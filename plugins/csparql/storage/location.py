"""Where a warehouse's files live: a local folder, or a prefix of an S3 bucket.

``location(text)`` reads a warehouse (or table, or file) location the way a user writes it: a local path, or
``s3://bucket/prefix`` (``s3a://`` is the same place, as Hadoop spells it). A local path is a ``Path``; an S3
location an ``ObjectPath``, which answers the part of ``pathlib`` the storage layer uses (``/``, ``name``,
``parent``, ``exists``, ``is_dir``, ``glob``, ``stat``, ``unlink``, reading and writing bytes), over pyarrow's
S3 file system. Any other scheme (``gs://``, ``abfss://``, ``hdfs://``, ``http://``…) is refused with
``UnsupportedLocation``: taken for a local path it would silently write to a folder named ``gs:``.

S3's endpoint, credentials and region come from the standard AWS variables, read when a location is first
used: ``AWS_ENDPOINT_URL`` (or ``AWS_ENDPOINT_URL_S3``; an S3-compatible server such as MinIO or SeaweedFS),
``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION`` (or
``AWS_DEFAULT_REGION``). delta-rs and Spark's ``s3a`` read the same ones (``s3_settings``). Airflow
components first copy them from the connection ``[csparql] aws_conn_id`` names
(``csparql.deploy.settings``).

Objects are written whole: an object store has no rename, and Delta commits on it rely on the server's
conditional writes (``If-None-Match``), which AWS S3, MinIO, SeaweedFS and Cloudflare R2 support.
"""

from __future__ import annotations

import atexit
import fnmatch
import functools
import os
import re
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from urllib.parse import urlparse

from csparql.storage.aws_variables import S3Settings, mark_s3_in_use, s3_in_use, s3_settings  # noqa: F401 (re-exported)

SCHEMES = ("s3", "s3a")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):")


class UnsupportedLocation(ValueError):
    """A location csparql cannot keep tables at (an unknown scheme, an S3 URI without a bucket)."""


class StorageUnreachable(OSError):
    """An object store that cannot be used: its endpoint does not answer, the bucket is missing, or the
    credentials are refused. The message is one line naming the location and what to check."""


def location(text: str | os.PathLike) -> Path | ObjectPath:
    """The place ``text`` names: a resolved local ``Path``, or an ``ObjectPath`` for ``s3://`` and ``s3a://``;
    ``UnsupportedLocation`` for any other scheme."""
    if isinstance(text, ObjectPath):
        return text
    if isinstance(text, Path):
        return text.resolve()
    text = os.fspath(text)
    scheme = _SCHEME.match(text)
    if scheme is None or text.startswith("file:"):
        return Path(text.removeprefix("file://") if text.startswith("file://") else text).resolve()
    name = scheme.group(1).lower()
    if name not in SCHEMES:
        raise UnsupportedLocation(
            f"'{text}': csparql keeps tables in a local folder or in S3 (s3://bucket/prefix, or any "
            f"S3-compatible server through AWS_ENDPOINT_URL); the scheme '{name}:' is not supported")
    parsed = urlparse(text)
    if not text.lower().startswith(f"{name}://") or not parsed.netloc:
        raise UnsupportedLocation(f"'{text}' names no bucket: write s3://bucket/prefix")
    key = PurePosixPath("/" + parsed.path.lstrip("/"))
    mark_s3_in_use()
    ensure_delta_rs_environment()
    return ObjectPath(parsed.netloc, "/".join(part for part in key.parts[1:] if part not in ("", ".")))


def is_remote(path) -> bool:
    """Whether ``path`` lies in an object store (not on this machine's disk)."""
    return isinstance(path, ObjectPath) or (isinstance(path, str) and _SCHEME.match(path) is not None
                                             and not path.startswith("file:"))


def uri(path) -> str:
    """The location as delta-rs, pyarrow and Spark take it: ``s3://bucket/key`` or an absolute local path."""
    return str(location(path))


def ensure_delta_rs_environment() -> None:
    """Let delta-rs talk to a plain-HTTP endpoint (a local S3-compatible server) as pyarrow and Spark do:
    delta-rs reads the same AWS variables, but refuses HTTP unless ``AWS_ALLOW_HTTP`` says so."""
    if s3_settings().insecure:
        os.environ.setdefault("AWS_ALLOW_HTTP", "true")


@functools.lru_cache(maxsize=8)
def _filesystem(settings: S3Settings):
    from pyarrow import fs

    options: dict = {"allow_bucket_creation": False, "allow_bucket_deletion": False,
                     "connect_timeout": 5, "request_timeout": 30,
                     "retry_strategy": fs.AwsStandardS3RetryStrategy(max_attempts=3)}
    if settings.endpoint:
        parsed = urlparse(settings.endpoint)
        options["endpoint_override"] = parsed.netloc or settings.endpoint
        options["scheme"] = parsed.scheme or "https"
        options["force_virtual_addressing"] = False
    if settings.access_key and settings.secret_key:
        options.update(access_key=settings.access_key, secret_key=settings.secret_key,
                       session_token=settings.session_token)
    options["region"] = settings.region or "us-east-1"
    if not _filesystem.cache_info().currsize:
        # pyarrow finalizes its S3 client at exit; a file system still held then aborts the process. Handlers
        # run last-registered first: this one, registered after pyarrow's, lets go of the file systems first.
        atexit.register(_filesystem.cache_clear)
    return fs.S3FileSystem(**options)


def filesystem(path=None):
    """The pyarrow file system ``path`` lies in (S3 for an ``ObjectPath``, else the local one), and the path
    as that file system names it."""
    from pyarrow import fs

    place = location(path) if path is not None else None
    if isinstance(place, ObjectPath):
        return _filesystem(s3_settings()), place.key_path
    return fs.LocalFileSystem(), None if place is None else str(place)


def file_exists(path) -> bool:
    """Whether a file is at ``path`` (a local path or an S3 URI)."""
    place = location(path)
    return place.is_file() if isinstance(place, ObjectPath) else os.path.exists(place)


def read_parquet(path, **options):
    """``pyarrow.parquet.read_table`` of the file at ``path``, local or in S3."""
    import pyarrow.parquet as pq

    if is_remote(path):
        store, name = filesystem(path)
        return pq.read_table(name, filesystem=store, **options)
    return pq.read_table(os.fspath(path), **options)


def parquet_metadata(path):
    """The footer metadata of the Parquet file at ``path``, local or in S3."""
    import pyarrow.parquet as pq

    if is_remote(path):
        store, name = filesystem(path)
        with store.open_input_file(name) as file:
            return pq.ParquetFile(file).metadata
    return pq.ParquetFile(os.fspath(path)).metadata


def write_parquet(rows, path, **options) -> None:
    """``pyarrow.parquet.write_table`` of ``rows`` to ``path``, local or in S3 (one whole object)."""
    import pyarrow.parquet as pq

    if is_remote(path):
        store, name = filesystem(path)
        pq.write_table(rows, name, filesystem=store, **options)
    else:
        pq.write_table(rows, os.fspath(path), **options)


class _Stat:
    """What ``ObjectPath.stat`` tells, under ``os.stat_result``'s names."""

    def __init__(self, size: int, mtime_ns: int):
        self.st_size, self.st_mtime_ns, self.st_ino = size, mtime_ns, 0
        self.st_mtime = mtime_ns / 1e9


class ObjectPath:
    """An object (or a prefix of objects) in an S3 bucket, with the ``pathlib`` operations the storage layer
    uses. A "folder" exists when an object lies under it; ``mkdir`` has nothing to do."""

    __slots__ = ("bucket", "key")

    def __init__(self, bucket: str, key: str = ""):
        self.bucket, self.key = bucket, key.strip("/")

    # naming

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.key}" if self.key else f"s3://{self.bucket}"

    def __repr__(self) -> str:
        return f"ObjectPath({str(self)!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, ObjectPath) and (self.bucket, self.key) == (other.bucket, other.key)

    def __hash__(self) -> int:
        return hash((self.bucket, self.key))

    def __lt__(self, other: ObjectPath) -> bool:
        return str(self) < str(other)

    def __truediv__(self, part: str | os.PathLike) -> ObjectPath:
        part = os.fspath(part).strip("/")
        return ObjectPath(self.bucket, f"{self.key}/{part}" if self.key else part) if part else self

    @property
    def key_path(self) -> str:
        """The path pyarrow's S3 file system names it by: ``bucket/key``."""
        return f"{self.bucket}/{self.key}" if self.key else self.bucket

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1] if self.key else ""

    @property
    def stem(self) -> str:
        return PurePosixPath(self.name).stem

    @property
    def suffix(self) -> str:
        return PurePosixPath(self.name).suffix

    @property
    def parent(self) -> ObjectPath:
        return ObjectPath(self.bucket, self.key.rsplit("/", 1)[0] if "/" in self.key else "")

    @property
    def parents(self) -> list[ObjectPath]:
        found, path = [], self
        while path.key:
            path = path.parent
            found.append(path)
        return found

    @property
    def parts(self) -> tuple[str, ...]:
        return (f"s3://{self.bucket}", *(self.key.split("/") if self.key else ()))

    def relative_to(self, other: ObjectPath) -> PurePosixPath:
        if not isinstance(other, ObjectPath) or other.bucket != self.bucket or (
                other.key and not (self.key == other.key or self.key.startswith(other.key + "/"))):
            raise ValueError(f"{self} is not in {other}")
        return PurePosixPath(self.key[len(other.key):].lstrip("/") or ".")

    def with_name(self, name: str) -> ObjectPath:
        return self.parent / name

    def resolve(self) -> ObjectPath:
        return self

    def absolute(self) -> ObjectPath:
        return self

    # the store

    def _fs(self):
        return _filesystem(s3_settings())

    def _info(self):
        return self._fs().get_file_info(self.key_path)

    def exists(self) -> bool:
        from pyarrow import fs

        return self._info().type != fs.FileType.NotFound

    def is_file(self) -> bool:
        from pyarrow import fs

        return self._info().type == fs.FileType.File

    def is_dir(self) -> bool:
        from pyarrow import fs

        return self._info().type == fs.FileType.Directory

    def stat(self) -> _Stat:
        from pyarrow import fs

        info = self._info()
        if info.type == fs.FileType.NotFound:
            raise FileNotFoundError(f"{self} does not exist")
        return _Stat(info.size or 0, info.mtime_ns or 0)

    def iterdir(self) -> Iterator[ObjectPath]:
        from pyarrow import fs

        for info in self._fs().get_file_info(fs.FileSelector(self.key_path, allow_not_found=True)):
            yield ObjectPath(self.bucket, info.path.split("/", 1)[1] if "/" in info.path else "")

    def glob(self, pattern: str) -> Iterator[ObjectPath]:
        """The paths under this one that match ``pattern``, one ``fnmatch`` pattern per level (``*/*``,
        ``bucket=*/*.parquet``); ``**`` is not supported."""
        parts = pattern.strip("/").split("/")
        if "**" in parts:
            raise ValueError("ObjectPath.glob does not support '**'")
        level = [self]
        for part in parts:
            level = [child for path in level if path.is_dir() for child in path.iterdir()
                     if fnmatch.fnmatchcase(child.name, part)]
        return iter(sorted(level))

    def rglob(self, pattern: str) -> Iterator[ObjectPath]:
        from pyarrow import fs

        for info in self._fs().get_file_info(fs.FileSelector(self.key_path, recursive=True, allow_not_found=True)):
            path = ObjectPath(self.bucket, info.path.split("/", 1)[1])
            if fnmatch.fnmatchcase(path.name, pattern):
                yield path

    def mkdir(self, parents: bool = False, exist_ok: bool = False) -> None:
        """Nothing to do: an object store has no folders; one exists once an object lies under it."""

    def unlink(self, missing_ok: bool = False) -> None:
        try:
            self._fs().delete_file(self.key_path)
        except FileNotFoundError:
            if not missing_ok:
                raise
        except OSError as error:
            if not (missing_ok and "NoSuchKey" in str(error)):
                raise

    def rmtree(self) -> None:
        """Delete every object under this prefix."""
        try:
            self._fs().delete_dir(self.key_path)
        except FileNotFoundError:
            pass

    def read_bytes(self) -> bytes:
        with self._fs().open_input_stream(self.key_path) as stream:
            return stream.read()

    def read_text(self, encoding: str = "utf-8") -> str:
        return self.read_bytes().decode(encoding)

    def write_bytes(self, data: bytes) -> int:
        with self._fs().open_output_stream(self.key_path) as stream:
            stream.write(data)
        return len(data)

    def write_text(self, text: str, encoding: str = "utf-8") -> int:
        return self.write_bytes(text.encode(encoding))


def check_reachable(root: Path | ObjectPath) -> None:
    """Nothing for a local folder; for S3, ``StorageUnreachable`` in one line when the endpoint does not
    answer, the bucket does not exist or the credentials are refused, before anything is read or written."""
    if not isinstance(root, ObjectPath):
        return
    settings = s3_settings()
    where = f"the warehouse {root} ({'endpoint ' + settings.endpoint if settings.endpoint else 'AWS S3'})"
    try:
        info = _filesystem(settings).get_file_info(root.bucket)
    except OSError as error:
        raise StorageUnreachable(f"{where} cannot be reached: {s3_reason(error)}") from None
    from pyarrow import fs

    if info.type == fs.FileType.NotFound:
        raise StorageUnreachable(f"{where}: the bucket '{root.bucket}' does not exist; create it first")


def s3_reason(error: BaseException) -> str:
    """What an S3 failure says, in a few words a user can act on."""
    text = " ".join(str(error).split())
    lowered = text.lower()
    if "accessdenied" in lowered or "access_denied" in lowered or "signaturedoesnotmatch" in lowered or "invalidaccesskeyid" in lowered \
            or "403" in lowered:
        return "the credentials were refused (check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"
    if "curl" in lowered or "connect" in lowered or "resolve" in lowered or "timeout" in lowered:
        return "the endpoint does not answer (check AWS_ENDPOINT_URL and that the server runs)"
    return text[:200]


def remove_tree(path) -> None:
    """Delete the folder (or S3 prefix) at ``path`` and everything under it; nothing when it is not there."""
    import shutil

    place = location(path)
    if isinstance(place, ObjectPath):
        try:
            place.rmtree()
        except OSError:
            pass
    else:
        shutil.rmtree(place, ignore_errors=True)
