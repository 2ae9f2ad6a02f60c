//! What each tenant holds, kept as counters by every write instead of
//! recounted at every admission: its VMs (count, cores, memory, disks), its
//! volumes' and imported images' disk, and the pool addresses of its
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
use vmaas_model::{MachineSpec, ObjectKind, Quantity};

use super::objects::Row;
use super::{Dialect, ImageRecord, Store, StoreError, VmRecord, VolumeRecord};

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

impl Amounts {
    /// What one VM of `machine` holds.
    pub fn vm(machine: &MachineSpec) -> Self {
        Self {
            virtual_machines: 1,
            cores: u64::from(machine.cpu.cores),
            memory_bytes: machine.memory_bytes(),
            disk_bytes: machine.disks.iter().map(|d| d.size.to_units_ceil().unwrap_or(u64::MAX)).fold(0, u64::saturating_add),
            external_ips: 0,
        }
    }

    /// What a volume of `size` holds.
    pub fn volume(size: &Quantity) -> Self {
        Self { disk_bytes: size.to_units_ceil().unwrap_or(u64::MAX), ..Self::default() }
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

/// What `row` holds of its tenant's quota (nothing once being deleted). A
/// row that does not decode holds nothing: it is reported where it is read.
pub(super) fn held(row: &Row) -> Amounts {
    if row.deleted_at.is_some() {
        return Amounts::default();
    }
    let held = match row.kind {
        ObjectKind::VirtualMachine => VmRecord::from_row(row).map(|v| Amounts::vm(&v.machine)),
        ObjectKind::Volume => VolumeRecord::from_row(row).map(|v| Amounts::volume(&v.spec.size)),
        ObjectKind::ExternalIp | ObjectKind::LoadBalancer => Ok(Amounts::external_ip()),
        // An imported image's file is on the host's disk: what it holds, or has received so far.
        ObjectKind::Image => ImageRecord::from_row(row)
            .map(|i| Amounts { disk_bytes: i.status.size_bytes.max(i.status.progress_bytes), ..Amounts::default() }),
        _ => Ok(Amounts::default()),
    };
    held.unwrap_or_default()
}

/// `new` − `old`, resource by resource, as `(quota name, signed difference)`.
fn difference(old: Amounts, new: Amounts) -> impl Iterator<Item = (&'static str, i64)> {
    old.named().into_iter().zip(new.named()).filter_map(|((name, old, _), (_, new, _))| {
        let d = i64::try_from(new).unwrap_or(i64::MAX).saturating_sub(i64::try_from(old).unwrap_or(i64::MAX));
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
    if dialect != Dialect::Postgres || tenant.is_empty() {
        return Ok(());
    }
    let (old, new) = (old.map(held).unwrap_or_default(), new.map(held).unwrap_or_default());
    for (resource, d) in difference(old, new) {
        sqlx::query(
            "INSERT INTO usage (tenant, resource, amount) VALUES ($1, $2, $3) \
             ON CONFLICT (tenant, resource) DO UPDATE SET amount = usage.amount + excluded.amount",
        )
        .bind(tenant)
        .bind(resource)
        .bind(d)
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

/// Per tenant, what the rows hold.
pub(super) fn tally<'a>(rows: impl IntoIterator<Item = &'a Row>) -> HashMap<String, Amounts> {
    let mut out: HashMap<String, Amounts> = HashMap::new();
    for r in rows {
        let h = held(r);
        if !h.is_zero() {
            let e = out.entry(r.tenant.clone()).or_default();
            *e = e.plus(h);
        }
    }
    out
}

impl Store {
    /// What `tenant` holds now (creates staged and not committed yet included).
    pub async fn usage(&self, tenant: &str) -> Result<Amounts, StoreError> {
        if let Some(mem) = &self.mem {
            return Ok(mem.usage_with_pending(tenant));
        }
        let rows =
            sqlx::query("SELECT resource, amount FROM usage WHERE tenant = $1").bind(tenant).fetch_all(&mut *self.conn().await?).await?;
        let named = rows.iter().map(|r| Ok((r.try_get("resource")?, r.try_get("amount")?))).collect::<Result<Vec<_>, sqlx::Error>>()?;
        Ok(Amounts::from_named(named))
    }

    /// What every tenant holding anything holds now, by tenant.
    pub async fn all_usage(&self) -> Result<HashMap<String, Amounts>, StoreError> {
        if let Some(mem) = &self.mem {
            return Ok(mem.all_usage_with_pending());
        }
        let rows = sqlx::query("SELECT tenant, resource, amount FROM usage").fetch_all(&mut *self.conn().await?).await?;
        let mut by: HashMap<String, Vec<(String, i64)>> = HashMap::new();
        for r in &rows {
            by.entry(r.try_get("tenant")?).or_default().push((r.try_get("resource")?, r.try_get("amount")?));
        }
        Ok(by.into_iter().map(|(t, named)| (t, Amounts::from_named(named))).filter(|(_, a)| !a.is_zero()).collect())
    }

    /// Counts what every tenant holds into `usage` once, if this database
    /// was made before the counters (PostgreSQL), holding writers off.
    pub(super) async fn count_usage_once(&self) -> Result<(), StoreError> {
        if self.dialect != Dialect::Postgres {
            return Ok(());
        }
        let mut tx = self.pool.begin().await?;
        // Reading every object may take longer than a session may idle.
        sqlx::query("SET LOCAL idle_in_transaction_session_timeout = 0").execute(&mut *tx).await?;
        sqlx::query("LOCK TABLE usage IN EXCLUSIVE MODE").execute(&mut *tx).await?;
        if sqlx::query("SELECT 1 FROM usage_counted").fetch_optional(&mut *tx).await?.is_some() {
            return Ok(());
        }
        let rows = self.sql_all().await?;
        sqlx::query("DELETE FROM usage").execute(&mut *tx).await?;
        for (tenant, amounts) in tally(&rows) {
            for (resource, amount, _) in amounts.named() {
                sqlx::query("INSERT INTO usage (tenant, resource, amount) VALUES ($1, $2, $3)")
                    .bind(&tenant)
                    .bind(resource)
                    .bind(i64::try_from(amount).unwrap_or(i64::MAX))
                    .execute(&mut *tx)
                    .await?;
            }
        }
        sqlx::query("INSERT INTO usage_counted (singleton, at) VALUES (1, $1)")
            .bind(super::ts(chrono::Utc::now()))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }
}
