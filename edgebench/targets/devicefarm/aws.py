"""The AWS side of the device-farm target: the boto3 client (the optional ``devicefarm`` extra,
imported only here and only when a devicefarm target is used), one call wrapper that turns
botocore's errors into edgebench's one-line errors, and the two HTTP transfers Device Farm hands
out as pre-signed URLs (the upload PUT and the artifact GET).

Credentials come only from boto3's default chain (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/
``AWS_SESSION_TOKEN``, ``AWS_PROFILE`` and ``~/.aws``, a container or instance role); edgebench never
reads, prints or stores them. An error names the operation and AWS's error code, never a key, a
token or a signed URL (a pre-signed URL carries a signature in its query string)."""

from __future__ import annotations

import ipaddress
import urllib.error
import urllib.parse
import urllib.request
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from edgebench.core.errors import BadInput, InfraError, first_line

# AWS Device Farm has one endpoint region (the service exists only in us-west-2).
REGION = "us-west-2"
INSTALL = "pip install 'edgebench[devicefarm]'"
CREDENTIALS_FIX = ("set AWS credentials the usual way (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, plus "
                   "AWS_SESSION_TOKEN for temporary ones, in the environment; or AWS_PROFILE with ~/.aws/credentials "
                   "from 'aws configure'; or an instance/container role) with the devicefarm:* permissions")
# Error codes that mean "these credentials are missing, wrong, expired or not allowed".
AUTH_CODES = frozenset({
    "UnrecognizedClientException", "InvalidClientTokenId", "InvalidSignatureException", "SignatureDoesNotMatch",
    "ExpiredTokenException", "ExpiredToken", "AccessDeniedException", "AccessDenied", "NotAuthorized",
    "UnauthorizedOperation", "IncompleteSignature", "MissingAuthenticationToken",
})
# Device Farm's own "you gave a wrong thing" codes: the user's input, exit 2.
INPUT_CODES = frozenset({"ArgumentException", "NotFoundException", "InvalidOperationException"})
TRANSFER_TIMEOUT_S = 300.0     # one upload PUT or artifact GET
ARTIFACT_MAX_BYTES = 64 * 1024 ** 2   # a log-folder zip: benchmark_model logs are KB to a few MB


def _botocore_exceptions() -> Any:
    try:
        from botocore import exceptions  # lazy: part of the optional devicefarm extra (boto3)
    except ImportError:
        raise BadInput(f"--targets devicefarm:... needs boto3, the optional devicefarm extra: {INSTALL}") from None
    return exceptions


def default_client() -> Any:
    """A boto3 Device Farm client in us-west-2 with boto3's default credential chain."""
    try:
        import boto3  # lazy: the optional devicefarm extra, loaded only for a devicefarm target
    except ImportError:
        raise BadInput(f"--targets devicefarm:... needs boto3, the optional devicefarm extra: {INSTALL}") from None
    with aws_errors("creating the client"):   # a half-set credential (a key id without its secret) fails here
        return boto3.client("devicefarm", region_name=REGION)


# The one way edgebench gets its client. Tests replace it with a function returning a client whose
# calls a botocore Stubber answers (the real client, real parameter validation, nothing sent).
client_factory: Callable[[], Any] = default_client


@contextmanager
def aws_errors(op: str) -> Iterator[None]:
    """botocore's errors as one line each: missing or refused credentials -> InfraError (exit 3)
    naming how to set them; Device Farm refusing an input -> BadInput; anything else from AWS ->
    InfraError with the operation and AWS's code. Never the key, the token or a signed URL."""
    bx = _botocore_exceptions()
    try:
        yield
    except (bx.NoCredentialsError, bx.PartialCredentialsError, bx.CredentialRetrievalError) as exc:
        raise InfraError(f"AWS Device Farm {op}: no usable AWS credentials ({type(exc).__name__}); "
                         f"{CREDENTIALS_FIX}") from None
    except bx.ClientError as exc:
        err = exc.response.get("Error", {}) if isinstance(exc.response, dict) else {}
        code = str(err.get("Code") or "ClientError")
        if code in AUTH_CODES:
            raise InfraError(f"AWS Device Farm {op}: the credentials were refused ({code}); {CREDENTIALS_FIX}") from None
        message = first_line(Exception(err.get("Message") or code), 200)
        if code in INPUT_CODES:
            raise BadInput(f"AWS Device Farm {op}: {code}: {message}") from None
        raise InfraError(f"AWS Device Farm {op}: {code}: {message}") from None
    except bx.EndpointConnectionError:
        raise InfraError(f"AWS Device Farm {op}: cannot reach the Device Farm endpoint in {REGION}; check the "
                         "network (and any HTTPS proxy) and rerun") from None
    except bx.BotoCoreError as exc:
        raise InfraError(f"AWS Device Farm {op}: {type(exc).__name__}: {first_line(exc, 200)}") from None


def call(client: Any, op: str, **params: Any) -> dict[str, Any]:
    """``client.<op>(**params)`` with botocore's errors as edgebench's (``aws_errors``)."""
    with aws_errors(op):
        return getattr(client, op)(**params)


def pages(client: Any, op: str, key: str, **params: Any) -> list[dict[str, Any]]:
    """Every item of a paginated list call (``nextToken``), in order."""
    out: list[dict[str, Any]] = []
    token = None
    for _ in range(1000):        # a bound: 1000 pages is far beyond any project's lists
        resp = call(client, op, **params, **({"nextToken": token} if token else {}))
        out.extend(resp.get(key) or [])
        token = resp.get("nextToken")
        if not token:
            break
    return out


# ----------------------------------------------------------------------------- pre-signed URLs
def _check_url(url: str, what: str) -> str:
    """Pre-signed URLs from Device Farm are HTTPS; plain HTTP only to this machine (loopback)."""
    parts = urllib.parse.urlsplit(url or "")
    host = parts.hostname or ""
    if parts.scheme == "https" and host:
        return url
    if parts.scheme == "http":
        try:
            if host == "localhost" or ipaddress.ip_address(host).is_loopback:
                return url
        except ValueError:
            pass
    raise InfraError(f"AWS Device Farm gave {what} a URL that is not HTTPS ({parts.scheme or 'no scheme'}://"
                     f"{host or '?'}); refusing to send or fetch it")


def put_bytes(url: str, data: bytes, content_type: str, what: str) -> None:
    """PUT ``data`` to a pre-signed upload URL (the Content-Type must be the one given to
    create_upload: it is part of the signature)."""
    req = urllib.request.Request(_check_url(url, what), data=data, method="PUT",
                                 headers={"Content-Type": content_type, "Content-Length": str(len(data))})
    try:
        with urllib.request.urlopen(req, timeout=TRANSFER_TIMEOUT_S) as resp:
            resp.read()
    except urllib.error.HTTPError as exc:
        raise InfraError(f"uploading {what} to Device Farm failed: HTTP {exc.code} {exc.reason}; rerun "
                         "(an expired upload URL needs a new create_upload)") from None
    except (urllib.error.URLError, OSError) as exc:
        raise InfraError(f"uploading {what} to Device Farm failed: {first_line(exc, 160)}; check the network "
                         "and rerun") from None


def get_bytes(url: str, what: str, limit: int = ARTIFACT_MAX_BYTES) -> bytes:
    """GET a pre-signed artifact URL, at most ``limit`` bytes."""
    try:
        with urllib.request.urlopen(_check_url(url, what), timeout=TRANSFER_TIMEOUT_S) as resp:
            data = resp.read(limit + 1)
    except urllib.error.HTTPError as exc:
        raise InfraError(f"downloading {what} from Device Farm failed: HTTP {exc.code} {exc.reason}; its URL "
                         "may have expired: rerun list_artifacts or fetch it from the console") from None
    except (urllib.error.URLError, OSError) as exc:
        raise InfraError(f"downloading {what} from Device Farm failed: {first_line(exc, 160)}") from None
    if len(data) > limit:
        raise InfraError(f"{what} from Device Farm is larger than {limit // 1024 ** 2} MB; edgebench reads "
                         "benchmark_model logs of a few MB at most")
    return data
