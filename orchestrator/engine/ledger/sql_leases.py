"""The SQL ledger's leases: the campaign's driver lease (one orchestrator drives a campaign; the epoch that
fences a driver out once another took over), its instance id, and the per-run leases a driver holds.

Fencing: the driver lease has an epoch, incremented on every takeover. A ledger object that took the lease
remembers its epoch (`SQLStore._fences`), and every write it makes about that campaign checks it inside the
write transaction (`SQLStore._tx`).
"""

from __future__ import annotations


import sqlalchemy as sa

from orchestrator.engine.ledger.base import NotInLedger
from orchestrator.engine.ledger.sql_schema import campaigns_t, events_t, new_instance_id, runs_t
from orchestrator.engine.ledger.sql_store import SQLStore


class Leases(SQLStore):
    """Driver and run leases (columns of the `campaigns` and `runs` tables)."""

    def campaign_instance(self, name: str) -> str:
        """The campaign's instance id in this ledger, created once (a ledger from an older version
        gets one on first use); submission ids carry it so two work dirs never share a job."""
        with self.engine.connect() as c:
            r = c.execute(sa.select(campaigns_t.c.instance_id).where(campaigns_t.c.name == name)).first()
        if r is None:
            raise NotInLedger(f"campaign {name!r} is not in the ledger at {self.url}")
        if r[0]:
            return str(r[0])
        with self._tx(name) as c:
            c.execute(campaigns_t.update().where((campaigns_t.c.name == name) & (campaigns_t.c.instance_id == ""))
                      .values(instance_id=new_instance_id()))
            return str(c.execute(sa.select(campaigns_t.c.instance_id).where(campaigns_t.c.name == name)).scalar_one())

    def claim_driver(self, name: str, owner: str, ttl_s: float, *, steal_from: str = "") -> tuple[bool, str, float]:
        """Take the campaign's driver lease (free, expired, ours, or `steal_from`'s): (ok, holder, expires).
        Anything but renewing the live lease this object holds is a takeover: the epoch goes up by one, and
        this object's later writes about the campaign carry (and are checked against) the new epoch."""
        now = self._now()
        with self._tx() as c:
            r = c.execute(sa.select(campaigns_t.c.driver, campaigns_t.c.driver_expires, campaigns_t.c.driver_epoch)
                          .where(campaigns_t.c.name == name).with_for_update()).first()
            if r is None:
                raise NotInLedger(f"campaign {name!r} is not in the ledger at {self.url}")
            holder, expires, epoch = str(r[0]), float(r[1]), int(r[2])
            if holder and holder != owner and expires >= now and holder != steal_from:
                return False, holder, expires
            renew = holder == owner and expires >= now and self._fences.get(name) == (owner, epoch)
            if not renew:
                epoch += 1
                why = ("free" if not holder else f"taken from {holder}, whose lease "
                       + ("had expired" if expires < now else "belonged to a dead process"))
                if holder == owner:
                    why = "taken again by its holder after it expired" if expires < now else "taken again"
                c.execute(events_t.insert().values(ts=now, campaign=name, run_key="", kind="driver_lease", src="",
                                                   dst="", detail=f"epoch {epoch}: {owner} ({why})"))
            c.execute(campaigns_t.update().where(campaigns_t.c.name == name)
                      .values(driver=owner, driver_expires=now + ttl_s, driver_epoch=epoch))
            self._fences[name] = (owner, epoch)
            return True, owner, now + ttl_s

    def driver_epoch(self, name: str) -> int:
        with self.engine.connect() as c:
            r = c.execute(sa.select(campaigns_t.c.driver_epoch).where(campaigns_t.c.name == name)).first()
        return int(r[0]) if r else 0

    def check_driver(self, name: str) -> None:
        """LeaseLost when this object's lease of `name` was taken over (no-op if it holds none). An expired
        lease nobody took is still this driver's here (a long step is no takeover); `heartbeat`, at the
        start of each step, is where an expired lease stops the driver."""
        if name not in self._fences:
            return
        with self.engine.connect() as c:
            self._fenced(c, name)

    def driver(self, name: str) -> tuple[str, float] | None:
        """(holder, expires) of the campaign's driver lease, or None when nobody holds one."""
        with self.engine.connect() as c:
            r = c.execute(sa.select(campaigns_t.c.driver, campaigns_t.c.driver_expires)
                          .where(campaigns_t.c.name == name)).first()
        return (str(r[0]), float(r[1])) if r and r[0] else None

    def release_driver(self, name: str, owner: str) -> None:
        """Give the lease up; a lease this object took under an older epoch than the current one is not
        released (it is someone else's now)."""
        fence = self._fences.pop(name, None)
        cond = (campaigns_t.c.name == name) & (campaigns_t.c.driver == owner)
        if fence is not None and fence[0] == owner:
            cond = cond & (campaigns_t.c.driver_epoch == fence[1])
        with self._tx() as c:
            c.execute(campaigns_t.update().where(cond).values(driver="", driver_expires=0.0))

    # -- run leases ------------------------------------------------------------------------------
    def claim(self, campaign: str, run_key: str, owner: str, ttl_s: float) -> bool:
        now = self._now()
        with self._tx(campaign) as c:
            res = c.execute(runs_t.update().where(
                (runs_t.c.campaign == campaign) & (runs_t.c.run_key == run_key)
                & ((runs_t.c.lease_owner == "") | (runs_t.c.lease_expires < now) | (runs_t.c.lease_owner == owner))
            ).values(lease_owner=owner, lease_expires=now + ttl_s))
            return res.rowcount == 1

    def heartbeat(self, owner: str, ttl_s: float) -> int:
        """Renew `owner`'s driver and run leases. A campaign this object drives whose lease was taken over raises
        LeaseLost first, renewing nothing: the driver must stop, not carry on. A lease that merely expired (a
        step slower than the TTL on a loaded machine) and that nobody took is renewed: no other driver can have
        written meanwhile, since a takeover raises the epoch that every write checks."""
        with self._tx() as c:
            mine = [(n, e) for n, (o, e) in self._fences.items() if o == owner]
            for name, _ in mine:
                self._fenced(c, name)
            c.execute(campaigns_t.update().where(campaigns_t.c.driver == owner)
                      .values(driver_expires=self._now() + ttl_s))
            return c.execute(runs_t.update().where(runs_t.c.lease_owner == owner)
                             .values(lease_expires=self._now() + ttl_s)).rowcount

    def release(self, campaign: str, run_key: str, owner: str) -> None:
        with self._tx(campaign) as c:
            c.execute(runs_t.update().where((runs_t.c.campaign == campaign) & (runs_t.c.run_key == run_key)
                                            & (runs_t.c.lease_owner == owner))
                      .values(lease_owner="", lease_expires=0.0))
