//! `vmaas-bench storage`: image import throughput from a loopback HTTP
//! server against `curl` writing the same file to the same disk, a VM's
//! create → READY from the image just imported, and volumes on a real
//! guest: hotplug latency (the attachment's create → the disk in the
//! guest, seen by a shell loop on its serial console, and → the attachment
//! READY in the API), hot-unplug latency (delete → the disk gone from the
//! guest, and → the attachment gone), and a volume's create → READY.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;
use vmaas_client::{Client, WaitFor};
use vmaas_model::{
    CreateObject, CreateVirtualMachine, MetadataInput, VirtualMachineSpec, Volume, VolumeAttachment, VolumeAttachmentSpec, VolumeSpec,
};

use crate::percentile;
use crate::vms::{none_left, ready_tiny, start_qemu_server};

pub(crate) type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

fn named<S>(name: String, spec: S) -> CreateObject<S> {
    CreateObject { type_url: None, id: None, metadata: Some(MetadataInput { name: Some(name), ..Default::default() }), spec, status: None }
}

/// Types `line` on the console.
pub(crate) async fn send(ws: &mut Ws, line: &str) -> anyhow::Result<()> {
    ws.send(Message::Binary(format!("{line}\n").into_bytes().into())).await?;
    Ok(())
}

/// Reads the console until `marker` appears (at most `within`); when it did.
pub(crate) async fn seen(ws: &mut Ws, marker: &str, within: Duration) -> anyhow::Result<Instant> {
    // The marker is built by the shell ($((…))), so the echoed command never matches.
    read_until(ws, marker, within, |text| text.contains(marker)).await?;
    Ok(Instant::now())
}

/// Reads the console until what came so far satisfies `done` (at most
/// `within`, else an error naming `what`); all that came.
pub(crate) async fn read_until(ws: &mut Ws, what: &str, within: Duration, done: impl Fn(&str) -> bool) -> anyhow::Result<String> {
    let deadline = Instant::now() + within;
    let mut text = String::new();
    while !done(&text) {
        let left = deadline.saturating_duration_since(Instant::now());
        let msg = tokio::time::timeout(left, ws.next()).await.with_context(|| format!("no {what:?} on the console within {within:?}"))?;
        match msg {
            Some(Ok(Message::Binary(b))) => text.push_str(&String::from_utf8_lossy(&b)),
            Some(Ok(Message::Text(t))) => text.push_str(&t),
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(e.into()),
            None => bail!("the console closed"),
        }
    }
    Ok(text)
}

async fn wait_volume(c: &Client, id: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let v: Volume = c.get_object("/volumes", id).await?;
        if v.status.state.as_str().ends_with("READY") {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("volume {id} not READY: {:?}", v.status);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Polls the attachment `id` until READY (`gone`: until it is gone).
async fn wait_attachment(c: &Client, id: &str, gone: bool) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match c.get_object::<VolumeAttachment>("/volume_attachments", id).await {
            Ok(a) if !gone && a.status.state.as_str().ends_with("READY") => return Ok(()),
            Err(e) if gone && e.is_not_found() => return Ok(()),
            Ok(_) => {}
            Err(e) => return Err(e.into()),
        }
        if Instant::now() > deadline {
            bail!("attachment {id} never got there");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One round: a fresh volume plugged into the running guest and unplugged.
/// `[volume create→READY, attach→disk in guest, attach→READY, detach→disk gone, detach→gone]`.
async fn round(c: &Client, ws: &mut Ws, vm: &str, i: usize) -> anyhow::Result<[f64; 5]> {
    let t = Instant::now();
    let v: Volume =
        c.create_object("/volumes", &named(format!("bench-{i}"), VolumeSpec { size: "64Mi".parse()?, source_image: None })).await?;
    wait_volume(c, &v.id).await?;
    let created = t.elapsed().as_secs_f64();
    let serial = vmaas_model::volume::disk_serial(&v.id);
    let has = format!("grep -qs '^{serial}$' /sys/block/vd*/serial");
    send(ws, &format!("until {has}; do usleep 2000; done; echo PLUGGED-{i}-$((6*7))")).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let spec = VolumeAttachmentSpec { volume: v.id.clone(), compute_instance: vm.to_owned(), auto_delete: false };
    let t = Instant::now();
    let a: VolumeAttachment = c.create_object("/volume_attachments", &named(format!("bench-{i}"), spec)).await?;
    let api = async {
        wait_attachment(c, &a.id, false).await?;
        anyhow::Ok(t.elapsed().as_secs_f64())
    };
    let marker = format!("PLUGGED-{i}-42");
    let (guest, api) = tokio::join!(seen(ws, &marker, Duration::from_secs(60)), api);
    let (plugged, ready) = ((guest? - t).as_secs_f64(), api?);
    send(ws, &format!("while {has}; do usleep 2000; done; echo UNPLUGGED-{i}-$((6*7))")).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let t = Instant::now();
    c.delete_object::<VolumeAttachment>("/volume_attachments", &a.id).await?;
    let api = async {
        wait_attachment(c, &a.id, true).await?;
        anyhow::Ok(t.elapsed().as_secs_f64())
    };
    let marker = format!("UNPLUGGED-{i}-42");
    let (guest, api) = tokio::join!(seen(ws, &marker, Duration::from_secs(60)), api);
    let (released, gone) = ((guest? - t).as_secs_f64(), api?);
    c.delete_object::<Volume>("/volumes", &v.id).await?;
    Ok([created, plugged, ready, released, gone])
}

/// Seconds `curl` takes to fetch `url` into `dir` (on the server's disk).
fn curl(url: &str, dir: &std::path::Path) -> anyhow::Result<f64> {
    let out = dir.join("curl.out");
    let t = Instant::now();
    let st = std::process::Command::new("curl").args(["-sSf", "-o"]).arg(&out).arg(url).status().context("running curl")?;
    let secs = t.elapsed().as_secs_f64();
    if !st.success() {
        bail!("curl {url} failed");
    }
    std::fs::remove_file(&out)?;
    Ok(secs)
}

/// Imports `url` as image `name`: seconds from create to READY, and the image's id.
async fn import(c: &Client, name: &str, url: &str) -> anyhow::Result<(f64, String)> {
    use vmaas_model::image::{Image, ImageSpec, ImageState};
    let t = Instant::now();
    let spec = ImageSpec { source: Some(url.to_owned()), ..Default::default() };
    let img: Image = c.create_object("/images", &named(name.to_owned(), spec)).await?;
    loop {
        let i: Image = c.get_object("/images", &img.id).await?;
        match i.status.state {
            ImageState::Ready => return Ok((t.elapsed().as_secs_f64(), img.id)),
            ImageState::Failed => bail!("import failed: {:?}", i.status.message),
            _ => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// Import throughput against curl (best of `rounds` each, alternating), and
/// create → READY of a VM booting (by BIOS) from the image just imported.
async fn imports(c: &Client, dir: &std::path::Path, images: &std::path::Path, megabytes: u64, rounds: usize) -> anyhow::Result<()> {
    let files = tempfile::tempdir_in(dir)?;
    let big = files.path().join("big.raw");
    {
        use std::io::Write;
        let mut f = std::io::BufWriter::new(std::fs::File::create(&big)?);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..megabytes * 1024 * 128 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            f.write_all(&x.to_le_bytes())?;
        }
    }
    std::fs::copy(images.join("test-guest/bios.qcow2"), files.path().join("bios.qcow2"))?;
    let web = vmaas_tests::files::FileServer::start(files.path().to_owned()).await;
    let url = format!("{}/big.raw", web.url);
    let (mut by_curl, mut by_import) = (f64::MAX, f64::MAX);
    for i in 0..rounds {
        by_curl = by_curl.min(curl(&url, dir)?);
        let (secs, id) = import(c, &format!("big-{i}"), &url).await?;
        by_import = by_import.min(secs);
        c.delete_object::<vmaas_model::image::Image>("/images", &id).await?;
    }
    let mb = megabytes as f64;
    println!(
        "image import, {megabytes} MiB raw from loopback HTTP: {:.0} MiB/s; curl to a file on the same disk {:.0} MiB/s; ratio {:.2} (best of {rounds})",
        mb / by_import,
        mb / by_curl,
        by_curl / by_import
    );
    let (secs, _) = import(c, "bios", &format!("{}/bios.qcow2", web.url)).await?;
    let t = Instant::now();
    let mut spec = VirtualMachineSpec::new("pick");
    spec.template_parameters.insert("vm_image".into(), vmaas_model::ParameterValue::new(serde_json::json!("bios")));
    let vm = c.create_vm(&CreateVirtualMachine { type_url: None, id: Some("imported".into()), metadata: None, spec, status: None }).await?;
    c.wait_vm(&vm.id, WaitFor::Ready, Duration::from_secs(300), Duration::from_millis(50), |_| {}).await?;
    println!(
        "bios.qcow2 ({:.0} MiB) imported in {secs:.2} s; a VM from it create→READY {:.2} s (SeaBIOS, syslinux, the test guest)",
        std::fs::metadata(images.join("test-guest/bios.qcow2"))?.len() as f64 / 1048576.0,
        t.elapsed().as_secs_f64()
    );
    c.delete_vm(&vm.id).await?;
    c.wait_vm(&vm.id, WaitFor::Deleted, Duration::from_secs(120), Duration::from_millis(50), |_| {}).await?;
    Ok(())
}

/// Runs the import benchmark, then `rounds` hotplug and unplug rounds on one test guest.
pub async fn storage(rounds: usize, megabytes: u64, images: std::path::PathBuf) -> anyhow::Result<()> {
    let srv = start_qemu_server(images.clone()).await?;
    let c = &srv.client;
    println!(
        "vmaas-bench storage: accelerator {}, {} cores",
        srv.accel,
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
    );
    imports(c, srv.dir.path(), &images, megabytes, 3).await?;
    let vm = ready_tiny(c, "disks").await?;
    let session = c.console_session(&vm.id).await?;
    let (mut ws, _) = tokio_tungstenite::connect_async(c.console_url(&session).as_str()).await?;
    send(&mut ws, "").await?;
    let mut figures: Vec<[f64; 5]> = Vec::new();
    for i in 0..rounds {
        figures.push(round(c, &mut ws, &vm.id, i).await?);
    }
    drop(ws);
    c.delete_vm(&vm.id).await?;
    c.wait_vm(&vm.id, WaitFor::Deleted, Duration::from_secs(120), Duration::from_millis(50), |_| {}).await?;
    none_left(srv.dir.path())?;

    println!("volumes: {rounds} rounds of a 64Mi volume plugged into and out of one running test guest");
    let names = [
        "volume create→READY",
        "attach→disk in the guest",
        "attach→attachment READY",
        "detach→disk gone in the guest",
        "detach→attachment gone",
    ];
    for (k, name) in names.iter().enumerate() {
        let mut v: Vec<f64> = figures.iter().map(|f| f[k] * 1000.0).collect();
        v.sort_by(|a, b| a.total_cmp(b));
        println!("{name:<32} p50 {:>7.0} ms   max {:>7.0} ms", percentile(&v, 0.5), percentile(&v, 1.0));
    }
    Ok(())
}
