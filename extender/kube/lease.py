"""Leader election over a coordination.k8s.io/v1 Lease, so that one replica alone runs each
controller: the releaser of held pods, the mismatch watcher, the policy's publisher
(extender.controllers.leading).

The protocol is client-go's tools/leaderelection, written for asyncio over `LeaseRecords`:
the API's (`ApiLeases`, the synchronous API client, each call in a thread) or a test's memory
(tests.support.fakes.MemoryLeases).
- The record is the Lease's spec: holderIdentity, leaseDurationSeconds, acquireTime,
  renewTime and leaseTransitions (+1 each time the holder changes).
- Every write is guarded by the resourceVersion last read or written, so of two
  contenders that read the same record, the apiserver lets one write and refuses the
  other (409); a create races the same way (409 AlreadyExists).
- A contender judges expiry on its own clock, as client-go does: a record it has seen
  unchanged for leaseDurationSeconds is expired. renewTime is written (people and tools
  read it) but never compared with a local clock, so clock skew between replicas cannot
  hand the Lease to two of them.
- The holder stops working once it has failed to renew for `duration - renew` seconds
  (client-go's renewDeadline), which is before any contender may take over.
- On shutdown the holder clears holderIdentity, so a successor takes over at once.
"""

from __future__ import annotations

import asyncio
import datetime
import math
import random
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any, Protocol

import structlog

from extender.errors import ConflictError
from extender.kube.client.api import JSON_PATCH, KubeApi
from extender.kube.client.calls import blocking
from extender.kube.client.errors import ApiError, short_error

log = structlog.get_logger("archfit.lease")

_RETRY_SECONDS = 2.0
"""How often a contender tries to acquire, and a holder retries a failed renewal at most
(client-go's RetryPeriod)."""
_JITTER = 0.2
"""Up to this fraction is added to each acquire wait, so contenders fall out of step."""

Spec = dict[str, Any]


def _utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _micro_time(moment: datetime.datetime) -> str:
    """A metav1.MicroTime: the apiserver parses exactly six fraction digits, which
    datetime.isoformat() leaves out when the microseconds are zero."""
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LostRace(ConflictError):
    """Another writer changed the Lease between our read and our write (409)."""


class LeaseRecords(Protocol):
    """Where one Lease is kept. Each call gives up after `timeout_seconds`; a create or write
    that another writer beat raises LostRace."""

    name: str
    """The Lease's name (log lines carry it)."""

    async def read(self, timeout_seconds: float) -> dict[str, Any] | None:
        """The Lease object, or None when there is none."""
        ...

    async def create(self, spec: Spec, timeout_seconds: float) -> dict[str, Any]:
        """Create the Lease with `spec`; returns the object created."""
        ...

    async def write(self, version: str, spec: Spec, timeout_seconds: float) -> dict[str, Any]:
        """Replace the Lease's spec if its resourceVersion is still `version`; returns the
        object written."""
        ...


class Lease:
    """One contender for a Lease: `lead(work)` runs `work` only while this one holds it."""

    def __init__(
        self,
        records: LeaseRecords,
        identity: str,
        *,
        duration_seconds: float = 15.0,
        renew_seconds: float = 5.0,
        on_change: Callable[[bool], None] | None = None,
        clock: Callable[[], datetime.datetime] = _utc_now,
    ) -> None:
        if not identity:
            raise ValueError("a Lease contender needs an identity")
        if not 0 < renew_seconds < duration_seconds:
            raise ValueError("renew_seconds must be above 0 and below duration_seconds")
        self._records = records
        self._name, self._identity = records.name, identity
        self._duration = duration_seconds
        self._renew = renew_seconds
        self._give_up_after = datetime.timedelta(seconds=duration_seconds - renew_seconds)
        """The holder gives up this long after its last successful renewal."""
        self._retry = min(renew_seconds, _RETRY_SECONDS)
        self._on_change = on_change
        self._clock = clock
        self._held = False
        self._lease: dict[str, Any] | None = None
        """The Lease as last read or written: its resourceVersion guards the next write."""
        self._observed: Spec | None = None
        self._observed_at = clock()
        """When the record last changed, on our clock: expiry is measured from here."""
        self._renewed_at = self._observed_at
        """When our last successful write was sent (a write lands after it was sent)."""

    @property
    def held(self) -> bool:
        """Whether this contender holds the Lease (and its work is running)."""
        return self._held

    async def lead(self, work: Callable[[], Awaitable[None]]) -> None:
        """Forever: acquire the Lease, run `work()` as a task while holding it, renew it
        every renew_seconds, and cancel the work when renewing fails for longer than the
        renew deadline or another holder shows up; then contend again.

        Work that ends on its own (returns or raises) gives the Lease up, and runs again
        when this contender next acquires it. Cancelling `lead` (shutdown) cancels the
        work and clears holderIdentity, so a successor need not wait out the duration.
        """
        try:
            while True:
                await self._acquire()
                ended = await self._hold(work)
                if ended:
                    await self._give_up()
                    await asyncio.sleep(self._retry)
        finally:
            await self._give_up()

    async def _acquire(self) -> None:
        while True:
            try:
                if await self._attempt():
                    return
            except Exception as error:  # any API or transport failure: try again later
                log.debug("lease_attempt_failed", lease=self._name, error=short_error(error))
            await asyncio.sleep(self._retry * (1 + random.random() * _JITTER))  # noqa: S311 - not crypto

    async def _hold(self, work: Callable[[], Awaitable[None]]) -> bool:
        """Run the work while renewing; True when the work ended on its own."""
        self._set_held(True)
        task = asyncio.create_task(_awaited(work), name=f"lease-{self._name}-work")
        reason = "shutdown"
        try:
            reason = await self._renew_until_lost(task)
        finally:
            task.cancel()
            await asyncio.wait([task])
            self._set_held(False, reason)
        error = None if task.cancelled() else task.exception()
        if error is not None:
            log.error(
                "lease_work_failed", lease=self._name, error=short_error(error), exc_info=error
            )
        return reason == "work_ended"

    async def _renew_until_lost(self, task: asyncio.Task[None]) -> str:
        """Renew until the Lease is lost or the work ends; returns why it stopped."""
        while True:
            done, _ = await asyncio.wait([task], timeout=self._renew)
            if done:
                return "work_ended"
            while True:
                left = (self._renewed_at + self._give_up_after - self._clock()).total_seconds()
                if left <= 0:
                    return "renewal_deadline"
                # asyncio.timeout, not wait_for: Python 3.11's wait_for swallows a
                # cancellation (shutdown) that arrives as the attempt ends.
                try:
                    async with asyncio.timeout(left):
                        held = await self._attempt()
                except TimeoutError:
                    return "renewal_deadline"
                except Exception as error:  # a failed renewal is retried until the deadline
                    log.info("lease_renewal_failed", lease=self._name, error=short_error(error))
                else:
                    if not held:
                        return "another_holder"
                    break
                await asyncio.sleep(min(self._retry, left))

    async def _attempt(self) -> bool:
        """client-go's tryAcquireOrRenew: True when we hold the Lease after it, False when
        another holder's record has not expired. Raises on API errors and lost races."""
        now = self._clock()
        if self._held and self._lease is not None:
            # Fast path: renew against the version we wrote last; a 409 means somebody
            # else wrote since, so read what they wrote.
            try:
                self._wrote(await self._write(self._lease, self._record(now)), now)
                return True
            except LostRace:
                pass
        found = await self._records.read(self._timeout())
        if found is None:
            # Created with its times, as client-go creates one: nobody held it before, so
            # no transition is counted.
            created = {**self._record(now), "leaseTransitions": 0}
            self._wrote(await self._records.create(created, self._timeout()), now)
            return True
        self._lease = found
        record: Spec = found.get("spec") or {}
        if record != self._observed:
            self._observed, self._observed_at = record, now
        holder = record.get("holderIdentity") or ""
        if holder and holder != self._identity and not self._expired(record, now):
            return False
        self._wrote(await self._write(found, self._record(now, record)), now)
        return True

    def _expired(self, record: Spec, now: datetime.datetime) -> bool:
        seconds = record.get("leaseDurationSeconds") or self._duration
        return self._observed_at + datetime.timedelta(seconds=seconds) <= now

    def _record(self, now: datetime.datetime, old: Spec | None = None) -> Spec:
        """Our record: a renewal keeps acquireTime and the count of transitions; taking
        the Lease from another holder (or from nobody) counts one more transition."""
        stamp = _micro_time(now)
        previous = old if old is not None else self._observed or {}
        ours = (previous.get("holderIdentity") or "") == self._identity
        transitions = int(previous.get("leaseTransitions") or 0)
        return {
            "holderIdentity": self._identity,
            "leaseDurationSeconds": max(1, math.ceil(self._duration)),
            "acquireTime": previous.get("acquireTime") or stamp if ours else stamp,
            "renewTime": stamp,
            "leaseTransitions": transitions if ours else transitions + 1,
        }

    def _wrote(self, lease: dict[str, Any], sent: datetime.datetime) -> None:
        self._lease = lease
        self._observed = lease.get("spec") or {}
        self._observed_at = self._renewed_at = sent

    async def _give_up(self) -> None:
        """Clear holderIdentity if the Lease is ours (client-go's ReleaseOnCancel)."""
        lease = self._lease
        spec = (lease or {}).get("spec") or {}
        if lease is None or spec.get("holderIdentity") != self._identity:
            return
        now = self._clock()
        released = {
            "leaseDurationSeconds": 1,
            "acquireTime": _micro_time(now),
            "renewTime": _micro_time(now),
            "leaseTransitions": int(spec.get("leaseTransitions") or 0),
        }
        try:
            async with asyncio.timeout(self._timeout()):
                wrote = await self._write(lease, released)
        except Exception as error:  # the successor then waits out the duration
            log.warning("lease_release_failed", lease=self._name, error=short_error(error))
            return
        self._lease, self._observed = wrote, released

    def _set_held(self, held: bool, reason: str = "") -> None:
        if held == self._held:
            return
        self._held = held
        if held:
            transitions = ((self._lease or {}).get("spec") or {}).get("leaseTransitions")
            log.info(
                "lease_acquired", lease=self._name, identity=self._identity, transitions=transitions
            )
        else:
            log.info("lease_lost", lease=self._name, identity=self._identity, reason=reason)
        if self._on_change is not None:
            self._on_change(held)

    def _timeout(self) -> float:
        return self._give_up_after.total_seconds()

    async def _write(self, lease: dict[str, Any], spec: Spec) -> dict[str, Any]:
        version = str((lease.get("metadata") or {}).get("resourceVersion") or "")
        return await self._records.write(version, spec, self._timeout())


async def _awaited(work: Callable[[], Awaitable[None]]) -> None:
    """`work()` as a coroutine, which create_task needs (an Awaitable may not be one)."""
    await work()


class ApiLeases:
    """The Lease `name` in `namespace`, through the API (each call runs in a thread)."""

    def __init__(self, api: KubeApi, namespace: str, name: str) -> None:
        self._api = api
        self._namespace = namespace
        self._path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        self.name = name

    async def read(self, timeout_seconds: float) -> dict[str, Any] | None:
        return await blocking(self._read, timeout_seconds)

    async def create(self, spec: Spec, timeout_seconds: float) -> dict[str, Any]:
        return await blocking(self._create, spec, timeout_seconds)

    async def write(self, version: str, spec: Spec, timeout_seconds: float) -> dict[str, Any]:
        return await blocking(self._patch, version, spec, timeout_seconds)

    def _read(self, timeout_seconds: float) -> dict[str, Any] | None:
        try:
            lease: dict[str, Any] = self._api.get(
                f"{self._path}/{self.name}", timeout=timeout_seconds
            )
        except ApiError as error:
            if error.status == HTTPStatus.NOT_FOUND:
                return None
            raise
        return lease

    def _create(self, spec: Spec, timeout_seconds: float) -> dict[str, Any]:
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self._namespace},
            "spec": dict(spec),
        }
        try:
            lease: dict[str, Any] = self._api.post(self._path, body, timeout=timeout_seconds)
        except ApiError as error:
            if error.status == HTTPStatus.CONFLICT:  # another contender created it first
                raise LostRace from error
            raise
        return lease

    def _patch(self, version: str, spec: Spec, timeout_seconds: float) -> dict[str, Any]:
        # The resourceVersion in the patched object is a precondition: the apiserver
        # refuses the write with 409 if the Lease changed since `version`.
        patch: list[dict[str, Any]] = [
            {"op": "replace", "path": "/metadata/resourceVersion", "value": version},
            {"op": "add", "path": "/spec", "value": spec},
        ]
        try:
            lease: dict[str, Any] = self._api.patch(
                f"{self._path}/{self.name}",
                patch,
                content_type=JSON_PATCH,
                timeout=timeout_seconds,
            )
        except ApiError as error:
            if error.status == HTTPStatus.CONFLICT:
                raise LostRace from error
            raise
        return lease
