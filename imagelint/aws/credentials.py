"""Credentials that last the run: a refreshing role session (``--role-arn``), or a refusal before launch.

A run must be able to terminate what it launched, and the presigned URLs it hands the instance are
only valid while the credentials that signed them are (whatever ``X-Amz-Expires`` says). So:

- ``--role-arn ARN``: :func:`role_session` assumes the role with ``DurationSeconds`` covering the
  whole run (at most 12 h, and only up to the role's ``MaxSessionDuration``) and wraps it in
  botocore's ``DeferredRefreshableCredentials``: API calls keep working past that, refreshed from
  the source credentials, so the cleanup after a long soak still runs. AWS caps a chained role
  session (a role assumed from role credentials, e.g. from a CI job's OIDC role) at 1 h, and the
  presigned URLs signed with it die with it: a run that needs longer is refused up front
  (``GetCallerIdentity``, which needs no permission, names an ``assumed-role`` caller), exit 2.
- otherwise :func:`check_lifetime` refuses, before anything launches, a run longer than what is
  left of the session. The time left is the earlier of ``--credentials-expire-at`` (or
  ``AWS_CREDENTIAL_EXPIRATION``, the variable botocore and the AWS CLI's ``export-credentials``
  use) and the credentials' expiry when botocore knows it (that variable, SSO, a profile's role,
  IMDS, web identity); credentials with a session token but no known expiry are assumed to have
  **one hour** left (the default session length of STS and of CI OIDC roles); long-term keys (no
  token) have no limit.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Any

from imagelint.aws.errors import AwsError, call, no_credentials
from imagelint.errors import UsageError

ASSUMED_TOKEN_LIFETIME = 3600.0  # seconds left assumed for a session token of unknown expiry
MAX_ROLE_SESSION = 43200  # AssumeRole's DurationSeconds upper bound
MIN_ROLE_SESSION = 900
ROLE_FLOOR = 3600.0  # the default MaxSessionDuration of a role, and AWS's cap on a chained one


def parse_expiry(text: str | None) -> datetime | None:
    """``--credentials-expire-at``: an ISO 8601 time with its zone (``2026-12-03T21:40:00Z``)."""
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        value = None
    if value is None or value.tzinfo is None:
        raise UsageError(
            f"--credentials-expire-at {text!r}: give an ISO 8601 time with its zone (2026-12-03T21:40:00Z)"
        )
    return value


def session_identity(label: str | None) -> str:
    r"""The RoleSessionName and SourceIdentity of a session for ``label`` (a run id): ``imagelint-``
    and the label, in the characters and length STS accepts (2-64 of ``\w+=,.@-``); without a label,
    the time."""
    text = label or f"{datetime.now(UTC):%Y%m%dT%H%M%S}"
    return ("imagelint-" + re.sub(r"[^\w+=,.@-]", "-", text))[:64]


def role_session(
    role_arn: str, seconds: float, region: str, base: Any = None, *, label: str | None = None
) -> Any:
    """A boto3 session whose credentials come from ``AssumeRole(role_arn)`` and refresh themselves.

    Its session name is :func:`session_identity` of ``label`` (the run id), and so is its
    ``SourceIdentity``, which CloudTrail keeps on every call of the session and of the roles it goes
    on to assume; a role whose trust policy does not allow ``sts:SetSourceIdentity`` answers
    AccessDenied to it: then the session goes on without it (the run id stays in the session name)."""
    import boto3
    from botocore.credentials import DeferredRefreshableCredentials
    from botocore.session import get_session

    if not role_arn.startswith("arn:") or ":role/" not in role_arn:
        raise UsageError(f"--role-arn {role_arn!r}: give a role ARN (arn:aws:iam::ACCOUNT:role/NAME)")
    duration = min(MAX_ROLE_SESSION, max(MIN_ROLE_SESSION, math.ceil(seconds)))
    if seconds > MAX_ROLE_SESSION:
        raise UsageError(
            f"this run needs {seconds:.0f}s of credentials; AssumeRole gives at most {MAX_ROLE_SESSION}s"
        )
    source = base if base is not None else boto3.session.Session(region_name=region)
    sts = source.client("sts", region_name=region)
    if duration > ROLE_FLOOR:
        caller = str(call(sts.get_caller_identity).get("Arn", ""))
        if ":assumed-role/" in caller:
            raise UsageError(
                f"--role-arn: the caller is itself a role session ({caller}), and AWS caps a role assumed "
                f"from role credentials (role chaining) at {ROLE_FLOOR:.0f}s; this run needs {seconds:.0f}s "
                "(soak and timeouts): shorten --soak, or run on the first role without --role-arn"
            )

    name = session_identity(label)
    source_identity = {"SourceIdentity": name} if label else {}

    def refresh() -> dict[str, str]:
        request = {"RoleArn": role_arn, "RoleSessionName": name, "DurationSeconds": duration}
        try:
            reply = call(sts.assume_role, **request, **source_identity)
        except AwsError as exc:
            if not source_identity or exc.code != "AccessDenied":
                raise
            source_identity.clear()  # the trust policy allows no SetSourceIdentity: without it
            reply = call(sts.assume_role, **request)
        creds = reply["Credentials"]
        return {
            "access_key": creds["AccessKeyId"],
            "secret_key": creds["SecretAccessKey"],
            "token": creds["SessionToken"],
            "expiry_time": creds["Expiration"].isoformat(),
        }

    core = get_session()
    core._credentials = DeferredRefreshableCredentials(refresh_using=refresh, method="assume-role")
    session = boto3.session.Session(botocore_session=core, region_name=region)
    refresh_now(session)  # fail now (AccessDenied, chained 1 h cap) rather than after the launch
    return session


def run_session(role_arn: str | None, seconds: float, region: str, *, label: str | None = None) -> Any:
    """The session of a run that needs credentials for ``seconds``: ``--role-arn``'s refreshing
    one (with slack for the cleanup, and at least an hour: a shorter session sits inside botocore's
    15-minute refresh window and would call AssumeRole before every request), else the
    environment's."""
    if role_arn:
        return role_session(role_arn, max(seconds + 300, ROLE_FLOOR), region, label=label)
    import boto3

    return boto3.session.Session()


def refresh_now(session: Any) -> None:
    creds = session.get_credentials()
    if creds is not None:
        creds.get_frozen_credentials()


def seconds_left(
    session: Any, now: datetime | None = None, expires_at: datetime | None = None
) -> float | None:
    """What is left of the session's credentials (None: no limit), ``expires_at`` being what the
    user says of them; see the module docstring."""
    creds = session.get_credentials()
    if creds is None:
        raise no_credentials("sts", "credentials")
    frozen = creds.get_frozen_credentials()
    expiry = getattr(creds, "_expiry_time", None)  # RefreshableCredentials' expiry (botocore has no getter)
    known = [e for e in (expiry, expires_at) if isinstance(e, datetime)]
    if known:
        return (min(known) - (now or datetime.now(UTC))).total_seconds()
    if frozen.token:
        return ASSUMED_TOKEN_LIFETIME
    return None


def check_lifetime(session: Any, needed: float, *, role: bool, expires_at: datetime | None = None) -> None:
    """Refuse a run that would outlive its credentials (and with them its presigned URLs).
    ``expires_at`` (``--credentials-expire-at``) is the expiry of the environment's credentials; with
    ``role`` the session is the assumed role's, whose expiry AssumeRole gave."""
    given = None if role else expires_at
    left = seconds_left(session, expires_at=given)
    if left is None or left >= needed:
        return
    if left <= 0:
        raise UsageError("the AWS credentials have expired: refresh them (or give --role-arn)")
    if given is not None:
        known = " (--credentials-expire-at)"
    elif getattr(session.get_credentials(), "_expiry_time", None):
        known = ""
    else:
        known = " (assumed: session token of unknown expiry; say it in AWS_CREDENTIAL_EXPIRATION)"
    fix = (
        "the role's MaxSessionDuration allows less: raise it, or shorten the soak"
        if role
        else "give --role-arn (imagelint assumes it for the whole run and refreshes it), or shorten the soak"
    )
    raise UsageError(
        f"this run needs credentials for {needed:.0f}s but they expire in {left:.0f}s{known}; "
        f"the instance could not upload and the cleanup could fail: {fix}"
    )
