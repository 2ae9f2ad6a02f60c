//! Durable state: SQLite embedded by default, PostgreSQL for several replicas.
//!
//! One portable schema and one set of queries serve both, through sqlx's
//! `Any` driver. Objects are stored as JSON documents beside the columns that
//! queries filter and sort on.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::{AnyPool, AssertSqlSafe, Row};
use vmaas_model::template::TemplateMetadata;
use vmaas_model::vm::VM_TYPE_URL;
use vmaas_model::{
    Metadata, PowerState, ResolvedSpec, VirtualMachine, VirtualMachineSpec, VirtualMachineStatus, VirtualMachineTemplate, VmState,
};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No such object (or not visible in the caller's scope).
    #[error("{kind} {id:?} not found")]
    NotFound {
        /// `virtual machine` or `template`.
        kind: &'static str,
        /// The id asked for.
        id: String,
    },
    /// A unique key is taken.
    #[error("{0}")]
    AlreadyExists(String),
    /// The version given is not the current one.
    #[error("{0}")]
    Conflict(String),
    /// The object is referenced and cannot be removed.
    #[error("{0}")]
    InUse(String),
    /// The database failed.
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    /// Migrations failed.
    #[error("schema migration: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A stored document does not decode: a bug or a hand-edited database.
    #[error("corrupt stored document: {0}")]
    Corrupt(#[from] serde_json::Error),
}

impl StoreError {
    /// A VM change based on version `expected` when the VM is at `current`.
    pub fn stale_vm(name: &str, expected: i64, current: i64) -> Self {
        Self::Conflict(format!(
            "virtual machine {name:?} was changed concurrently: version {expected} is not current (it is {current}); read it again and retry"
        ))
    }
}

/// Which database is behind the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// Embedded SQLite file.
    Sqlite,
    /// Shared PostgreSQL.
    Postgres,
}

impl Dialect {
    /// `sqlite` or `postgres`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sqlite => "sqlite",
            Self::Postgres => "postgres",
        }
    }
}

/// Which VMs a caller may see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Only this tenant's.
    Tenant(String),
    /// Every tenant's (administrators and the reconciler).
    All,
}

impl Scope {
    fn tenant(&self) -> Option<&str> {
        match self {
            Self::Tenant(t) => Some(t),
            Self::All => None,
        }
    }
}

/// A stored template.
#[derive(Debug, Clone)]
pub struct TemplateRecord {
    /// The template as published (without server metadata).
    pub template: VirtualMachineTemplate,
    /// Incremented on every change.
    pub version: i64,
    /// First published.
    pub created_at: DateTime<Utc>,
    /// Last changed.
    pub updated_at: DateTime<Utc>,
}

impl TemplateRecord {
    /// The template as the API returns it.
    pub fn to_api(&self) -> VirtualMachineTemplate {
        let mut t = self.template.clone();
        t.type_url = Some(vmaas_model::template::TEMPLATE_TYPE_URL.into());
        t.metadata = Some(TemplateMetadata {
            creation_timestamp: Some(self.created_at),
            update_timestamp: Some(self.updated_at),
            version: Some(self.version),
        });
        t
    }
}

/// A stored virtual machine.
#[derive(Debug, Clone, PartialEq)]
pub struct VmRecord {
    /// Server-assigned UUID.
    pub id: String,
    /// Owner.
    pub tenant: String,
    /// Unique per tenant.
    pub name: String,
    /// What the tenant asked for, as written.
    pub spec: VirtualMachineSpec,
    /// The spec resolved against the template when it was last set.
    pub resolved: ResolvedSpec,
    /// Last status written by the reconciler.
    pub status: VirtualMachineStatus,
    /// Who created it.
    pub creators: Vec<String>,
    /// Incremented on every spec change.
    pub version: i64,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Set once deletion was requested.
    pub deleted_at: Option<DateTime<Utc>>,
    /// Restarts requested so far.
    pub restarts: i64,
}

impl VmRecord {
    /// The VM as the API returns it.
    pub fn to_api(&self) -> VirtualMachine {
        VirtualMachine {
            type_url: VM_TYPE_URL.into(),
            id: self.id.clone(),
            metadata: Metadata {
                name: self.name.clone(),
                tenant: self.tenant.clone(),
                creation_timestamp: self.created_at,
                deletion_timestamp: self.deleted_at,
                creators: self.creators.clone(),
                version: self.version,
            },
            spec: self.spec.clone(),
            status: self.status.clone(),
        }
    }

    /// The power state asked for.
    pub fn power(&self) -> PowerState {
        self.spec.state
    }
}

/// Filters and paging for listing VMs.
#[derive(Debug, Clone, Default)]
pub struct VmFilter {
    /// Exact name.
    pub name: Option<String>,
    /// Current state.
    pub state: Option<VmState>,
    /// Skip this many.
    pub offset: u64,
    /// Return at most this many.
    pub limit: u64,
}

/// The store.
///
/// With SQLite, this process is the only one using the database file, so the
/// store also keeps every object in memory: reads are served from memory,
/// and writes go to SQLite first and then to memory, one at a time. With
/// PostgreSQL, other replicas write too, so every read goes to the database.
#[derive(Clone)]
pub struct Store {
    pool: AnyPool,
    dialect: Dialect,
    mem: Option<Arc<Mem>>,
}

/// The in-memory copy of an exclusively owned database.
struct Mem {
    /// Serialises writes, so memory is updated in the order the database was.
    write: tokio::sync::Mutex<()>,
    state: RwLock<MemState>,
}

/// A VM in memory, with its API representation serialised once per change.
struct Cached {
    rec: VmRecord,
    json: Arc<str>,
}

#[derive(Default)]
struct MemState {
    vms: HashMap<String, Cached>,
    /// (tenant, creation time, id): each tenant's VMs in list order.
    by_tenant: BTreeSet<(String, String, String)>,
    /// (creation time, id): every VM in list order.
    by_time: BTreeSet<(String, String)>,
    /// VMs per tenant.
    counts: HashMap<String, u64>,
    templates: BTreeMap<String, TemplateRecord>,
}

impl MemState {
    fn put_vm(&mut self, vm: VmRecord) {
        let created = ts(vm.created_at);
        if self.by_time.insert((created.clone(), vm.id.clone())) {
            *self.counts.entry(vm.tenant.clone()).or_default() += 1;
        }
        self.by_tenant.insert((vm.tenant.clone(), created, vm.id.clone()));
        let json: Arc<str> = serde_json::to_string(&vm.to_api()).unwrap_or_default().into();
        self.vms.insert(vm.id.clone(), Cached { rec: vm, json });
    }

    fn remove_vm(&mut self, id: &str) {
        if let Some(c) = self.vms.remove(id) {
            let created = ts(c.rec.created_at);
            self.by_time.remove(&(created.clone(), c.rec.id.clone()));
            self.by_tenant.remove(&(c.rec.tenant.clone(), created, c.rec.id));
            if let Some(n) = self.counts.get_mut(&c.rec.tenant) {
                *n = n.saturating_sub(1);
            }
        }
    }

    fn visible(&self, id: &str, scope: &Scope) -> Option<&Cached> {
        self.vms.get(id).filter(|c| scope.tenant().is_none_or(|t| t == c.rec.tenant))
    }

    fn list<T>(&self, scope: &Scope, f: &VmFilter, pick: impl Fn(&Cached) -> T) -> (Vec<T>, u64) {
        let ids: Box<dyn Iterator<Item = &String>> = match scope.tenant() {
            Some(t) => {
                Box::new(self.by_tenant.range((t.to_owned(), String::new(), String::new())..).take_while(move |k| k.0 == t).map(|k| &k.2))
            }
            None => Box::new(self.by_time.iter().map(|k| &k.1)),
        };
        let vms = ids.filter_map(|id| self.vms.get(id));
        let skip = usize::try_from(f.offset).unwrap_or(usize::MAX);
        let take = usize::try_from(f.limit).unwrap_or(usize::MAX);
        if f.name.is_none() && f.state.is_none() {
            // No filter: the total is known without a scan.
            let total = match scope.tenant() {
                Some(t) => self.counts.get(t).copied().unwrap_or(0),
                None => self.vms.len() as u64,
            };
            return (vms.skip(skip).take(take).map(pick).collect(), total);
        }
        let matches = |c: &&Cached| f.name.as_deref().is_none_or(|n| n == c.rec.name) && f.state.is_none_or(|st| st == c.rec.status.state);
        let mut total = 0u64;
        let mut items = Vec::new();
        for c in vms.filter(matches) {
            if total >= f.offset && items.len() < take {
                items.push(pick(c));
            }
            total += 1;
        }
        (items, total)
    }
}

fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Nanos, true)
}

fn parse_ts(s: &str) -> Result<DateTime<Utc>, StoreError> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| StoreError::Corrupt(serde::de::Error::custom(format!("timestamp {s:?}: {e}"))))
}

fn json<T: Serialize>(v: &T) -> Result<String, StoreError> {
    Ok(serde_json::to_string(v)?)
}

fn from_json<T: DeserializeOwned>(s: &str) -> Result<T, StoreError> {
    Ok(serde_json::from_str(s)?)
}

/// The outcome of an insert: a taken unique key is `AlreadyExists(taken())`.
fn inserted<T>(r: Result<T, sqlx::Error>, taken: impl FnOnce() -> String) -> Result<(), StoreError> {
    match r {
        Ok(_) => Ok(()),
        Err(sqlx::Error::Database(d)) if d.is_unique_violation() => Err(StoreError::AlreadyExists(taken())),
        Err(e) => Err(e.into()),
    }
}

const VM_COLUMNS: &str = "id, tenant, name, spec, resolved, status, creators, version, created_at, deleted_at, restarts";

fn vm_from_row(row: &AnyRow) -> Result<VmRecord, StoreError> {
    let deleted: Option<String> = row.try_get("deleted_at")?;
    Ok(VmRecord {
        id: row.try_get("id")?,
        tenant: row.try_get("tenant")?,
        name: row.try_get("name")?,
        spec: from_json(&row.try_get::<String, _>("spec")?)?,
        resolved: from_json(&row.try_get::<String, _>("resolved")?)?,
        status: from_json(&row.try_get::<String, _>("status")?)?,
        creators: from_json(&row.try_get::<String, _>("creators")?)?,
        version: row.try_get("version")?,
        created_at: parse_ts(&row.try_get::<String, _>("created_at")?)?,
        deleted_at: deleted.as_deref().map(parse_ts).transpose()?,
        restarts: row.try_get("restarts")?,
    })
}

fn template_from_row(row: &AnyRow) -> Result<TemplateRecord, StoreError> {
    Ok(TemplateRecord {
        template: from_json(&row.try_get::<String, _>("body")?)?,
        version: row.try_get("version")?,
        created_at: parse_ts(&row.try_get::<String, _>("created_at")?)?,
        updated_at: parse_ts(&row.try_get::<String, _>("updated_at")?)?,
    })
}

impl Store {
    /// Opens (creating if needed) the SQLite database `vmaas.db` in `data_dir`.
    pub async fn open_sqlite(data_dir: &Path) -> Result<Self, StoreError> {
        let path = data_dir.join("vmaas.db");
        Self::connect(&format!("sqlite://{}?mode=rwc", path.display())).await
    }

    /// Connects to `url` (`sqlite://…` or `postgres://…`) and migrates the schema.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        sqlx::any::install_default_drivers();
        let dialect = if url.starts_with("postgres:") || url.starts_with("postgresql:") { Dialect::Postgres } else { Dialect::Sqlite };
        let max = match dialect {
            Dialect::Sqlite => 8,
            Dialect::Postgres => 16,
        };
        let pool =
            AnyPoolOptions::new().max_connections(max).min_connections(1).acquire_timeout(Duration::from_secs(10)).connect(url).await?;
        if dialect == Dialect::Sqlite {
            // Persistent for the file: readers never block the writer.
            sqlx::query("PRAGMA journal_mode=WAL").execute(&pool).await?;
        }
        MIGRATOR.run(&pool).await?;
        let mut store = Self { pool, dialect, mem: None };
        if dialect == Dialect::Sqlite {
            let mut state = MemState::default();
            for vm in store.all_vms().await? {
                state.put_vm(vm);
            }
            let (templates, _) = store.list_templates(0, i64::MAX as u64).await?;
            state.templates = templates.into_iter().map(|t| (t.template.id.clone(), t)).collect();
            store.mem = Some(Arc::new(Mem { write: tokio::sync::Mutex::new(()), state: RwLock::new(state) }));
        }
        Ok(store)
    }

    /// Takes the write lock when memory mirrors the database.
    async fn write_lock(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        match &self.mem {
            Some(m) => Some(m.write.lock().await),
            None => None,
        }
    }

    /// Runs `f` on the in-memory state, if there is one.
    fn with_mem<R>(&self, f: impl FnOnce(&mut MemState) -> R) -> Option<R> {
        self.mem.as_ref().map(|m| f(&mut m.state.write().unwrap_or_else(|p| p.into_inner())))
    }

    /// Reads the in-memory state, if there is one.
    fn read_mem<R>(&self, f: impl FnOnce(&MemState) -> R) -> Option<R> {
        self.mem.as_ref().map(|m| f(&m.state.read().unwrap_or_else(|p| p.into_inner())))
    }

    /// Re-reads a VM from the database into memory after a write; nothing
    /// to do when there is no memory copy.
    async fn refresh_vm(&self, id: &str) -> Result<(), StoreError> {
        if self.mem.is_none() {
            return Ok(());
        }
        let row = sqlx::query(AssertSqlSafe(format!("SELECT {VM_COLUMNS} FROM virtual_machines WHERE id = $1")))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        let vm = row.as_ref().map(vm_from_row).transpose()?;
        self.with_mem(|m| match vm {
            Some(v) => m.put_vm(v),
            None => m.remove_vm(id),
        });
        Ok(())
    }

    /// Which database this is.
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// Checks the database answers.
    pub async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    // ---- templates ----

    /// Publishes a new template.
    pub async fn insert_template(&self, t: &VirtualMachineTemplate, now: DateTime<Utc>) -> Result<TemplateRecord, StoreError> {
        let _w = self.write_lock().await;
        let r = sqlx::query("INSERT INTO templates (id, body, version, created_at, updated_at) VALUES ($1, $2, 1, $3, $3)")
            .bind(&t.id)
            .bind(json(t)?)
            .bind(ts(now))
            .execute(&self.pool)
            .await;
        inserted(r, || format!("template {:?} already exists", t.id))?;
        let rec = TemplateRecord { template: t.clone(), version: 1, created_at: now, updated_at: now };
        self.with_mem(|m| m.templates.insert(t.id.clone(), rec.clone()));
        Ok(rec)
    }

    /// The template `id`.
    pub async fn get_template(&self, id: &str) -> Result<TemplateRecord, StoreError> {
        let not_found = || StoreError::NotFound { kind: "template", id: id.to_owned() };
        if let Some(found) = self.read_mem(|m| m.templates.get(id).cloned()) {
            return found.ok_or_else(not_found);
        }
        let row = sqlx::query("SELECT body, version, created_at, updated_at FROM templates WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
            .ok_or_else(not_found)?;
        template_from_row(&row)
    }

    /// A page of templates in id order, and the total.
    pub async fn list_templates(&self, offset: u64, limit: u64) -> Result<(Vec<TemplateRecord>, u64), StoreError> {
        let skip = usize::try_from(offset).unwrap_or(usize::MAX);
        let take = usize::try_from(limit).unwrap_or(usize::MAX);
        if let Some(page) = self.read_mem(|m| (m.templates.values().skip(skip).take(take).cloned().collect(), m.templates.len() as u64)) {
            return Ok(page);
        }
        let rows = sqlx::query("SELECT body, version, created_at, updated_at FROM templates ORDER BY id LIMIT $1 OFFSET $2")
            .bind(i64::try_from(limit).unwrap_or(i64::MAX))
            .bind(i64::try_from(offset).unwrap_or(i64::MAX))
            .fetch_all(&self.pool)
            .await?;
        let total: i64 = sqlx::query("SELECT COUNT(*) AS n FROM templates").fetch_one(&self.pool).await?.try_get("n")?;
        let items = rows.iter().map(template_from_row).collect::<Result<_, _>>()?;
        Ok((items, u64::try_from(total).unwrap_or(0)))
    }

    /// Replaces a template, if `expected_version` (when given) is current.
    pub async fn update_template(
        &self,
        t: &VirtualMachineTemplate,
        expected_version: Option<i64>,
        now: DateTime<Utc>,
    ) -> Result<TemplateRecord, StoreError> {
        let _w = self.write_lock().await;
        let current = self.get_template(&t.id).await?;
        let base = expected_version.unwrap_or(current.version);
        if current.template == *t && base == current.version {
            return Ok(current);
        }
        let r = sqlx::query("UPDATE templates SET body = $1, version = version + 1, updated_at = $2 WHERE id = $3 AND version = $4")
            .bind(json(t)?)
            .bind(ts(now))
            .bind(&t.id)
            .bind(base)
            .execute(&self.pool)
            .await?;
        if r.rows_affected() == 0 {
            return Err(StoreError::Conflict(format!(
                "template {:?} was changed concurrently: version {base} is not current; read it again and retry",
                t.id
            )));
        }
        let rec = TemplateRecord { template: t.clone(), version: base + 1, created_at: current.created_at, updated_at: now };
        self.with_mem(|m| m.templates.insert(t.id.clone(), rec.clone()));
        Ok(rec)
    }

    /// Removes a template no VM uses.
    pub async fn delete_template(&self, id: &str) -> Result<(), StoreError> {
        let _w = self.write_lock().await;
        let used: i64 = sqlx::query("SELECT COUNT(*) AS n FROM virtual_machines WHERE template = $1")
            .bind(id)
            .fetch_one(&self.pool)
            .await?
            .try_get("n")?;
        if used > 0 {
            return Err(StoreError::InUse(format!("template {id:?} is used by {used} virtual machine(s); delete them first")));
        }
        let r = sqlx::query("DELETE FROM templates WHERE id = $1").bind(id).execute(&self.pool).await?;
        if r.rows_affected() == 0 {
            return Err(StoreError::NotFound { kind: "template", id: id.to_owned() });
        }
        self.with_mem(|m| m.templates.remove(id));
        Ok(())
    }

    // ---- virtual machines ----

    /// Stores a new VM; its name must be free in its tenant.
    pub async fn insert_vm(&self, vm: &VmRecord) -> Result<(), StoreError> {
        let _w = self.write_lock().await;
        let r = sqlx::query(
            "INSERT INTO virtual_machines (id, tenant, name, template, state, spec, resolved, status, creators, version, created_at, deleted_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, NULL)",
        )
        .bind(&vm.id)
        .bind(&vm.tenant)
        .bind(&vm.name)
        .bind(&vm.spec.template)
        .bind(vm.status.state.as_str())
        .bind(json(&vm.spec)?)
        .bind(json(&vm.resolved)?)
        .bind(json(&vm.status)?)
        .bind(json(&vm.creators)?)
        .bind(vm.version)
        .bind(ts(vm.created_at))
        .execute(&self.pool)
        .await;
        inserted(r, || format!("a virtual machine named {:?} already exists", vm.name))?;
        self.with_mem(|m| m.put_vm(vm.clone()));
        Ok(())
    }

    /// The VM `id`, if `scope` may see it.
    pub async fn get_vm(&self, id: &str, scope: &Scope) -> Result<VmRecord, StoreError> {
        let not_found = || StoreError::NotFound { kind: "virtual machine", id: id.to_owned() };
        if let Some(found) = self.read_mem(|m| m.visible(id, scope).map(|c| c.rec.clone())) {
            return found.ok_or_else(not_found);
        }
        let sql = format!("SELECT {VM_COLUMNS} FROM virtual_machines WHERE id = $1 AND ($2 IS NULL OR tenant = $2)");
        let row = sqlx::query(AssertSqlSafe(sql)).bind(id).bind(scope.tenant()).fetch_optional(&self.pool).await?.ok_or_else(not_found)?;
        vm_from_row(&row)
    }

    /// A page of the VMs `scope` may see, oldest first, and the total matching.
    pub async fn list_vms(&self, scope: &Scope, f: &VmFilter) -> Result<(Vec<VmRecord>, u64), StoreError> {
        if let Some(page) = self.read_mem(|m| m.list(scope, f, |c| c.rec.clone())) {
            return Ok(page);
        }
        let cond = "($1 IS NULL OR tenant = $1) AND ($2 IS NULL OR name = $2) AND ($3 IS NULL OR state = $3)";
        let sql = format!("SELECT {VM_COLUMNS} FROM virtual_machines WHERE {cond} ORDER BY created_at, id LIMIT $4 OFFSET $5");
        let state = f.state.map(VmState::as_str);
        let rows = sqlx::query(AssertSqlSafe(sql))
            .bind(scope.tenant())
            .bind(f.name.as_deref())
            .bind(state)
            .bind(i64::try_from(f.limit).unwrap_or(i64::MAX))
            .bind(i64::try_from(f.offset).unwrap_or(i64::MAX))
            .fetch_all(&self.pool)
            .await?;
        let total: i64 = sqlx::query(AssertSqlSafe(format!("SELECT COUNT(*) AS n FROM virtual_machines WHERE {cond}")))
            .bind(scope.tenant())
            .bind(f.name.as_deref())
            .bind(state)
            .fetch_one(&self.pool)
            .await?
            .try_get("n")?;
        let items = rows.iter().map(vm_from_row).collect::<Result<_, _>>()?;
        Ok((items, u64::try_from(total).unwrap_or(0)))
    }

    /// The VM `id` as the API's JSON, if `scope` may see it. Served from the
    /// serialised copy in memory when there is one.
    pub async fn get_vm_json(&self, id: &str, scope: &Scope) -> Result<Arc<str>, StoreError> {
        let not_found = || StoreError::NotFound { kind: "virtual machine", id: id.to_owned() };
        if let Some(found) = self.read_mem(|m| m.visible(id, scope).map(|c| c.json.clone())) {
            return found.ok_or_else(not_found);
        }
        Ok(serde_json::to_string(&self.get_vm(id, scope).await?.to_api())?.into())
    }

    /// A page of VMs as the API's JSON, and the total matching.
    pub async fn list_vms_json(&self, scope: &Scope, f: &VmFilter) -> Result<(Vec<Arc<str>>, u64), StoreError> {
        if let Some(page) = self.read_mem(|m| m.list(scope, f, |c| c.json.clone())) {
            return Ok(page);
        }
        let (items, total) = self.list_vms(scope, f).await?;
        let items = items.iter().map(|v| serde_json::to_string(&v.to_api()).map(Arc::from)).collect::<Result<_, _>>()?;
        Ok((items, total))
    }

    /// Every VM, for the reconciler, oldest first.
    pub async fn all_vms(&self) -> Result<Vec<VmRecord>, StoreError> {
        let all = VmFilter { limit: u64::MAX, ..Default::default() };
        if let Some((vms, _)) = self.read_mem(|m| m.list(&Scope::All, &all, |c| c.rec.clone())) {
            return Ok(vms);
        }
        let rows = sqlx::query(AssertSqlSafe(format!("SELECT {VM_COLUMNS} FROM virtual_machines ORDER BY created_at, id")))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(vm_from_row).collect()
    }

    /// Replaces a VM's spec if its version is still `expected_version`, and
    /// returns the record with the new version.
    pub async fn update_vm_spec(&self, vm: &VmRecord, expected_version: i64) -> Result<VmRecord, StoreError> {
        let _w = self.write_lock().await;
        let r = sqlx::query(
            "UPDATE virtual_machines SET spec = $1, resolved = $2, status = $3, state = $4, version = version + 1 \
             WHERE id = $5 AND version = $6 AND deleted_at IS NULL",
        )
        .bind(json(&vm.spec)?)
        .bind(json(&vm.resolved)?)
        .bind(json(&vm.status)?)
        .bind(vm.status.state.as_str())
        .bind(&vm.id)
        .bind(expected_version)
        .execute(&self.pool)
        .await?;
        if r.rows_affected() == 0 {
            let current = self.get_vm(&vm.id, &Scope::All).await?;
            if current.deleted_at.is_some() {
                return Err(StoreError::InUse(format!("virtual machine {:?} is being deleted", vm.name)));
            }
            return Err(StoreError::stale_vm(&vm.name, expected_version, current.version));
        }
        let mut out = vm.clone();
        out.version = expected_version + 1;
        self.with_mem(|m| m.put_vm(out.clone()));
        Ok(out)
    }

    /// Marks a VM for deletion (idempotent) and sets its status.
    pub async fn mark_vm_deleted(
        &self,
        id: &str,
        scope: &Scope,
        status: &VirtualMachineStatus,
        now: DateTime<Utc>,
    ) -> Result<VmRecord, StoreError> {
        let _w = self.write_lock().await;
        sqlx::query(
            "UPDATE virtual_machines SET deleted_at = COALESCE(deleted_at, $1), status = $2, state = $3 \
             WHERE id = $4 AND ($5 IS NULL OR tenant = $5)",
        )
        .bind(ts(now))
        .bind(json(status)?)
        .bind(status.state.as_str())
        .bind(id)
        .bind(scope.tenant())
        .execute(&self.pool)
        .await?;
        self.refresh_vm(id).await?;
        self.get_vm(id, scope).await
    }

    /// Asks for a restart of a VM that is not being deleted; returns the record.
    pub async fn request_restart(&self, id: &str, scope: &Scope) -> Result<VmRecord, StoreError> {
        let _w = self.write_lock().await;
        let r = sqlx::query(
            "UPDATE virtual_machines SET restarts = restarts + 1 WHERE id = $1 AND ($2 IS NULL OR tenant = $2) AND deleted_at IS NULL",
        )
        .bind(id)
        .bind(scope.tenant())
        .execute(&self.pool)
        .await?;
        self.refresh_vm(id).await?;
        let vm = self.get_vm(id, scope).await?;
        if r.rows_affected() == 0 {
            return Err(StoreError::InUse(format!("virtual machine {:?} is being deleted", vm.name)));
        }
        Ok(vm)
    }

    /// Writes a VM's status, as observed by the reconciler from `seen`. Does
    /// nothing if the VM changed since (a new spec version, or deletion
    /// requested): the next pass observes it afresh.
    pub async fn update_vm_status(&self, seen: &VmRecord, status: &VirtualMachineStatus) -> Result<bool, StoreError> {
        let _w = self.write_lock().await;
        let r = sqlx::query(
            "UPDATE virtual_machines SET status = $1, state = $2 \
             WHERE id = $3 AND version = $4 AND (CASE WHEN deleted_at IS NULL THEN 0 ELSE 1 END) = $5",
        )
        .bind(json(status)?)
        .bind(status.state.as_str())
        .bind(&seen.id)
        .bind(seen.version)
        .bind(i64::from(seen.deleted_at.is_some()))
        .execute(&self.pool)
        .await?;
        let written = r.rows_affected() > 0;
        if written {
            self.with_mem(|m| {
                if let Some(mut vm) = m.vms.get(&seen.id).map(|c| c.rec.clone()) {
                    vm.status = status.clone();
                    m.put_vm(vm);
                }
            });
        }
        Ok(written)
    }

    /// Removes a VM for good, once the backend has cleaned up after it.
    pub async fn remove_vm(&self, id: &str) -> Result<(), StoreError> {
        let _w = self.write_lock().await;
        sqlx::query("DELETE FROM virtual_machines WHERE id = $1 AND deleted_at IS NOT NULL").bind(id).execute(&self.pool).await?;
        self.refresh_vm(id).await?;
        Ok(())
    }

    // ---- leases ----

    /// Takes or renews the lease `name` for `holder` until `ttl` from `now`.
    /// True when `holder` holds it afterwards.
    pub async fn acquire_lease(&self, name: &str, holder: &str, now: DateTime<Utc>, ttl: Duration) -> Result<bool, StoreError> {
        let now_ms = now.timestamp_millis();
        let until = now_ms + i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX / 2);
        let r = sqlx::query(
            "INSERT INTO leases (name, holder, expires_at) VALUES ($1, $2, $3) \
             ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at \
             WHERE leases.holder = excluded.holder OR leases.expires_at < $4",
        )
        .bind(name)
        .bind(holder)
        .bind(until)
        .bind(now_ms)
        .execute(&self.pool)
        .await?;
        Ok(r.rows_affected() > 0)
    }

    /// Gives up the lease `name` if `holder` has it.
    pub async fn release_lease(&self, name: &str, holder: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM leases WHERE name = $1 AND holder = $2").bind(name).bind(holder).execute(&self.pool).await?;
        Ok(())
    }
}
