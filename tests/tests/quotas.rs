//! Quotas per tenant on the real `vmaas-server`, on SQLite and PostgreSQL:
//! set by administrators, read by the tenant, enforced on create and on
//! PATCH with RESOURCE_EXHAUSTED naming the limit (nothing made or
//! changed), shown as usage in the API and in `/metrics`.

use reqwest::Method;
use serde_json::{Value, json};
use vmaas_tests::vms::{TINY, V1, publish};
use vmaas_tests::{Db, Server, on_both_databases};

fn vm(name: &str, cores: u32, memory: &str) -> Value {
    json!({"object": {"metadata": {"name": name}, "spec": {"template": "tiny",
        "template_parameters": {"vm_cpu_cores": {"value": cores}, "vm_memory": {"value": memory}}}}})
}

/// A 429 RESOURCE_EXHAUSTED naming `field`, with `words` in its reason.
fn exhausted(st: u16, e: &Value, field: &str, words: &str) {
    assert_eq!((st, &e["code"]), (429, &json!(8)), "{e}");
    assert_eq!(e["details"][0]["field"], field, "{e}");
    assert!(e["details"][0]["reason"].as_str().unwrap().contains(words), "{e}");
}

on_both_databases! {
    async fn quotas_are_set_read_and_enforced_on_create_and_patch(db: Db) {
        let Some(s) = Server::start(db).await else { return };
        publish(&s, TINY);
        let (admin, acme, globex) = (s.token("ops", true), s.token("acme", false), s.token("globex", false));
        let quota = format!("{V1}/tenants/acme/quota");
        let limits = json!({"object": {"spec": {"virtual_machines": 2, "cores": 3, "memory": "1Gi", "external_ips": 1}}});

        // Only administrators set quotas; a tenant reads its own, not another's.
        assert_eq!(s.raw(Method::PUT, &quota, Some(&acme), Some(limits.clone())).await.0, 403);
        let q = s.cli_json(&admin, &["quota", "set", "acme", "--vms", "2", "--cores", "3", "--memory", "1Gi", "--external-ips", "1"]);
        assert_eq!((&q["metadata"]["version"], &q["spec"]), (&json!(1), &limits["object"]["spec"]), "{q}");
        let table = String::from_utf8(s.cli(&acme, &["quota", "get", "acme"]).stdout).unwrap();
        assert!(table.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["cores", "3", "0"]), "{table}");
        assert!(table.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["disk", "unlimited", "0"]), "{table}");
        let (st, own) = s.raw(Method::GET, &quota, Some(&acme), None).await;
        assert_eq!((st, &own["object"]["status"]["usage"]["virtual_machines"]), (200, &json!(0)), "{own}");
        assert_eq!(s.raw(Method::GET, &quota, Some(&globex), None).await.0, 404);
        // Bad limits name the field; a stale version is 409; nothing changes.
        let (st, e) = s.raw(Method::PUT, &quota, Some(&admin), Some(json!({"object": {"spec": {"vms": 1}}}))).await;
        assert_eq!(st, 400, "{e}");
        assert!(e["message"].as_str().unwrap().contains("vms"), "{e}");
        let (st, e) = s.raw(Method::PUT, &quota, Some(&admin), Some(json!({"object": {"spec": {"memory": "-1Gi"}}}))).await;
        assert_eq!((st, &e["details"][0]["field"]), (400, &json!("object.spec.memory")), "{e}");
        let stale = json!({"object": {"metadata": {"version": 7}, "spec": {"cores": 100}}});
        assert_eq!(s.raw(Method::PUT, &quota, Some(&admin), Some(stale)).await.0, 409);

        // Creates within the quota pass; the one beyond it names the limit and makes nothing.
        let vms = format!("{V1}/virtual_machines");
        assert_eq!(s.raw(Method::POST, &vms, Some(&acme), Some(vm("a", 1, "256Mi"))).await.0, 201);
        let (st, e) = s.raw(Method::POST, &vms, Some(&acme), Some(vm("b", 3, "256Mi"))).await;
        exhausted(st, &e, "quota.cores", "may have 3 cores; it holds 1 and this asks for 3 more");
        let (st, e) = s.raw(Method::POST, &vms, Some(&acme), Some(vm("b", 1, "1Gi"))).await;
        exhausted(st, &e, "quota.memory", "may have 1Gi memory");
        let (st, b) = s.raw(Method::POST, &vms, Some(&acme), Some(vm("b", 2, "512Mi"))).await;
        assert_eq!(st, 201, "{b}");
        let (st, e) = s.raw(Method::POST, &vms, Some(&acme), Some(vm("c", 1, "128Mi"))).await;
        exhausted(st, &e, "quota.virtual_machines", "may have 2 virtual_machines");
        assert_eq!(s.raw(Method::GET, &vms, Some(&acme), None).await.1["total"], 2, "nothing more was made");
        // Another tenant is not limited by acme's quota.
        assert_eq!(s.raw(Method::POST, &vms, Some(&globex), Some(vm("c", 4, "2Gi"))).await.0, 201);

        // A PATCH that takes more is refused and changes nothing; one that takes less passes.
        let id = b["object"]["id"].as_str().unwrap();
        let more = json!({"object": {"spec": {"template_parameters": {"vm_cpu_cores": {"value": 3}}}}});
        let (st, e) = s.raw(Method::PATCH, &format!("{vms}/{id}"), Some(&acme), Some(more)).await;
        exhausted(st, &e, "quota.cores", "it holds 3 and this asks for 1 more");
        let (_, now) = s.raw(Method::GET, &format!("{vms}/{id}"), Some(&acme), None).await;
        assert_eq!(now["object"]["metadata"]["version"], b["object"]["metadata"]["version"], "unchanged: {now}");
        let less = json!({"object": {"spec": {"template_parameters": {"vm_cpu_cores": {"value": 1}, "vm_memory": {"value": "512Mi"}}}}});
        let (st, e) = s.raw(Method::PATCH, &format!("{vms}/{id}"), Some(&acme), Some(less)).await;
        assert_eq!(st, 200, "{e}");

        // External IPs.
        let ips = format!("{V1}/external_ips");
        assert_eq!(s.raw(Method::POST, &ips, Some(&acme), Some(json!({"object": {"metadata": {"name": "one"}, "spec": {}}}))).await.0, 201);
        let (st, e) = s.raw(Method::POST, &ips, Some(&acme), Some(json!({"object": {"metadata": {"name": "two"}, "spec": {}}}))).await;
        exhausted(st, &e, "quota.external_ips", "may have 1 external_ips");

        // Usage in the API and in /metrics.
        let usage = s.raw(Method::GET, &quota, Some(&acme), None).await.1["object"]["status"]["usage"].clone();
        assert_eq!(usage, json!({"virtual_machines": 2, "cores": 2, "memory": "768Mi", "disk": usage["disk"], "external_ips": 1}));
        // Per tenant: an administrator's only; without a token, nothing of a tenant.
        let anyone = reqwest::get(format!("{}/metrics", s.endpoint)).await.unwrap().text().await.unwrap();
        assert!(!anyone.contains("tenant=") && anyone.contains("vmaas_build_info"), "{anyone}");
        let metrics = s.raw(Method::GET, "/metrics", Some(&admin), None).await.1;
        let metrics = metrics.as_str().unwrap_or_default();
        assert!(metrics.contains("vmaas_quota_limit{tenant=\"acme\",resource=\"cores\"} 3"), "{metrics}");
        assert!(metrics.contains("vmaas_quota_usage{tenant=\"acme\",resource=\"external_ips\"} 1"), "{metrics}");
        assert!(!metrics.contains("tenant=\"globex\""), "only tenants with a quota are exported");
        let (st, all) = s.raw(Method::GET, &format!("{V1}/quotas"), Some(&admin), None).await;
        assert_eq!((st, &all["total"], &all["items"][0]["tenant"]), (200, &json!(1), &json!("acme")), "{all}");

        // Disk: the VMs' disks (1Gi each) and volumes count.
        let (st, q) = s.raw(Method::PUT, &quota, Some(&admin), Some(json!({"object": {"spec": {"disk": "3Gi"}}}))).await;
        assert_eq!((st, &q["object"]["metadata"]["version"]), (200, &json!(2)), "{q}");
        let volume = |name: &str, size: &str| json!({"object": {"metadata": {"name": name}, "spec": {"size": size}}});
        let (st, e) = s.raw(Method::POST, &format!("{V1}/volumes"), Some(&acme), Some(volume("big", "2Gi"))).await;
        exhausted(st, &e, "quota.disk", "may have 3Gi disk; it holds 2Gi");
        assert_eq!(s.raw(Method::POST, &format!("{V1}/volumes"), Some(&acme), Some(volume("small", "1Gi"))).await.0, 201);

        // Without a quota, the tenant is unlimited again.
        assert_eq!(s.raw(Method::DELETE, &quota, Some(&acme), None).await.0, 403);
        let (st, q) = s.raw(Method::DELETE, &quota, Some(&admin), None).await;
        assert_eq!((st, &q["object"]["spec"]), (200, &json!({})), "{q}");
        assert_eq!(s.raw(Method::POST, &vms, Some(&acme), Some(vm("c", 4, "2Gi"))).await.0, 201);
    }
}

/// `status.usage` of the quota at `quota`, read as `t`.
async fn usage(s: &Server, quota: &str, t: &str) -> Value {
    s.raw(Method::GET, quota, Some(t), None).await.1["object"]["status"]["usage"].clone()
}

on_both_databases! {
    /// What a tenant holds is counted by every write (create, resize,
    /// delete), not recounted: the counters stay true across restarts, and
    /// on PostgreSQL a database whose counters are missing (one made by an
    /// older release) is counted once at start.
    async fn usage_follows_every_write_and_survives_restarts(db: Db) {
        let Some(mut s) = Server::start(db).await else { return };
        publish(&s, TINY);
        let (admin, acme) = (s.token("ops", true), s.token("acme", false));
        let quota = format!("{V1}/tenants/acme/quota");
        let (st, q) = s.raw(Method::PUT, &quota, Some(&admin), Some(json!({"object": {"spec": {"cores": 100}}}))).await;
        assert_eq!(st, 200, "{q}");
        let vms = format!("{V1}/virtual_machines");
        let (_, a) = s.raw(Method::POST, &vms, Some(&acme), Some(vm("a", 1, "256Mi"))).await;
        let (_, b) = s.raw(Method::POST, &vms, Some(&acme), Some(vm("b", 2, "512Mi"))).await;
        let volume = json!({"object": {"metadata": {"name": "v"}, "spec": {"size": "1Gi"}}});
        assert_eq!(s.raw(Method::POST, &format!("{V1}/volumes"), Some(&acme), Some(volume)).await.0, 201);
        let ip = json!({"object": {"metadata": {"name": "ip"}, "spec": {}}});
        assert_eq!(s.raw(Method::POST, &format!("{V1}/external_ips"), Some(&acme), Some(ip)).await.0, 201);
        let held = usage(&s, &quota, &acme).await;
        assert_eq!((&held["virtual_machines"], &held["cores"], &held["memory"], &held["external_ips"]), (&json!(2), &json!(3), &json!("768Mi"), &json!(1)), "{held}");
        let disk_of_two = held["disk"].clone();

        // A resize and a delete change the counters by what they change.
        let b_id = b["object"]["id"].as_str().unwrap();
        let less = json!({"object": {"spec": {"template_parameters": {"vm_cpu_cores": {"value": 1}, "vm_memory": {"value": "512Mi"}}}}});
        assert_eq!(s.raw(Method::PATCH, &format!("{vms}/{b_id}"), Some(&acme), Some(less)).await.0, 200);
        let a_id = a["object"]["id"].as_str().unwrap();
        assert_eq!(s.raw(Method::DELETE, &format!("{vms}/{a_id}"), Some(&acme), None).await.0, 202);
        let held = usage(&s, &quota, &acme).await;
        assert_eq!((&held["virtual_machines"], &held["cores"], &held["memory"]), (&json!(1), &json!(1), &json!("512Mi")), "{held}");
        assert_ne!(held["disk"], disk_of_two, "a's disk is no longer held: {held}");

        // The same after a restart, and (PostgreSQL) after the counters are lost.
        s.restart().await;
        assert_eq!(usage(&s, &quota, &acme).await, held, "after a restart");
        if let Some(url) = s.database_url.clone() {
            // Stopped first: the server's own writes (a's deletion being
            // finished) would otherwise race this wholesale delete.
            s.stop().await;
            let mut conn = <sqlx::postgres::PgConnection as sqlx::Connection>::connect(&url).await.unwrap();
            sqlx::query("DELETE FROM usage").execute(&mut conn).await.unwrap();
            sqlx::query("DELETE FROM usage_counted").execute(&mut conn).await.unwrap();
            s.relaunch().await;
            assert_eq!(usage(&s, &quota, &acme).await, held, "counted again at start");
        }
    }
}
