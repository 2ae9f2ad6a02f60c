//! `vmaas-bench`: benchmarks that print figures.
//!
//! `vmaas-bench api` measures GET-by-id and list throughput and p50/p99
//! latency of the real router on SQLite at N concurrent connections, next to
//! a bare axum handler on the same machine, and prints the ratios;
//! `vmaas-bench api --objects N` measures the server as its store fills.

/// The server's allocator (see `vmaas-server`'s main), so that the
/// server measured in process allocates as the real one does.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use axum::Router;
use axum::routing::get;
use clap::{Parser, Subcommand};
use serde_json::json;
use vmaas_server::auth::Role;
use vmaas_server::none_backend::NoBackend;
use vmaas_server::startup::{App, Config};

mod boot;
mod debian;
mod disk_snapshots;
mod events;
mod export;
mod filtered;
mod grpc;
mod grpc_create;
mod import;
mod kubevirt;
mod kubevirt_bare;
mod kubevirt_cost;
mod kubevirt_watch;
mod migration;
mod network;
mod pg_writes;
mod recovery;
mod scale;
mod shapes;
mod storage;
mod terraform;
mod tf_plan;
mod throughput;
mod tls;
mod vms;
mod writes;

#[derive(Parser)]
#[command(
    name = "vmaas-bench",
    about = "vmaas benchmarks",
    after_help = "Environment:\n  VMAAS_BENCH_DATABASE_URL  a PostgreSQL server the api and writes benchmarks also measure on\n  VMAAS_BENCH_VERBOSE       events: print each change as it arrives"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// The kubevirt backend on a real kube-apiserver: VMs applied per
    /// second, create→applied, cluster status change → API, server RSS.
    Kubevirt {
        /// VMs created.
        #[arg(long, default_value_t = 1000)]
        vms: usize,
        /// The server binary [default: vmaas-server beside vmaas-bench].
        #[arg(long)]
        server: Option<std::path::PathBuf>,
    },
    /// API throughput and latency versus a bare axum handler.
    Api {
        /// Concurrent connections.
        #[arg(long, default_value_t = 64)]
        connections: usize,
        /// Measuring time per scenario.
        #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
        duration: Duration,
        /// VMs stored before measuring.
        #[arg(long, default_value_t = 500)]
        vms: usize,
        /// Page size of the list scenario.
        #[arg(long, default_value_t = 20)]
        page: usize,
        /// Only the write scenarios (creates beside the bare SQLite loop).
        #[arg(long)]
        writes_only: bool,
        /// Instead: the real server empty and then with this many VMs stored
        /// (idle CPU, `/healthz`, creates with and without a quota, a frozen replica).
        #[arg(long)]
        objects: Option<usize>,
        /// With `--objects`: the server binary [default: vmaas-server beside vmaas-bench].
        #[arg(long)]
        server: Option<std::path::PathBuf>,
    },
    /// Event fan-out: N watchers, one VM changed M times; change → every watcher notified.
    Events {
        /// Watchers holding the stream open.
        #[arg(long, default_value_t = 1000)]
        watchers: usize,
        /// Changes made, one at a time.
        #[arg(long, default_value_t = 20)]
        changes: usize,
    },
    /// `terraform apply` of N VMs against the slowest VM, and the provider's overhead.
    Terraform(terraform::TerraformArgs),
    /// OpenTofu's plan of N VMs and apply of M against `terraform_data`'s (`--backend none`).
    TerraformPlan(tf_plan::PlanArgs),
    /// An image import over HTTP against `curl` plus `qemu-img check` of the same file.
    Import {
        /// MiB of data in the qcow2.
        #[arg(long, default_value_t = 1024)]
        megabytes: u64,
        /// Rounds of each, alternating.
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// Images directory [default: ~/.local/share/vmaas/images].
        #[arg(long)]
        images_dir: Option<std::path::PathBuf>,
    },
    /// The user-space switch: forwarding rate in process and through unix sockets, DHCP answer time.
    Network {
        /// Frames forwarded in process.
        #[arg(long, default_value_t = 5_000_000)]
        frames: usize,
    },
    /// Two real test guests: TCP throughput over a switch segment against QEMU's own socket networking, and DHCP time in the guest.
    Guests {
        /// Megabytes sent from one guest to the other.
        #[arg(long, default_value_t = 64)]
        megabytes: u32,
        /// Only host to guest: through a subnet's gateway and through QEMU's user network.
        #[arg(long)]
        host_only: bool,
    },
    /// function-vmaas: RunFunction latency over gRPC on loopback, and the in-process render time.
    Function {
        /// Calls to measure.
        #[arg(long, default_value_t = 5000)]
        calls: usize,
    },
    /// Recovery after `kill -9` of the server with N running VMs.
    Recovery {
        /// Running VMs.
        #[arg(long, default_value_t = 50)]
        vms: usize,
        /// Kills and restarts measured.
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// The server binary [default: vmaas-server beside vmaas-bench]; another
        /// release's, to compare.
        #[arg(long)]
        server: Option<std::path::PathBuf>,
        /// Images directory [default: ~/.local/share/vmaas/images].
        #[arg(long)]
        images_dir: Option<std::path::PathBuf>,
    },
    /// Image import against curl, a VM from an imported image, and volumes on a real guest: hotplug and hot-unplug latency.
    Storage {
        /// Volumes plugged in and out, one after another.
        #[arg(long, default_value_t = 5)]
        rounds: usize,
        /// Size of the image imported, in MiB.
        #[arg(long, default_value_t = 512)]
        megabytes: u64,
        /// Images directory [default: ~/.local/share/vmaas/images].
        #[arg(long)]
        images_dir: Option<std::path::PathBuf>,
    },
    /// Snapshots of a running test guest's disks (1 GiB volume, 256 MiB written) and restores from them.
    Snapshots {
        /// Snapshot and restore rounds, one after another.
        #[arg(long, default_value_t = 5)]
        rounds: usize,
        /// Only exports of a stopped VM's disk grown by 1 GiB, against `qemu-img convert` (issue 57's goal 1).
        #[arg(long)]
        export_only: bool,
        /// Images directory [default: ~/.local/share/vmaas/images].
        #[arg(long)]
        images_dir: Option<std::path::PathBuf>,
    },
    /// Live migration of a test guest to a new QEMU: time to READY and the downtime a client sees.
    Migration {
        /// Migrations, one after another.
        #[arg(long, default_value_t = 10)]
        rounds: usize,
        /// Images directory [default: ~/.local/share/vmaas/images].
        #[arg(long)]
        images_dir: Option<std::path::PathBuf>,
    },
    /// Real VMs, cold and from snapshots: create→READY, stop, delete, memory, a burst, how many idle VMs fit, and disk snapshots and restores.
    Qemu {
        /// VMs created one after another.
        #[arg(long, default_value_t = 5)]
        vms: usize,
        /// VMs created at once.
        #[arg(long, default_value_t = 10)]
        burst: usize,
        /// Idle VMs from snapshots to start at most (at 2 GiB available the run stops adding); 0: none.
        #[arg(long, default_value_t = 100)]
        idle: usize,
        /// Clones' TCG translation cache sizes (MiB) to measure beside QEMU's default.
        #[arg(long, value_delimiter = ',', default_values_t = [24, 16])]
        tcg_caches: Vec<u32>,
        /// The guest: the test guest, or `debian` (the `debian` template, cold
        /// and from a snapshot, and each VM's own host key; --burst, --idle
        /// and --tcg-caches do not apply).
        #[arg(long, value_enum, default_value_t = Guest::TestGuest)]
        image: Guest,
        /// Images directory [default: ~/.local/share/vmaas/images].
        #[arg(long)]
        images_dir: Option<std::path::PathBuf>,
    },
    /// Machine shapes on real guests: EFI (Secure Boot, TPM) beside BIOS
    /// create→READY, cold and from a snapshot, and how long a live resize
    /// takes until the guest sees it.
    Shapes {
        /// VMs per boot path.
        #[arg(long, default_value_t = 5)]
        vms: usize,
        /// Live resizes (one new VM each).
        #[arg(long, default_value_t = 5)]
        resizes: usize,
        /// Base images (default: ~/.local/share/vmaas/images).
        #[arg(long)]
        images_dir: Option<std::path::PathBuf>,
    },
}

struct Figures {
    name: String,
    rps: f64,
    p50_ms: f64,
    p99_ms: f64,
    errors: u64,
}

async fn serve(router: Router) -> anyhow::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    Ok(addr)
}

/// Drives `connections` workers, each with its own keep-alive connection,
/// through `urls` in turn for `duration`, after a one-second warm-up.
async fn load(
    name: &str,
    urls: Arc<Vec<String>>,
    token: Option<String>,
    ca: Option<&reqwest::Certificate>,
    connections: usize,
    duration: Duration,
) -> anyhow::Result<Figures> {
    let mut tasks = Vec::new();
    let warmup = Duration::from_secs(1);
    let start = Instant::now() + Duration::from_millis(100);
    for w in 0..connections {
        let urls = urls.clone();
        let token = token.clone();
        let mut builder = reqwest::Client::builder().pool_max_idle_per_host(1);
        if let Some(ca) = ca {
            // HTTP/1.1 as in plain text: the figure is the cost of TLS, not of HTTP/2 (which ALPN would pick).
            builder = builder.tls_certs_merge([ca.clone()]).http1_only();
        }
        let client = builder.build()?;
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(1 << 16);
            let mut errors = 0u64;
            let mut i = w;
            tokio::time::sleep_until(start.into()).await;
            let measure_from = start + warmup;
            let end = measure_from + duration;
            loop {
                let t0 = Instant::now();
                if t0 >= end {
                    break;
                }
                let mut req = client.get(&urls[i % urls.len()]);
                if let Some(t) = &token {
                    req = req.bearer_auth(t);
                }
                i += 7;
                let ok = match req.send().await {
                    Ok(r) => r.status().is_success() && r.bytes().await.is_ok(),
                    Err(_) => false,
                };
                if t0 >= measure_from {
                    if ok {
                        lat.push(t0.elapsed().as_micros() as u32);
                    } else {
                        errors += 1;
                    }
                }
            }
            (lat, errors)
        }));
    }
    Figures::gather(name, tasks, duration).await
}

impl Figures {
    /// The figures of load workers that each return their latencies (µs) and errors.
    async fn gather(name: &str, tasks: Vec<tokio::task::JoinHandle<(Vec<u32>, u64)>>, duration: Duration) -> anyhow::Result<Self> {
        Self::gather_since(name, tasks, None, duration).await
    }

    /// [`Figures::gather`] for workers that may stop before `duration` (a
    /// count reached): the rate is over the time from `started` until the
    /// last of them stopped, when that is shorter.
    async fn gather_since(
        name: &str,
        tasks: Vec<tokio::task::JoinHandle<(Vec<u32>, u64)>>,
        started: Option<Instant>,
        duration: Duration,
    ) -> anyhow::Result<Self> {
        let (mut all, mut errors) = (Vec::new(), 0);
        for t in tasks {
            let (l, e) = t.await?;
            all.extend(l);
            errors += e;
        }
        all.sort_unstable();
        let pct = |p: f64| all.get(((all.len() as f64 - 1.0) * p) as usize).copied().unwrap_or(0) as f64 / 1000.0;
        let window = started.map_or(duration, |t| t.elapsed().min(duration));
        Ok(Figures { name: name.into(), rps: all.len() as f64 / window.as_secs_f64(), p50_ms: pct(0.50), p99_ms: pct(0.99), errors })
    }
}

async fn api(connections: usize, duration: Duration, vms: usize, page: usize) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    // The per-tenant rate limit checks every request but, this high, refuses none:
    // its cost is measured, not its limit (one tenant makes every request here).
    let tenant_rate = vmaas_server::rate::RateConfig::new(1_000_000_000, 0);
    let config =
        Config { reconcile_interval: Duration::from_secs(3600), tenant_rate, ..Config::new("127.0.0.1:0".parse()?, dir.path().to_owned()) };
    let app = App::open(config, Arc::new(NoBackend)).await?;
    let admin = app.state.keys.issue("ops", "ops", Role::Admin, Duration::from_secs(3600))?;
    let token = app.state.keys.issue("bench", "bench", Role::Tenant, Duration::from_secs(3600))?;
    let vmaas = serve(app.router()).await?;
    let base = format!("http://{vmaas}/api/fulfillment/v1");

    // Seed through the API.
    let http = reqwest::Client::new();
    let tpl = json!({"object": {"id": "simple_vm", "parameters": [
        {"name": "vm_cpu_cores", "default": {"value": 2}}, {"name": "vm_memory", "default": {"value": "2Gi"}}, {"name": "vm_disk_size", "default": {"value": "20Gi"}}]}});
    let r = http.post(format!("{base}/virtual_machine_templates")).bearer_auth(&admin).json(&tpl).send().await?;
    if !r.status().is_success() {
        bail!("publishing the template: {}", r.text().await?);
    }
    let mut ids = Vec::new();
    let mut sample = String::new();
    for i in 0..vms {
        let body = json!({"object": {"id": format!("vm-{i}"), "spec": {"template": "simple_vm", "template_parameters": {"vm_cpu_cores": {"value": 4}, "vm_memory": {"value": "4Gi"}}}}});
        let r = http.post(format!("{base}/virtual_machines")).bearer_auth(&token).json(&body).send().await?;
        let text = r.text().await?;
        let v: serde_json::Value = serde_json::from_str(&text).context("create response")?;
        ids.push(v["object"]["id"].as_str().context("id")?.to_owned());
        sample = text;
    }
    let list_sample = http.get(format!("{base}/virtual_machines?limit={page}")).bearer_auth(&token).send().await?.text().await?;

    // The bare handler returns bodies of the same sizes, prebuilt.
    let one: &'static str = Box::leak(sample.into_boxed_str());
    let many: &'static str = Box::leak(list_sample.into_boxed_str());
    let bare = serve(Router::new().route("/one", get(move || async move { one })).route("/many", get(move || async move { many }))).await?;

    let by_id: Arc<Vec<String>> = Arc::new(ids.iter().map(|id| format!("{base}/virtual_machines/{id}")).collect());
    let list = Arc::new(vec![format!("{base}/virtual_machines?limit={page}")]);
    println!(
        "vmaas-bench api: {connections} connections, {} s per scenario, {vms} VMs on SQLite, list page {page}, {} cores",
        duration.as_secs(),
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
    );
    // Each pair runs back to back, twice, alternating, and the better run of
    // each counts: the machine's noise hits both sides alike.
    let one_url = Arc::new(vec![format!("http://{bare}/one")]);
    let many_url = Arc::new(vec![format!("http://{bare}/many")]);
    let mut results: Vec<Figures> = Vec::new();
    for (bare_name, bare_urls, name, urls) in [
        ("bare axum, one object", one_url, "vmaas GET virtual_machines/{id}", by_id),
        ("bare axum, list-sized body", many_url, "vmaas GET virtual_machines (list)", list),
    ] {
        let mut best_bare: Option<Figures> = None;
        let mut best: Option<Figures> = None;
        for _ in 0..2 {
            let b = load(bare_name, bare_urls.clone(), None, None, connections, duration).await?;
            let v = load(name, urls.clone(), Some(token.clone()), None, connections, duration).await?;
            if best_bare.as_ref().is_none_or(|x| b.rps > x.rps) {
                best_bare = Some(b);
            }
            if best.as_ref().is_none_or(|x| v.rps > x.rps) {
                best = Some(v);
            }
        }
        results.extend(best_bare);
        results.extend(best);
    }
    results.extend(grpc::figures(app.router_with_grpc()?, grpc::VM_GET, ids.clone(), &token, connections, duration).await?);
    results.extend(tls::figures(app.router(), &ids, &token, connections, duration).await?);
    results.extend(writes::figures(connections, duration).await?);
    results.extend(grpc::figures(app.router_with_grpc()?, grpc::INSTANCE_GET, ids.clone(), &token, connections, duration).await?);
    println!("{:<36} {:>10} {:>9} {:>9} {:>7}", "scenario", "req/s", "p50 ms", "p99 ms", "errors");
    for f in &results {
        println!("{:<36} {:>10.0} {:>9.2} {:>9.2} {:>7}", f.name, f.rps, f.p50_ms, f.p99_ms, f.errors);
    }
    let rps = |name: &str| results.iter().find(|f| f.name == name).map_or(f64::NAN, |f| f.rps);
    let ratio = |of: &str, to: &str| 100.0 * rps(of) / rps(to);
    println!("ratio GET by id / bare: {:.0}%", ratio("vmaas GET virtual_machines/{id}", "bare axum, one object"));
    println!("ratio list / bare:      {:.0}%", ratio("vmaas GET virtual_machines (list)", "bare axum, list-sized body"));
    let bare_tonic = |i: usize| results.iter().filter(|f| f.name == "bare tonic, one object").nth(i).map_or(f64::NAN, |f| f.rps);
    println!("ratio gRPC VirtualMachines/Get / bare tonic: {:.0}%", 100.0 * rps("vmaas gRPC VirtualMachines/Get") / bare_tonic(0));
    println!(
        "ratio gRPC ComputeInstances/Get / bare tonic: {:.0}% (goal >= 80%)",
        100.0 * rps("vmaas gRPC ComputeInstances/Get") / bare_tonic(1)
    );
    println!(
        "ratio TLS / plain (GET by id): {:.0}% (goal >= 70%)",
        ratio("vmaas GET by id, TLS (rustls)", "vmaas GET by id, plain (server loop)")
    );
    println!(
        "ratio creates on SQLite / bare SQLite inserts: {:.0}% (goal >= 50%)",
        ratio("vmaas POST virtual_machines, SQLite", "bare SQLite insert loop")
    );
    println!(
        "ratio gRPC creates / REST creates (SQLite): {:.0}% (goal >= 90%)",
        ratio("vmaas gRPC ComputeInstances/Create", "vmaas POST virtual_machines, SQLite")
    );
    if results.iter().any(|f| f.name == "bare PostgreSQL insert loop") {
        println!(
            "ratio creates on PostgreSQL / bare PostgreSQL inserts: {:.0}% (goal >= 50%)",
            ratio("vmaas POST virtual_machines, PostgreSQL", "bare PostgreSQL insert loop")
        );
    }
    Ok(())
}

/// A token of `tenant` (an administrator's when `admin`) valid for `ttl`,
/// from `bin token` on the server's data directory `dir`.
pub fn server_token(bin: &std::path::Path, dir: &std::path::Path, tenant: &str, admin: bool, ttl: &str) -> anyhow::Result<String> {
    let mut cmd = std::process::Command::new(bin);
    cmd.args(["token", "--tenant", tenant, "--ttl", ttl, "--data-dir"]).arg(dir);
    if admin {
        cmd.arg("--admin");
    }
    let out = cmd.output()?;
    if !out.status.success() {
        bail!("vmaas-server token: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8(out.stdout)?.trim().to_owned())
}

/// A goal's verdict as the tables print it.
pub fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "NOT MET" }
}

/// The `p` quantile of sorted figures.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted.get(((sorted.len() as f64 - 1.0) * p).round() as usize).copied().unwrap_or(0.0)
}

fn example(file: &str) -> anyhow::Result<serde_json::Value> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/compositions").join(file);
    Ok(serde_norway::from_str(&std::fs::read_to_string(&path).with_context(|| path.display().to_string())?)?)
}

/// RunFunction p50/p99 over gRPC on loopback for a VM with a network and a
/// LoadBalancer, and the in-process render time.
async fn function_bench(calls: usize) -> anyhow::Result<()> {
    use function_sdk_rust::proto::v1::function_runner_service_client::FunctionRunnerServiceClient;
    use function_sdk_rust::proto::v1::{RequestMeta, Resource, RunFunctionRequest, State};
    use function_sdk_rust::resource::json_to_struct;
    use vmaas_function::render::render_vm;
    use vmaas_function::xr::{FunctionInput, Owner, VmXrSpec};

    // The XR Crossplane makes for the example claim.
    let claim = example("claim-virtualmachine.yaml")?;
    let xr = serde_json::json!({
        "apiVersion": claim["apiVersion"], "kind": "XVirtualMachine", "spec": claim["spec"],
        "metadata": {"name": "myvm-x7k2p", "labels": {"crossplane.io/claim-name": "myvm", "crossplane.io/claim-namespace": "team-a"}},
    });
    let observed = example("observed-virtualmachine.yaml")?;
    let input_json = example("input.yaml")?;
    let obj = |v: &serde_json::Value| v.as_object().map(json_to_struct).context("an object");
    let mut req = RunFunctionRequest {
        meta: Some(RequestMeta { tag: "bench".into(), ..Default::default() }),
        observed: Some(State { composite: Some(Resource { resource: Some(obj(&xr)?), ..Default::default() }), ..Default::default() }),
        input: Some(obj(&input_json)?),
        ..Default::default()
    };
    if let Some(state) = req.observed.as_mut() {
        for (name, r) in observed["resources"].as_object().context("resources")? {
            state.resources.insert(name.clone(), Resource { resource: Some(obj(r)?), ..Default::default() });
        }
    }

    // In-process render.
    let input: FunctionInput = serde_json::from_value(input_json.clone())?;
    let spec: VmXrSpec = serde_json::from_value(xr["spec"].clone())?;
    let template = vmaas_model::Template::compile(input.templates[0].clone()).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut render = Vec::with_capacity(calls);
    for _ in 0..calls {
        let t = Instant::now();
        let r = render_vm(&Owner { tenant: "team-a".into(), name: "myvm".into() }, &spec, &template, &input, None)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        std::hint::black_box(serde_json::to_value(&r.vm)?);
        render.push(t.elapsed().as_secs_f64() * 1e6);
    }
    render.sort_by(|a, b| a.total_cmp(b));

    // Over gRPC.
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let args = function_sdk_rust::Args {
        debug: false,
        address: format!("127.0.0.1:{port}"),
        tls_certs_dir: None,
        insecure: true,
        max_recv_message_size: None,
        metrics_address: String::new(),
    };
    tokio::spawn(async move {
        let _ = function_sdk_rust::serve(vmaas_function::function::VmaasFunction, &args).await;
    });
    let mut client = loop {
        match FunctionRunnerServiceClient::connect(format!("http://127.0.0.1:{port}")).await {
            Ok(c) => break c,
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    };
    for _ in 0..200 {
        client.run_function(req.clone()).await?;
    }
    let mut lat = Vec::with_capacity(calls);
    for _ in 0..calls {
        let t = Instant::now();
        let rsp = client.run_function(req.clone()).await?.into_inner();
        lat.push(t.elapsed().as_secs_f64() * 1000.0);
        std::hint::black_box(rsp);
    }
    lat.sort_by(|a, b| a.total_cmp(b));
    println!("vmaas-bench function: {calls} calls, VM with an inline network and a LoadBalancer");
    println!("RunFunction over gRPC   p50 {:.3} ms   p99 {:.3} ms   (target p99 ≤ 5 ms)", percentile(&lat, 0.5), percentile(&lat, 0.99));
    println!(
        "render in process       p50 {:.1} µs   p99 {:.1} µs   (target ≤ 200 µs)",
        percentile(&render, 0.5),
        percentile(&render, 0.99)
    );
    Ok(())
}

/// The guest `vmaas-bench qemu` measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Guest {
    /// The test guest (the `tiny` template).
    TestGuest,
    /// The `debian` example template.
    Debian,
}

/// The images directory asked for, or the default ~/.local/share/vmaas/images.
fn images(asked: Option<std::path::PathBuf>) -> std::path::PathBuf {
    asked.unwrap_or_else(|| std::path::PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".local/share/vmaas/images"))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match Cli::parse().cmd {
        Cmd::Api { objects: Some(n), server, .. } => scale::report(n, server).await,
        Cmd::Api { connections, duration, writes_only: true, .. } => writes::report(connections, duration).await,
        Cmd::Api { connections, duration, vms, page, .. } => api(connections, duration, vms, page).await,
        Cmd::Function { calls } => function_bench(calls).await,
        Cmd::Kubevirt { vms, server } => kubevirt::report(vms, server).await,
        Cmd::Events { watchers, changes } => events::events(watchers, changes).await,
        Cmd::Network { frames } => network::network(frames).await,
        Cmd::Guests { megabytes, host_only: false } => throughput::guests(megabytes).await,
        Cmd::Guests { megabytes, host_only: true } => throughput::host_only(megabytes).await,
        Cmd::Terraform(a) => {
            let dir = images(a.images_dir.clone());
            terraform::run(a, dir).await
        }
        Cmd::Import { megabytes, rounds, images_dir } => import::import_bench(megabytes, rounds, images(images_dir)).await,
        Cmd::TerraformPlan(a) => tf_plan::plan_bench(a.vms, a.apply, a.tofu, &a.plugins, a.server).await,
        Cmd::Recovery { vms, rounds, images_dir, server } => recovery::recovery(vms, rounds, images(images_dir), server).await,
        Cmd::Snapshots { rounds, images_dir, export_only: true } => export::report(rounds, images(images_dir)).await,
        Cmd::Snapshots { rounds, images_dir, .. } => disk_snapshots::snapshots(rounds, images(images_dir)).await,
        Cmd::Migration { rounds, images_dir } => migration::migration(rounds, images(images_dir)).await,
        Cmd::Qemu { image: Guest::Debian, vms, images_dir, .. } => debian::debian(vms, images(images_dir)).await,
        Cmd::Qemu { vms, burst, idle, tcg_caches, images_dir, .. } => boot::qemu(vms, burst, idle, &tcg_caches, images(images_dir)).await,
        Cmd::Storage { rounds, megabytes, images_dir } => storage::storage(rounds, megabytes, images(images_dir)).await,
        Cmd::Shapes { vms, resizes, images_dir } => shapes::shapes(vms, resizes, images(images_dir)).await,
    }
}
