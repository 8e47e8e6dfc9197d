"""The sandbox's callers: IAM identities that call the app's HTTP APIs, as a user would have them on AWS.

On AWS a client of an `AWS_IAM` route is an IAM user or role whose identity policy allows
`execute-api:Invoke` on the route's ARN, and it signs with that identity's keys. The sandbox provisions two:

- `relay-local-client` (user), allowed `execute-api:Invoke` on every route of the app's APIs,
  `arn:aws:execute-api:<region>:<account>:<api-id>/*`, the grant a user writes for their own client;
- `relay-local-denied` (user), with no policy: every signed call it makes is refused, for the negative tests.

Their keys are written where the usual tools find them (`make local` only; the e2e sandboxes keep them in
memory): `.sandbox/aws/credentials` and `.sandbox/aws/config`, as the named profiles `relay-local-client`
and `relay-local-denied`. With `AWS_SHARED_CREDENTIALS_FILE` and `AWS_CONFIG_FILE` pointing there,
`curl --aws-sigv4`, `awscurl`, boto3 and botocore's `SigV4Auth` sign the same way locally and on AWS.
"""

from __future__ import annotations

import functools
import hashlib
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emulator.iam import Caller, Principal, Statement, parse_policy

CLIENT = "relay-local-client"
DENIED = "relay-local-denied"


@dataclass(frozen=True)
class Identity:
    name: str
    access_key_id: str
    secret_access_key: str
    account: str
    policy: dict[str, Any] = field(default_factory=dict)
    # Temporary credentials (an assumed role's session) carry a token, which a request must send as
    # X-Amz-Security-Token; a long-term user key has none.
    session_token: str | None = None

    @property
    def arn(self) -> str:
        return f"arn:aws:iam::{self.account}:user/{self.name}"

    @functools.cached_property
    def principal(self) -> Principal:
        # Parsed once: the sandbox's HTTP API asks for it on every AWS_IAM request.
        statements: list[Statement] = parse_policy(self.policy, f"{self.name} policy") if self.policy else []
        return Principal(Caller(self.name, self.arn, self.account), statements)

    def credentials(self) -> Any:
        from botocore.credentials import Credentials

        return Credentials(self.access_key_id, self.secret_access_key, self.session_token)


def _access_key(name: str) -> str:
    # Long-term IAM user keys start with AKIA; stable per name so a restarted `make local` keeps its profile.
    return "AKIA" + hashlib.sha256(name.encode()).hexdigest().upper()[:16]


def invoke_policy(region: str, account: str, api_ids: list[str]) -> dict[str, Any]:
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "InvokeRelayApis",
                "Effect": "Allow",
                "Action": "execute-api:Invoke",
                "Resource": [
                    f"arn:aws:execute-api:{region}:{account}:{api_id}/*" for api_id in sorted(api_ids)
                ],
            }
        ],
    }


def provision(region: str, account: str, api_ids: list[str]) -> dict[str, Identity]:
    """A fresh secret per sandbox (a key is only as good as its secret); the key ids are stable."""
    return {
        CLIENT: Identity(
            CLIENT,
            _access_key(CLIENT),
            secrets.token_urlsafe(30),
            account,
            invoke_policy(region, account, api_ids),
        ),
        DENIED: Identity(DENIED, _access_key(DENIED), secrets.token_urlsafe(30), account),
    }


def write_profiles(
    directory: Path, identities: dict[str, Identity], region: str, endpoint: str, api_url: str
) -> None:
    """`credentials` and `config` in the AWS CLI's format (each profile's AWS service calls go to the
    emulator, `endpoint_url`), and `client.env`: the client's keys as the environment variables curl's
    `--aws-sigv4` examples read, with `API` the base URL."""
    directory.mkdir(parents=True, exist_ok=True)
    credentials = "".join(
        f"[{name}]\naws_access_key_id = {i.access_key_id}\naws_secret_access_key = {i.secret_access_key}\n\n"
        for name, i in identities.items()
    )
    config = "".join(
        f"[profile {name}]\nregion = {region}\nendpoint_url = {endpoint}\n\n" for name in identities
    )
    path = directory / "credentials"
    path.write_text(credentials)
    path.chmod(0o600)
    (directory / "config").write_text(config)
    client = identities[CLIENT]
    env = directory / "client.env"
    env.write_text(
        f"# source me: the sandbox's {CLIENT} keys (the same variables a client uses on AWS)\n"
        f"export AWS_ACCESS_KEY_ID={client.access_key_id}\n"
        f"export AWS_SECRET_ACCESS_KEY={client.secret_access_key}\n"
        f"export AWS_REGION={region}\nexport API={api_url}\n"
    )
    env.chmod(0o600)
