"""The object stores behind the file sources' inputs (``fs.py``): objects of S3, Google Cloud
Storage and Azure Blob Storage (``s3://``, ``gs://``, ``az://``), read through pyarrow's own
filesystems (``pyarrow.fs.S3FileSystem``, ``GcsFileSystem``, ``AzureFileSystem``). pyarrow is
already the reader underneath every format, its filesystems are maintained and released with it
(the cloud vendors' C++ SDKs), they stream straight into Arrow without a Python file layer, and
they talk to any S3-compatible server through ``endpoint_override``. fsspec's s3fs would put
aiobotocore, whose narrow botocore pin fights the other AWS packages of an environment, on the
read path (docs/sources.md).

An object is read twice, both times as a stream: once to hash it (its SHA-256 goes into every
``record_ref`` of its rows, so it must be known before the first row is), then to parse it,
hashing again on the way; an object whose second hash differs changed while it was read
(:class:`SourceObjectChanged`, nothing of the run loads). Parquet needs random access, so its
second read cannot be hashed: the object's size and modification time are compared instead.

pyarrow reports every remote failure as an ``OSError`` without an errno, naming the cloud's
error code only in its message; :func:`_object_error` reads the code from there to tell
denied credentials, a missing bucket and a flaky network apart. That message never reaches a
user (it may quote a request id, a host or a key); errors name the URI as the manifest wrote it.
"""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pyarrow as pa

from dpone import sourcepaths
from dpone.connectors.errors import (
    SourceAccessDenied,
    SourceBucketNotFound,
    SourceConfigError,
    SourceNoFiles,
    SourceObjectChanged,
    SourceUnavailable,
)
from dpone.connectors.inputs import SourceFile
from dpone.manifest.secrets import resolve_all
from dpone.manifest.specs import StorageOptions
from dpone.records import frozen

if TYPE_CHECKING:  # pyarrow.fs is loaded by the object stores only: a local run skips it
    import pyarrow.fs as pafs

_READ_SIZE = 1 << 20
# The extensions pyarrow's ``compression="detect"`` decompresses (pyarrow.io
# _detect_compression); objects follow the same rule as local files.
_COMPRESSION = {".gz": "gzip", ".bz2": "bz2", ".lz4": "lz4", ".zst": "zstd"}


# --- objects --------------------------------------------------------------------------------------


@dataclass(slots=True)
class ObjectFile:
    """One object (``uri`` as listed) of a pyarrow filesystem whose root is the store."""

    fs: pafs.FileSystem
    uri: str
    listed_size: int | None = None  # from the listing: no request for the progress total
    _stat: tuple[int, object] | None = None
    _reader: _ObjectReader | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.uri

    def size(self) -> int:
        return self.listed_size if self.listed_size is not None else self._info()[0]

    @property
    def location(self) -> str:
        """``bucket/key``: the object's path in pyarrow's filesystem."""
        return self.uri.partition("://")[2]

    def sha256(self) -> str:
        """Stream the object once through SHA-256 (a missing object is FileNotFoundError)."""
        self._stat = self._info()
        digest = hashlib.sha256()
        reader = _ObjectReader(self._open(self._raw_stream), self.uri, digest)
        with reader:
            buffer = bytearray(_READ_SIZE)
            while reader.readinto(buffer):
                pass
        return digest.hexdigest()

    def open_stream(self) -> Any:
        """The object's bytes as they stream in, hashed on the way, decompressed by extension."""
        self._reader = _ObjectReader(self._open(self._raw_stream), self.uri, hashlib.sha256())
        stream = pa.PythonFile(self._reader, mode="r")
        codec = next((c for ext, c in _COMPRESSION.items() if self.uri.endswith(ext)), None)
        return stream if codec is None else pa.CompressedInputStream(stream, codec)

    def open_random(self) -> Any:
        self._reader = None
        return _ObjectReader(self._open(self.fs.open_input_file), self.uri)

    def verify(self, sha256: str) -> None:
        """Whether the read saw the object that was hashed (see the module docstring)."""
        reader = self._reader
        if reader is not None and reader.digest is not None:
            # A decompressor may stop before the object's last bytes (trailing padding):
            # then the object is hashed once more, which is correct if slower.
            seen = reader.digest.hexdigest() if reader.at_end else self.sha256()
            same = seen == sha256
        else:
            same = self._stat is None or self._info() == self._stat
        if not same:
            raise SourceObjectChanged(
                f"{self.uri} changed while it was read (its bytes are not those hashed "
                "before the read); nothing of this run is loaded",
                path=self.uri,
                fixes=("run again once the object is no longer being written",),
            )

    def _raw_stream(self, location: str) -> Any:
        # The stored bytes: pyarrow's own default would decompress a .gz object, and then
        # neither the hash nor the codec below would see what the store holds.
        return self.fs.open_input_stream(location, compression=None)

    def _info(self) -> tuple[int, object]:
        import pyarrow.fs as pafs

        try:
            info = self.fs.get_file_info(self.location)
        except OSError as exc:
            raise _object_error(exc, self.uri) from None
        if info.type != pafs.FileType.File:
            raise FileNotFoundError(self.uri)
        return int(info.size or 0), info.mtime_ns

    def _open(self, opener: Any) -> Any:
        try:
            return opener(self.location)
        except FileNotFoundError:
            raise FileNotFoundError(self.uri) from None
        except OSError as exc:
            raise _object_error(exc, self.uri) from None


class _ObjectReader(io.RawIOBase):
    """A pyarrow file of an object as a Python raw file: its ``OSError`` becomes dpone's typed
    error (pyarrow passes a Python exception through its readers unchanged), and a
    sequential read feeds ``digest`` as the bytes pass."""

    def __init__(self, native: Any, uri: str, digest: Any = None) -> None:
        super().__init__()
        self.native = native
        self.uri = uri
        self.digest = digest
        self.at_end = False

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return bool(self.native.seekable())

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return int(self._call(self.native.seek, offset, whence))

    def tell(self) -> int:
        return int(self._call(self.native.tell))

    def readinto(self, buffer: Any) -> int:
        count = int(self._call(self.native.readinto, buffer))
        if self.digest is not None:
            self.digest.update(memoryview(buffer)[:count])
        if count == 0:
            self.at_end = True
        return count

    def close(self) -> None:
        if not self.closed:
            self.native.close()
        super().close()

    def _call(self, method: Any, *args: Any) -> Any:
        try:
            return method(*args)
        except FileNotFoundError:
            raise SourceUnavailable(
                f"{self.uri} was deleted while it was read", path=self.uri
            ) from None
        except OSError as exc:
            raise _object_error(exc, self.uri) from None


@frozen
class ObjectInputs:
    """The objects an ``s3://``/``gs://``/``az://`` glob names, listed under its literal prefix."""

    pattern: str
    fs: pafs.FileSystem

    def files(self) -> list[tuple[str, SourceFile]]:
        import pyarrow.fs as pafs

        scheme, bucket, _ = sourcepaths.split_uri(self.pattern)
        root, below = sourcepaths.glob_root(self.pattern)
        # One level below the prefix needs no recursive listing (S3 lists with a delimiter).
        selector = pafs.FileSelector(root, recursive=len(below) > 1 or "**" in below)
        try:
            listed = self.fs.get_file_info(selector)
        except FileNotFoundError:
            listed = []  # no object under the prefix (the bucket exists: see below)
        except OSError as exc:
            raise _object_error(exc, self.pattern) from None
        found: dict[str, SourceFile] = {}
        for info in listed:
            uri = f"{scheme}://{info.path}"
            if info.type != pafs.FileType.File or not sourcepaths.matches(self.pattern, uri):
                continue
            if sourcepaths.source_path_problem(uri, glob=False) is not None:
                raise SourceConfigError(
                    f"an object matching {self.pattern!r} has a key dpone cannot name (an "
                    "empty, '.' or '..' segment, a control character or a backslash)",
                    fixes=("rename the object, or narrow the glob so that it does not match",),
                )
            found[uri] = ObjectFile(self.fs, uri, info.size)
        if not found:
            self._check_bucket(bucket)
            raise SourceNoFiles(
                f"source path {self.pattern!r} matched no object",
                fixes=(
                    "check the key prefix and the glob: '*' stays within one '/' segment, "
                    "'**' spans them",
                ),
            )
        return sorted(found.items())

    def _check_bucket(self, bucket: str) -> None:
        """A listing of a missing bucket may come back empty: ask for the bucket itself."""
        import pyarrow.fs as pafs

        try:
            info = self.fs.get_file_info(bucket)
        except OSError as exc:
            raise _object_error(exc, self.pattern) from None
        if info.type == pafs.FileType.NotFound:
            raise _bucket_missing(self.pattern)

    def matches(self, partition: str) -> bool:
        return sourcepaths.matches(self.pattern, partition)

    def resolve(self, partition: str) -> SourceFile:
        return ObjectFile(self.fs, partition)


# --- errors ---------------------------------------------------------------------------------------

# Cloud error codes as pyarrow spells them in its messages: "AWS Error ACCESS_DENIED during
# ListObjectsV2 operation: ...", google::cloud::Status codes, the Azure SDK's error codes.
_AWS_CODE = re.compile(r"AWS Error ([A-Z_]+) during")
_DENIED = re.compile(
    r"^(?:ACCESS_DENIED|SIGNATURE_DOES_NOT_MATCH|INVALID_ACCESS_KEY_ID|EXPIRED_TOKEN|"
    r"INVALID_CLIENT_TOKEN_ID|UNRECOGNIZED_CLIENT|MISSING_AUTHENTICATION_TOKEN)$|"
    r"\bPERMISSION_DENIED\b|\bUNAUTHENTICATED\b|AuthorizationFailure|AuthenticationFailed|"
    r"AuthorizationPermissionMismatch"
)
_NO_BUCKET = re.compile(r"^NO_SUCH_BUCKET$|\bContainerNotFound\b|bucket does not exist", re.I)


def _object_error(exc: OSError, uri: str) -> Exception:
    message = str(exc)
    aws = _AWS_CODE.search(message)
    text = aws[1] if aws else message
    if _DENIED.search(text):
        return SourceAccessDenied(
            f"{uri}: the object store refused the credentials (access denied, an unknown key "
            "or a wrong secret)",
            path=uri,
            fixes=(
                "check the credentials: the AWS_* / GOOGLE_* / AZURE_STORAGE_* environment "
                "variables or the ${ENV} references of source.options.storage",
                "check that they may list and read the bucket",
            ),
        )
    if _NO_BUCKET.search(text):
        return _bucket_missing(uri)
    return SourceUnavailable(
        f"{uri}: the object store did not answer as expected ({type(exc).__name__})",
        path=uri,
        fixes=("retry; check the endpoint (options.storage.endpoint_url) and the network",),
    )


def _bucket_missing(uri: str) -> SourceBucketNotFound:
    _, bucket, _ = sourcepaths.split_uri(uri)
    return SourceBucketNotFound(
        f"the bucket {bucket!r} of {uri!r} does not exist",
        path=uri,
        fixes=("check the bucket name and, for an S3-compatible server, the endpoint_url",),
    )


# --- filesystems ----------------------------------------------------------------------------------

#: Per scheme: ``options.storage`` key -> the environment variables it falls back to.
_ENV_FALLBACK: dict[str, dict[str, tuple[str, ...]]] = {
    "s3": {
        "key": ("AWS_ACCESS_KEY_ID",),
        "secret": ("AWS_SECRET_ACCESS_KEY",),
        "token": ("AWS_SESSION_TOKEN",),
        "endpoint_url": ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
        "region": ("AWS_REGION", "AWS_DEFAULT_REGION"),
    },
    "gs": {"endpoint_url": ("STORAGE_EMULATOR_HOST",)},
    "az": {
        "account_name": ("AZURE_STORAGE_ACCOUNT_NAME",),
        "account_key": ("AZURE_STORAGE_ACCOUNT_KEY",),
        "sas_token": ("AZURE_STORAGE_SAS_TOKEN",),
    },
}


def standard_variables(pattern: str) -> tuple[str, ...]:
    """The environment variables the store of ``pattern`` falls back to (none for a local
    path): what a process that reads it on dpone's behalf (a Dask worker) must be handed."""
    if not sourcepaths.is_object_uri(pattern):
        return ()
    fallbacks = _ENV_FALLBACK[sourcepaths.split_uri(pattern)[0]]
    return tuple(name for names in fallbacks.values() for name in names)


def storage_settings(
    scheme: str, storage: StorageOptions | None, env: Mapping[str, str]
) -> dict[str, Any]:
    """The settings the manifest wrote, their ``${ENV}`` references resolved in ``env``, and
    the standard environment variables where it wrote none (values are secrets: never log
    the result)."""
    written = {} if storage is None else storage.written()
    allowed = sourcepaths.STORAGE_OPTIONS[scheme]
    unknown = sorted(set(written) - set(allowed))
    if storage is not None and storage.anonymous and "anonymous" not in allowed:
        unknown.append("anonymous")
    if unknown:
        raise SourceConfigError(
            f"storage option(s) {', '.join(unknown)} do not apply to {scheme}://",
            pointer="/source/options/storage",
        )
    resolved = resolve_all(written, env)
    settings: dict[str, Any] = {}
    for key in allowed:
        if key == "anonymous":
            continue
        value = resolved.get(key)
        if value is None:
            value = next((env[n] for n in _ENV_FALLBACK[scheme].get(key, ()) if env.get(n)), None)
        if value:
            settings[key] = value
    if storage is not None and storage.anonymous:
        settings["anonymous"] = True
    return settings


def _endpoint(url: str) -> tuple[str, str]:
    """``(scheme, host[:port])`` of an endpoint URL (``http://127.0.0.1:9000``)."""
    parts = urlsplit(url if "://" in url else f"https://{url}")
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/"):
        raise SourceConfigError(
            "storage endpoint_url must be http(s)://host[:port] with no path",
            pointer="/source/options/storage/endpoint_url",
        )
    return parts.scheme, parts.netloc


def object_filesystem(
    uri: str, storage: StorageOptions | None, env: Mapping[str, str]
) -> pafs.FileSystem:
    """The pyarrow filesystem of ``uri``'s store, configured from ``storage`` and ``env``.

    Without a key (S3), account key or SAS token (Azure), or with GCS, each SDK's own default
    credential chain applies (profiles, workload identity, instance metadata).
    """
    scheme = sourcepaths.split_uri(uri)[0]
    settings = storage_settings(scheme, storage, env)
    try:
        return _filesystem(scheme, settings)
    except (ValueError, TypeError, pa.ArrowException) as exc:
        # The library's text may quote a setting; the class name is enough to go on.
        raise SourceConfigError(
            f"the storage settings of {uri!r} do not make a {scheme}:// client "
            f"({type(exc).__name__})",
            pointer="/source/options/storage",
        ) from None


def _filesystem(scheme: str, settings: dict[str, Any]) -> pafs.FileSystem:
    import pyarrow.fs as pafs

    anonymous = settings.get("anonymous") is True
    endpoint = _endpoint(settings["endpoint_url"]) if "endpoint_url" in settings else None
    if scheme == "s3":
        return _s3(settings, anonymous, endpoint)
    if scheme == "gs":
        gcs: dict[str, Any] = {"anonymous": anonymous}
        if "project_id" in settings:
            gcs["project_id"] = settings["project_id"]
        if endpoint is not None:
            gcs |= {"scheme": endpoint[0], "endpoint_override": endpoint[1]}
        return pafs.GcsFileSystem(**gcs)
    return _azure(settings, endpoint)


def _s3(
    settings: dict[str, Any], anonymous: bool, endpoint: tuple[str, str] | None
) -> pafs.FileSystem:
    import pyarrow.fs as pafs

    if ("key" in settings) != ("secret" in settings):
        raise SourceConfigError(
            "an S3 key needs its secret and a secret its key",
            pointer="/source/options/storage",
            fixes=("set both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or neither",),
        )
    kwargs: dict[str, Any] = {"anonymous": anonymous}
    if not anonymous and "key" in settings:
        kwargs |= {
            "access_key": settings["key"],
            "secret_key": settings["secret"],
            "session_token": settings.get("token"),
        }
    if "region" in settings:
        kwargs["region"] = settings["region"]
    if endpoint is not None:
        kwargs |= {"scheme": endpoint[0], "endpoint_override": endpoint[1]}
    return pafs.S3FileSystem(**kwargs)


def _azure(settings: dict[str, Any], endpoint: tuple[str, str] | None) -> pafs.FileSystem:
    import pyarrow.fs as pafs

    if "account_name" not in settings:
        raise SourceConfigError(
            "an az:// source needs the storage account: options.storage.account_name or "
            "AZURE_STORAGE_ACCOUNT_NAME",
            pointer="/source/options/storage",
        )
    azure: dict[str, Any] = {"account_name": settings["account_name"]}
    for key in ("account_key", "sas_token"):
        if key in settings:
            azure[key] = settings[key]
    if endpoint is not None:
        azure |= {"blob_storage_scheme": endpoint[0], "blob_storage_authority": endpoint[1]}
        azure |= {"dfs_storage_scheme": endpoint[0], "dfs_storage_authority": endpoint[1]}
    return pafs.AzureFileSystem(**azure)


__all__ = [
    "ObjectFile",
    "ObjectInputs",
    "object_filesystem",
    "standard_variables",
    "storage_settings",
]
