"""Claim check: keep large payloads in S3 and pass ``{bucket, key, sha256, size}`` in the envelope.

Messages stay small (SNS/SQS cap a message at 256 KiB) and the reader verifies it gets exactly the
bytes the producer referenced: a changed or replaced object is a permanent ClaimCheckMismatch, not
something a retry can fix. No SSE parameters are passed: the bucket's default encryption applies.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from relay import untrusted_json
from relay.clients import default_client
from relay.envelope import ClaimCheckRef
from relay.errors import ClaimCheckMismatch

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


def put_bytes(
    data: bytes,
    *,
    bucket: str,
    key: str,
    s3_client: S3Client | None = None,
    content_type: str = "application/octet-stream",
) -> ClaimCheckRef:
    """Store ``data`` and return the reference to put in the envelope."""
    client = s3_client if s3_client is not None else default_client("s3")
    digest = hashlib.sha256(data).digest()
    client.put_object(
        Bucket=bucket,
        Key=key,
        Body=data,
        ContentType=content_type,
        # S3 verifies this on upload, so a corrupted upload fails here instead of at the reader.
        ChecksumSHA256=base64.b64encode(digest).decode("ascii"),
        Metadata={"sha256": digest.hex()},
    )
    return ClaimCheckRef(bucket=bucket, key=key, sha256=digest.hex(), size=len(data))


def put_json(obj: Any, *, bucket: str, key: str, s3_client: S3Client | None = None) -> ClaimCheckRef:
    data = json.dumps(obj, separators=(",", ":"), ensure_ascii=False, sort_keys=True).encode("utf-8")
    return put_bytes(data, bucket=bucket, key=key, s3_client=s3_client, content_type="application/json")


def get_bytes(ref: ClaimCheckRef, s3_client: S3Client | None = None) -> bytes:
    """Read the referenced object; raises ClaimCheckMismatch if it is missing or differs."""
    client = s3_client if s3_client is not None else default_client("s3")
    location = f"s3://{ref.bucket}/{ref.key}"
    try:
        response = client.get_object(Bucket=ref.bucket, Key=ref.key)
    except Exception as exc:
        code = getattr(exc, "response", {}).get("Error", {}).get("Code")
        if code in ("NoSuchKey", "404", "NotFound"):
            raise ClaimCheckMismatch(
                f"claim check {location} does not exist (expired by lifecycle or never written); "
                "cannot process. Re-publish from the source of truth."
            ) from exc
        raise  # throttling, 5xx, network: classified as transient by the consumer
    data: bytes = response["Body"].read()
    actual = hashlib.sha256(data).hexdigest()
    if len(data) != ref.size or actual != ref.sha256:
        raise ClaimCheckMismatch(
            f"claim check {location} does not match its reference: sha256 {actual[:12]}… ({len(data)} bytes) "
            f"found, {ref.sha256[:12]}… ({ref.size} bytes) expected. The object was changed after the event "
            "was published; not processed. Re-publish from the source of truth."
        )
    return data


def get_json(ref: ClaimCheckRef, s3_client: S3Client | None = None) -> Any:
    """The claim-checked document; InvalidInput (permanent) when its bytes are not JSON this code can use."""
    data = get_bytes(ref, s3_client=s3_client)
    return untrusted_json.loads(data, what=f"claim check s3://{ref.bucket}/{ref.key}")


# Claim check only when large: below this many bytes of canonical JSON a document travels inline (in
# the entity item or the event); above it, in S3 with its reference. Stage configuration can lower it.
DEFAULT_THRESHOLD_BYTES = 64 * 1024


@dataclass(frozen=True)
class Kept:
    """A JSON document as it is kept: inline (``text``, its canonical JSON) or in S3 (``ref``), with
    its sha256 and size either way, so a reader verifies it gets exactly what was accepted."""

    sha256: str
    size: int
    text: str | None = None
    ref: ClaimCheckRef | None = None

    @property
    def uri(self) -> str | None:
        return f"s3://{self.ref.bucket}/{self.ref.key}" if self.ref is not None else None


def canonical_bytes(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, sort_keys=True).encode("utf-8")


def keep_json(
    obj: Any, *, threshold_bytes: int, bucket: str, key: str, s3_client: S3Client | None = None
) -> Kept:
    """Keep ``obj`` inline when its canonical JSON is at most ``threshold_bytes``, else claim-check it
    into ``s3://bucket/key`` (one PutObject). The sha256 is of the same canonical bytes either way."""
    data = canonical_bytes(obj)
    if len(data) <= threshold_bytes:
        return Kept(hashlib.sha256(data).hexdigest(), len(data), text=data.decode("utf-8"))
    ref = put_bytes(data, bucket=bucket, key=key, s3_client=s3_client, content_type="application/json")
    return Kept(ref.sha256, ref.size, ref=ref)


def kept_from_ref(ref: ClaimCheckRef) -> Kept:
    return Kept(ref.sha256, ref.size, ref=ref)


def load_json(kept: Kept, s3_client: S3Client | None = None, *, what: str = "document") -> Any:
    """The kept document, verified against its sha256 (inline too: an item edited by hand is caught);
    ClaimCheckMismatch (permanent) when it differs, InvalidInput when it is not JSON this code can use."""
    if kept.ref is not None:
        return get_json(kept.ref, s3_client=s3_client)
    data = (kept.text or "").encode("utf-8")
    actual = hashlib.sha256(data).hexdigest()
    if actual != kept.sha256:
        raise ClaimCheckMismatch(
            f"the inline {what} does not match its recorded sha256 ({actual[:12]}… found, "
            f"{kept.sha256[:12]}… expected); not processed."
        )
    return untrusted_json.loads(data, what=f"inline {what}")
