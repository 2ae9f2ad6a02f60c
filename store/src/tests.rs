//! The store over a real SQLite file: upgrades, references, versions.

use chrono::Utc;
use serde_json::json;
use vmaas_model::image::Image;
use vmaas_model::{
    LoadBalancer, MachineSpec, ObjectKind, PowerState, VirtualMachineSpec, VirtualMachineTemplate, VmState, VolumeAttachment,
};

use super::*;
use vmaas_backend::Requests;

fn template(id: &str) -> VirtualMachineTemplate {
    serde_json::from_value(json!({"id": id})).unwrap()
}

fn vm(name: &str, template: &str) -> VmRecord {
    let spec = VirtualMachineSpec::new(template);
    VmRecord::new(uuid::Uuid::new_v4().to_string(), "acme", name, "acme", spec, MachineSpec::default(), Utc::now())
}

#[tokio::test]
async fn upgrades_a_first_release_database_keeping_every_object() {
    let dir = tempfile::tempdir().unwrap();
    sqlx::any::install_default_drivers();
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("vmaas.db").display());
    let pool = sqlx::AnyPool::connect(&url).await.unwrap();
    let first_release = crate::migrations::first(2);
    first_release.run(&pool).await.unwrap();
    let now = "2026-11-01T10:00:00.000000000Z";
    sqlx::query(
        "INSERT INTO templates (id, body, version, created_at, updated_at) VALUES ('simple_vm', '{\"id\":\"simple_vm\"}', 3, $1, $1)",
    )
    .bind(now)
    .execute(&pool)
    .await
    .unwrap();
    let resolved = r#"{"cpu_cores":4,"memory":"4Gi","disk_size":"30Gi","image":"default","gpus":[],"exposed_ports":[],"readiness_probe":null,"user_data":null,"ssh_keys":["k"]}"#;
    let status = serde_json::to_string(&vmaas_model::initial_status(PowerState::Started, Utc::now())).unwrap();
    sqlx::query(
        "INSERT INTO virtual_machines (id, tenant, name, template, state, spec, resolved, status, creators, version, created_at, deleted_at, restarts) \
         VALUES ('0b3c5e0e-0000-4000-8000-000000000001', 'acme', 'myvm', 'simple_vm', 'VIRTUAL_MACHINE_STATE_READY', \
         '{\"template\":\"simple_vm\",\"template_parameters\":{},\"state\":\"started\"}', $1, $2, '[\"acme\"]', 5, $3, NULL, 2)",
    )
    .bind(resolved)
    .bind(&status)
    .bind(now)
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;

    let store = Store::open_sqlite(dir.path()).await.unwrap();
    let t = store.get_template("simple_vm").await.unwrap();
    assert_eq!(t.version, 3);
    let v = store.get_vm("0b3c5e0e-0000-4000-8000-000000000001", &Scope::Tenant("acme".into())).await.unwrap();
    assert_eq!((v.name.as_str(), v.version, v.machine.cpu.cores), ("myvm", 5, 4));
    assert_eq!(v.machine.disk_bytes(), 30 << 30);
    assert_eq!(v.machine.cloud_init.ssh_keys, ["k"]);
    assert_eq!((v.requests.restart, v.acted.restart), (2, 2), "a restart acted on before the upgrade is not repeated");
    assert!(!v.unacknowledged());
    // The reference to the template came along.
    let err = store.delete_template("simple_vm").await.unwrap_err().to_string();
    assert!(err.contains("is used by 1 virtual machine(s): myvm"), "{err}");
}

#[tokio::test]
async fn references_are_enforced_and_name_the_referrers() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_sqlite(dir.path()).await.unwrap();
    let missing = store.insert_vm(&vm("a", "nope")).await.unwrap_err();
    assert!(
        matches!(&missing, StoreError::MissingReference(m) if m.contains("\"nope\", or its image, or a subnet or security group of the VM, does not exist")),
        "{missing}"
    );
    assert!(store.all_vms().await.unwrap().is_empty(), "nothing half-made");

    store.insert_template(&template("tpl"), Utc::now()).await.unwrap();
    let (a, b) = (vm("a", "tpl"), vm("b", "tpl"));
    store.insert_vm(&a).await.unwrap();
    store.insert_vm(&b).await.unwrap();
    let taken = store.insert_vm(&vm("a", "tpl")).await.unwrap_err();
    assert!(matches!(taken, StoreError::AlreadyExists(_)));
    let in_use = store.delete_template("tpl").await.unwrap_err().to_string();
    assert!(in_use.contains("is used by 2 virtual machine(s): a, b"), "{in_use}");

    for v in [&a, &b] {
        store.mark_vm_deleted(&v.id, &Scope::All, Utc::now()).await.unwrap();
        store.remove_vm(&v.id).await.unwrap();
    }
    store.delete_template("tpl").await.unwrap();
    assert!(matches!(store.get_template("tpl").await, Err(StoreError::NotFound { .. })));
}

#[tokio::test]
async fn every_change_of_the_desired_state_is_a_new_version() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_sqlite(dir.path()).await.unwrap();
    store.insert_template(&template("tpl"), Utc::now()).await.unwrap();
    let v = vm("a", "tpl");
    store.insert_vm(&v).await.unwrap();
    let restarted = store.request_restart(&v.id, &Scope::All).await.unwrap();
    assert_eq!((restarted.version, restarted.requests.restart), (2, 1));
    // A status derived from version 1 no longer lands.
    let mut status = v.status.clone();
    status.state = VmState::Ready;
    assert!(!store.write_vm_status(&v, &status, Requests::default()).await.unwrap());
    assert!(store.write_vm_status(&restarted, &status, Requests::default()).await.unwrap());
    let deleted = store.mark_vm_deleted(&v.id, &Scope::All, Utc::now()).await.unwrap();
    assert_eq!(deleted.version, 3);
    assert!(deleted.unacknowledged());
    let stale = store.update_vm_spec(&restarted, restarted.version).await.unwrap_err();
    assert!(stale.to_string().contains("is being deleted"), "{stale}");
    // Another tenant sees nothing.
    assert!(matches!(store.get_vm(&v.id, &Scope::Tenant("other".into())).await, Err(StoreError::NotFound { .. })));
}

#[tokio::test]
async fn an_image_made_for_a_vm_is_stored_with_it_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_sqlite(dir.path()).await.unwrap();
    store.insert_template(&template("tpl"), Utc::now()).await.unwrap();
    store.insert_vm(&vm("a", "tpl")).await.unwrap();
    let made = |id: &str| {
        let spec = vmaas_model::image::ImageSpec { source: Some(format!("http://127.0.0.1/{id}.qcow2")), ..Default::default() };
        BootImage { id: id.into(), new: Some(ImageRecord::new(id.into(), "t", &format!("url-{id}"), "t", spec, Utc::now())) }
    };
    let images = || async { store.all_records::<Image>().await.unwrap().len() };

    // The VM's name is taken: no image either.
    let taken = store.insert_vm_booting(&vm("a", "tpl"), Some(&made("i1"))).await.unwrap_err();
    assert!(matches!(taken, StoreError::AlreadyExists(_)), "{taken}");
    assert_eq!(images().await, 0, "nothing half-made");
    // Stored together, and the VM's reference keeps the image.
    let b = vm("b", "tpl");
    store.insert_vm_booting(&b, Some(&made("i1"))).await.unwrap();
    assert!(matches!(store.delete_now(ObjectKind::Image, "i1").await, Err(StoreError::InUse(_))));
    // A stale change stores no new image; a change to a catalog image drops the reference.
    let stale = store.update_vm_booting(&b, b.version + 1, Some(&made("i2"))).await.unwrap_err();
    assert!(stale.to_string().contains("version"), "{stale}");
    assert_eq!(images().await, 1);
    store.update_vm_booting(&b, b.version, None).await.unwrap();
    store.delete_now(ObjectKind::Image, "i1").await.unwrap();
    assert_eq!(images().await, 0);
}

/// What the counters (each tenant's quota usage, the host's) say equals a
/// recount of the rows after every kind of write, on SQLite and, with
/// `VMAAS_TEST_DATABASE_URL`, on PostgreSQL.
#[tokio::test]
async fn the_counters_follow_every_write() {
    let dir = tempfile::tempdir().unwrap();
    counters_follow(Store::open_sqlite(dir.path()).await.unwrap()).await;
    if let Some(url) = fresh_postgres().await {
        counters_follow(Store::connect(&url).await.unwrap()).await;
    }
}

/// A new PostgreSQL database beside `VMAAS_TEST_DATABASE_URL`'s, if set.
async fn fresh_postgres() -> Option<String> {
    use sqlx::Connection as _;
    let base = std::env::var("VMAAS_TEST_DATABASE_URL").ok()?;
    let name = format!("vmaas_store_{}", uuid::Uuid::new_v4().simple());
    let mut conn = sqlx::postgres::PgConnection::connect(&base).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut conn).await.unwrap();
    let (prefix, _) = base.rsplit_once('/').unwrap();
    Some(format!("{prefix}/{name}"))
}

/// Checks the counters of `store` against a recount of its rows; the host's CPUs too.
async fn counted(store: &Store, host_cpus: u64) {
    let rows = store.sql_all().await.unwrap();
    let (mut by_tenant, host) = usage::tally(&rows);
    let quota = by_tenant.remove("acme").unwrap_or_default();
    assert_eq!(store.usage("acme").await.unwrap(), quota);
    assert_eq!(store.host_usage().await.unwrap(), host);
    assert_eq!(host.cpus, host_cpus, "{host:?}");
}

async fn counters_follow(store: Store) {
    store.insert_template(&template("tpl"), Utc::now()).await.unwrap();
    let (mut a, mut b) = (vm("a", "tpl"), vm("b", "tpl"));
    a.machine.cpu.cores = 2;
    b.spec.state = PowerState::Stopped;
    store.insert_vm(&a).await.unwrap();
    store.insert_vm(&b).await.unwrap();
    counted(&store, 2).await;
    assert_eq!(store.usage("acme").await.unwrap().virtual_machines, 2);
    // Started: b's CPU counts on the host now.
    let mut started = store.get_vm(&b.id, &Scope::All).await.unwrap();
    started.spec.state = PowerState::Started;
    store.update_vm_spec(&started, started.version).await.unwrap();
    counted(&store, 3).await;
    // Being deleted, a leaves the quota but holds the host until it is gone.
    store.mark_vm_deleted(&a.id, &Scope::All, Utc::now()).await.unwrap();
    counted(&store, 3).await;
    assert_eq!(store.usage("acme").await.unwrap().virtual_machines, 1);
    store.remove_vm(&a.id).await.unwrap();
    counted(&store, 1).await;
}

/// What a VM is named by without being pinned (attachments, load
/// balancers) and what names an image (VMs, volumes) is found through the
/// links, after inserts, spec changes and removals; on SQLite (again after
/// a reopen) and on PostgreSQL (again after the index is made anew, as for
/// a database older than it).
#[tokio::test]
async fn the_links_follow_every_write() {
    let dir = tempfile::tempdir().unwrap();
    let ids = links_follow(&Store::open_sqlite(dir.path()).await.unwrap()).await;
    drop_attachment(&Store::open_sqlite(dir.path()).await.unwrap(), &ids).await;
    if let Some(url) = fresh_postgres().await {
        let store = Store::connect(&url).await.unwrap();
        let ids = links_follow(&store).await;
        for older in ["DELETE FROM links", "DELETE FROM links_made"] {
            sqlx::query(older).execute(&store.pool).await.unwrap();
        }
        drop_attachment(&Store::connect(&url).await.unwrap(), &ids).await;
    }
}

/// Finds the links of what [`links_follow`] wrote, then removes the attachment: linked no more.
async fn drop_attachment(store: &Store, ids: &[String; 4]) {
    links_found(store, ids).await;
    let [a, _, att, _] = ids;
    store.mark_record_deleted::<VolumeAttachment>(att, &Scope::All, Utc::now()).await.unwrap();
    store.remove(att).await.unwrap();
    assert!(store.linked_to(ObjectKind::VolumeAttachment, a).await.unwrap().is_empty(), "removed: linked no more");
}

/// Writes two VMs, a volume made from image `url-x` attached to the first,
/// and a load balancer over both, then moves the balancer to the second:
/// `[first VM, second VM, attachment, balancer]`.
async fn links_follow(store: &Store) -> [String; 4] {
    store.insert_template(&template("tpl"), Utc::now()).await.unwrap();
    let (a, mut b) = (vm("a", "tpl"), vm("b", "tpl"));
    b.machine.boot.image = "url-x".into();
    store.insert_vm(&a).await.unwrap();
    store.insert_vm(&b).await.unwrap();
    fn spec<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
        serde_json::from_value(v).unwrap()
    }
    let vol = VolumeRecord::new("vol".into(), "acme", "v", "acme", spec(json!({"size": "1Gi", "source_image": "url-x"})), Utc::now());
    store.insert_record(&vol, Vec::new()).await.unwrap();
    let att_spec = spec(json!({"volume": "vol", "compute_instance": a.id}));
    let att = VolumeAttachmentRecord::new("att".into(), "acme", "at", "acme", att_spec, Utc::now());
    store.insert_record(&att, vec![("vol".into(), VOLUME_OF.into())]).await.unwrap();
    let lb = LoadBalancerRecord::new(
        "lb".into(),
        "acme",
        "l",
        "acme",
        spec(json!({"subnet": "s", "targets": [a.id, b.id], "port_mappings": []})),
        Utc::now(),
    );
    store.insert_record(&lb, Vec::new()).await.unwrap();
    let ids = [a.id.clone(), b.id.clone(), att.id.clone(), lb.id.clone()];
    assert_eq!(store.linked_to(ObjectKind::LoadBalancer, &a.id).await.unwrap()[0].id, "lb");
    let mut moved = lb.spec.clone();
    moved.targets = vec![b.id.clone()];
    store.update_record_spec(&lb, lb.version, moved, Utc::now()).await.unwrap();
    assert!(store.linked_to(ObjectKind::LoadBalancer, &a.id).await.unwrap().is_empty(), "a target no more");
    assert_eq!(store.linked_records::<LoadBalancer>(&b.id).await.unwrap()[0].id, "lb");
    links_found(store, &ids).await;
    ids
}

/// The links of what [`links_follow`] wrote.
async fn links_found(store: &Store, [a, b, att, lb]: &[String; 4]) {
    let on_a = store.linked_records::<VolumeAttachment>(a).await.unwrap();
    assert_eq!(on_a.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), [att.as_str()]);
    assert!(store.linked_to(ObjectKind::VolumeAttachment, b).await.unwrap().is_empty());
    assert_eq!(store.linked_to(ObjectKind::LoadBalancer, b).await.unwrap()[0].id, *lb);
    let users = store.users_of_image(&["url-x", "http://elsewhere/x.img"], |t| t == "acme").await.unwrap();
    let users: Vec<(ObjectKind, &str)> = users.iter().map(|u| (u.kind, u.id.as_str())).collect();
    assert_eq!(users, [(ObjectKind::VirtualMachine, b.as_str()), (ObjectKind::Volume, "vol")]);
    assert!(store.users_of_image(&["url-x"], |t| t == "other").await.unwrap().is_empty(), "another tenant's users are not shown");
}

#[test]
fn visible_images_are_the_tenants_and_the_public_ones() {
    use vmaas_model::image::ImageSpec;
    let now = Utc::now();
    let mine = ImageRecord::new("1".into(), "a", "os", "u", ImageSpec::default(), now);
    let public = ImageRecord::new("2".into(), "ops", "os", "u", ImageSpec { public: true, ..Default::default() }, now);
    let theirs = ImageRecord::new("3".into(), "b", "other", "u", ImageSpec::default(), now);
    let all = [public.clone(), mine.clone(), theirs];
    assert_eq!(image::visible(&all, "a", "os").map(|i| i.id.as_str()), Some("1"), "a tenant's own image first");
    assert_eq!(image::visible(&all, "c", "os").map(|i| i.id.as_str()), Some("2"), "else a public one");
    assert!(image::visible(&all, "a", "other").is_none(), "never another tenant's");
}

#[tokio::test]
async fn status_writes_share_commits_and_each_is_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_sqlite(dir.path()).await.unwrap();
    store.insert_template(&template("tpl"), Utc::now()).await.unwrap();
    let mut vms = Vec::new();
    for i in 0..40 {
        let v = vm(&format!("vm-{i}"), "tpl");
        store.insert_vm(&v).await.unwrap();
        vms.push(v);
    }
    // One VM moved on since it was seen: its status must not land.
    let newer = store.request_restart(&vms[0].id, &Scope::All).await.unwrap();
    let before = store.events_after(0, 10_000).await.unwrap().len();
    let mut ready = vms[0].status.clone();
    ready.state = VmState::Ready;
    let tasks: Vec<_> = vms
        .iter()
        .map(|v| {
            let (store, v, ready) = (store.clone(), v.clone(), ready.clone());
            tokio::spawn(async move { store.write_vm_status(&v, &ready, Requests::default()).await })
        })
        .collect();
    let mut written = Vec::new();
    for t in tasks {
        written.push(t.await.unwrap());
    }
    assert!(!*written[0].as_ref().unwrap(), "a status of an old version is refused");
    assert!(written[1..].iter().all(|w| *w.as_ref().unwrap()), "{written:?}");
    let events = store.events_after(0, 10_000).await.unwrap();
    assert_eq!(events.len() - before, 39, "one event per status changed");
    assert!(events[before..].iter().all(|e| e.kind_of_change.ends_with("UPDATED")), "{:?}", events[before].kind_of_change);
    assert_eq!(store.get_vm(&vms[0].id, &Scope::All).await.unwrap().status.state, newer.status.state);
    // Durable: a store opened again reads them from the file.
    drop(store);
    let again = Store::open_sqlite(dir.path()).await.unwrap();
    for v in &vms[1..] {
        let read = again.get_vm(&v.id, &Scope::All).await.unwrap();
        assert_eq!((read.status.state, read.observed_version), (VmState::Ready, v.version), "{}", v.name);
    }
}

/// A watcher starts after the last event whose change reads already show:
/// were the log's last event ahead of what a read shows, a change
/// committed and not yet in memory would be missed by a caller that reads
/// the object and then watches for its next event (as every wait does).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_log_never_runs_ahead_of_reads() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_sqlite(dir.path()).await.unwrap();
    store.insert_template(&template("tpl"), Utc::now()).await.unwrap();
    let v = vm("vm", "tpl");
    store.insert_vm(&v).await.unwrap();
    // Each status write numbers itself in the status (as its cluster).
    let writer = {
        let (store, v) = (store.clone(), v.clone());
        tokio::spawn(async move {
            let mut status = v.status.clone();
            for k in 1..=400 {
                status.cluster = Some(k.to_string());
                assert!(store.write_vm_status(&v, &status, Requests::default()).await.unwrap());
            }
        })
    };
    let number = |cluster: Option<&str>| cluster.map_or(0, |c| c.parse::<u32>().unwrap());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut compared = 0;
    while !writer.is_finished() {
        assert!(std::time::Instant::now() < deadline, "400 status writes took over a minute");
        let last = store.last_event().await.unwrap();
        let read = store.get_vm(&v.id, &Scope::All).await.unwrap();
        let Some(event) = store.events_after(last - 1, 1).await.unwrap().pop().filter(|e| e.seq == last && e.object_id == v.id) else {
            continue;
        };
        let shown: serde_json::Value = serde_json::from_str(&event.object).unwrap();
        let logged = number(shown["status"]["cluster"].as_str());
        assert!(
            number(read.status.cluster.as_deref()) >= logged,
            "event {last} shows write {logged}; a read after it shows {:?}",
            read.status.cluster
        );
        compared += 1;
    }
    writer.await.unwrap();
    assert!(compared > 0, "no read was compared with the log");
}

/// Admissions queued together on PostgreSQL (`VMAAS_TEST_DATABASE_URL`)
/// share a transaction, yet each decides on what the ones before it
/// wrote, and one that gives up after writing takes only its own write
/// with it; on SQLite, the same through the store itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admissions_decide_in_turn_and_give_up_alone() {
    let dir = tempfile::tempdir().unwrap();
    admissions_in_turn(Store::open_sqlite(dir.path()).await.unwrap(), false).await;
    if let Some(url) = fresh_postgres().await {
        admissions_in_turn(Store::connect(&url).await.unwrap(), true).await;
        // What was acknowledged is what another connection finds.
        let again = Store::connect(&url).await.unwrap();
        assert_eq!(again.usage("acme").await.unwrap().virtual_machines, 12);
    }
}

/// 40 admissions at once, each storing a VM while the tenant holds fewer
/// than 12; every third one gives up, after its write when `undone` (a
/// write in an admission is undone only on PostgreSQL: on SQLite it is
/// the admission's last step).
async fn admissions_in_turn(store: Store, undone: bool) {
    store.insert_template(&template("tpl"), Utc::now()).await.unwrap();
    let tasks: Vec<_> = (0..40)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                let adm = store.admission().await.unwrap();
                if adm.store().usage("acme").await.unwrap().virtual_machines >= 12 {
                    return None;
                }
                let v = vm(&format!("vm{i}"), "tpl");
                if i % 3 == 0 && !undone {
                    return Some((v.name.clone(), false));
                }
                adm.store().insert_vm(&v).await.unwrap();
                if i % 3 == 0 {
                    return Some((v.name.clone(), false));
                }
                adm.commit().await.unwrap();
                Some((v.name.clone(), true))
            })
        })
        .collect();
    let mut kept = Vec::new();
    let mut gave_up = 0;
    for t in tasks {
        match t.await.unwrap() {
            Some((name, true)) => kept.push(name),
            Some((_, false)) => gave_up += 1,
            None => {}
        }
    }
    assert_eq!(kept.len(), 12, "a limit of 12 decided in turn: {kept:?}");
    assert!(gave_up > 0, "some gave up after writing");
    kept.sort();
    assert_eq!(stored_vm_names(&store).await, kept, "what was kept is stored, and nothing else");
    assert_eq!(store.usage("acme").await.unwrap().virtual_machines, 12);
}

/// A create that fails in an admission (its name taken) leaves the
/// admission's transaction good: committed after the failure, as a VM
/// create does, it stores nothing of its own, and the admissions sharing
/// the transaction (PostgreSQL, `VMAAS_TEST_DATABASE_URL`) keep theirs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_create_leaves_its_admissions_group_good() {
    let dir = tempfile::tempdir().unwrap();
    failed_creates_in_turn(Store::open_sqlite(dir.path()).await.unwrap()).await;
    if let Some(url) = fresh_postgres().await {
        failed_creates_in_turn(Store::connect(&url).await.unwrap()).await;
        let again = Store::connect(&url).await.unwrap();
        assert_eq!(again.usage("acme").await.unwrap().virtual_machines, 31, "what was acknowledged is what another connection finds");
    }
}

/// 40 admissions at once, each creating a VM and committing whatever
/// came of it; every fourth names the VM already called `taken`.
async fn failed_creates_in_turn(store: Store) {
    store.insert_template(&template("tpl"), Utc::now()).await.unwrap();
    store.insert_vm(&vm("taken", "tpl")).await.unwrap();
    let tasks: Vec<_> = (0..40)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                let adm = store.admission().await.unwrap();
                let name = if i % 4 == 0 { "taken".to_owned() } else { format!("vm{i}") };
                let inserted = adm.store().insert_vm(&vm(&name, "tpl")).await;
                adm.commit().await.unwrap();
                (name, inserted.map_err(|e| e.to_string()))
            })
        })
        .collect();
    let mut kept = vec!["taken".to_owned()];
    for t in tasks {
        match t.await.unwrap() {
            (name, Ok(())) => kept.push(name),
            (name, Err(e)) => assert!(name == "taken" && e.contains("already exists"), "{name}: {e}"),
        }
    }
    assert_eq!(kept.len(), 31, "every create but the ten of a taken name: {kept:?}");
    kept.sort();
    assert_eq!(stored_vm_names(&store).await, kept, "what was kept is stored, and nothing else");
    assert_eq!(store.usage("acme").await.unwrap().virtual_machines, 31);
}

/// The names of the VMs `store` holds (at most 100), sorted.
async fn stored_vm_names(store: &Store) -> Vec<String> {
    let (rows, _) = store.list(ObjectKind::VirtualMachine, &Scope::All, &Filter { limit: 100, ..Default::default() }).await.unwrap();
    let mut names: Vec<String> = rows.into_iter().map(|r| r.name).collect();
    names.sort();
    names
}
