//! What each tenant holds, kept as counters by every write instead of
//! recounted at every admission: its VMs (count, cores, memory, disks), its
//! volumes', imported images' and snapshots' disk, and the pool addresses of its
//! external IPs and load balancers. An object being deleted holds nothing.
//!
//! - On SQLite memory keeps the counters, changed with the rows it holds;
//!   creates staged and not committed yet are added when read.
//! - On PostgreSQL the table `usage` (migration 0009) keeps them, changed in
//!   the transaction of each write by the difference it makes. A database
//!   made before the table is counted once, at the first start that finds
//!   it uncounted (`usage_counted`), with writers held off meanwhile: every
//!   replica must run a release that keeps the counters.

use std::collections::HashMap;

use sqlx::Row as _;
use vmaas_model::{MachineSpec, ObjectKind, PowerState, Quantity};

use super::row::Row;
use super::{Dialect, ImageRecord, SnapshotRecord, Store, StoreError, VmRecord, VolumeRecord};

/// Amounts of every resource a quota limits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Amounts {
    /// Virtual machines.
    pub virtual_machines: u64,
    /// Cores.
    pub cores: u64,
    /// Memory, bytes.
    pub memory_bytes: u64,
    /// Disk, bytes.
    pub disk_bytes: u64,
    /// External IPs.
    pub external_ips: u64,
}

/// Bytes of `size` (all of them, should it not be a size in bytes).
fn bytes(size: &Quantity) -> u64 {
    size.to_units_ceil().unwrap_or(u64::MAX)
}

/// Bytes of `machine`'s disks together.
fn disk_bytes(machine: &MachineSpec) -> u64 {
    machine.disks.iter().map(|d| bytes(&d.size)).fold(0, u64::saturating_add)
}

impl Amounts {
    /// What one VM of `machine` holds.
    pub fn vm(machine: &MachineSpec) -> Self {
        Self {
            virtual_machines: 1,
            cores: u64::from(machine.cpu.vcpus()),
            memory_bytes: machine.memory_bytes(),
            disk_bytes: disk_bytes(machine),
            external_ips: 0,
        }
    }

    /// What a volume of `size` holds.
    pub fn volume(size: &Quantity) -> Self {
        Self { disk_bytes: bytes(size), ..Self::default() }
    }

    /// One external IP.
    pub fn external_ip() -> Self {
        Self { external_ips: 1, ..Self::default() }
    }

    /// Both together.
    pub fn plus(self, b: Self) -> Self {
        self.zip(b, u64::saturating_add)
    }

    /// What `self` takes beyond `before` (nothing where it takes less).
    pub fn beyond(self, before: Self) -> Self {
        self.zip(before, u64::saturating_sub)
    }

    fn zip(self, b: Self, f: impl Fn(u64, u64) -> u64) -> Self {
        Self {
            virtual_machines: f(self.virtual_machines, b.virtual_machines),
            cores: f(self.cores, b.cores),
            memory_bytes: f(self.memory_bytes, b.memory_bytes),
            disk_bytes: f(self.disk_bytes, b.disk_bytes),
            external_ips: f(self.external_ips, b.external_ips),
        }
    }

    /// Whether it takes nothing at all.
    pub fn is_zero(&self) -> bool {
        *self == Self::default()
    }

    /// Each resource with its quota name, amount, and whether it is bytes.
    pub fn named(&self) -> [(&'static str, u64, bool); 5] {
        [
            ("virtual_machines", self.virtual_machines, false),
            ("cores", self.cores, false),
            ("memory", self.memory_bytes, true),
            ("disk", self.disk_bytes, true),
            ("external_ips", self.external_ips, false),
        ]
    }

    /// From the counters' rows: `(resource, amount)`.
    fn from_named(rows: impl IntoIterator<Item = (String, i64)>) -> Self {
        let mut a = Self::default();
        for (resource, amount) in rows {
            let v = u64::try_from(amount).unwrap_or(0);
            match resource.as_str() {
                "virtual_machines" => a.virtual_machines = v,
                "cores" => a.cores = v,
                "memory" => a.memory_bytes = v,
                "disk" => a.disk_bytes = v,
                "external_ips" => a.external_ips = v,
                _ => {}
            }
        }
        a
    }
}

/// What VMs ask of the host. One VM may have more virtual CPUs than the
/// host has CPUs (they are threads); the total is bounded by the overcommit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostUsage {
    /// Virtual CPUs.
    pub cpus: u64,
    /// Memory, bytes.
    pub memory_bytes: u64,
    /// Disk capacity, bytes.
    pub disk_bytes: u64,
}

impl HostUsage {
    /// What one machine asks for; a stopped one holds only its disks.
    pub fn of(machine: &MachineSpec, power: PowerState) -> Self {
        let running = power.holds_host();
        Self {
            cpus: if running { u64::from(machine.cpu.vcpus()) } else { 0 },
            memory_bytes: if running { machine.memory_bytes() } else { 0 },
            disk_bytes: disk_bytes(machine),
        }
    }

    /// The disk capacity of a volume of `size`.
    pub fn volume(size: &Quantity) -> Self {
        Self { disk_bytes: bytes(size), ..Self::default() }
    }

    /// Both together.
    pub fn plus(self, b: Self) -> Self {
        self.zip(b, u64::saturating_add)
    }

    /// `self` without `b`.
    pub fn minus(self, b: Self) -> Self {
        self.zip(b, u64::saturating_sub)
    }

    fn zip(self, b: Self, f: impl Fn(u64, u64) -> u64) -> Self {
        Self {
            cpus: f(self.cpus, b.cpus),
            memory_bytes: f(self.memory_bytes, b.memory_bytes),
            disk_bytes: f(self.disk_bytes, b.disk_bytes),
        }
    }

    /// Whether this asks for more of any resource than `before`.
    pub fn grows_from(&self, before: &Self) -> bool {
        self.cpus > before.cpus || self.memory_bytes > before.memory_bytes || self.disk_bytes > before.disk_bytes
    }

    /// As quota-like counters: `(resource, amount)`, the way `usage` stores them.
    fn named(&self) -> [(&'static str, u64); 3] {
        [("host_cpus", self.cpus), ("host_memory", self.memory_bytes), ("host_disk", self.disk_bytes)]
    }

    fn from_named(rows: impl IntoIterator<Item = (String, i64)>) -> Self {
        let mut h = Self::default();
        for (resource, amount) in rows {
            let v = u64::try_from(amount).unwrap_or(0);
            match resource.as_str() {
                "host_cpus" => h.cpus = v,
                "host_memory" => h.memory_bytes = v,
                "host_disk" => h.disk_bytes = v,
                _ => {}
            }
        }
        h
    }
}

/// The tenant under which `usage` keeps the host's counters (no tenant is named so).
const HOST: &str = "";

/// What one row holds: of its tenant's quota, and of the host.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Holds {
    /// Of its tenant's quota: nothing once its deletion is asked.
    pub(super) quota: Amounts,
    /// Of the host: a VM until it is removed (its disks and, running, its
    /// CPUs and memory), a volume until its deletion is asked.
    pub(super) host: HostUsage,
}

/// Whether what an object of `kind` holds is in its status (an image's
/// file as imported, a snapshot's bytes once taken), so that a status write
/// counts it again.
pub(super) fn held_by_status(kind: ObjectKind) -> bool {
    matches!(kind, ObjectKind::Image | ObjectKind::ComputeInstanceSnapshot)
}

/// What `row` holds, its document decoded once. A row that does not
/// decode holds nothing: it is reported where it is read.
pub(super) fn holds(row: &Row) -> Holds {
    let deleting = row.deleted_at.is_some();
    match row.kind {
        ObjectKind::VirtualMachine => VmRecord::from_row(row)
            .map(|v| Holds {
                quota: if deleting { Amounts::default() } else { Amounts::vm(&v.machine) },
                host: HostUsage::of(&v.machine, v.spec.state),
            })
            .unwrap_or_default(),
        ObjectKind::Volume if !deleting => VolumeRecord::from_row(row)
            .map(|v| Holds { quota: Amounts::volume(&v.spec.size), host: HostUsage::volume(&v.spec.size) })
            .unwrap_or_default(),
        ObjectKind::ExternalIp | ObjectKind::LoadBalancer if !deleting => Holds { quota: Amounts::external_ip(), ..Holds::default() },
        // An imported image's file is on the host's disk: what it holds, or has received so far.
        ObjectKind::Image if !deleting => ImageRecord::from_row(row)
            .map(|i| Holds {
                quota: Amounts { disk_bytes: i.status.size_bytes.max(i.status.progress_bytes), ..Amounts::default() },
                ..Holds::default()
            })
            .unwrap_or_default(),
        // A snapshot's files are on the host's disk too, once taken.
        ObjectKind::ComputeInstanceSnapshot if !deleting => SnapshotRecord::from_row(row)
            .map(|s| Holds { quota: Amounts { disk_bytes: s.status.size_bytes, ..Amounts::default() }, ..Holds::default() })
            .unwrap_or_default(),
        _ => Holds::default(),
    }
}

fn signed(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// `new` − `old`, resource by resource, as `(quota name, signed difference)`.
fn difference(old: Amounts, new: Amounts) -> impl Iterator<Item = (&'static str, i64)> {
    old.named().into_iter().zip(new.named()).filter_map(|((name, old, _), (_, new, _))| {
        let d = signed(new).saturating_sub(signed(old));
        (d != 0).then_some((name, d))
    })
}

/// Adds what `new` holds and takes away what `old` held from their
/// tenant's counters, in `tx` (PostgreSQL; nothing to do on SQLite, whose
/// memory follows its rows).
pub(super) async fn record(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    dialect: Dialect,
    old: Option<&Row>,
    new: Option<&Row>,
) -> Result<(), StoreError> {
    let Some(tenant) = new.or(old).map(|r| r.tenant.as_str()) else { return Ok(()) };
    if dialect != Dialect::Postgres {
        return Ok(());
    }
    let changes = changes(tenant, old, new);
    if changes.is_empty() {
        return Ok(());
    }
    let sql = upsert_sql(changes.len(), 1);
    let q = changes.iter().fold(sqlx::query(sqlx::AssertSqlSafe(sql)), |q, (t, r, d)| q.bind(*t).bind(*r).bind(*d));
    q.execute(&mut **tx).await?;
    Ok(())
}

/// The counters a change from `old` to `new` (of `tenant`) moves, each
/// `(tenant, resource, by)` once (the host's tenant is empty, a tenant's
/// never is): one statement for all of them, one round trip inside the
/// admission's lock.
pub(super) fn changes<'a>(tenant: &'a str, old: Option<&Row>, new: Option<&Row>) -> Vec<(&'a str, &'static str, i64)> {
    let (old, new) = (old.map(holds).unwrap_or_default(), new.map(holds).unwrap_or_default());
    let on_host = old.host.named().into_iter().zip(new.host.named()).map(|((name, o), (_, n))| (HOST, name, signed(n) - signed(o)));
    let of_tenant = difference(old.quota, new.quota).map(|(name, d)| (tenant, name, d)).filter(|_| !tenant.is_empty());
    on_host.chain(of_tenant).filter(|(_, _, d)| *d != 0).collect()
}

/// The upsert of `changes` with its placeholders numbered from `$first`.
pub(super) fn upsert_sql(changes: usize, first: usize) -> String {
    format!(
        "INSERT INTO usage (tenant, resource, amount) VALUES {} \
         ON CONFLICT (tenant, resource) DO UPDATE SET amount = usage.amount + excluded.amount",
        super::statement::placeholders(first, changes, 3)
    )
}

/// What the rows hold: per tenant, and of the host.
pub(super) fn tally<'a>(rows: impl IntoIterator<Item = &'a Row>) -> (HashMap<String, Amounts>, HostUsage) {
    let (mut by_tenant, mut host): (HashMap<String, Amounts>, HostUsage) = Default::default();
    for r in rows {
        let h = holds(r);
        host = host.plus(h.host);
        if !h.quota.is_zero() {
            let e = by_tenant.entry(r.tenant.clone()).or_default();
            *e = e.plus(h.quota);
        }
    }
    (by_tenant, host)
}

impl Store {
    /// What `tenant` holds now (creates staged and not committed yet included).
    pub async fn usage(&self, tenant: &str) -> Result<Amounts, StoreError> {
        if let Some(mem) = &self.mem {
            return Ok(mem.usage_with_pending(tenant));
        }
        Ok(Amounts::from_named(self.counters(tenant).await?))
    }

    /// The `(resource, amount)` counters kept under `tenant` (PostgreSQL).
    async fn counters(&self, tenant: &str) -> Result<Vec<(String, i64)>, StoreError> {
        let rows =
            sqlx::query("SELECT resource, amount FROM usage WHERE tenant = $1").bind(tenant).fetch_all(&mut *self.conn().await?).await?;
        Ok(rows.iter().map(|r| Ok((r.try_get("resource")?, r.try_get("amount")?))).collect::<Result<_, sqlx::Error>>()?)
    }

    /// What the VMs and volumes hold of the host now (creates staged and not committed yet included).
    pub async fn host_usage(&self) -> Result<HostUsage, StoreError> {
        if let Some(mem) = &self.mem {
            return Ok(mem.host_usage_with_pending());
        }
        Ok(HostUsage::from_named(self.counters(HOST).await?))
    }

    /// What object `id` of `kind` holds of the host (nothing when there is no such object).
    pub async fn host_usage_of(&self, kind: ObjectKind, id: &str) -> Result<HostUsage, StoreError> {
        match self.get(kind, id, &super::Scope::All).await {
            Ok(row) => Ok(holds(&row).host),
            Err(StoreError::NotFound { .. }) => Ok(HostUsage::default()),
            Err(e) => Err(e),
        }
    }

    /// What every tenant holding anything holds now, by tenant.
    pub async fn all_usage(&self) -> Result<HashMap<String, Amounts>, StoreError> {
        if let Some(mem) = &self.mem {
            return Ok(mem.all_usage_with_pending());
        }
        let rows = sqlx::query("SELECT tenant, resource, amount FROM usage").fetch_all(&mut *self.conn().await?).await?;
        let mut by: HashMap<String, Vec<(String, i64)>> = HashMap::new();
        for r in &rows {
            let tenant: String = r.try_get("tenant")?;
            if tenant != HOST {
                by.entry(tenant).or_default().push((r.try_get("resource")?, r.try_get("amount")?));
            }
        }
        Ok(by.into_iter().map(|(t, named)| (t, Amounts::from_named(named))).filter(|(_, a)| !a.is_zero()).collect())
    }

    /// Counts what every tenant holds into `usage` once, if this database
    /// was made before the counters (PostgreSQL), holding writers off.
    pub(super) async fn count_usage_once(&self) -> Result<(), StoreError> {
        let Some(mut tx) = self.once("usage", "usage_counted").await? else { return Ok(()) };
        let rows = self.sql_all().await?;
        sqlx::query("DELETE FROM usage").execute(&mut *tx).await?;
        let (by_tenant, host) = tally(&rows);
        let counters = by_tenant
            .into_iter()
            .flat_map(|(t, a)| a.named().map(|(r, n, _)| (t.clone(), r, n)))
            .chain(host.named().map(|(r, n)| (HOST.to_owned(), r, n)));
        for (tenant, resource, amount) in counters {
            sqlx::query("INSERT INTO usage (tenant, resource, amount) VALUES ($1, $2, $3)")
                .bind(&tenant)
                .bind(resource)
                .bind(signed(amount))
                .execute(&mut *tx)
                .await?;
        }
        Self::done_once(tx, "usage_counted").await
    }

    /// On PostgreSQL, a transaction holding `table` against writers, to
    /// fill it once for a database made before it; none when `marker`
    /// says it was done (or on SQLite, which keeps it in memory).
    pub(super) async fn once(&self, table: &str, marker: &str) -> Result<Option<sqlx::Transaction<'static, sqlx::Any>>, StoreError> {
        if self.dialect != Dialect::Postgres {
            return Ok(None);
        }
        let mut tx = self.pool.begin().await?;
        // Reading every object may take longer than a session may idle.
        sqlx::query("SET LOCAL idle_in_transaction_session_timeout = 0").execute(&mut *tx).await?;
        sqlx::query(sqlx::AssertSqlSafe(format!("LOCK TABLE {table} IN EXCLUSIVE MODE"))).execute(&mut *tx).await?;
        let done = sqlx::query(sqlx::AssertSqlSafe(format!("SELECT 1 FROM {marker}"))).fetch_optional(&mut *tx).await?.is_some();
        Ok((!done).then_some(tx))
    }

    /// Records in `marker` that what [`Self::once`] began is done, and commits it.
    pub(super) async fn done_once(mut tx: sqlx::Transaction<'static, sqlx::Any>, marker: &str) -> Result<(), StoreError> {
        sqlx::query(sqlx::AssertSqlSafe(format!("INSERT INTO {marker} (singleton, at) VALUES (1, $1)")))
            .bind(super::ts(chrono::Utc::now()))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }
}
